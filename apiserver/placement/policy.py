"""PlacementPolicy: an administrator's limits on where a namespace's objects may run.

Two teams may be given the same locations; one of them, by policy, runs only on some of them
and, inside each, only on some nodes, without having to know. A cluster-scoped
`PlacementPolicy` (kmc.dev/v1alpha1) selects namespaces by label and

- limits the locations their objects may use (`locations` by name, `locationSelector` by
  label; both when both are given). No strategy can widen that: a location a policy rules
  out is ruled out before anything the strategy says, and its verdict reads `policy NAME`,
  which shows no more of the policy than its name to someone who may not read it;
- adds constraints to the child objects at sync (`childConstraints`: nodeSelector entries,
  tolerations, a priorityClassName) that never appear on the hub object.

Every policy that selects a namespace applies. A cluster-scoped object (a ClusterRole with a
strategy) is in no namespace: the policies whose namespace selector is empty, which select
every namespace, apply to it (`applying_everywhere`). A policy that does not parse still
applies, and allows nothing: failing open would place objects where an administrator said
they must not go.

Pure functions over raw objects; the loops read the policies from the hub cache.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, StrictStr, ValidationError
from pydantic.alias_generators import to_camel

from apiserver.objects import Obj, ReadOnly
from apiserver.placement.selector import matches
from apiserver.placement.strategy import LabelSelector, LocationName

GROUP = "kmc.dev"
VERSION = "v1alpha1"
PLURAL = "placementpolicies"
PATH = f"/apis/{GROUP}/{VERSION}/{PLURAL}"


class _Model(BaseModel):
    model_config = ConfigDict(
        extra="ignore", frozen=True, populate_by_name=True, alias_generator=to_camel
    )


class PodToleration(_Model):
    """A pod toleration, as in a pod spec."""

    key: StrictStr | None = None
    operator: Literal["Equal", "Exists"] | None = None
    value: StrictStr | None = None
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"] | None = None
    toleration_seconds: int | None = None

    def as_pod_spec(self) -> Obj:
        return self.model_dump(by_alias=True, exclude_none=True)


class ChildConstraints(_Model):
    """Added to the pod template of every child object of the selected namespaces."""

    node_selector: dict[StrictStr, StrictStr] = Field(default_factory=dict)
    tolerations: tuple[PodToleration, ...] = ()
    priority_class_name: StrictStr | None = None


class PolicySpec(_Model):
    namespace_selector: LabelSelector
    locations: tuple[LocationName, ...] | None = None
    location_selector: LabelSelector | None = None
    child_constraints: ChildConstraints = ChildConstraints()


@dataclass(frozen=True)
class Policy:
    """One PlacementPolicy as read; `spec` is None when it does not parse (allows nothing)."""

    name: str
    spec: PolicySpec | None
    error: str | None = None

    def selects(self, namespace_labels: Mapping[str, str]) -> bool:
        if self.spec is None:
            return True  # unreadable: it may have meant this namespace; fail closed
        return matches(self.spec.namespace_selector, namespace_labels)

    def allows(self, location: str, labels: Mapping[str, str]) -> bool:
        if self.spec is None:
            return False
        if self.spec.locations is not None and location not in self.spec.locations:
            return False
        return matches(self.spec.location_selector, labels)


def read_policy(raw: ReadOnly) -> Policy:
    name = str((raw.get("metadata") or {}).get("name", ""))
    try:
        return Policy(name, PolicySpec.model_validate(raw.get("spec") or {}))
    except ValidationError as error:
        first = error.errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        return Policy(name, None, f"spec.{where}: {first['msg']}")


def applying(policies: Iterable[Policy], namespace_labels: Mapping[str, str]) -> list[Policy]:
    """The policies that select a namespace, by name."""
    return sorted((p for p in policies if p.selects(namespace_labels)), key=lambda p: p.name)


def applying_everywhere(policies: Iterable[Policy]) -> list[Policy]:
    """The policies that hold for cluster-scoped objects, which are in no namespace: those
    whose namespace selector is empty (they select every namespace, whatever its labels), and
    those that do not parse (fail closed), by name. A policy for some namespaces only, by
    label, says nothing of what belongs to none."""
    return sorted(
        (p for p in policies if p.spec is None or _selects_all(p.spec.namespace_selector)),
        key=lambda p: p.name,
    )


def _selects_all(selector: LabelSelector) -> bool:
    return not selector.match_labels and not selector.match_expressions


def denied(
    policies: Sequence[Policy], locations: Mapping[str, Mapping[str, str]]
) -> dict[str, str]:
    """Location -> `policy NAME` of the first policy (by name) that rules it out."""
    result: dict[str, str] = {}
    for name, labels in sorted(locations.items()):
        refusing = next((p for p in policies if not p.allows(name, labels)), None)
        if refusing is not None:
            result[name] = f"policy {refusing.name}"
    return result


@dataclass(frozen=True)
class Constraints:
    """What the policies add to a child's pod template, merged (the first policy by name wins
    a nodeSelector key or the priorityClassName)."""

    node_selector: Mapping[str, str] = field(default_factory=dict)
    tolerations: tuple[ReadOnly, ...] = ()
    priority_class_name: str | None = None

    def __bool__(self) -> bool:
        return bool(self.node_selector or self.tolerations or self.priority_class_name)


def constraints(policies: Sequence[Policy]) -> Constraints:
    node_selector: dict[str, str] = {}
    tolerations: list[ReadOnly] = []
    priority: str | None = None
    for policy in policies:
        if policy.spec is None:
            continue
        added = policy.spec.child_constraints
        for key, value in added.node_selector.items():
            node_selector.setdefault(key, value)
        tolerations += [
            t for t in (t.as_pod_spec() for t in added.tolerations) if t not in tolerations
        ]
        priority = priority or added.priority_class_name
    return Constraints(dict(sorted(node_selector.items())), tuple(tolerations), priority)


def constrain(pod_spec: Obj, added: Constraints) -> None:
    """Add the policies' constraints to a child's pod spec, in place. The policy's nodeSelector
    entries win over the template's: the administrator's word is the last."""
    if added.node_selector:
        pod_spec["nodeSelector"] = {**(pod_spec.get("nodeSelector") or {}), **added.node_selector}
    if added.tolerations:
        own = list(pod_spec.get("tolerations") or [])
        pod_spec["tolerations"] = own + [dict(t) for t in added.tolerations if t not in own]
    if added.priority_class_name:
        pod_spec["priorityClassName"] = added.priority_class_name
        pod_spec.pop("priority", None)  # set by the child's admission from the class
