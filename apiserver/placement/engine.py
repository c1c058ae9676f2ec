"""The placement engine: which locations run a hub object, and with how many replicas.

`decide` is a pure function of the object, its strategy, a snapshot of the locations and the
current placement, with the clock passed in. Keeping it free of I/O and time makes every
placement reproducible in a unit test and lets the placement loop call it as often as it likes:
equal inputs give an equal decision, and an unchanged world gives an unchanged placement.

It first judges each location (`Verdict`, with the reason a user sees in the `strategy`
sub-resource), then places the object on the eligible ones by the strategy's type, and finally
explains what changed (`changes`, one line per location, for Events).

Stability is a goal of its own: a location that stops answering keeps its replicas for the
grace period (it may come back), a location that just became Ready gets nothing new until the
cooldown is over (it may flap), and Split moves the fewest replicas it can.

The loop decides for every object against the same locations, so how a location fares under a
strategy for a kind (selector, taints, served kinds, weights) is worked out once and remembered
for the same candidate and strategy objects; only the object's fields, the clock and the
placement are looked at per decision. Remembering changes no result, only its cost.
"""

from __future__ import annotations

import functools
import math
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import NamedTuple, Protocol

from apiserver.contract import Placement
from apiserver.objects import ReadOnly
from apiserver.placement import room
from apiserver.placement.apportion import apportion
from apiserver.placement.selector import matches, tolerated
from apiserver.placement.strategy import Strategy
from apiserver.placement.template import NOTHING, Steering, steering

# --- inputs and outputs -----------------------------------------------------------------------


@dataclass(frozen=True)
class Shape:
    """What an object's kind says of its size (the engine tests no kind by name)."""

    total: int | None  # replicas to divide; None: every location gets a whole copy
    # At most this many locations: a Job with completions needs a pod running in each.
    location_limit: int | None = None
    # A child's share cannot change in place (a Job's completions): the placement holds while
    # every location it uses stays eligible and the size holds.
    fixed_shares: bool = False
    pod_spec: ReadOnly | None = None  # its pod template's spec, if it has one


@dataclass(frozen=True)
class Taint:
    """A Location's taint, like a node taint."""

    key: str
    value: str
    effect: str

    def __str__(self) -> str:
        value = f"={self.value}" if self.value else ""
        return f"{self.key}{value}:{self.effect}"


@dataclass(frozen=True)
class Resources:
    """Room on a location, summed over its nodes (allocatable minus requested)."""

    cpu_milli: int
    memory: int
    pods: int


class FieldChecker(Protocol):
    """A location's schema for one kind."""

    def missing(self, obj: ReadOnly) -> list[str]:
        """Field paths `obj` sets that the schema lacks (so the location would drop them)."""
        ...


@dataclass(frozen=True)
class Candidate:
    """What the engine knows about one location.

    `served` holds "apiVersion/kind" entries ("apps/v1/Deployment", "v1/ConfigMap"); `schemas`
    is keyed the same way, and a kind without an entry is not checked (schema unknown).
    """

    name: str
    labels: Mapping[str, str]
    taints: tuple[Taint, ...]
    unschedulable: bool
    ready: bool
    ready_changed_at: float
    served: frozenset[str]
    schemas: Mapping[str, FieldChecker] = field(default_factory=dict)
    free: Resources | None = None


@dataclass(frozen=True)
class Settings:
    """Damping, in seconds: how long a not-Ready location keeps its share, and how long a
    location must have been Ready before it gets new work."""

    grace: float = 60.0
    cooldown: float = 60.0


class Why(StrEnum):
    """What a verdict rests on, for code: `Verdict.reason` is the words shown to people."""

    ELIGIBLE = "Eligible"
    EVACUATING = "Evacuating"  # eligible, but not Ready: its share goes when the grace ends
    AVOIDED = "Avoided"
    NOT_PINNED = "NotPinned"
    CORDONED = "Cordoned"
    FILTERED = "FilteredBySelector"
    TAINTED = "TaintNotTolerated"
    NOT_SERVED = "NotServed"
    FIELD_MISSING = "FieldNotInSchema"
    NOT_READY = "NotReady"
    COOLING_DOWN = "CoolingDown"
    TEMPLATE = "RuledOutByTemplate"  # the pod template's nodeAffinity, nodeSelector or spread
    POLICY = "RuledOutByPolicy"  # a PlacementPolicy of the object's namespace


