"""Folding the children's statuses into the hub object's status.

The hub's workload controllers are off, so the hub object's `status` is ours to write, and it
must read like one cluster's: `kubectl rollout status` compares summed counters with
`spec.replicas` once `observedGeneration` has caught up, and `kubectl wait --for=condition=…`
watches conditions. So counters are summed over every child (children being handed over
still run pods), `observedGeneration` only advances once every placed location has really
observed what we applied, and conditions are merged pessimistically: the hub object is only
Available or Complete when it is so everywhere it is placed.

What differs by kind — a Deployment's Available and Progressing, a StatefulSet's revisions,
a Job's outcome and times, which the hub validates — is the kind's `Rules`, beside its entry in
`kinds/`; this module is the part every kind shares, and the helpers those rules read with.

`fold` is pure: the caller passes the clock (`now`) and what it applied (`applied`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime

from apiserver.contract import OVERRIDDEN, OVERRIDE_FAILED, OVERRIDES, SYNCED
from apiserver.objects import Obj, ReadOnly


@dataclass(frozen=True)
class Condition:
    type: str
    status: str
    reason: str
    message: str


@dataclass(frozen=True)
class Children:
    """The children as the fold sees them: `present` includes those being handed over."""

    present: Mapping[str, ReadOnly]  # location -> child, sorted by location
    placed: tuple[str, ...]  # sorted
    stale: Mapping[str, str]

    def condition(self, location: str, type_: str) -> ReadOnly | None:
        return find_condition(status_of(self.present[location]), type_)

    def is_true(self, location: str, type_: str) -> bool:
        child = self.present.get(location)
        return child is not None and is_true(find_condition(status_of(child), type_))

    def with_condition(self, type_: str, status: str = "True") -> list[str]:
        """Present children (placed or not) with that condition in that status."""
        found = []
        for location in self.present:
            condition = self.condition(location, type_)
            if condition is not None and condition.get("status") == status:
                found.append(location)
        return found


@dataclass(frozen=True)
class Rules:
    """What a kind adds to the fold every kind gets (counters summed, `observedGeneration`
    once every location caught up, conditions merged pessimistically, `kmc.dev/Synced`).
    Each kind's own rules live beside its entry in `kinds/`."""

    # Fields of its own, set on the summed status: (status, hub, seen, previous status).
    fields: Callable[[Obj, ReadOnly, Children, ReadOnly], None] | None = None
    # Its conditions: (hub, seen, status so far, previous status); the others are merged.
    conditions: Callable[[ReadOnly, Children, ReadOnly, ReadOnly], list[Condition]] = field(
        default_factory=lambda: merged_all
    )
    # The last word on fields, once the conditions are known: (status, conditions).
    settle: Callable[[Obj, list[Condition]], None] | None = None
    update_time: bool = False  # its conditions carry lastUpdateTime too
    # Its children's status says which generation their controller saw (observedGeneration).
    observes_generation: bool = True
    # Its status has a conditions list (an Ingress's has none: no Synced, no Placed there).
    conditions_in_status: bool = True


def fold(
    hub: ReadOnly,
    rules: Rules,
    children: Mapping[str, ReadOnly | None],
    placement: Mapping[str, int | None],
    stale: Mapping[str, str],
    applied: Mapping[str, tuple[int, int]],
    now: str,
    override_failures: Mapping[str, str] | None = None,
    override_objects: bool = False,
) -> Obj:
    """The full `status` to apply on the hub object, by the kind's `rules`.

    `children`: location -> the child as last seen (None: not created yet); `placement`: the
    hub object's placement; `stale`: location -> why its child's status is a last known one;
    `applied`: location -> (hub generation we applied there, child generation it produced);
    `override_failures`: location -> why its overrides did not apply (its child was left as
    it was); `override_objects`: whether Override or ClusterOverride objects target it.
    """
    seen = Children(
        present={loc: child for loc, child in sorted(children.items()) if child is not None},
        placed=tuple(sorted(placement)),
        stale=stale,
    )
    previous = status_of(hub)
    status: Obj = _sums(seen.present.values())
    if rules.fields is not None:
        rules.fields(status, hub, seen, previous)
    observed = _observed_generation(hub, seen, applied, previous)
    if observed is not None:
        status["observedGeneration"] = observed
    if not rules.conditions_in_status:
        return dict(sorted(status.items()))
    conditions = [*rules.conditions(hub, seen, status, previous), _synced(seen)]
    overridden = _overridden(hub, previous, override_failures or {}, override_objects)
    if overridden is not None:
        conditions.append(overridden)
    if rules.settle is not None:
        rules.settle(status, conditions)
    status["conditions"] = _stamped(conditions, previous, now, rules.update_time)
    return dict(sorted(status.items()))


