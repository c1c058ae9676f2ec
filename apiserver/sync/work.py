"""One location's work: every child object it should hold, and how one state of it becomes
the next, as events.

A pull location's agent reads this (the work feed, `feed/`) instead of being written to; what
it holds is made by `desired.location_child`, the function the push sync loop applies with,
so push and pull cannot differ. Pure: the hub objects, Locations and policies are the
caller's to read.

An entry is a child object, or `Kept`: the child is left as it was, as the push loop leaves
it, because its overrides do not apply in this location, or because the handover step says
so (the location's numbers are last known ones, or a follower waits for its namespace's
workloads to leave; `loops/sync/steps.py`). Its last version sent stays the agent's to keep;
never a reason to delete it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import NamedTuple, Protocol

from apiserver.contract import HUB_GENERATION, Placement, read_placement
from apiserver.objects import NAMESPACE, Obj, ReadOnly
from apiserver.overrides.apply import OverrideError
from apiserver.overrides.rules import RuleError
from apiserver.sync.desired import ChildKind, child_namespace, spec_of


class WorkKey(NamedTuple):
    """One child object of a location: what names it in that cluster."""

    api_version: str
    kind: str
    namespace: str  # "" when cluster-scoped
    name: str

    @classmethod
    def of(cls, obj: ReadOnly) -> WorkKey:
        meta = obj.get("metadata") or {}
        return cls(
            str(obj.get("apiVersion", "")),
            str(obj.get("kind", "")),
            str(meta.get("namespace") or ""),
            str(meta.get("name", "")),
        )

    @property
    def is_namespace(self) -> bool:
        return self.api_version == "v1" and self.kind == NAMESPACE

    def __str__(self) -> str:
        where = f"{self.namespace}/" if self.namespace else ""
        return f"{self.kind}.{self.api_version} {where}{self.name}"


@dataclass(frozen=True)
class Kept:
    """The child stays as it was in this location, for `reason`."""

    reason: str


Entry = Obj | Kept


class Makes(Protocol):
    """What a location's child is made by (`models.child_inputs.ChildInputs`)."""

    def child(self, hub: ReadOnly, kind: ChildKind, location: str, placement: Placement) -> Obj: ...


def entry_for(
    hub: ReadOnly,
    kind: ChildKind,
    location: str,
    inputs: Makes,
    held: bool = False,
    shares: Placement | None = None,
) -> Entry | None:
    """What `location` holds of one hub object: None when it holds nothing of it (not in
    `shares`, or the hub object is being deleted), else the child the push loop applies
    there, made by the same `inputs`; `shares`: the handover step the sync loop decided (None:
    the hub object's placement, the goal); `held` (an autoscaler sizes it there): without
    `spec.replicas`. It carries the hub generation it was made from (`HUB_GENERATION`), so
    the agent's report of it says which hub generation the location reflects."""
    meta = hub.get("metadata") or {}
    if meta.get("deletionTimestamp"):
        return None
    placement = read_placement(dict(hub)) if shares is None else shares
    if location not in placement:
        return None
    try:
        child = inputs.child(hub, kind, location, placement)
    except (RuleError, OverrideError) as err:
        return Kept(f"overrides do not apply in {location}: {err}")
    if held:
        spec_of(child).pop("replicas", None)
    child_meta = child.setdefault("metadata", {})
    annotations = {**(child_meta.get("annotations") or {})}
    annotations[HUB_GENERATION] = str(meta.get("generation", 0))
    child_meta["annotations"] = annotations
    return child


def namespace_key(name: str) -> WorkKey:
    return WorkKey("v1", "Namespace", "", name)


def with_namespaces(
    entries: Mapping[WorkKey, Entry], hub_namespace: Mapping[str, ReadOnly]
) -> dict[WorkKey, Entry]:
    """`entries` (of objects only) and the Namespace of every namespaced one, made from the
    hub Namespace (`hub_namespace`, by name; a bare `{"metadata": {"name": …}}` when the hub
    has none cached), in `ordered` order."""
    out: dict[WorkKey, Entry] = dict(entries)
    for name in {key.namespace for key in entries if key.namespace}:
        hub = hub_namespace.get(name) or {"metadata": {"name": name}}
        out[namespace_key(name)] = child_namespace(hub)
    return {key: out[key] for key in ordered(out)}


class Event(NamedTuple):
    type: str  # ADDED, MODIFIED, DELETED
    object: Obj


