"""Make before break: moving replicas between locations without an outage.

When a placement takes replicas away from one location and gives them to another, the naive
sync (apply every child's new share at once) kills the old pods while the new ones are still
pulling images, and the workload is down for a while. Instead the new shares are applied at once
and the old ones shrink only as far as the replicas available elsewhere allow: the sum of
available replicas never drops below `replicas - maxUnavailable` of the hub object's own rollout
strategy, which is the promise a single-cluster Deployment makes too (DESIGN.md section 4).

The rule is level-based: `plan` sees only what is observed now (each child's applied replicas and
its available count) and remembers nothing, so a sync worker that restarts half way through a
move simply carries on from what it observes.

How much may go, the budget: available replicas of reachable children beyond the floor
`total - max_unavailable`. Removing `n` replicas from a child with `a` available costs `min(n, a)`
of it: we cannot know which pods the child's own controller removes (a Deployment mid-rollout
scales its ReplicaSets proportionally), so we assume the available ones go first.

Choices that keep the promise when observations are imperfect:

- An unreachable child cannot be changed, and its numbers are stale: it keeps its replicas, is
  never deleted, and its available replicas do not count towards the budget.
- A child's available count is capped at its replicas. Status lags behind spec: a child scaled
  down a moment ago still reports its old available count, which would otherwise be spent twice.
- When the floor is not met (nothing available yet, say, because a brand-new Deployment was
  re-placed before any pod came up), nothing shrinks, not even children whose replicas are all
  unavailable: they may be about to become available, and nowhere else may ever succeed. The move
  then waits for the new copies, and a workload whose new copies never become available keeps the
  replicas it has.
- Likewise a placement that places fewer than `total - max_unavailable` replicas (capacity ran
  out) never finishes draining the old locations: they keep the difference, reported in
  `Plan.waiting`, rather than the workload running below its floor.
- Lowering the hub's own `replicas` does not deadlock: the floor falls with it, so the surplus is
  budget and the decreases go ahead.

The budget is spent on removed locations first (they are what blocks the garbage collection),
then on the largest decreases, then by name, so equal inputs give equal plans.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class Child:
    """What we observe of one location's child object."""

    replicas: int  # its spec.replicas as currently applied
    available: int  # its status.availableReplicas (0 if unknown)
    reachable: bool  # False: location unreachable, its numbers are stale and it cannot be changed


@dataclass(frozen=True)
class Plan:
    """What to do now; computed afresh on every change."""

    # spec.replicas to apply now, per location that should have a child (placed ones, and
    # removed ones still draining); sorted by name
    replicas: dict[str, int]
    # locations whose child can be deleted now (handover done)
    delete: frozenset[str]
    # human lines for a condition or Event: what holds the move
    waiting: tuple[str, ...]


@dataclass(frozen=True)
class _Decrease:
    """A reachable child that has more replicas than it should."""

    name: str
    removed: bool
    current: int
    goal: int
    available: int

    @property
    def cost(self) -> int:
        """Available replicas lost, at worst, by going all the way to the goal."""
        return min(self.current - self.goal, self.available)

    def priority(self) -> tuple[bool, int, str]:
        return (not self.removed, self.goal - self.current, self.name)


def plan(
    target: Mapping[str, int], children: Mapping[str, Child], total: int, max_unavailable: int
) -> Plan:
    """Replicas to apply and children to delete now, on the way from `children` to `target`.

    `target` is the placement (locations absent from it must end up without a child), `children`
    what exists now, `total` the hub object's replicas and `max_unavailable` its rollout
    strategy's allowance.
    """
    _check(target, total, max_unavailable)
    replicas: dict[str, int] = {}
    delete: set[str] = set()
    waiting: list[str] = []
    decreases: list[_Decrease] = []
    for name in sorted(target.keys() | children.keys()):
        child, goal, removed = children.get(name), target.get(name, 0), name not in target
        if child is None:  # so placed: a removed location without a child is not in the union
            replicas[name] = goal  # make first
        elif not child.reachable:
            replicas[name] = child.replicas
            if removed or child.replicas != goal:
                waiting.append(_unreachable_line(name, child.replicas, goal, removed))
        elif removed and child.replicas == 0:
            delete.add(name)
        elif child.replicas > goal:
            decreases.append(_Decrease(name, removed, child.replicas, goal, _available(child)))
        else:
            replicas[name] = goal  # make first
    for decrease, now, need in _spend(decreases, _budget(children, total, max_unavailable)):
        replicas[decrease.name] = now
        if need:
            waiting.append(
                f"{decrease.name}: {now} -> {decrease.goal} waits for {need} more available"
                " elsewhere"
            )
    return Plan(dict(sorted(replicas.items())), frozenset(delete), tuple(waiting))


def _check(target: Mapping[str, int], total: int, max_unavailable: int) -> None:
    if total < 0 or max_unavailable < 0:
        raise ValueError(
            f"total and max_unavailable must be >= 0, got {total} and {max_unavailable}"
        )
    negative = sorted(name for name, replicas in target.items() if replicas < 0)
    if negative:
        raise ValueError(f"negative target replicas for {', '.join(negative)}")


def _available(child: Child) -> int:
    """Available replicas we may count on: never more than the child now asks for."""
    return max(0, min(child.available, child.replicas))


def _budget(children: Mapping[str, Child], total: int, max_unavailable: int) -> int:
    """Available replicas that may be lost now; negative while the floor is not met."""
    available = sum(_available(child) for child in children.values() if child.reachable)
    return available - (total - max_unavailable)


def _spend(decreases: list[_Decrease], budget: int) -> Iterator[tuple[_Decrease, int, int]]:
    """Each decrease with the replicas it may go to now and how many more available it awaits.

    Removing a replica loses at most one available one, so a decrease the budget covers only in
    part goes down by what is left. The wait counts what the decreases before it still need too:
    they are served first when more becomes available.
    """
    left, queued = budget, 0
    for decrease in sorted(decreases, key=_Decrease.priority):
        if decrease.cost <= left:
            left -= decrease.cost
            yield decrease, decrease.goal, 0
            continue
        now = max(left, 0)
        left -= now
        rest = decrease.cost - now
        yield decrease, decrease.current - now, queued + rest - left
        queued += rest


def _unreachable_line(name: str, replicas: int, goal: int, removed: bool) -> str:
    then = " and delete" if removed else ""
    return f"{name}: {replicas} -> {goal}{then} waits for the location to become reachable"