# The location cannot take the object at all, however healthy it is.
INCOMPATIBLE = frozenset({Why.NOT_SERVED, Why.FIELD_MISSING})


@dataclass(frozen=True, slots=True)
class Verdict:
    """Whether a location may run the object, why in words (shown to users as is), and why as
    a code (for whoever acts on it)."""

    location: str
    eligible: bool
    reason: str
    code: Why


class Moved(StrEnum):
    """What a change of placement did to one location: the reason of its Event."""

    PLACED = "Placed"
    SPILLED_OVER = "SpilledOver"
    EVACUATED = "Evacuated"
    REBALANCED = "Rebalanced"


class Change(NamedTuple):
    """One location's change, as an Event says it."""

    reason: Moved
    message: str


@dataclass(frozen=True)
class Decision:
    """The new placement (sorted by location), every verdict, and what changed and why.

    `unplaceable` is set when the object cannot be placed as asked: no eligible location (the
    placement is then the current one, unchanged) or replicas that fit nowhere.
    """

    placement: Placement
    verdicts: tuple[Verdict, ...]
    unplaceable: str | None
    before: Mapping[str, int | None] = field(default_factory=dict)  # the current placement
    missing: Mapping[str, int] = field(default_factory=dict)  # unschedulable, where placed

    @functools.cached_property
    def changes(self) -> tuple[Change, ...]:
        """What changed, worked out when asked: a first placement (announced as a whole)
        and an unchanged one never ask, and with fifty locations the wording was a quarter
        of a decision's time."""
        return _changes(self.before, self.placement, self.verdicts, self.missing)

    @property
    def messages(self) -> tuple[str, ...]:
        return tuple(change.message for change in self.changes)


# --- replicas ---------------------------------------------------------------------------------


# --- verdicts ---------------------------------------------------------------------------------


def _duration(seconds: float) -> str:
    """Like kubectl's ages: 75s, 2m30s, 15m, 4h5m, 3d."""
    total = max(0, int(seconds))
    minutes, hours, days = total // 60, total // 3600, total // 86400
    if total < 120:
        return f"{total}s"
    if minutes < 10:
        return f"{minutes}m{total % 60}s" if total % 60 else f"{minutes}m"
    if hours < 3:
        return f"{minutes}m"
    if hours < 8:
        return f"{hours}h{minutes % 60}m" if minutes % 60 else f"{hours}h"
    return f"{hours}h" if hours < 48 else f"{days}d"


def _api_key(obj: ReadOnly) -> tuple[str, str]:
    api_version, kind = str(obj.get("apiVersion", "")), str(obj.get("kind", ""))
    return f"{api_version}/{kind}", f"{api_version} {kind}"


def _incompatibility(
    candidate: Candidate, strategy: Strategy, key: str, shown: str
) -> tuple[Why, str] | None:
    """Why the strategy or the object's kind rules the location out, whatever its health (the
    object's own fields are checked against the schema per decision, in `_verdict`)."""
    if not matches(strategy.location_selector, candidate.labels):
        return Why.FILTERED, "filtered by selector"
    for taint in candidate.taints:
        if not tolerated(strategy.tolerations, taint.key, taint.value, taint.effect):
            return Why.TAINTED, f"taint {taint} not tolerated"
    if key not in candidate.served:
        return Why.NOT_SERVED, f"{shown} not served"
    return None


class _Judged(NamedTuple):
    """One candidate judged on all that does not change from one object of a kind to the next
    under one strategy: everything but the object's fields, the clock and the placement."""

    candidate: Candidate
    verdict: Verdict  # eligible, or the first reason against it that is known already
    whatever_health: bool  # that reason comes before readiness: avoided, not pinned, cordoned
    checker: FieldChecker | None  # the kind's schema, checked against each object


def _judge(candidate: Candidate, strategy: Strategy, key: str, shown: str) -> _Judged:
    name = candidate.name
    if name in strategy.avoid:
        return _Judged(candidate, Verdict(name, False, "avoided", Why.AVOIDED), True, None)
    if strategy.pin and name not in strategy.pin:
        verdict = Verdict(name, False, "not pinned", Why.NOT_PINNED)
        return _Judged(candidate, verdict, True, None)
    if candidate.unschedulable:
        return _Judged(candidate, Verdict(name, False, "cordoned", Why.CORDONED), True, None)
    against = _incompatibility(candidate, strategy, key, shown)
    if against is not None:
        code, reason = against
        return _Judged(candidate, Verdict(name, False, reason, code), False, None)
    checker = candidate.schemas.get(key) if candidate.schemas else None
    return _Judged(candidate, Verdict(name, True, "eligible", Why.ELIGIBLE), False, checker)


