"""`mc.kmc.dev` views and their table rows, built once per change and kept.

A view reads the hub object, its Namespace (the strategy may be inherited), its children in
every location, what the sync loop applied, and which locations are stale. All but the last
two are cached objects that are replaced, never changed, when they change: a view is rebuilt
only when one of them is not the very object it was built from. A list of thousands of
unchanged workloads is then a walk over kept rows; only the Age cell is written per request.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from aiohttp import web

from apiserver.api.table import age
from apiserver.hubcache import HubCache
from apiserver.kinds import Key, Kind
from apiserver.loops.placement.deciding import Decider
from apiserver.loops.sync.loop import Progress
from apiserver.mc.views import cells, view
from apiserver.objects import Obj

AGE = 4  # the Age cell of `views.COLUMNS`


@dataclass(frozen=True)
class Inputs:
    hub: Obj
    namespace: Obj
    children: tuple[int, int]  # how often its children (and the watches) changed
    applied: dict[str, tuple[int, int]]  # replaced, never changed in place
    stale: tuple[tuple[str, str], ...]

    def same(self, other: Inputs) -> bool:
        return (
            self.hub is other.hub
            and self.namespace is other.namespace
            and self.children == other.children
            and self.applied is other.applied
            and self.stale == other.stale
        )


@dataclass(frozen=True)
class Row:
    """One view, its strategy error if any, and its cells (Age as of when it was built)."""

    inputs: Inputs
    view: Obj
    error: str | None
    cells: list[Any]

    @property
    def key(self) -> tuple[str, str, str]:
        meta = self.view["metadata"]
        return (meta["namespace"], meta["name"], "")

    def cells_now(self, now: datetime) -> list[Any]:
        shown = list(self.cells)
        shown[AGE] = age(self.view["metadata"].get("creationTimestamp"), now)
        return shown


class ViewRows:
    def __init__(self, cache: HubCache, decider: Decider, progress: Progress) -> None:
        self.cache = cache
        self.decider = decider
        self.progress = progress
        self._rows: dict[Key, Row] = {}
        cache.subscribe(self._on_change)

    async def _on_change(self, kind: str, event: str, obj: Obj, _: Obj | None) -> None:
        if event == "DELETED":
            self._rows.pop(Key.of(kind, obj), None)

    def stale(self) -> tuple[tuple[str, str], ...]:
        """The stale locations, once per request: every row of a list compares to it."""
        return tuple(sorted(self.progress.stale().items()))

    def row(self, kind: Kind, hub: Obj, stale: tuple[tuple[str, str], ...]) -> Row:
        key = Key.of(kind.key, hub)
        children, applied = self.progress.inputs(key)
        namespace = self.cache.namespace(hub["metadata"]["namespace"])
        inputs = Inputs(hub, namespace, children, applied, stale)
        kept = self._rows.get(key)
        if kept is not None and kept.inputs.same(inputs):
            return kept
        typed = kind.typed(hub)
        strategy, source, error = self.decider.strategy_of(kind, typed)
        states = self.progress.rows(kind, typed, stale=dict(stale))
        shown = view(kind, typed, strategy, source, states)
        built = Row(inputs, shown, error, cells(kind, shown, datetime.now(UTC), error))
        if self.cache.get(key) is hub:  # not a stale or foreign copy: worth keeping
            self._rows[key] = built
        return built

    def __len__(self) -> int:
        return len(self._rows)


VIEW_ROWS = web.AppKey("view_rows", ViewRows)
