"""What the sync loop remembers of each object between two looks, in one record, forgotten in
one place. Nothing here is needed for correctness after a restart: it spares work (an apply
of what a child already holds) and says what a view shows before the hub's status does."""

from __future__ import annotations

from dataclasses import dataclass, field

from apiserver.kinds import Key


@dataclass
class Record:
    # location -> (hub generation applied, child generation it produced); replaced, never
    # changed in place (`applied_in`, `gone_from`), so a view tells a change by identity.
    applied: dict[str, tuple[int, int]] = field(default_factory=dict)
    # location -> (digest of what we applied, the child's version it produced). A child status
    # change re-queues the hub object; this spares re-applying unchanged objects. A spec edit
    # by hand bumps the generation, and a label or annotation edit is seen by comparing what
    # the child wears, so drift is still undone.
    written: dict[str, tuple[str, str]] = field(default_factory=dict)
    # Locations whose child's spec.replicas was handed to its autoscaler (`Applier._release`).
    released: set[str] = field(default_factory=set)
    # location -> why its overrides did not apply (its child left as it was), for the fold's
    # Overridden condition.
    override_failures: dict[str, str] = field(default_factory=dict)
    # Whether Override or ClusterOverride objects target it (its Overridden condition).
    override_objects: bool = False
    folded: float | None = None  # when we last wrote its status (monotonic clock)
    # When a new object was first looked at, until its children settled (its first status
    # waits for them, and how long they took tells the next ones how long to wait).
    first_look: float | None = None
    first_hold: float = 0.0  # how long its first status may wait, as judged at that first look
    partway: float | None = None  # since when a partway status waits to be written
    # Whether a move was announced (Moving) and not yet ended (Moved), while the hub's status
    # does not say so yet: a move can start, or even end, while its placement is still on its
    # way to the hub, when no status is folded. None: the hub's status says it.
    moving: bool | None = None

    def applied_in(self, location: str, hub_generation: int, child_generation: int) -> None:
        if self.applied.get(location) != (hub_generation, child_generation):
            self.applied = {**self.applied, location: (hub_generation, child_generation)}

    def gone_from(self, location: str) -> None:
        self.written.pop(location, None)
        self.override_failures.pop(location, None)
        self.released.discard(location)
        if location in self.applied:
            self.applied = {k: v for k, v in self.applied.items() if k != location}


_NOTHING: dict[str, tuple[int, int]] = {}


class Records:
    def __init__(self) -> None:
        self._records: dict[Key, Record] = {}

    def of(self, key: Key) -> Record:
        record = self._records.get(key)
        if record is None:
            record = self._records[key] = Record()
        return record

    def applied(self, key: Key) -> dict[str, tuple[int, int]]:
        record = self._records.get(key)
        return record.applied if record else _NOTHING

    def forget(self, key: Key) -> None:
        self._records.pop(key, None)
