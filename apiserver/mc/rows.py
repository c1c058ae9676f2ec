"""`mc.kmc.dev` views and their table rows, built once per change and kept.

A view reads the hub object, its Namespace (the strategy may be inherited), its children in
every location, what the sync loop applied, and which locations are stale. All but the last
two are cached objects that are replaced, never changed, when they change: a view is rebuilt
only when one of them is not the very object it was built from. A list of thousands of
unchanged workloads is then a walk over kept rows. A row is also kept encoded, per shape
asked for (`includeObject`, Table version), as the bytes on either side of its Age cell: a
Table list joins kept bytes around one Age per creationTimestamp (`Ages`), and encodes nothing
else per request.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import msgspec
from aiohttp import web

from apiserver.api import table
from apiserver.api.table import age
from apiserver.hubcache import HubCache
from apiserver.kinds import Key, Kind
from apiserver.loops.placement.deciding import Decider
from apiserver.loops.sync.loop import Progress
from apiserver.mc.views import cells, view
from apiserver.objects import Obj

AGE = 4  # the Age cell of `views.COLUMNS`
_MARK = "\x00age\x00"  # stands for the Age cell while a row is encoded
_MARK_BYTES = msgspec.json.encode(_MARK)
_encode = msgspec.json.encode


@dataclass(frozen=True)
class Inputs:
    hub: Obj
    namespace: Obj
    children: tuple[int, int]  # how often its children (and the watches) changed
    applied: dict[str, tuple[int, int]]  # replaced, never changed in place
    stale: tuple[tuple[str, str], ...]

    def same(self, other: Inputs) -> bool:
        return self.holds(other.hub, other.namespace, other.children, other.applied, other.stale)

    def holds(
        self,
        hub: Obj,
        namespace: Obj,
        children: tuple[int, int],
        applied: dict[str, tuple[int, int]],
        stale: tuple[tuple[str, str], ...],
    ) -> bool:
        """Whether these are the inputs (checked without making an `Inputs` of them: a list
        asks this of every row it serves)."""
        return (
            self.hub is hub
            and self.namespace is namespace
            and self.children == children
            and self.applied is applied
            and self.stale == stale
        )


class Ages:
    """The Age cell as of one moment, encoded, per creationTimestamp: a list's rows share
    far fewer timestamps (whole seconds) than there are rows."""

    def __init__(self, now: datetime) -> None:
        self.now = now
        self._known: dict[str | None, bytes] = {}

    def __call__(self, created: str | None) -> bytes:
        known = self._known.get(created)
        if known is None:
            known = self._known[created] = _encode(age(created, self.now))
        return known


@dataclass(frozen=True)
class Row:
    """One view, its strategy error if any, and its cells (Age as of when it was built)."""

    inputs: Inputs
    view: Obj
    error: str | None
    cells: list[Any]
    key: tuple[str, str, str]  # its place in a list: namespace, name
    # Encoded once, on first use: the Table row per (includeObject, version), split at the
    # Age cell; the view as a list item.
    _rows: dict[tuple[str, str], tuple[bytes, bytes]] = field(
        default_factory=dict, compare=False, repr=False
    )
    _item: list[bytes] = field(default_factory=list, compare=False, repr=False)

    @property
    def created(self) -> str | None:
        created: str | None = self.view["metadata"].get("creationTimestamp")
        return created

    def cells_now(self, now: datetime) -> list[Any]:
        shown = list(self.cells)
        shown[AGE] = age(self.created, now)
        return shown

    def table_row(self, include: table.IncludeObject, version: str, ages: Ages) -> bytes:
        """The Table row, encoded, with the Age cell as of `ages`."""
        parts = self._rows.get((include, version))
        if parts is None:
            marked = list(self.cells)
            marked[AGE] = _MARK
            before, mark, after = _encode(table.row(marked, self.view, include, version)).partition(
                _MARK_BYTES
            )
            # The first mark is the Age cell's: the cells before it (a name, a strategy, the
            # locations, a count) hold no NUL. One in the object after it is its own.
            assert mark, "the Age cell is marked"
            parts = self._rows[(include, version)] = (before, after)
        return parts[0] + ages(self.created) + parts[1]

    def item(self) -> bytes:
        """The view as a list's item, encoded."""
        if not self._item:
            self._item.append(_encode(self.view))
        return self._item[0]


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

    def row(
        self,
        kind: Kind,
        hub: Obj,
        stale: tuple[tuple[str, str], ...],
        namespace: Obj | None = None,
    ) -> Row:
        """The object's row, kept or built again; `namespace`, when given, is the cache's
        Namespace of the object, read once for a list of one namespace."""
        meta = hub["metadata"]
        key = Key(kind.key, meta.get("namespace") or "", meta["name"])
        children, applied = self.progress.inputs(key)
        if namespace is None:
            namespace = self.cache.namespace(key.namespace)
        kept = self._rows.get(key)
        if kept is not None and kept.inputs.holds(hub, namespace, children, applied, stale):
            return kept
        inputs = Inputs(hub, namespace, children, applied, stale)
        typed = kind.typed(hub)
        strategy, source, error = self.decider.strategy_of(kind, typed)
        states = self.progress.rows(kind, typed, stale=dict(stale))
        shown = view(kind, typed, strategy, source, states)
        made = cells(kind, shown, datetime.now(UTC), error)
        built = Row(inputs, shown, error, made, (key.namespace, key.name, ""))
        if self.cache.get(key) is hub:  # not a stale or foreign copy: worth keeping
            self._rows[key] = built
        return built

    def kept_for(self, kind: Kind, obj: Obj) -> Row | None:
        """The row of a watch event's object when it is the version the cache holds: every
        watcher of a change shares one view instead of each building its own."""
        meta = obj["metadata"]
        cached = self.cache.get(Key(kind.key, meta.get("namespace") or "", meta["name"]))
        if cached is None or cached["metadata"].get("resourceVersion") != meta.get(
            "resourceVersion"
        ):
            return None  # the cache is behind (or ahead): this event's own view is built
        return self.row(kind, cached, self.stale())

    def __len__(self) -> int:
        return len(self._rows)


VIEW_ROWS = web.AppKey("view_rows", ViewRows)