def _verdict(
    judged: _Judged,
    obj: ReadOnly,
    placed: bool,
    now: float,
    settings: Settings,
    new: bool = False,
) -> Verdict:
    """The first thing that rules the location out, in the order users read them. `new`: the
    object has no placement yet, so there is nothing to churn and no cooldown to wait out."""
    verdict, candidate = judged.verdict, judged.candidate
    if judged.whatever_health:
        return verdict
    since = max(0.0, now - candidate.ready_changed_at)
    if not candidate.ready and (not placed or since >= settings.grace):
        return Verdict(candidate.name, False, f"not Ready for {_duration(since)}", Why.NOT_READY)
    if not verdict.eligible:
        return verdict
    missing = judged.checker.missing(obj) if judged.checker is not None else []
    if missing:
        missing_field = f"field {missing[0]} not in schema"
        return Verdict(candidate.name, False, missing_field, Why.FIELD_MISSING)
    if not candidate.ready:
        grace_left = _duration(math.ceil(settings.grace - since))
        evacuating = f"not Ready, evacuating in {grace_left}"
        return Verdict(candidate.name, True, evacuating, Why.EVACUATING)
    if not placed and not new and since < settings.cooldown:
        cooling = f"cooling down (Ready for {_duration(since)} of {_duration(settings.cooldown)})"
        return Verdict(candidate.name, False, cooling, Why.COOLING_DOWN)
    return verdict


@dataclass(frozen=True)
class _Snapshot:
    """The candidates judged under one strategy for one kind, in name order, and what placing
    on them reads (weights, Single's order of preference), worked out when first needed.

    `steady` says the verdicts are `verdicts` whenever the clock is `settled_at + cooldown` or
    later, whatever the placement: every candidate not ruled out is Ready, and none that could
    be eligible has a schema to check the object against.
    """

    candidates: tuple[Candidate, ...]  # held, so that their ids stay theirs while remembered
    strategy: Strategy
    judged: tuple[_Judged, ...]
    steady: bool
    settled_at: float
    verdicts: tuple[Verdict, ...]
    eligible: dict[str, Candidate]

    @functools.cached_property
    def weights(self) -> dict[str, int]:
        """Of every candidate that could be eligible."""
        return {
            j.candidate.name: _weight(self.strategy, j.candidate)
            for j in self.judged
            if j.verdict.eligible
        }

    @functools.cached_property
    def by_preference(self) -> tuple[str, ...]:
        """The same, heaviest first, then the roomiest, then by name."""
        weights = self.weights
        free_cpu = {
            j.candidate.name: -1 if j.candidate.free is None else j.candidate.free.cpu_milli
            for j in self.judged
            if j.verdict.eligible
        }
        return tuple(sorted(weights, key=lambda n: (-weights[n], -free_cpu[n], n)))


def _judge_all(
    candidates: Sequence[Candidate], strategy: Strategy, key: str, shown: str
) -> _Snapshot:
    by_name = {candidate.name: candidate for candidate in candidates}
    if len(by_name) != len(candidates):
        raise ValueError("candidates must have distinct names")
    judged = tuple(_judge(by_name[name], strategy, key, shown) for name in sorted(by_name))
    possible = [j for j in judged if j.verdict.eligible]
    steady = all(j.candidate.ready for j in judged if not j.whatever_health) and all(
        j.checker is None for j in possible
    )
    return _Snapshot(
        candidates=tuple(candidates),
        strategy=strategy,
        judged=judged,
        steady=steady,
        settled_at=max((j.candidate.ready_changed_at for j in possible), default=-math.inf),
        verdicts=tuple(j.verdict for j in judged) if steady else (),
        eligible={j.candidate.name: j.candidate for j in possible} if steady else {},
    )


def _weight(strategy: Strategy, candidate: Candidate) -> int:
    """The written weight, else (weights: capacity) its free CPU, 1 when that is unknown."""
    written = strategy.weight_of(candidate.name)
    if written is not None:
        return written
    return max(0, candidate.free.cpu_milli) if candidate.free is not None else 1


