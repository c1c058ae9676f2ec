"""Folding the children's statuses into the hub object's status.

The hub's workload controllers are off, so the hub object's `status` is ours to write, and it
must read like one cluster's: `kubectl rollout status` compares summed counters with
`spec.replicas` once `observedGeneration` has caught up, and `kubectl wait --for=condition=…`
watches conditions. So counters are summed over every child (children being handed over
still run pods), `observedGeneration` only advances once every placed location has really
observed what we applied, and conditions are merged pessimistically: the hub object is only
Available or Complete when it is so everywhere it is placed.

Jobs need more care: the hub's apiserver validates Job status transitions (terminal
conditions never go away, Complete needs SuccessCriteriaMet and a completionTime, a finished
Job has no active or terminating pods, counters never decrease, startTime and completionTime
do not move). The fold keeps to those rules, or the hub would refuse the whole status.

`fold` is pure: the caller passes the clock (`now`) and what it applied (`applied`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

SYNCED = "kmc.dev/Synced"

_Obj = Mapping[str, Any]


@dataclass(frozen=True)
class _Condition:
    type: str
    status: str
    reason: str
    message: str


@dataclass(frozen=True)
class _Children:
    """The children as the fold sees them: `present` includes those being handed over."""

    present: Mapping[str, _Obj]  # location -> child, sorted by location
    placed: tuple[str, ...]  # sorted
    stale: Mapping[str, str]

    def condition(self, location: str, type_: str) -> _Obj | None:
        return _find_condition(_status(self.present[location]), type_)

    def is_true(self, location: str, type_: str) -> bool:
        child = self.present.get(location)
        return child is not None and _is_true(_find_condition(_status(child), type_))

    def with_condition(self, type_: str, status: str = "True") -> list[str]:
        """Present children (placed or not) with that condition in that status."""
        found = []
        for location in self.present:
            condition = self.condition(location, type_)
            if condition is not None and condition.get("status") == status:
                found.append(location)
        return found


def fold(
    hub: Mapping[str, Any],
    kind: str,
    children: Mapping[str, Mapping[str, Any] | None],
    placement: Mapping[str, int | None],
    stale: Mapping[str, str],
    applied: Mapping[str, tuple[int, int]],
    now: str,
) -> dict[str, Any]:
    """The full `status` to apply on the hub object.

    `children`: location -> the child as last seen (None: not created yet); `placement`: the
    hub object's placement; `stale`: location -> why its child's status is a last known one;
    `applied`: location -> (hub generation we applied there, child generation it produced).
    """
    seen = _Children(
        present={loc: child for loc, child in sorted(children.items()) if child is not None},
        placed=tuple(sorted(placement)),
        stale=stale,
    )
    previous = _status(hub)
    status: dict[str, Any] = _sums(seen.present.values())
    if kind == "Deployment" and seen.present:
        available = status.get("availableReplicas", 0)
        status["unavailableReplicas"] = max(0, _replicas(hub) - available)
    if kind == "StatefulSet":
        status.update(_revisions(seen))
    if kind == "Job":
        _job_fields(status, hub, seen, previous)
    observed = _observed_generation(hub, seen, applied, previous)
    if observed is not None:
        status["observedGeneration"] = observed
    conditions = [*_kind_conditions(kind, hub, seen, status, previous), _synced(seen)]
    if kind == "Job" and "completionTime" in status and not _has_true(conditions, "Complete"):
        del status["completionTime"]
    status["conditions"] = _stamped(conditions, previous, now, kind == "Deployment")
    return dict(sorted(status.items()))


# --- counters and generations -----------------------------------------------------------------


def _sums(children: Iterable[_Obj]) -> dict[str, Any]:
    """Every integer top-level status field but observedGeneration, summed; absent stays absent."""
    totals: dict[str, Any] = {}
    for child in children:
        for key, value in _status(child).items():
            if key != "observedGeneration" and _is_int(value):
                totals[key] = totals.get(key, 0) + value
    return totals


def _observed_generation(
    hub: _Obj, seen: _Children, applied: Mapping[str, tuple[int, int]], previous: _Obj
) -> int | None:
    """The hub generation once every placed location observed what we applied for it."""
    generation = _int(_mapping(hub.get("metadata")).get("generation"))
    if generation is not None and all(
        _observed_there(seen.present.get(loc), applied.get(loc), generation) for loc in seen.placed
    ):
        return generation
    return _int(previous.get("observedGeneration"))


def _observed_there(child: _Obj | None, applied: tuple[int, int] | None, generation: int) -> bool:
    """We applied `generation` there, the child is still what that produced, and its
    controller has seen it."""
    if child is None or applied is None:
        return False
    hub_generation, child_generation = applied
    observed = _int(_status(child).get("observedGeneration"))
    return (
        hub_generation == generation
        and _mapping(child.get("metadata")).get("generation") == child_generation
        and observed is not None
        and observed >= child_generation
    )


def _revisions(seen: _Children) -> dict[str, str]:
    """A StatefulSet rolling out anywhere shows differing revisions, as on one cluster.

    Revisions are per-cluster hashes, so they are only carried up (as `location/revision`
    lists) while some child is mid-rollout; `kubectl rollout status` waits on them.
    """
    pairs = {
        loc: (
            str(_status(child).get("currentRevision", "")),
            str(_status(child).get("updateRevision", "")),
        )
        for loc, child in seen.present.items()
    }
    if all(current == update for current, update in pairs.values()):
        return {}
    return {
        "currentRevision": ",".join(f"{loc}/{current}" for loc, (current, _) in pairs.items()),
        "updateRevision": ",".join(f"{loc}/{update}" for loc, (_, update) in pairs.items()),
    }


# --- Jobs: times and counters -----------------------------------------------------------------


def _job_fields(status: dict[str, Any], hub: _Obj, seen: _Children, previous: _Obj) -> None:
    """startTime, completionTime (dropped again unless Complete), monotonic counters."""
    suspended = _mapping(hub.get("spec")).get("suspend") is True
    start = previous.get("startTime") if not suspended else None
    if start is None:
        start = _earliest(_status(child).get("startTime") for child in seen.present.values())
    if start is not None:
        status["startTime"] = start
    finish = previous.get("completionTime")
    if finish is None:
        times = [
            _status(seen.present[loc]).get("completionTime") if loc in seen.present else None
            for loc in seen.placed
        ]
        if times and all(isinstance(time, str) for time in times):
            finish = _latest(times)
    if finish is not None:
        status["completionTime"] = finish
    for counter in ("failed", "succeeded"):  # the hub refuses counters that go down
        earlier = previous.get(counter)
        if _is_int(earlier) and earlier > status.get(counter, 0):
            status[counter] = earlier


# --- conditions -------------------------------------------------------------------------------


def _kind_conditions(
    kind: str, hub: _Obj, seen: _Children, status: Mapping[str, Any], previous: _Obj
) -> list[_Condition]:
    if kind == "Deployment":
        conditions = [_available(hub, seen), _progressing(seen)]
        failure = _replica_failure(seen)
        return [*conditions, failure] if failure is not None else conditions
    if kind == "Job":
        return [*_job_conditions(seen, status, previous), *_merged(seen, skip=_JOB_TERMINAL)]
    return _merged(seen, skip=frozenset())


def _available(hub: _Obj, seen: _Children) -> _Condition:
    """Available only where every placed location's child is Available and none is stale."""
    if not seen.placed and _replicas(hub) > 0:
        message = "not placed in any location"
        return _Condition("Available", "False", "MinimumReplicasUnavailable", message)
    lacking = []
    for loc in sorted({*seen.placed, *seen.stale}):
        child = seen.present.get(loc)
        if child is None:
            lacking.append(f"{loc} (not created yet)")
        elif loc in seen.stale:
            lacking.append(f"{loc} (stale)")
        elif not seen.is_true(loc, "Available"):
            want = _replicas(child)
            have = _status(child).get("availableReplicas", 0)
            lacking.append(f"{loc} ({have}/{want} available)")
    if lacking:
        message = "not available in " + ", ".join(lacking)
        return _Condition("Available", "False", "MinimumReplicasUnavailable", message)
    message = "available in " + ", ".join(seen.placed) if seen.placed else "no replicas to run"
    return _Condition("Available", "True", "MinimumReplicasAvailable", message)


