"""Placing an object by its strategy: workloads, and any object that carries a strategy.

A look reads the effective strategy, every Location as a `Candidate`, the replicas stuck
unschedulable past the grace period and the locations held low for want of room, calls the
engine, and writes what changed: the placement (handed over to the sync loop on its way) and
the Events; the `kmc.dev/Placed` condition is handed to the sync loop, which writes it.
Decisions that depend on time (a grace period, a cooldown, a capacity hold, a stuck pod's
grace) are looked at again when they are due.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from apiserver.contract import Placement, describe, read_placement
from apiserver.kinds import PLACED, Key, Kind, Role
from apiserver.locations.pending import Unschedulable
from apiserver.loops.placement.deciding import Decider, unplaceable_message
from apiserver.loops.placement.records import Records
from apiserver.loops.placement.writes import Writer
from apiserver.objects import Obj
from apiserver.placement import engine
from apiserver.placement.dependencies import references
from apiserver.placement.gates import GatesError, gated_message, placement_gates
from apiserver.placement.strategy import StrategyError
from apiserver.workqueue import WorkQueue


def dependency(kind: str, namespace: str, name: str) -> Key:
    """A pod template's reference as a key: in the workload's namespace, unless the kind is
    cluster-scoped (a PriorityClass)."""
    entry = PLACED.get(kind)
    return Key(kind, namespace if entry is None or entry.namespaced else "", name)


@dataclass(frozen=True)
class Timing:
    grace: float  # a location not Ready, or pods stuck there, keep their share this long
    cooldown: float  # a location Ready again gets new work only after this long
    capacity_hold: float  # a location found short of room keeps its lowered share this long


class Placer:
    def __init__(
        self,
        decider: Decider,
        records: Records,
        writer: Writer,
        queue: WorkQueue[Key],
        pending: Callable[[str], Unschedulable | None],
        timing: Timing,
    ) -> None:
        self.decider = decider
        self.records = records
        self.writer = writer
        self.queue = queue
        self.pending = pending
        self.timing = timing

    async def place(self, kind: Kind, key: Key, obj: Obj, ns: Obj) -> None:
        writer = self.writer
        workload = kind.role is Role.WORKLOAD
        current = read_placement(obj)
        if not current:
            annotations = obj["metadata"].get("annotations") or {}
            try:
                gates = placement_gates(annotations, f"{kind.plural} {key.namespace}/{key.name}")
            except GatesError as err:
                writer.condition(
                    kind, key, obj, "False", "InvalidPlacementGates", str(err), warn=True
                )
                return
            if gates:  # held before its first placement; removing the last gate re-queues it
                writer.condition(kind, key, obj, "False", "Gated", gated_message(gates))
                return
        try:
            strategy, _ = self.decider.strategy(kind, obj, ns)
        except StrategyError as err:
            writer.condition(kind, key, obj, "False", "InvalidStrategy", str(err), warn=True)
            return
        now = time.time()
        candidates = await self.decider.candidates(obj)
        held = {n: share for n, (share, _) in self.records.held(key, now).items()}
        missing = self._missing(key, obj, candidates, now) if workload else {}
        # A held location already lost its stuck replicas; they linger until the child
        # scales down, and must not be taken away a second time.
        missing = {name: count for name, count in missing.items() if name not in held}
        decision = engine.decide(
            obj,
            kind.shape(obj),
            strategy,
            candidates,
            current,
            now,
            self.decider.settings,
            missing_capacity=missing,
            limits=held,
            denied=self.decider.denied(key.namespace, candidates),
            load=self.records.load.besides(key) if workload else None,
        )
        # Room changing anywhere may change these: they are looked at again then.
        weighs_room = bool(
            missing
            or decision.unplaceable
            or not decision.placement
            or strategy.weights == "capacity"
        )
        self.records.decided(key, decision.placement, weighs_room, workload)
        self._hold(key, missing, current, decision.placement, now)
        if decision.unplaceable:
            why = unplaceable_message(strategy, candidates, decision.unplaceable)
            condition = ("False", "Unplaceable", why, True)
        else:
            condition = ("True", "Placed", describe(decision.placement), False)
        # Handed to the sync loop first: its fold once the placement has landed carries it.
        writer.condition(kind, key, obj, *condition)
        if decision.placement != current:
            writer.announce(kind, obj, current, decision)
            await writer.placement(kind, key, obj, decision.placement)
        if workload:
            spec = kind.pod_spec(obj)
            names = references(spec) if spec else ()
            self.records.use(key, frozenset(dependency(k, key.namespace, n) for k, n in names))
        self._look_again_when_due(key, candidates, current, now)

    def _missing(
        self, key: Key, obj: Obj, candidates: list[engine.Candidate], now: float
    ) -> dict[str, int]:
        """Replicas stuck unschedulable past the grace period, per location; a look is
        scheduled for when the next stuck pod's grace period ends."""
        meta = obj["metadata"]
        owner = (obj["kind"], meta["namespace"], meta["name"])
        grace = self.timing.grace
        missing: dict[str, int] = {}
        due = []
        for candidate in candidates:
            index = self.pending(candidate.name)
            if index is None:
                continue
            count = index.stuck(owner, now - grace)
            if count:
                missing[candidate.name] = count
            earliest = index.earliest(owner)
            if earliest is not None and earliest + grace > now:
                due.append(earliest + grace)
        if due:
            self.queue.add_after(key, min(due) - now + 0.5)
        return missing

    def _hold(
        self,
        key: Key,
        missing: dict[str, int],
        current: Placement,
        placement: Placement,
        now: float,
    ) -> None:
        """A location that lost replicas for want of room keeps its lower share for a while:
        without this the share would move back as soon as the stuck pods are gone, and flap."""
        held = self.records.held(key, now)
        for name in missing:
            share = placement.get(name) or 0
            if share < (current.get(name) or 0):
                held[name] = (share, now + self.timing.capacity_hold)
        self.records.of(key).held = held
        if held:
            self.queue.add_after(key, min(until for _, until in held.values()) - now + 0.5)

    def _look_again_when_due(
        self, key: Key, candidates: list[engine.Candidate], current: Placement, now: float
    ) -> None:
        """Grace periods and cooldowns end without any event: schedule a look for then."""
        due = []
        for c in candidates:
            if not c.ready and c.name in current:
                due.append(c.ready_changed_at + self.timing.grace)
            elif c.ready and c.name not in current:
                due.append(c.ready_changed_at + self.timing.cooldown)
        future = [d for d in due if d > now]
        if future:
            self.queue.add_after(key, min(future) - now + 0.5)