# Snapshots of recent (candidates, strategy, kind), by the identity of the objects: judging 50
# locations costs more than placing on them. Candidates and strategies are frozen values that
# nobody changes in place (their mappings included: §8, never mutate cached objects), and a
# snapshot holds on to them, so an id in a key cannot be another object's while the entry
# lives. Bounded, oldest out first; the lock only guards adding and evicting.
_SNAPSHOTS: dict[tuple[object, ...], _Snapshot] = {}
_SNAPSHOTS_KEPT = 64
_SNAPSHOTS_LOCK = threading.Lock()


def _snapshot(candidates: Sequence[Candidate], strategy: Strategy, obj: ReadOnly) -> _Snapshot:
    key, shown = _api_key(obj)
    memo_key = (id(strategy), key, *map(id, candidates))
    snapshot = _SNAPSHOTS.get(memo_key)
    if snapshot is None:
        snapshot = _judge_all(candidates, strategy, key, shown)
        with _SNAPSHOTS_LOCK:
            while len(_SNAPSHOTS) >= _SNAPSHOTS_KEPT:
                del _SNAPSHOTS[next(iter(_SNAPSHOTS))]
            _SNAPSHOTS[memo_key] = snapshot
    return snapshot


class _Verdicts(NamedTuple):
    all: tuple[Verdict, ...]  # by name
    eligible: dict[str, Candidate]  # by name
    evacuating: frozenset[str]  # eligible but not Ready (within the grace period)


def _verdicts(
    snapshot: _Snapshot,
    obj: ReadOnly,
    current: Mapping[str, int | None],
    now: float,
    settings: Settings,
) -> _Verdicts:
    if snapshot.steady and max(0.0, now - snapshot.settled_at) >= settings.cooldown:
        return _Verdicts(snapshot.verdicts, snapshot.eligible, frozenset())
    new = not current  # a first placement is whole at once: the cooldown damps moves
    verdicts = tuple(
        _verdict(judged, obj, judged.candidate.name in current, now, settings, new)
        for judged in snapshot.judged
    )
    eligible = {
        judged.candidate.name: judged.candidate
        for judged, verdict in zip(snapshot.judged, verdicts, strict=True)
        if verdict.eligible
    }
    evacuating = frozenset(name for name, candidate in eligible.items() if not candidate.ready)
    return _Verdicts(verdicts, eligible, evacuating)


# --- placing ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Context:
    """Everything the strategies need, restricted to the eligible locations."""

    obj: ReadOnly
    shape: Shape
    strategy: Strategy
    locations: Mapping[str, Candidate]  # eligible only
    current: Mapping[str, int | None]  # eligible only
    evacuating: frozenset[str]
    total: int | None
    missing: Mapping[str, int]
    limits: Mapping[str, int]
    snapshot: _Snapshot
    steering: Steering = NOTHING
    load: Mapping[str, int] = field(default_factory=dict)  # see `decide`

    def weight(self, name: str) -> int:
        return self.snapshot.weights[name]

    def held(self, name: str) -> int:
        return self.current.get(name) or 0


# The placement in name order (None: leave the current one alone) and what could not be
# placed, if anything.
_Outcome = tuple[Placement | None, str | None]


def _spread(ctx: _Context, names: Sequence[str]) -> list[str]:
    """One location per value of the spreadBy label: the one already used, else the heaviest."""
    key = ctx.strategy.spread_by
    if key is None:
        return list(names)
    groups: dict[str, list[str]] = {}
    for name in names:
        value = ctx.locations[name].labels.get(key)
        if value is not None:
            groups.setdefault(value, []).append(name)

    def preference(name: str) -> tuple[bool, int, int, str]:
        return (name not in ctx.current, -ctx.held(name), -ctx.weight(name), name)

    return sorted(min(group, key=preference) for group in groups.values())


def _replicate(ctx: _Context, names: Sequence[str]) -> _Outcome:
    """Every chosen location runs the whole object; evacuating ones keep what they have."""
    placement: Placement = {}
    for name in names:
        placement[name] = ctx.current.get(name) if name in ctx.evacuating else ctx.total
    return placement, None


def _single(ctx: _Context, names: Sequence[str]) -> _Outcome:
    """One location: the current one while it is eligible, else the heaviest, roomiest one;
    either way one that is not evacuating if there is one."""
    placed = [name for name in names if name in ctx.current]
    pool = set(placed or names)
    ranked = (name for name in ctx.snapshot.by_preference if name in pool)
    chosen = next((name for name in ranked if name not in ctx.evacuating), None)
    if chosen is None:  # all of them evacuating
        chosen = next(name for name in ctx.snapshot.by_preference if name in pool)
    return _replicate(ctx, [chosen])


