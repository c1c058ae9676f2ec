"""A placement writer and an Event recorder that record what the follow code would write,
for its unit tests."""

from __future__ import annotations

from apiserver.contract import Placement
from apiserver.kinds import Key, Kind
from apiserver.objects import Obj


class RecordingEvents:
    def __init__(self) -> None:
        self.posted: list[tuple[str, str, str]] = []

    def post(self, obj: Obj, event_type: str, reason: str, message: str) -> None:
        self.posted.append((event_type, reason, message))


class RecordingWriter:
    def __init__(self) -> None:
        self.placements: list[Placement] = []
        self.conditions: list[tuple[str, str, str]] = []
        self.events = RecordingEvents()

    async def placement(self, kind: Kind, key: Key, obj: Obj, placement: Placement) -> Obj:
        self.placements.append(placement)
        return obj

    def condition(
        self, kind: Kind, key: Key, obj: Obj, status: str, reason: str, message: str
    ) -> None:
        self.conditions.append((status, reason, message))

    def note(self, key: Key, obj: Obj, note: tuple[str, str] | None) -> None:
        pass

    def said(self) -> list[tuple[str, str]]:
        """The conditions' status and reason, without their words."""
        return [(status, reason) for status, reason, _ in self.conditions]
