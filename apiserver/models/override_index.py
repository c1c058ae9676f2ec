"""The object form of per-location overrides: `Override` (namespaced) and `ClusterOverride`
(cluster-scoped) objects, read and ordered (`override.py` has their shape; `overrides/` the
rules they hold).

A hub object's location gets, in this order:

1. the rules of every ClusterOverride that targets it there,
2. then those of every Override of its namespace that targets it there,
   each group by `priority` (lowest first, so the highest has the last word) and then by name,
3. then those of its own `kmc.dev/overrides` annotation (`annotation.py`).

`Index` files the objects by the kinds they target, so that building a child looks only at the
overrides of its kind and namespace, and an override's change names the objects it targets
without a look at any other. Pure: the hub cache feeds it from its watches.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from pydantic import ValidationError

from apiserver.models.override import (
    CLUSTER_KIND,
    KIND,
    ClusterOverrideSpec,
    OverrideSpec,
    Target,
)
from apiserver.objects import ReadOnly
from apiserver.overrides.annotation import overrides_for
from apiserver.overrides.rules import Rule, RuleError, parse_rules
from apiserver.placement.selector import matches
from apiserver.placement.strategy import LabelSelector

GroupKind = tuple[str, str]  # ("apps", "Deployment"); "" for the core group


@dataclass(frozen=True)
class Source:
    """One Override or ClusterOverride as read. `error`: why its rules do not parse (one that
    got past the webhook); its targets then get no rules at all, and say why."""

    namespace: str  # "" for a ClusterOverride
    name: str
    spec: OverrideSpec
    rules: tuple[Rule, ...]
    error: str | None = None

    @property
    def cluster(self) -> bool:
        return not self.namespace

    @property
    def label(self) -> str:
        """How a message names it: `Override demo/eu`, `ClusterOverride mirrors`."""
        if self.cluster:
            return f"{CLUSTER_KIND} {self.name}"
        return f"{KIND} {self.namespace}/{self.name}"

    @property
    def order(self) -> tuple[int, int, str, str]:
        return (0 if self.cluster else 1, self.spec.priority, self.name, self.namespace)

    def kinds(self) -> set[GroupKind]:
        return {_group_kind(target) for target in self.spec.targets}

    def targets(
        self,
        group_kind: GroupKind,
        namespace: str,
        name: str,
        labels: Mapping[str, str],
        namespace_labels: Mapping[str, str],
    ) -> bool:
        """Does it target this hub object (`namespace` "" for a cluster-scoped one)?"""
        if self.cluster:
            selector = getattr(self.spec, "namespace_selector", None)
            if (
                selector is not None
                and not _empty(selector)
                and (not namespace or not matches(selector, namespace_labels))
            ):
                return False
        elif namespace != self.namespace:
            return False
        return any(
            _group_kind(target) == group_kind
            and (target.name is None or target.name == name)
            and matches(target.label_selector, labels)
            for target in self.spec.targets
        )

    def selects(self, location: str, labels: Mapping[str, str]) -> bool:
        """Does it apply in this location?"""
        where = self.spec.locations
        if where.names is not None and location not in where.names:
            return False
        return matches(where.location_selector, labels)


def read(raw: ReadOnly) -> Source | None:
    """An Override or ClusterOverride object (told apart by its namespace); None when its spec
    does not parse at all (it targets nothing anyone can tell)."""
    meta = raw.get("metadata") or {}
    namespace, name = str(meta.get("namespace") or ""), str(meta.get("name") or "")
    model = OverrideSpec if namespace else ClusterOverrideSpec
    try:
        spec = model.model_validate(raw.get("spec") or {})
    except ValidationError:
        return None
    source = f"{KIND} {namespace}/{name}" if namespace else f"{CLUSTER_KIND} {name}"
    try:
        rules = parse_rules(list(spec.rules), f"{source}: spec.rules")
    except RuleError as err:
        return Source(namespace, name, spec, (), str(err))
    return Source(namespace, name, spec, rules)


def rules_of(
    sources: Iterable[Source], location: str, labels: Mapping[str, str]
) -> tuple[Rule, ...]:
    """The rules `location` gets from these overrides (those that target the object), in
    order; one that does not parse raises `RuleError`."""
    found: list[Rule] = []
    for source in sorted(sources, key=lambda s: s.order):
        if not source.selects(location, labels):
            continue
        if source.error is not None:
            raise RuleError(source.error)
        found += source.rules
    return tuple(found)


def location_rules(
    hub: ReadOnly, objects: Iterable[Source], location: str, labels: Mapping[str, str]
) -> tuple[Rule, ...]:
    """Every rule `location` gets for `hub`: those of the override `objects` that target it,
    then those of its own `kmc.dev/overrides`; raises `RuleError` when one does not parse."""
    return rules_of(objects, location, labels) + overrides_for(hub, location, labels)


class Index:
    """Every Override and ClusterOverride as read, filed by (namespace, group, kind) of what
    they target ("" for a ClusterOverride's namespace)."""

    def __init__(self) -> None:
        self._sources: dict[tuple[str, str], Source] = {}  # (namespace, name) -> read
        self._by_kind: dict[tuple[str, GroupKind], dict[str, Source]] = {}

    def put(self, raw: ReadOnly) -> tuple[Source | None, Source | None]:
        """Read a new or changed one; (before, now)."""
        before = self.drop(raw)
        now = read(raw)
        if now is not None:
            self._sources[(now.namespace, now.name)] = now
            for group_kind in now.kinds():
                self._by_kind.setdefault((now.namespace, group_kind), {})[now.name] = now
        return before, now

    def drop(self, raw: ReadOnly) -> Source | None:
        meta = raw.get("metadata") or {}
        key = (str(meta.get("namespace") or ""), str(meta.get("name") or ""))
        before = self._sources.pop(key, None)
        if before is not None:
            for group_kind in before.kinds():
                filed = self._by_kind.get((before.namespace, group_kind))
                if filed is not None:
                    filed.pop(before.name, None)
                    if not filed:
                        del self._by_kind[(before.namespace, group_kind)]
        return before

    def applying(
        self,
        group_kind: GroupKind,
        namespace: str,
        name: str,
        labels: Mapping[str, str],
        namespace_labels: Mapping[str, str],
    ) -> list[Source]:
        """The overrides that target one hub object, in the order they apply."""
        scopes = ("", namespace) if namespace else ("",)
        found = [
            source
            for scope in scopes
            for source in (self._by_kind.get((scope, group_kind)) or {}).values()
            if source.targets(group_kind, namespace, name, labels, namespace_labels)
        ]
        return sorted(found, key=lambda s: s.order)

    def get(self, namespace: str, name: str) -> Source | None:
        """The one of that name as read ("" for a ClusterOverride's namespace)."""
        return self._sources.get((namespace, name))

    def __len__(self) -> int:
        return len(self._sources)


def _group_kind(target: Target) -> GroupKind:
    return (target.api_version.rpartition("/")[0], target.kind)


def _empty(selector: LabelSelector) -> bool:
    return not selector.match_labels and not selector.match_expressions
