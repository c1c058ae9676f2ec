"""What the placement loop writes: the placement (handed over first), the `kmc.dev/Placed`
condition (handed over only), and the Events that say why.

The placement goes to the sync loop through the hand-off as the write to the hub leaves, and
the annotation is the durable record (`loops/handoff.py`). The condition goes to the sync
loop too, which writes it with the object's status: one writer per object's status.
"""

from __future__ import annotations

import logging

from apiserver.contract import (
    CLEANUP,
    PLACED,
    PLACEMENT,
    PLACEMENT_MANAGER,
    Placement,
    condition,
    describe,
    now,
    placement_text,
)
from apiserver.hubcache import HubCache
from apiserver.kinds import Key, Kind
from apiserver.kube import events
from apiserver.kube.client import Kube
from apiserver.loops import hubwrites
from apiserver.loops.handoff import Handoff
from apiserver.loops.placement.records import Records
from apiserver.objects import Obj
from apiserver.placement import engine

log = logging.getLogger(__name__)


class Writer:
    def __init__(self, cache: HubCache, handoff: Handoff, records: Records) -> None:
        self.hub: Kube = cache.hub
        self.cache = cache
        self.handoff = handoff
        self.records = records
        self.events = events.Recorder(cache.hub, PLACEMENT_MANAGER)

    async def placement(self, kind: Kind, key: Key, obj: Obj, placement: Placement) -> Obj:
        """Hand the placement to whoever acts on it (the sync loop writes the children now),
        then record it on the hub, where it is the durable record; the hub's answer. If that
        write fails the hand-over is taken back (the children follow the hub's record again),
        and not made again until a write of this object succeeds: a write that keeps failing
        must not make children come and go. A write cancelled on its way (leadership ended)
        counts as failed."""
        replaced = (obj["metadata"].get("annotations") or {}).get(PLACEMENT) or ""
        handed = self.handoff.give(key, replaced, placement)
        try:
            updated = await hubwrites.annotate(
                self.hub,
                kind,
                obj,
                {PLACEMENT: placement_text(placement)},
                # The sync loop's finalizer, set in the same write as the first placement.
                CLEANUP if placement else "",
            )
        except BaseException:
            # Refused, unreachable, or cancelled mid-write (leadership ended): the hub may not
            # have it, so the hand-over must not outlive this attempt. A hand-over left behind
            # would steer the children forever, since the hub keeps the annotation it replaces.
            self.handoff.failed(key, handed)
            raise
        self.handoff.landed(key)
        await self.cache.observe(kind.key, updated)
        log.info("%s placed: %s", key, describe(placement))
        return updated

    def announce(self, kind: Kind, obj: Obj, current: Placement, decision: engine.Decision) -> None:
        """Events for a placement that changed over time: spilled over, evacuated, rebalanced.
        A first placement has none: the Placed condition says where, and an Event per
        created object was a second hub write for what the status already says."""
        if not current:
            return
        for change in decision.changes:
            self.events.post(obj, "Normal", change.reason, change.message + kind.moved_note)

    def note(self, key: Key, obj: Obj, note: tuple[str, str] | None) -> None:
        """A kind's word on where an object went (`Kind.note`): a Warning Event, posted when
        the word changes (not at every look)."""
        # Most dependencies never have a word to say: no record is made for them.
        record = self.records.of(key) if note is not None else self.records.get(key)
        message = note[1] if note is not None else None
        if record is None or message == record.noted:
            return
        record.noted = message
        if note is not None:
            self.events.post(obj, "Warning", *note)

    def condition(
        self,
        kind: Kind,
        key: Key,
        obj: Obj,
        status: str,
        reason: str,
        message: str,
        warn: bool = False,
    ) -> None:
        """Decide `kmc.dev/Placed` (kinds whose status we fold and has conditions), with a
        Warning Event when it turns bad (for a kind without conditions, an Ingress, whenever it
        is False: the Event is all that says it). The sync loop writes it
        (`loops/handoff.py`): with its next fold, or alone when it has nothing to fold.
        Compared with the one still on its way, if any, else with the hub's: a cache that has
        not seen the last one yet decides nothing twice."""
        old = self.handoff.condition_of(key) or condition(obj, PLACED)
        if old and (old["status"], old.get("reason"), old.get("message")) == (
            status,
            reason,
            message,
        ):
            return
        record = self.records.of(key)
        # A kind whose status we fold but has no conditions (an Ingress) says why it is not
        # placed by an Event alone.
        warn = warn or (status == "False" and kind.folds and not kind.has_conditions)
        if warn and record.warned != message:
            # Remembered too: a reconcile working from a cache that predates our condition
            # write must not warn twice.
            record.warned = message
            self.events.post(obj, "Warning", reason, message)
        elif not warn:
            record.warned = None
        if not kind.has_conditions:
            return
        since = old["lastTransitionTime"] if old and old["status"] == status else now()
        placed = {
            "type": PLACED,
            "status": status,
            "reason": reason,
            "message": message,
            "lastTransitionTime": since,
        }
        self.handoff.give_condition(key, placed)
