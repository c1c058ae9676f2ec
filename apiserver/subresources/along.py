"""What went with a workload: the objects that follow it, location by location.

A Deployment placed in `us-east` took its ConfigMaps and Secrets there (its pod template names
them), the Services whose selector matches its pods, the Ingresses that route to those
Services, and its namespace's policy (Roles, NetworkPolicies, quotas). The `locations`
sub-resource lists them per location, so `kubectl mc describe` can show a whole application
where people look, not only its workload.

Which objects follow a workload is asked of each kind's entry (its `Role`, `selector`,
`follows`, `uses`), never of a kind's name, so a kind that joins the registry shows up here
with no change. An object is listed in a location when the workload is there (placed, or
still leaving) and the object's own placement (`kmc.dev/placement`) includes that location;
`present` says whether the child cluster holds our copy of it, as the sync loop's watches of
that child last saw it (no request to the child is made for this).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping

from pydantic import BaseModel, ConfigDict, Field

from apiserver.contract import read_placement
from apiserver.hubcache import HubCache
from apiserver.kinds import Key, Kind, Role
from apiserver.objects import Obj, ReadOnly
from apiserver.placement.dependencies import references

# Roles whose objects go where other objects go, rather than by a strategy of their own.
FOLLOWING = (
    Role.DEPENDENCY,
    Role.SELECTOR_FOLLOWER,
    Role.REFERENCE_FOLLOWER,
    Role.NAMESPACE_FOLLOWER,
    Role.SCALER,
)

Present = Callable[[Kind, ReadOnly], Collection[str]]
"""The locations whose child cluster holds our copy of an object."""


class Along(BaseModel):
    """One object that went with a workload to one location."""

    model_config = ConfigDict(populate_by_name=True)

    kind: str
    api_version: str = Field(alias="apiVersion")
    name: str
    namespace: str | None = None  # None: cluster-scoped (a PriorityClass)
    # How it follows: `dependency` (the pod template names it), `selector-follower` (its
    # selector matches the pods), `reference-follower` (it names something that went),
    # `namespace-follower` (it goes wherever its namespace's workloads run), `scaler` (it
    # scales the workload).
    role: str
    present: bool  # the child cluster holds our copy of it

    def shown(self) -> Obj:
        return self.model_dump(by_alias=True, exclude_none=True)


def companions(
    kind: Kind, workload: ReadOnly, others: Iterable[tuple[Kind, ReadOnly]]
) -> list[tuple[Kind, ReadOnly]]:
    """Which of `others` (objects of the workload's namespace, and cluster-scoped ones its
    pod template may name) go with the workload, sorted by kind and name."""
    meta = workload.get("metadata") or {}
    namespace, name = meta.get("namespace") or "", meta.get("name") or ""
    spec = kind.pod_spec(workload)
    named = references(spec) if spec else frozenset()
    labels = kind.pod_labels(workload)
    candidates = [(k, obj) for k, obj in others if k.role in FOLLOWING]
    went: dict[Key, tuple[Kind, ReadOnly]] = {}
    for other_kind, obj in candidates:
        if _goes_with(other_kind, obj, named, labels) or _scales(other_kind, obj, kind, name):
            went[_key(other_kind, obj)] = (other_kind, obj)
    # A reference follower goes with what it names (an Ingress: a Service that went; an
    # autoscaler: the workload itself), and takes what it uses (the Ingress's TLS Secrets):
    # looked at again until nothing more joins.
    start = Key(kind.key, namespace, name)
    while True:
        joined = False
        for other_kind, obj in candidates:
            key = _key(other_kind, obj)
            if key in went or other_kind.role is not Role.REFERENCE_FOLLOWER:
                continue
            targets = {Key(k, namespace, n) for k, n in other_kind.follows(obj)}
            if start in targets or targets & went.keys():
                went[key] = (other_kind, obj)
                joined = True
        used = {
            Key(k, namespace, n)
            for other_kind, obj in list(went.values())
            for k, n in other_kind.uses(obj)
        }
        for other_kind, obj in candidates:
            key = _key(other_kind, obj)
            if key in used and key not in went:
                went[key] = (other_kind, obj)
                joined = True
        if not joined:
            break
    return [went[key] for key in sorted(went)]


def _goes_with(
    kind: Kind, obj: ReadOnly, named: frozenset[tuple[str, str]], labels: Mapping[str, str]
) -> bool:
    if kind.role is Role.NAMESPACE_FOLLOWER:
        return kind.namespaced
    if kind.role is Role.DEPENDENCY:
        return (kind.key, (obj.get("metadata") or {}).get("name")) in named
    if kind.role is Role.SELECTOR_FOLLOWER:
        selects = kind.selector(obj)
        return selects is None or selects(labels)  # no selector: the namespace's workloads'
    return False


def _scales(kind: Kind, obj: ReadOnly, workloads: Kind, name: str) -> bool:
    """Is it a scaler (an HPA) whose target is this workload?"""
    target = kind.target(obj) if kind.role is Role.SCALER else None
    return target is not None and target.name == name and workloads.named_by(target)


def _key(kind: Kind, obj: ReadOnly) -> Key:
    meta = obj.get("metadata") or {}
    return Key(kind.key, meta.get("namespace") or "", meta.get("name") or "")


def by_location(
    locations: Iterable[str], went: Iterable[tuple[Kind, ReadOnly]], present: Present
) -> dict[str, list[Along]]:
    """For each of the workload's locations, the objects of `went` placed there too."""
    wanted = list(locations)
    out: dict[str, list[Along]] = {location: [] for location in wanted}
    for kind, obj in went:
        placed = read_placement(dict(obj))  # reads only
        there = present(kind, obj)
        meta = obj.get("metadata") or {}
        for location in wanted:
            if location in placed:
                out[location].append(
                    Along(
                        kind=kind.kind,
                        apiVersion=kind.api_version,
                        name=meta.get("name") or "",
                        namespace=meta.get("namespace") or None,
                        role=str(kind.role),
                        present=location in there,
                    )
                )
    return out


def gather(cache: HubCache, kind: Kind, workload: ReadOnly) -> list[tuple[Kind, ReadOnly]]:
    """What might go with the workload, from the hub cache: every following object of its
    namespace, and the cluster-scoped ones its pod template names."""
    namespace = (workload.get("metadata") or {}).get("namespace") or ""
    spec = kind.pod_spec(workload)
    named = references(spec) if spec else frozenset()
    found: list[tuple[Kind, ReadOnly]] = []
    for other in list(cache.kinds.values()):
        if other.role not in FOLLOWING:
            continue
        if other.namespaced:
            keys: Iterable[Key] = cache.list_keys(other.key, namespace)
        else:
            keys = (Key(other.key, "", name) for k, name in named if k == other.key)
        for key in keys:
            obj = cache.get(key)
            if obj is not None:
                found.append((other, obj))
    return found
