"""The placement loop's hand-off to the sync loop: a decision acted on before the hub has it.

The hub's `kmc.dev/placement` annotation is the durable record, but writing it takes a round
trip, and the children need not wait for it: the placement loop hands each new placement
over as it sends the write, and the sync loop writes the children at once. A handed-over
placement counts only while the hub object still carries the annotation it replaces; once
the hub has the new one (or another), the hub's record says it again. If the write fails,
the hand-over is taken back and the children converge to what the hub holds; while an
object's writes keep failing, nothing of it is handed over again, so its children do not
come and go with every retry.

The `kmc.dev/Placed` condition goes the same way: the placement loop decides it, and the sync
loop writes it, with its next fold of the object's status (one status write where there were
two), or alone when it has nothing to fold (nothing placed: gated, an invalid strategy, no
location fits). So each object's status has one writer, and no write of the condition races
a fold that carries an older one. A condition stays pending here until the sync loop says
it wrote it; a placement write that fails takes back the condition that went with it.

One object owns all of that, built in `app.py` and given to both loops: the placement loop
calls `give` and `give_condition`, then `landed` or `failed`; the sync loop asks
`placement_of` and `condition_of`, and calls `condition_written`; `handed` tells whoever
`app.py` connected (the sync loop's queue) that a key has something new.
"""

from __future__ import annotations

from apiserver.contract import PLACEMENT, Placement, read_placement
from apiserver.kinds import Key
from apiserver.objects import Obj
from apiserver.signals import Signal


class Handoff:
    def __init__(self) -> None:
        # key -> (the annotation it replaces, the placement), until the hub has it
        self._handed: dict[Key, tuple[str, Placement]] = {}
        self._unwritten: set[Key] = set()  # whose last placement write failed
        self._conditions: dict[Key, Obj] = {}  # key -> its Placed condition, until written
        self.handed: Signal[[Key]] = Signal("handoff")

    def give(self, key: Key, replaced: str, placement: Placement) -> bool:
        """A placement on its way to the hub, in place of the `replaced` annotation; False
        (nothing handed over) while the object's writes are failing."""
        if key in self._unwritten:
            return False
        self._handed[key] = (replaced, placement)
        self.handed.emit(key)
        return True

    def landed(self, key: Key) -> None:
        """The hub has the object's placement: its writes work again."""
        self._unwritten.discard(key)

    def failed(self, key: Key, handed: bool) -> None:
        """The write did not land (refused, unreachable, cancelled): the hub may not have it,
        so what was `handed` over must not outlive it, and nothing is handed over until a
        write of this object lands."""
        self._unwritten.add(key)
        if handed or key in self._conditions:
            self._handed.pop(key, None)
            self._conditions.pop(key, None)  # it said where the placement went
            self.handed.emit(key)

    def give_condition(self, key: Key, placed: Obj) -> None:
        """The object's `kmc.dev/Placed` condition as the placement loop decided it now: the
        sync loop writes it (the latest one given, when several came meanwhile)."""
        self._conditions[key] = placed
        self.handed.emit(key)

    def condition_of(self, key: Key) -> Obj | None:
        """The object's Placed condition not written yet, if any (read-only)."""
        return self._conditions.get(key)

    def condition_written(self, key: Key, placed: Obj) -> None:
        """The sync loop wrote `placed`: it is no longer pending, unless a newer one came
        meanwhile."""
        if self._conditions.get(key) is placed:
            del self._conditions[key]

    def placement_of(self, key: Key, hub: Obj) -> tuple[Placement, bool]:
        """Where the object goes: a placement handed over for the annotation the cached
        object still has, else the hub's record. True when it was handed over."""
        handed = self._handed.get(key)
        if handed is not None:
            replaced, placement = handed
            if replaced == ((hub["metadata"].get("annotations") or {}).get(PLACEMENT) or ""):
                return placement, True
            del self._handed[key]  # the hub has it (or another) now: its annotation says it
        return read_placement(hub), False

    def forget(self, key: Key) -> None:
        """The object is gone, or going."""
        self._handed.pop(key, None)
        self._unwritten.discard(key)
        self._conditions.pop(key, None)
