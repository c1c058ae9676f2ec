"""Folding the children's status into the hub object's, and showing a move as it goes.

The fold itself is pure (`sync/status.py`, with the kind's rules); this writes it, and only
when it says something new: a status that moves only counters partway to `spec.replicas`
waits a hold (after the object's last status write, and after it was first seen), while a
changed condition, a new `observedGeneration` or counters that arrived are written at once
and take its place. A new object's first status waits for its children to settle (about as
long as new objects lately took, a minute at most), so a create costs one status write.
The hold is twenty times what our status writes have been taking lately,
within a floor and a ceiling (`Hold`): a hub slow to answer is a hub with no room for writes
that say little.

This is the one writer of a hub object's status: the `kmc.dev/Placed` condition the
placement loop decided (`loops/handoff.py`) goes with the next fold, or alone when there is
nothing to fold. Once a fold has sent Placed (field manager `kmc-sync`), every later fold
sends it again, the hub's own when nothing new came, since server-side apply removes what a
manager stops sending. Each write's answer goes into the hub cache at once, so the next look
never compares with a status older than our own last write.

A handover in progress shows as `kmc.dev/Synced=False`, reason `Moving`, with what it waits
for, and as the Events `Moving` and `Moved` when it starts and ends.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Awaitable, Callable, Mapping

from apiserver import metrics
from apiserver.contract import (
    OURS,
    PLACED,
    PLACEMENT_MANAGER,
    SYNC_MANAGER,
    SYNCED,
    Placement,
    condition,
    describe,
    now,
    read_placement,
    status_body,
)
from apiserver.kinds import Key, Kind
from apiserver.kube import events
from apiserver.kube.client import Kube
from apiserver.loops.handoff import Handoff
from apiserver.loops.sync.records import Records
from apiserver.objects import Obj
from apiserver.sync.status import fold, reported

_COUNTERS = ("replicas", "updatedReplicas", "readyReplicas", "availableReplicas")

Observe = Callable[[str, Obj], Awaitable[None]]  # our write's answer, into the hub cache


async def _unobserved(_: str, __: Obj) -> None:
    return None


class Hold:
    """How long a status that only moves counters partway waits after the object's last
    status write: `factor` times the recent latency of our status writes, within
    [`least`, `most`] seconds. The latency is a moving average over the last writes.

    And how long a new object's first status waits for its children to settle, within
    [`most`, `first_most`] seconds: half as long again as new objects have lately taken to
    settle, and longer while many new objects came in the last minute (`most` more for every
    `PER_MOST` of them). In a burst of creates the children settle minutes after the first
    look (1,000 Deployments took about 170 s on the bed's two cores), and a first status
    written before that is followed by a second when they do; a burst's objects all come
    before any of them has settled, so their number is the first sign of it."""

    WINDOW = 60.0  # seconds over which new objects count as one burst
    PER_MOST = 50  # new objects in the window that add `most` seconds to a first status's wait

    def __init__(
        self, least: float, most: float = 10.0, factor: float = 20.0, first_most: float = 240.0
    ) -> None:
        self.least, self.most, self.factor = least, max(least, most), factor
        self.first_most = max(self.most, first_most)
        self.latency: float | None = None
        self.settling: float | None = None
        self.news: deque[float] = deque()  # when each recent new object was first looked at

    def took(self, seconds: float) -> None:
        self.latency = seconds if self.latency is None else 0.8 * self.latency + 0.2 * seconds

    def settled(self, seconds: float) -> None:
        """A new object's children settled this long after its first look."""
        self.settling = seconds if self.settling is None else 0.9 * self.settling + 0.1 * seconds

    @property
    def seconds(self) -> float:
        return min(self.most, max(self.least, self.factor * (self.latency or 0.0)))

    def new_object(self, moment: float) -> None:
        self.news.append(moment)

    def first(self, moment: float) -> float:
        while self.news and self.news[0] < moment - self.WINDOW:
            self.news.popleft()
        burst = self.most * (1 + len(self.news) / self.PER_MOST)
        return min(self.first_most, max(burst, 1.5 * (self.settling or 0.0)))


class Folder:
    def __init__(
        self,
        hub: Kube,
        records: Records,
        recorder: events.Recorder,
        again: Callable[[Key, float], None],
        hold: Hold,
        handoff: Handoff | None = None,
        observe: Observe = _unobserved,
    ) -> None:
        self.hub = hub
        self.records = records
        self.events = recorder
        self.again = again  # look at a key again after so many seconds
        self.hold = hold
        self.handoff = handoff
        self.observe = observe

    async def fold(
        self,
        key: Key,
        kind: Kind,
        hub: Obj,
        children: Mapping[str, Obj],
        placement: Placement,
        stale: Mapping[str, str],
        waiting: tuple[str, ...],
    ) -> None:
        assert kind.fold_rules is not None
        seen: dict[str, Obj | None] = {loc: children.get(loc) for loc in placement}
        seen.update(children)
        record = self.records.of(key)
        status = fold(
            hub,
            kind.fold_rules,
            seen,
            placement,
            {loc: msg for loc, msg in stale.items() if loc in seen},
            record.applied,
            now(),
            {loc: why for loc, why in record.override_failures.items() if loc in seen},
            record.override_objects,
        )
        self.show_move(key, hub, status, waiting)
        pending = self.handoff.condition_of(key) if self.handoff is not None else None
        placed = pending or condition(hub, PLACED)
        if placed is not None and kind.has_conditions:
            conditions = [*status.get("conditions", []), dict(placed)]
            status["conditions"] = sorted(conditions, key=lambda c: str(c["type"]))
        current = hub.get("status") or {}
        if not _differs(current, status):
            record.partway = None
            self._written(key, pending)
            return
        moment, last, hold = time.monotonic(), record.folded, self.hold.seconds
        if last is None and not current:
            # A new object's first status waits for its children: a hold at most for their
            # controllers to have seen them, and `Hold.first` at most for their counters to
            # reach spec.replicas. Written before, it would say "on its way", and the next
            # write, a moment later, where it got: two status writes per create instead of one.
            # Unless one of our conditions is not True (not all placed, a child not written,
            # an override that failed): that is news, said at once.
            if record.first_look is None:
                record.first_look = moment
                self.hold.new_object(moment)
                record.first_hold = self.hold.first(moment)
            waited = moment - record.first_look
            if not reported(kind.fold_rules, seen, placement) and waited < hold:
                self.again(key, hold - waited)
                return
            # As judged at the first look (a burst's count is gone from the window by the time
            # its last objects settle), or now, if it has learnt since to wait longer.
            first = max(record.first_hold, self.hold.first(moment))
            if _all_well(status) and not _arrived(status, hub) and waited < first:
                self.again(key, first - waited)
                return
        if last is not None and _partway(current, status, hub):
            # Each such write is a hub write the user's own writes queue behind (a burst of
            # creates brings a handful per object). It waits a hold from the last write and
            # from when it was first seen, so what follows soon (the settled status, not
            # held) goes in its place; the object is looked at again when the hold is up.
            record.partway = record.partway or moment
            due = max(last, record.partway) + hold
            if moment < due:
                self.again(key, due - moment)
                return
        why = _why(last, current, status, hub)
        await self._write(kind, hub, status, SYNC_MANAGER, why)
        record.folded, record.partway = time.monotonic(), None
        if record.first_look is not None and _arrived(status, hub):
            self.hold.settled(moment - record.first_look)
            record.first_look = None
        self._written(key, pending)

    async def placed_alone(self, key: Key, kind: Kind, hub: Obj) -> None:
        """Nothing to fold (nothing placed, no children), but a Placed condition to write:
        gated, an invalid strategy, nowhere to go. Applied alone under the placement's field
        manager, which held it alone before there was a fold: under `kmc-sync` an apply of it
        alone would take the fold's other fields away."""
        pending = self.handoff.condition_of(key) if self.handoff is not None else None
        if pending is None or not kind.has_conditions:
            return
        if _differs(hub.get("status") or {}, {"conditions": [pending]}):
            body = {"conditions": [dict(pending)]}
            await self._write(kind, hub, body, PLACEMENT_MANAGER, "placed")
        self._written(key, pending)

    async def _write(self, kind: Kind, hub: Obj, status: Obj, manager: str, why: str) -> None:
        metrics.STATUS_WRITES.labels(why).inc()
        meta = hub["metadata"]
        path = kind.path(meta.get("namespace"), meta["name"], "status")
        body = status_body(hub, status, kind.whole_conditions)
        started = time.monotonic()
        try:
            answer = await self.hub.apply(path, body, manager)
        finally:
            self.hold.took(time.monotonic() - started)
        await self.observe(kind.key, answer)

    def _written(self, key: Key, pending: Obj | None) -> None:
        if pending is not None and self.handoff is not None:
            self.handoff.condition_written(key, pending)

    def show_move(self, key: Key, hub: Obj, status: Obj | None, waiting: tuple[str, ...]) -> None:
        """A handover in progress shows as Synced=False/Moving with what it waits for (in
        `status`, when one is folded), and as Events when it starts and ends. Whether one is
        going on is what the hub's status says (a restart loses none), unless this process
        saw it start or end since."""
        said = (condition(hub, SYNCED) or {}).get("reason") == "Moving"
        record = self.records.of(key)
        was_moving = said if record.moving is None else record.moving
        if waiting:
            for folded in (status or {}).get("conditions", []):
                if folded["type"] == SYNCED:
                    folded.update(
                        status="False", reason="Moving", message="moving: " + "; ".join(waiting)
                    )
                    if not said:
                        folded["lastTransitionTime"] = now()
            if not was_moving:
                self.events.post(hub, "Normal", "Moving", "moving: " + "; ".join(waiting))
        elif was_moving:
            message = "handover done: " + describe(read_placement(hub))
            self.events.post(hub, "Normal", "Moved", message)
        moving = bool(waiting)
        record.moving = None if moving == said else moving  # None: the hub's status says it


def _differs(current: Obj, new: Obj) -> bool:
    """Would applying `new` change anything we own? Timestamps alone do not count, nor a
    zero the hub does not keep: built-in kinds' status fields are `omitempty`, so the hub
    answers a written `unavailableReplicas: 0` without it, and comparing the two would
    write the same settled status again at the next look."""

    def strip(conditions: list[Obj], types: set[str]) -> Obj:
        return {
            c["type"]: {k: v for k, v in c.items() if not k.endswith("Time")}
            for c in conditions
            if c["type"] in types
        }

    for field, value in new.items():
        if field == "conditions":
            types = {c["type"] for c in value}
            if strip(current.get("conditions") or [], types) != strip(value, types):
                return True
        elif current.get(field) != value and (field in current or not _zero(value)):
            return True
    return False


def _zero(value: object) -> bool:
    """What Go's `omitempty` leaves out (False is 0 to Python, and left out too)."""
    return value is None or (isinstance(value, int | str | list | dict) and not value)


def _why(last: float | None, current: Obj, new: Obj, hub: Obj) -> str:
    """Why a fold is written, for the `kmc_status_writes_total` metric."""
    if last is None and not current:
        return "first"
    if _arrived(new, hub):
        return "settled"
    return "partway" if _partway(current, new, hub) else "flipped"


def _all_well(status: Obj) -> bool:
    """Is every condition of ours (`kmc.dev/…`) True?"""
    return all(
        c.get("status") == "True"
        for c in status.get("conditions") or []
        if str(c.get("type", "")).startswith(OURS)
    )


def _arrived(status: Obj, hub: Obj) -> bool:
    """Have the folded counters reached spec.replicas (or has the kind none to reach)?"""
    wanted = (hub.get("spec") or {}).get("replicas")
    counted = [
        f for f in _COUNTERS if f in status or f != "updatedReplicas"
    ]  # a ReplicaSet's lack it
    return not isinstance(wanted, int) or all(status.get(f, 0) == wanted for f in counted)


def _partway(current: Obj, new: Obj, hub: Obj) -> bool:
    """Does `new` differ from `current` only in counters on their way to spec.replicas, or
    in words (messages, reasons)? Such a status may wait; one that a user or
    `kubectl wait`/`rollout status` acts on may not (a condition's status, a new
    observedGeneration, counters arriving at spec.replicas), nor a new word on where it is
    placed."""
    if current.get("observedGeneration") != new.get("observedGeneration"):
        return False

    def states(status: Obj) -> dict[str, str]:
        return {c["type"]: c.get("status", "") for c in status.get("conditions") or []}

    if states(current) != states(new):
        return False

    def where(status: Obj) -> tuple[object, ...]:
        found: Obj = next((c for c in status.get("conditions") or [] if c["type"] == PLACED), {})
        return found.get("status"), found.get("reason"), found.get("message")

    if where(current) != where(new):
        return False  # where it is placed: said at once
    wanted = (hub.get("spec") or {}).get("replicas")
    fields = [field for field in _COUNTERS if field in new or field in current]
    counters = [new.get(field, 0) for field in fields]
    arrived = isinstance(wanted, int) and bool(counters) and all(c == wanted for c in counters)
    # Arrived just now, not there already: a settled status whose messages alone move (a
    # child's Progressing reason once its rollout is done) may wait like any other.
    return not (arrived and counters != [current.get(field, 0) for field in fields])