def _progressing(seen: _Children) -> _Condition:
    """False once any child gave up; otherwise True, and settled only when all have rolled out."""
    exceeded = [
        loc
        for loc in seen.present
        if _mapping(seen.condition(loc, "Progressing")).get("reason") == "ProgressDeadlineExceeded"
    ]
    if exceeded:
        message = "progress deadline exceeded in " + ", ".join(exceeded)
        return _Condition("Progressing", "False", "ProgressDeadlineExceeded", message)
    moving = [
        loc
        for loc in seen.placed
        if loc not in seen.present
        or _mapping(seen.condition(loc, "Progressing")).get("reason") != "NewReplicaSetAvailable"
    ]
    if moving:
        return _Condition(
            "Progressing", "True", "ReplicaSetUpdated", "progressing in " + ", ".join(moving)
        )
    message = "rolled out in " + ", ".join(seen.placed) if seen.placed else "nothing to roll out"
    return _Condition("Progressing", "True", "NewReplicaSetAvailable", message)


def _replica_failure(seen: _Children) -> _Condition | None:
    """Carried up from any child that has it, naming where."""
    failing = seen.with_condition("ReplicaFailure")
    if not failing:
        return None
    first = _mapping(seen.condition(failing[0], "ReplicaFailure"))
    message = "; ".join(_located(loc, seen.condition(loc, "ReplicaFailure")) for loc in failing)
    return _Condition("ReplicaFailure", "True", str(first.get("reason") or "FailedCreate"), message)