def _settled(ctx: _Context, names: Sequence[str]) -> bool:
    """Fixed shares (a Job's) stay while all their locations stay eligible and the size holds:
    moving them restarts pods there, and a child's share cannot be changed in place."""
    if not ctx.shape.fixed_shares:
        return False
    used = [name for name in ctx.current if ctx.held(name) > 0]
    return (
        not ctx.missing
        and bool(used)
        and set(used) <= set(names)
        and sum(ctx.held(name) for name in ctx.current) == ctx.total
    )


def _limit_locations(ctx: _Context, names: Sequence[str]) -> list[str]:
    limit = ctx.shape.location_limit
    if limit is None or len(names) <= limit:
        return list(names)

    def preference(name: str) -> tuple[int, int, str]:
        return (-ctx.held(name), -ctx.weight(name), name)

    return sorted(sorted(names, key=preference)[:limit])


def _split(ctx: _Context, names: Sequence[str]) -> _Outcome:
    """Divide the replicas by weight; evacuating locations keep theirs while others can take
    the rest; locations short of capacity are capped and the rest goes where there is room."""
    if ctx.total is None:
        return _replicate(ctx, names)
    if _settled(ctx, names):
        return {name: ctx.current[name] for name in names if name in ctx.current}, None
    names = _limit_locations(ctx, names)
    ready = [name for name in names if name not in ctx.evacuating] if ctx.evacuating else names
    fixed = _keep_evacuating(ctx, names) if ready and ctx.evacuating else {}
    pool = ready or list(names)
    if ctx.steering.spread_key:
        shares, unplaced = _divide_by_domain(ctx, ctx.total - sum(fixed.values()), pool)
        no_room = None
    else:
        shares, unplaced, no_room = _divide_within_room(ctx, ctx.total - sum(fixed.values()), pool)
    if fixed:
        shares = dict(sorted({**shares, **fixed}.items()))
    # Only where it runs, or ran before (a share scaled to zero keeps its copy there).
    placement: Placement = {
        name: share for name, share in shares.items() if share > 0 or name in ctx.current
    }
    return placement, _unplaced_message(ctx, unplaced) or no_room


def _keep_evacuating(ctx: _Context, names: Sequence[str]) -> dict[str, int]:
    left = ctx.total or 0
    fixed: dict[str, int] = {}
    for name in names:
        if name in ctx.evacuating:
            fixed[name] = min(ctx.held(name), left)
            left -= fixed[name]
    return fixed


def _divide(ctx: _Context, total: int, pool: Sequence[str]) -> tuple[dict[str, int], int]:
    """Shares, and replicas not placed (every location at its maximum): the division for
    callers that do not report on room."""
    shares, unplaced, _ = _divide_within_room(ctx, total, pool)
    return shares, unplaced


