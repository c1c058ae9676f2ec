"""Where a hub object runs, one row per location: what `--subresource locations` shows.

A pure function of what the sync loop already knows — the placement, the children it sees,
which hub generation it applied where, which locations are stale — and, when the caller has
them, the placement verdicts (so an evacuation says why). Nothing here is stored: the rows
are rebuilt on every request, so they cannot drift from the loops' own view.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import TypedDict

from apiserver.objects import ReadOnly
from apiserver.placement.engine import INCOMPATIBLE, Verdict

# A Ready pull location whose agent has not reported to this kmc-apiserver yet.
WAITING = "waiting for its agent"


class LocationState(TypedDict):
    location: str
    desired: int | None
    ready: int | None
    available: int | None
    syncedGeneration: int | None
    state: str  # Pending, Synced, Moving, Evacuating, Unreachable, Waiting, Incompatible
    message: str


def location_states(
    hub: ReadOnly,
    counts: tuple[str, str],
    placement: Mapping[str, int | None],
    children: Mapping[str, ReadOnly],
    applied: Mapping[str, tuple[int, int]],
    stale: Mapping[str, str],
    verdicts: Sequence[Verdict] = (),
    held: Collection[str] = (),
) -> list[LocationState]:
    """A row for every location the object is placed in or still has a child in. `counts`
    names the status fields that say how many pods are ready and available (the kind's).
    A `held` location's child is sized by its own autoscaler: what it asks is what is
    desired there."""
    generation = int(hub.get("metadata", {}).get("generation", 0))
    by_location = {v.location: v for v in verdicts}
    ready_field, available_field = counts
    rows: list[LocationState] = []
    for location in sorted(set(placement) | set(children)):
        child = children.get(location)
        status = (child or {}).get("status") or {}
        synced = _synced_generation(child, applied.get(location))
        desired = placement.get(location)
        if location in held and child is not None:
            replicas = (child.get("spec") or {}).get("replicas")
            desired = replicas if isinstance(replicas, int) else desired
        state, message = _state(
            location,
            {**placement, location: desired} if location in placement else placement,
            child,
            synced == generation,
            stale.get(location),
            by_location.get(location),
        )
        rows.append(
            LocationState(
                location=location,
                desired=desired,
                ready=_int(status.get(ready_field)) if child else None,
                available=_int(status.get(available_field)) if child else None,
                syncedGeneration=synced,
                state=state,
                message=message,
            )
        )
    return rows


def _synced_generation(child: ReadOnly | None, applied: tuple[int, int] | None) -> int | None:
    """The hub generation the child has caught up with, if we know it did."""
    if child is None or applied is None:
        return None
    hub_generation, child_generation = applied
    observed = (child.get("status") or {}).get("observedGeneration")
    if observed is None:  # kinds without observedGeneration: applied is as good as it gets
        return hub_generation
    return hub_generation if int(observed) >= child_generation else None


def _state(
    location: str,
    placement: Mapping[str, int | None],
    child: ReadOnly | None,
    caught_up: bool,
    stale: str | None,
    verdict: Verdict | None,
) -> tuple[str, str]:
    if stale == WAITING:
        return "Waiting", stale
    if stale is not None:
        return "Unreachable", stale
    if verdict is not None and verdict.code in INCOMPATIBLE:
        return "Incompatible", verdict.reason
    if location not in placement:
        why = verdict.reason if verdict is not None and not verdict.eligible else "not placed"
        return "Evacuating", why
    if verdict is not None and not verdict.eligible:
        return "Evacuating", verdict.reason
    if child is None:
        return "Pending", "not created yet"
    desired = placement[location]
    replicas = (child.get("spec") or {}).get("replicas")
    if desired is not None and isinstance(replicas, int) and replicas != desired:
        return "Moving", f"{replicas} -> {desired} replicas"
    if not caught_up:
        return "Pending", "the child has not observed the hub's generation yet"
    return "Synced", _problem(child)


def _problem(child: ReadOnly) -> str:
    """The child's own word when something is wrong there (a failing rollout, a quota)."""
    for condition in (child.get("status") or {}).get("conditions") or []:
        bad = (condition.get("type") == "ReplicaFailure" and condition.get("status") == "True") or (
            condition.get("type") in ("Progressing", "Available")
            and condition.get("status") == "False"
        )
        if bad:
            return str(condition.get("message") or condition.get("reason") or "")
    return ""


def _int(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0
