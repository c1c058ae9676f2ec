"""A placement writer that records what the follow code would write, for its unit tests."""

from __future__ import annotations

from apiserver.contract import Placement
from apiserver.kinds import Key, Kind
from apiserver.objects import Obj


class RecordingWriter:
    def __init__(self) -> None:
        self.placements: list[Placement] = []
        self.conditions: list[tuple[str, str, str]] = []

    async def placement(self, kind: Kind, key: Key, obj: Obj, placement: Placement) -> Obj:
        self.placements.append(placement)
        return obj

    def condition(
        self, kind: Kind, key: Key, obj: Obj, status: str, reason: str, message: str
    ) -> None:
        self.conditions.append((status, reason, message))

    def said(self) -> list[tuple[str, str]]:
        """The conditions' status and reason, without their words."""
        return [(status, reason) for status, reason, _ in self.conditions]