def _divide_within_room(
    ctx: _Context, total: int, pool: Sequence[str]
) -> tuple[dict[str, int], int, str | None]:
    """Shares, replicas not placed (every location at its maximum), and why replicas short of
    room stay where they are (no location has room for them)."""
    every = ctx.snapshot.weights
    # The snapshot's weights as they are when the pool is all of them (the usual case).
    weights = every if len(pool) == len(every) else {name: every[name] for name in pool}
    high = ctx.strategy.max_per_location
    caps = {
        name: max(0, ctx.held(name) - missing)
        for name, missing in ctx.missing.items()
        if name in weights and missing > 0
    }
    for name, limit in ctx.limits.items():
        if name in weights:
            caps[name] = min(caps.get(name, limit), limit)
    short = set(caps)  # where a share went for want of room, and stays back if none is found
    # Replicas move only as far as the destination's free room fits them (#16): moved into a
    # full location they are as stuck there as where they were (and, once a hold ends, they
    # would move back into the full location they left). A scale-up or a first placement is
    # not a move: it goes where the strategy puts it, pending where there is no room, as on
    # one cluster, until the grace period says which replicas are stuck.
    held = sum(count or 0 for name, count in ctx.current.items() if name in weights)
    moving = bool(ctx.missing) or (held > 0 and total <= held)
    destinations = _room_caps(ctx, weights, short) if moving else {}
    caps.update(destinations)
    result = apportion(
        total,
        weights,
        minimum=ctx.strategy.min_per_location,
        maximum=high,
        current={name: held or 0 for name, held in ctx.current.items() if name in weights},
        caps=caps,
        tiebreak=_tiebreak(ctx.obj),
        load=ctx.load,
    )
    shares = dict(result.shares)
    if not (result.unplaced and caps):
        return shares, result.unplaced, None
    # No room anywhere: the rest stays pending, as on one cluster, rather than vanish from the
    # placement — first back where it was stuck, then (a scale-up or a first placement beyond
    # every location's room) where the strategy would put it.
    moved = {name: shares[name] - ctx.held(name) for name in destinations}
    owed = {name: max(0, ctx.held(name) - shares[name]) for name in short}
    if high is not None:
        owed = {name: min(count, high - shares[name]) for name, count in owed.items()}
    back = apportion(
        min(result.unplaced, sum(owed.values())), {name: weights[name] for name in short}, caps=owed
    )
    for name, extra in back.shares.items():
        shares[name] += extra
    rest = result.unplaced - sum(back.shares.values())
    unplaced = back.unplaced
    if rest:
        room_left = None if high is None else {name: high - shares[name] for name in weights}
        more = apportion(rest, weights, caps=room_left)
        for name, extra in more.shares.items():
            shares[name] += extra
        unplaced += more.unplaced
    roomless = result.unplaced - unplaced
    if not roomless:
        return shares, unplaced, None
    free = {name: _free_of(ctx.locations[name]) for name in weights}
    stuck = {name: ctx.missing.get(name, 0) for name in short}
    return (
        shares,
        unplaced,
        room.no_room(roomless, room.ask_of(ctx.shape.pod_spec), free, moved, stuck),
    )


def _room_caps(ctx: _Context, weights: Mapping[str, int], short: set[str]) -> dict[str, int]:
    """The most each location not short of room may hold: what it holds now and what its
    free room fits (unknown room: no cap)."""
    ask = room.ask_of(ctx.shape.pod_spec)
    caps = {}
    for name in weights:
        free = _free_of(ctx.locations[name])
        if name not in short and free is not None:
            caps[name] = ctx.held(name) + room.fits(free, ask)
    return caps


def _free_of(candidate: Candidate) -> room.Free | None:
    free = candidate.free
    return None if free is None else room.Free(free.cpu_milli, free.memory, free.pods)


def _tiebreak(obj: ReadOnly) -> str | None:
    """Ties among equal locations go by a rendezvous hash of the workload's uid (issue #16):
    many small workloads spread evenly, each stays put."""
    uid = (obj.get("metadata") or {}).get("uid")
    return uid if isinstance(uid, str) and uid else None


def _divide_by_domain(ctx: _Context, total: int, pool: Sequence[str]) -> tuple[dict[str, int], int]:
    """A template's topologySpreadConstraint over locations: the replicas are divided evenly
    between the values of its key (a skew of at most 1, within any maxSkew), and each value's
    share between its locations by weight."""
    groups: dict[str, list[str]] = {}
    for name in pool:
        groups.setdefault(ctx.steering.domains[name], []).append(name)
    held = {value: sum(ctx.held(name) for name in names) for value, names in groups.items()}
    per_value = apportion(total, dict.fromkeys(groups, 1), current=held).shares
    shares: dict[str, int] = {}
    unplaced = 0
    for value, names in sorted(groups.items()):
        part, left = _divide(ctx, per_value[value], names)
        shares.update(part)
        unplaced += left
    return dict(sorted(shares.items())), unplaced


def _unplaced_message(ctx: _Context, unplaced: int) -> str | None:
    if not unplaced:
        return None
    return (
        f"{unplaced} of {ctx.total} replicas not placed: every eligible location is at "
        f"maxPerLocation {ctx.strategy.max_per_location}"
    )


def _place(ctx: _Context) -> _Outcome:
    names = sorted(ctx.locations)
    if ctx.strategy.type == "Single":
        return _single(ctx, names)
    spread = _spread(ctx, names)
    if not spread:
        return None, (
            f"no eligible location has the spreadBy label {ctx.strategy.spread_by}: "
            + ", ".join(names)
        )
    if ctx.strategy.type == "Replicate":
        return _replicate(ctx, spread)
    return _split(ctx, spread)


# --- explaining -------------------------------------------------------------------------------