def reported(
    rules: Rules, children: Mapping[str, ReadOnly | None], placement: Mapping[str, int | None]
) -> bool:
    """Has every placed child's controller seen it: a status of its own, and, for kinds whose
    status says so, the child's generation observed?"""
    for location in placement:
        child = children.get(location)
        status = status_of(child) if child is not None else {}
        if not status:
            return False
        if rules.observes_generation:
            observed = as_int(status.get("observedGeneration"))
            generation = as_int(mapping(child.get("metadata")).get("generation")) if child else None
            if observed is None or (generation is not None and observed < generation):
                return False
    return True


# --- counters and generations -----------------------------------------------------------------


def _sums(children: Iterable[ReadOnly]) -> Obj:
    """Every integer top-level status field but observedGeneration, summed; absent stays absent."""
    totals: Obj = {}
    for child in children:
        for key, value in status_of(child).items():
            if key != "observedGeneration" and is_int(value):
                totals[key] = totals.get(key, 0) + value
    return totals


def _observed_generation(
    hub: ReadOnly, seen: Children, applied: Mapping[str, tuple[int, int]], previous: ReadOnly
) -> int | None:
    """The hub generation once every placed location observed what we applied for it."""
    generation = as_int(mapping(hub.get("metadata")).get("generation"))
    if generation is not None and all(
        _observed_there(seen.present.get(loc), applied.get(loc), generation) for loc in seen.placed
    ):
        return generation
    return as_int(previous.get("observedGeneration"))


def _observed_there(
    child: ReadOnly | None, applied: tuple[int, int] | None, generation: int
) -> bool:
    """We applied `generation` there, the child is still what that produced, and its
    controller has seen it."""
    if child is None or applied is None:
        return False
    hub_generation, child_generation = applied
    observed = as_int(status_of(child).get("observedGeneration"))
    return (
        hub_generation == generation
        and mapping(child.get("metadata")).get("generation") == child_generation
        and observed is not None
        and observed >= child_generation
    )


# --- conditions -------------------------------------------------------------------------------


_ORDER = {"True": 0, "Unknown": 1, "False": 2}
# Conditions where True is the bad news: carried up if any child has them.
_TRUE_IS_BAD = frozenset({"ReplicaFailure"})
_BAD_TRUE_ORDER = {"False": 0, "Unknown": 1, "True": 2}


def merged_all(_: ReadOnly, seen: Children, __: ReadOnly, ___: ReadOnly) -> list[Condition]:
    """Every condition type seen in the children, merged pessimistically."""
    return merged(seen, skip=frozenset())


def merged(seen: Children, skip: frozenset[str]) -> list[Condition]:
    """Every other condition type seen in the children, merged pessimistically."""
    by_type: dict[str, list[tuple[str, ReadOnly]]] = {}
    for loc, child in seen.present.items():
        for condition in items_of(status_of(child).get("conditions")):
            type_ = condition.get("type")
            if isinstance(type_, str) and type_ not in skip and type_ != SYNCED:
                by_type.setdefault(type_, []).append((loc, condition))
    return [_merge(type_, found) for type_, found in sorted(by_type.items())]


def merged_condition(type_: str, found: list[tuple[str, ReadOnly]]) -> Condition:
    """One condition type as (location, condition) pairs, merged as every fold merges them
    (for conditions a kind keeps elsewhere than `status.conditions`: a route's parents)."""
    return _merge(type_, found)


def _merge(type_: str, found: list[tuple[str, ReadOnly]]) -> Condition:
    """The worst status wins (False, then Unknown); the message names the other locations."""
    good = "False" if type_ in _TRUE_IS_BAD else "True"
    order = _BAD_TRUE_ORDER if type_ in _TRUE_IS_BAD else _ORDER
    _, worst = max(found, key=lambda item: order[_status_value(item[1])])  # first of the worst
    status = _status_value(worst)
    reason = str(worst.get("reason") or status)
    others = [(loc, c) for loc, c in found if _status_value(c) != good]
    if not others:
        return Condition(type_, status, reason, f"{good} in " + ", ".join(loc for loc, _ in found))
    message = "; ".join(f"{_status_value(c)} in {located(loc, c)}" for loc, c in others)
    return Condition(type_, status, reason, message)