_JOB_TERMINAL = frozenset({"Complete", "Failed", "FailureTarget", "SuccessCriteriaMet"})


def _job_conditions(seen: _Children, status: Mapping[str, Any], previous: _Obj) -> list[_Condition]:
    """Success only when every placed child succeeded, failure when any child failed.

    As the Job controller does, the outcome is first announced (SuccessCriteriaMet or
    FailureTarget) and the Job only finishes (Complete or Failed) once no pod of it is active
    or terminating anywhere. Once reached, the hub keeps an outcome: it refuses to drop it.
    """
    kept = {
        str(c.get("type")): _condition_from(c)
        for c in _list(previous.get("conditions"))
        if c.get("type") in _JOB_TERMINAL and _is_true(c)
    }
    idle = not status.get("active") and not status.get("terminating") and "startTime" in status
    if {"SuccessCriteriaMet", "Complete"} & kept.keys():
        return _job_success(seen, status, kept, idle)
    failing = [
        loc
        for loc in seen.present
        if seen.is_true(loc, "Failed") or seen.is_true(loc, "FailureTarget")
    ]
    if failing or {"FailureTarget", "Failed"} & kept.keys():
        return _job_failure(seen, failing, kept, idle)
    if seen.placed and all(
        seen.is_true(loc, "SuccessCriteriaMet") or seen.is_true(loc, "Complete")
        for loc in seen.placed
    ):
        return _job_success(seen, status, kept, idle)
    return []


def _job_success(
    seen: _Children, status: Mapping[str, Any], kept: Mapping[str, _Condition], idle: bool
) -> list[_Condition]:
    complete = kept.get("Complete")
    if complete is not None and "SuccessCriteriaMet" not in kept:
        return [complete]  # finished before SuccessCriteriaMet existed: the hub refuses adding it
    met = kept.get("SuccessCriteriaMet") or _Condition(
        "SuccessCriteriaMet", "True", "CompletionsReached", "succeeded in " + ", ".join(seen.placed)
    )
    everywhere = all(seen.is_true(loc, "Complete") for loc in seen.placed)
    if complete is None and everywhere and idle and "completionTime" in status:
        complete = _Condition(
            "Complete", "True", met.reason, "complete in " + ", ".join(seen.placed)
        )
    return [met, complete] if complete is not None else [met]


def _job_failure(
    seen: _Children, failing: list[str], kept: Mapping[str, _Condition], idle: bool
) -> list[_Condition]:
    def described(type_: str, locations: list[str]) -> _Condition:
        first = _mapping(seen.condition(locations[0], type_))
        message = "failed in " + "; ".join(
            _located(loc, seen.condition(loc, type_)) for loc in locations
        )
        return _Condition(type_, "True", str(first.get("reason") or "Failed"), message)

    target = (
        kept.get("FailureTarget")
        or kept.get("Failed")
        or described(
            "FailureTarget" if seen.is_true(failing[0], "FailureTarget") else "Failed", failing
        )
    )
    target = _Condition("FailureTarget", "True", target.reason, target.message)
    failed = kept.get("Failed")
    failed_at = [loc for loc in failing if seen.is_true(loc, "Failed")]
    if failed is None and failed_at and idle:
        failed = described("Failed", failed_at)
    return [target, failed] if failed is not None else [target]


_ORDER = {"True": 0, "Unknown": 1, "False": 2}
# Conditions where True is the bad news: carried up if any child has them.
_TRUE_IS_BAD = frozenset({"ReplicaFailure"})
_BAD_TRUE_ORDER = {"False": 0, "Unknown": 1, "True": 2}