def _changes(
    current: Mapping[str, int | None],
    placement: Placement,
    verdicts: Sequence[Verdict],
    missing: Mapping[str, int],
) -> tuple[Change, ...]:
    """One per location that changed: evacuations first, then arrivals, then scaling."""
    if not current:  # the first placement: every location is an arrival
        return tuple(Change(Moved.PLACED, f"placed in {name}") for name in placement)
    gone = sorted(set(current) - set(placement))
    new = sorted(set(placement) - set(current))
    by_location = {verdict.location: verdict for verdict in verdicts} if gone else {}
    changes = [
        Change(Moved.EVACUATED, f"evacuated {name}: {_why_gone(by_location.get(name))}")
        for name in gone
    ]
    why_new = _why_new(current, placement, gone, missing)
    changes += [Change(Moved.SPILLED_OVER, f"spilled into {name}{why_new}") for name in new]
    for name in sorted(set(current) & set(placement)):
        old, now = current[name], placement[name]
        if old != now:
            short = f": {missing[name]} replicas unschedulable there" if missing.get(name) else ""
            changes.append(Change(Moved.REBALANCED, f"scaled {name} {old} -> {now}{short}"))
    return tuple(changes)


def _why_gone(verdict: Verdict | None) -> str:
    if verdict is None:
        return "location removed"
    return verdict.reason if not verdict.eligible else "not chosen by the strategy"


def _why_new(
    current: Mapping[str, int | None],
    placement: Placement,
    gone: Sequence[str],
    missing: Mapping[str, int],
) -> str:
    if not current:
        return ""
    if gone:
        return f": replacing {', '.join(gone)}"
    short = sorted(name for name, count in missing.items() if count > 0 and name in current)
    if short:
        return f": no room in {', '.join(short)}"
    if sum(v or 0 for v in placement.values()) > sum(v or 0 for v in current.values()):
        return ": scaled up"
    return ": new eligible location"


def _says_where(strategy: Strategy) -> bool:
    """A strategy that names locations (selector, pin, avoid) wins over the pod template."""
    return strategy.location_selector is not None or bool(strategy.pin or strategy.avoid)


def _steered(
    verdicts: tuple[Verdict, ...],
    eligible: dict[str, Candidate],
    evacuating: frozenset[str],
    ruled_out: Mapping[str, str],
    code: Why,
    every: bool = False,
) -> _Verdicts:
    """Rule out more locations. The template's reason replaces only "eligible" (the
    strategy's own reasons come first); a policy's replaces every reason (`every`): it is
    the first thing a user reads, and says nothing of the strategy a policy overrides."""
    changed = tuple(
        Verdict(v.location, False, ruled_out[v.location], code)
        if v.location in ruled_out and (every or v.eligible)
        else v
        for v in verdicts
    )
    kept = {name: c for name, c in eligible.items() if name not in ruled_out}
    return _Verdicts(changed, kept, frozenset(evacuating - set(ruled_out)))


def _overridden(verdicts: tuple[Verdict, ...], ruled_out: Mapping[str, str]) -> tuple[Verdict, ...]:
    """The strategy says where: a location the template alone would rule out stays eligible,
    and its verdict says what was overridden."""
    return tuple(
        Verdict(
            v.location, True, f"eligible (the strategy wins over {ruled_out[v.location]})", v.code
        )
        if v.code is Why.ELIGIBLE and v.location in ruled_out
        else v
        for v in verdicts
    )


# Strategies with a template's preferred terms for weights, by (strategy, weights): the same
# object for the same inputs, so the engine's snapshots (remembered per strategy object) keep
# working. Bounded like the snapshots; each entry holds its strategy, so its id stays its own.
_WEIGHTED: dict[tuple[int, tuple[tuple[str, int], ...]], tuple[Strategy, Strategy]] = {}
_WEIGHTED_KEPT = 256


def _weighted(strategy: Strategy, preferences: Mapping[str, int]) -> Strategy:
    """The strategy weighing locations by the template's preferred terms (0: matches none)."""
    items = tuple(sorted(preferences.items()))
    key = (id(strategy), items)
    known = _WEIGHTED.get(key)
    if known is None:
        derived = strategy.model_copy(update={"weights": dict(items)})
        with _SNAPSHOTS_LOCK:
            while len(_WEIGHTED) >= _WEIGHTED_KEPT:
                del _WEIGHTED[next(iter(_WEIGHTED))]
            _WEIGHTED[key] = known = (strategy, derived)
    return known[1]