def _synced(seen: Children) -> Condition:
    """Whether every placed location has its child and shows its current status."""
    pending = [loc for loc in seen.placed if loc not in seen.present]
    waiting = "not created yet in " + ", ".join(pending) if pending else ""
    if seen.stale:
        stale = "; ".join(f"{loc}: {message}" for loc, message in sorted(seen.stale.items()))
        return Condition(SYNCED, "False", "Stale", "; ".join(filter(None, [stale, waiting])))
    if pending:
        return Condition(SYNCED, "False", "Pending", waiting)
    where = "in sync in " + ", ".join(seen.placed) if seen.placed else "in sync, placed nowhere"
    return Condition(SYNCED, "True", "Synced", where)


def _overridden(
    hub: ReadOnly, previous: ReadOnly, failures: Mapping[str, str], objects: bool
) -> Condition | None:
    """`Overridden`: False (OverrideFailed) naming every location whose overrides failed
    and why; True while the object has overrides, or once it had them (a condition we stop
    sending would stay behind on kinds whose conditions list is atomic)."""
    if failures:
        message = "; ".join(f"in {loc}: {why}" for loc, why in sorted(failures.items()))
        return Condition(OVERRIDDEN, "False", OVERRIDE_FAILED, message)
    if objects or OVERRIDES in mapping(mapping(hub.get("metadata")).get("annotations")):
        return Condition(OVERRIDDEN, "True", "Applied", "overrides applied where they select")
    if find_condition(previous, OVERRIDDEN) is not None:
        return Condition(OVERRIDDEN, "True", "NoOverrides", "no overrides")
    return None


def _stamped(
    conditions: Iterable[Condition], previous: ReadOnly, now: str, update_time: bool
) -> list[Obj]:
    """Condition dicts sorted by type, keeping the times of whatever did not change."""
    before = {c.get("type"): c for c in items_of(previous.get("conditions"))}
    stamped = []
    for condition in sorted(conditions, key=lambda c: c.type):
        old = before.get(condition.type)
        same_status = old is not None and old.get("status") == condition.status
        unchanged = same_status and condition_from(mapping(old)) == condition
        item: Obj = {
            "type": condition.type,
            "status": condition.status,
            "reason": condition.reason,
            "message": condition.message,
            "lastTransitionTime": _kept(old, "lastTransitionTime", same_status, now),
        }
        if update_time:
            item["lastUpdateTime"] = _kept(old, "lastUpdateTime", unchanged, now)
        stamped.append(item)
    return stamped


def _kept(old: ReadOnly | None, key: str, keep: bool, now: str) -> str:
    value = old.get(key) if old is not None and keep else None
    return value if isinstance(value, str) and value else now


# --- helpers ----------------------------------------------------------------------------------


def mapping(value: object) -> ReadOnly:
    return value if isinstance(value, Mapping) else {}


def items_of(value: object) -> list[ReadOnly]:
    return [item for item in value if isinstance(item, Mapping)] if isinstance(value, list) else []


def status_of(obj: ReadOnly) -> ReadOnly:
    return mapping(obj.get("status"))


def is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def as_int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def replicas_of(obj: ReadOnly) -> int:
    value = mapping(obj.get("spec")).get("replicas", 1)
    return value if isinstance(value, int) and not isinstance(value, bool) else 1


def find_condition(status: ReadOnly, type_: str) -> ReadOnly | None:
    return next((c for c in items_of(status.get("conditions")) if c.get("type") == type_), None)


def is_true(condition: ReadOnly | None) -> bool:
    return condition is not None and condition.get("status") == "True"


def has_true(conditions: Iterable[Condition], type_: str) -> bool:
    return any(c.type == type_ and c.status == "True" for c in conditions)


def _status_value(condition: ReadOnly) -> str:
    value = condition.get("status")
    return value if value in _ORDER else "Unknown"


def condition_from(condition: ReadOnly) -> Condition:
    return Condition(
        str(condition.get("type", "")),
        str(condition.get("status", "")),
        str(condition.get("reason", "")),
        str(condition.get("message", "")),
    )


def located(location: str, condition: ReadOnly | None) -> str:
    message = mapping(condition).get("message")
    return f"{location}: {message}" if message else location


def _time(value: str) -> datetime:
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


def earliest(values: Iterable[object]) -> str | None:
    times = [value for value in values if isinstance(value, str)]
    return min(times, key=_time) if times else None


def latest(values: Iterable[object]) -> str | None:
    times = [value for value in values if isinstance(value, str)]
    return max(times, key=_time) if times else None