def _merged(seen: _Children, skip: frozenset[str]) -> list[_Condition]:
    """Every other condition type seen in the children, merged pessimistically."""
    by_type: dict[str, list[tuple[str, _Obj]]] = {}
    for loc, child in seen.present.items():
        for condition in _list(_status(child).get("conditions")):
            type_ = condition.get("type")
            if isinstance(type_, str) and type_ not in skip and type_ != SYNCED:
                by_type.setdefault(type_, []).append((loc, condition))
    return [_merge(type_, found) for type_, found in sorted(by_type.items())]


def _merge(type_: str, found: list[tuple[str, _Obj]]) -> _Condition:
    """The worst status wins (False, then Unknown); the message names the other locations."""
    good = "False" if type_ in _TRUE_IS_BAD else "True"
    order = _BAD_TRUE_ORDER if type_ in _TRUE_IS_BAD else _ORDER
    _, worst = max(found, key=lambda item: order[_status_value(item[1])])  # first of the worst
    status = _status_value(worst)
    reason = str(worst.get("reason") or status)
    others = [(loc, c) for loc, c in found if _status_value(c) != good]
    if not others:
        return _Condition(type_, status, reason, f"{good} in " + ", ".join(loc for loc, _ in found))
    message = "; ".join(f"{_status_value(c)} in {_located(loc, c)}" for loc, c in others)
    return _Condition(type_, status, reason, message)


def _synced(seen: _Children) -> _Condition:
    """Whether every placed location has its child and shows its current status."""
    pending = [loc for loc in seen.placed if loc not in seen.present]
    waiting = "not created yet in " + ", ".join(pending) if pending else ""
    if seen.stale:
        stale = "; ".join(f"{loc}: {message}" for loc, message in sorted(seen.stale.items()))
        return _Condition(SYNCED, "False", "Stale", "; ".join(filter(None, [stale, waiting])))
    if pending:
        return _Condition(SYNCED, "False", "Pending", waiting)
    where = "in sync in " + ", ".join(seen.placed) if seen.placed else "in sync, placed nowhere"
    return _Condition(SYNCED, "True", "Synced", where)


def _stamped(
    conditions: Iterable[_Condition], previous: _Obj, now: str, update_time: bool
) -> list[dict[str, Any]]:
    """Condition dicts sorted by type, keeping the times of whatever did not change."""
    before = {c.get("type"): c for c in _list(previous.get("conditions"))}
    stamped = []
    for condition in sorted(conditions, key=lambda c: c.type):
        old = before.get(condition.type)
        same_status = old is not None and old.get("status") == condition.status
        unchanged = same_status and _condition_from(_mapping(old)) == condition
        item: dict[str, Any] = {
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


def _kept(old: _Obj | None, key: str, keep: bool, now: str) -> str:
    value = old.get(key) if old is not None and keep else None
    return value if isinstance(value, str) and value else now


# --- helpers ----------------------------------------------------------------------------------


def _mapping(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _list(value: object) -> list[Mapping[str, Any]]:
    return [item for item in value if isinstance(item, Mapping)] if isinstance(value, list) else []


def _status(obj: _Obj) -> Mapping[str, Any]:
    return _mapping(obj.get("status"))


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _replicas(obj: _Obj) -> int:
    value = _mapping(obj.get("spec")).get("replicas", 1)
    return value if isinstance(value, int) and not isinstance(value, bool) else 1


def _find_condition(status: Mapping[str, Any], type_: str) -> _Obj | None:
    return next((c for c in _list(status.get("conditions")) if c.get("type") == type_), None)


def _is_true(condition: _Obj | None) -> bool:
    return condition is not None and condition.get("status") == "True"


def _has_true(conditions: Iterable[_Condition], type_: str) -> bool:
    return any(c.type == type_ and c.status == "True" for c in conditions)


def _status_value(condition: _Obj) -> str:
    value = condition.get("status")
    return value if value in _ORDER else "Unknown"


def _condition_from(condition: _Obj) -> _Condition:
    return _Condition(
        str(condition.get("type", "")),
        str(condition.get("status", "")),
        str(condition.get("reason", "")),
        str(condition.get("message", "")),
    )


def _located(location: str, condition: _Obj | None) -> str:
    message = _mapping(condition).get("message")
    return f"{location}: {message}" if message else location


def _time(value: str) -> datetime:
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


def _earliest(values: Iterable[object]) -> str | None:
    times = [value for value in values if isinstance(value, str)]
    return min(times, key=_time) if times else None


def _latest(values: Iterable[object]) -> str | None:
    times = [value for value in values if isinstance(value, str)]
    return max(times, key=_time) if times else None