def _staying(
    strategy: Strategy, eligible: Mapping[str, Candidate], current: Mapping[str, int | None]
) -> dict[str, Candidate]:
    """Where an immovable object may be: its eligible locations, and those a pin names (a
    pin is how `kubectl mc move` says where it goes). Empty when it lost them all: it is
    then placed anew, as a lost location's share moves anyway."""
    return {
        name: candidate
        for name, candidate in eligible.items()
        if name in current or name in strategy.pin
    }


def _unmoved(
    strategy: Strategy,
    staying: Mapping[str, Candidate],
    current: Mapping[str, int | None],
    total: int | None,
) -> bool:
    """Does an immovable object keep its placement exactly? Yes while it is in every location
    it may use and, when divided, its size has not changed: no rebalancing between them."""
    if set(staying) != set(current):
        return False
    if total is None:
        return True
    if strategy.type == "Split":
        return sum(share or 0 for share in current.values()) == total
    return all(share == total for share in current.values())


def _no_eligible(verdicts: Sequence[Verdict]) -> str:
    if not verdicts:
        return "no eligible location: there are no locations"
    return "no eligible location: " + "; ".join(f"{v.location}: {v.reason}" for v in verdicts)


# --- the engine -------------------------------------------------------------------------------


def decide(
    obj: ReadOnly,
    shape: Shape,
    strategy: Strategy,
    candidates: Sequence[Candidate],
    current: Mapping[str, int | None],
    now: float,
    settings: Settings = Settings(),
    missing_capacity: Mapping[str, int] | None = None,
    limits: Mapping[str, int] | None = None,
    denied: Mapping[str, str] | None = None,
    load: Mapping[str, int] | None = None,
) -> Decision:
    """Place `obj`, of the `shape` its kind reads, by `strategy` on `candidates`, given its
    `current` placement.

    `load` counts, per location, the replicas of everything placed there: a replica left over
    among equal locations goes to the least loaded, then by a hash of the object's uid.

    `missing_capacity` counts, per location, replicas that stayed unschedulable there past the
    grace period: that location is capped at what actually runs and the rest goes elsewhere.
    `limits` caps locations found short earlier, so their share does not grow back at once.
    `denied` names the locations an administrator's policy rules out, with the reason
    (`policy NAME`): they are out whatever the strategy or the template says.
    """
    steer = steering(shape.pod_spec, lambda: {c.name: c.labels for c in candidates})
    says_where = _says_where(strategy)
    if not says_where and steer.preferences is not None and strategy.weights is None:
        strategy = _weighted(strategy, steer.preferences)
    snapshot = _snapshot(candidates, strategy, obj)
    verdicts, eligible, evacuating = _verdicts(snapshot, obj, current, now, settings)
    if denied:
        verdicts, eligible, evacuating = _steered(
            verdicts, eligible, evacuating, denied, Why.POLICY, every=True
        )
    if steer.ruled_out:
        if says_where:
            verdicts = _overridden(verdicts, steer.ruled_out)
        else:
            verdicts, eligible, evacuating = _steered(
                verdicts, eligible, evacuating, steer.ruled_out, Why.TEMPLATE
            )
    if not eligible:
        return Decision(dict(sorted(current.items())), verdicts, _no_eligible(verdicts), current)
    total = shape.total
    if not strategy.movable and current:
        staying = _staying(strategy, eligible, current)
        if staying:
            if _unmoved(strategy, staying, current, total):
                return Decision(dict(sorted(current.items())), verdicts, None, current)
            # Scaled, or a location lost or pinned: divided among these only, and what is
            # short of room stays pending where it is.
            eligible, missing_capacity, limits = staying, None, None
    ctx = _Context(
        obj=obj,
        shape=shape,
        strategy=strategy,
        locations=eligible,
        current={name: value for name, value in current.items() if name in eligible},
        evacuating=evacuating,
        total=total,
        missing=dict(missing_capacity or {}),
        limits=dict(limits or {}),
        snapshot=snapshot,
        steering=NOTHING if says_where else steer,
        load=load or {},
    )
    placement, problem = _place(ctx)
    if placement is None:
        return Decision(dict(sorted(current.items())), verdicts, problem, current)
    missing = {name: count for name, count in ctx.missing.items() if name in placement}
    return Decision(placement, verdicts, problem, current, missing)