def changes(sent: Mapping[WorkKey, Obj], new: Mapping[WorkKey, Entry]) -> list[Event]:
    """The events that take a watcher from what it was `sent` to `new`; a `Kept` entry
    sends nothing (the watcher keeps what it has). Namespaces are added before the objects
    in them and deleted after them."""
    events: list[Event] = []
    for key in ordered(new):
        entry = new[key]
        if isinstance(entry, Kept):
            continue
        before = sent.get(key)
        if before is None:
            events.append(Event("ADDED", entry))
        elif before != entry:
            events.append(Event("MODIFIED", entry))
    gone = [key for key in sent if key not in new]
    for key in reversed(ordered(gone)):
        events.append(Event("DELETED", sent[key]))
    return events


def taken(sent: Mapping[WorkKey, Obj], new: Mapping[WorkKey, Entry]) -> dict[WorkKey, Obj]:
    """What the watcher holds once `changes(sent, new)` reached it."""
    held: dict[WorkKey, Obj] = {}
    for key, entry in new.items():
        if not isinstance(entry, Kept):
            held[key] = entry
        elif key in sent:
            held[key] = sent[key]
    return held


def ordered(keys: Iterable[WorkKey]) -> list[WorkKey]:
    """Namespaces first, then cluster-scoped objects, then the rest; by kind, namespace and
    name within each: what an object needs (its namespace) comes before it."""

    def rank(key: WorkKey) -> tuple[int, str, str, str, str]:
        group = 0 if key.is_namespace else 2
        if group and not key.namespace:
            group = 1
        return (group, key.kind, key.api_version, key.namespace, key.name)

    return sorted(keys, key=rank)


def kept_refs(entries: Mapping[WorkKey, Entry]) -> list[Obj]:
    """The `Kept` entries, as references with their reason (a list's `kept`)."""
    return [
        {
            "apiVersion": key.api_version,
            "kind": key.kind,
            **({"namespace": key.namespace} if key.namespace else {}),
            "name": key.name,
            "reason": entry.reason,
        }
        for key in ordered(entries)
        if isinstance(entry := entries[key], Kept)
    ]


class Sent:
    """What one watcher of a feed holds, so that a change to a few objects costs those few.

    `objects`: what it was sent and still holds (a `Kept` entry keeps what it had); `present`:
    the objects with an entry (`Kept` ones too); a namespace is in the feed while any of them
    is in it, as `with_namespaces` has it. `whole` takes every entry (and costs them all);
    `update` only those of some objects, and must leave the same state a `whole` of the same
    entries would (a property test holds it to that)."""

    def __init__(self) -> None:
        self.objects: dict[WorkKey, Obj] = {}
        self.present: set[WorkKey] = set()
        self.counts: dict[str, int] = {}

    def whole(
        self, entries: Mapping[WorkKey, Entry], hub_namespace: Mapping[str, ReadOnly]
    ) -> list[Event]:
        """Events to the feed of `entries` (objects only, no namespaces)."""
        full = with_namespaces(entries, hub_namespace)
        events = changes(self.objects, full)
        self.objects = taken(self.objects, full)
        self.present = set(entries)
        self.counts = {}
        for key in self.present:
            if key.namespace:
                self.counts[key.namespace] = self.counts.get(key.namespace, 0) + 1
        return events

    def update(
        self, changed: Mapping[WorkKey, Entry | None], hub_namespace: Mapping[str, ReadOnly]
    ) -> list[Event]:
        """Events for new entries of some objects (None: it has none now); never namespaces."""
        touched = {key.namespace for key in changed}
        then: list[Event] = []
        for key in ordered(changed):
            entry = changed[key]
            if (entry is None) == (key in self.present):  # it comes or goes
                by = -1 if entry is None else 1
                if entry is None:
                    self.present.discard(key)
                else:
                    self.present.add(key)
                if key.namespace:
                    self.counts[key.namespace] = self.counts.get(key.namespace, 0) + by
            before = self.objects.get(key)
            if entry is None:
                if before is not None:
                    del self.objects[key]
                    then.append(Event("DELETED", before))
            elif not isinstance(entry, Kept) and before != entry:
                self.objects[key] = entry
                then.append(Event("ADDED" if before is None else "MODIFIED", entry))
        first: list[Event] = []  # namespaces made, before what goes in them
        last: list[Event] = []  # namespaces gone, after what was in them
        for namespace in sorted(n for n in touched if n):
            key, now = namespace_key(namespace), self.counts.get(namespace, 0)
            if now <= 0:
                self.counts.pop(namespace, None)
                gone = self.objects.pop(key, None)
                if gone is not None:
                    last.append(Event("DELETED", gone))
            elif key not in self.objects:
                hub = hub_namespace.get(namespace) or {"metadata": {"name": namespace}}
                made = self.objects[key] = child_namespace(hub)
                first.append(Event("ADDED", made))
        return first + then + last
