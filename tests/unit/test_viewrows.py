"""mc.kmc.dev rows are built once per change: an unchanged object is served from the row
kept for it, and a change to anything the view reads builds it again."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any, cast

import msgspec

from apiserver.api import table
from apiserver.hubcache import HubCache
from apiserver.kinds import DEPLOYMENT, Key, Kind
from apiserver.loops.placement.deciding import Decider
from apiserver.loops.sync.loop import Progress
from apiserver.mc.rows import AGE, Ages, ViewRows
from apiserver.objects import Obj


def hub_object(replicas: int) -> Obj:
    created = (datetime.now(UTC) - timedelta(minutes=5)).strftime("%Y-%m-%dT%H:%M:%SZ")
    meta = {"name": "web", "namespace": "demo", "uid": "u1", "creationTimestamp": created}
    return {"metadata": meta, "spec": {"replicas": replicas}}


class Cache:
    def __init__(self) -> None:
        self.objects: dict[Key, Obj] = {}
        self.ns: Obj = {"metadata": {"name": "demo"}}
        self.handlers: list[Any] = []

    def subscribe(self, handler: Any) -> None:
        self.handlers.append(handler)

    def get(self, key: Key) -> Obj | None:
        return self.objects.get(key)

    def namespace(self, name: str) -> Obj:
        return self.ns


class Sync:
    """The sync loop's progress, as the views read it."""

    def __init__(self) -> None:
        self.children = (0, 0)  # (watches changed, this object's children changed)
        self.applied: dict[str, tuple[int, int]] = {}
        self.built = 0

    def inputs(self, key: Key) -> tuple[Any, Any]:
        return self.children, self.applied

    def stale(self) -> dict[str, str]:
        return {}

    def rows(self, kind: Kind, hub: Obj, stale: Any = None) -> list[Any]:
        self.built += 1
        return []


class Placement:
    def strategy_of(self, kind: Kind, obj: Obj) -> tuple[None, str, None]:
        return None, "default", None


def rows() -> tuple[ViewRows, Cache, Sync]:
    cache, sync = Cache(), Sync()
    built = ViewRows(cast(HubCache, cache), cast(Decider, Placement()), cast(Progress, sync))
    return built, cache, sync


def test_an_unchanged_object_is_not_built_again() -> None:
    views, cache, sync = rows()
    web = hub_object(3)
    cache.objects[Key("Deployment", "demo", "web")] = web
    first = views.row(DEPLOYMENT, web, views.stale())
    again = views.row(DEPLOYMENT, web, views.stale())
    assert again is first and sync.built == 1
    assert first.view["spec"]["replicas"] == 3
    assert first.cells_now(datetime.now(UTC))[AGE] == "5m"


def test_any_input_that_changes_builds_the_row_again() -> None:
    views, cache, sync = rows()
    key = Key("Deployment", "demo", "web")
    web = cache.objects[key] = hub_object(3)
    first = views.row(DEPLOYMENT, web, views.stale())
    scaled = cache.objects[key] = hub_object(4)  # a new object from the watch
    second = views.row(DEPLOYMENT, scaled, views.stale())
    assert second is not first and second.view["spec"]["replicas"] == 4
    sync.children = (0, 1)  # a child appeared
    third = views.row(DEPLOYMENT, scaled, views.stale())
    assert third is not second
    assert views.row(DEPLOYMENT, scaled, views.stale()) is third
    sync.applied = {"us-east": (1, 1)}  # applied there
    third = views.row(DEPLOYMENT, scaled, views.stale())
    assert third is not second
    cache.ns = {"metadata": {"name": "demo", "annotations": {}}}  # the Namespace changed
    assert views.row(DEPLOYMENT, scaled, views.stale()) is not third
    assert views.row(DEPLOYMENT, scaled, (("us-east", "unreachable"),)) is not third
    assert sync.built == 6


def test_only_the_cached_object_itself_is_kept() -> None:
    views, cache, _ = rows()
    copy = hub_object(3)  # say, read from the hub: the cache holds another object
    cache.objects[Key("Deployment", "demo", "web")] = hub_object(3)
    views.row(DEPLOYMENT, copy, views.stale())
    assert len(views) == 0


def decoded_row(row: Any, include: str, ages: Ages) -> Any:
    return msgspec.json.decode(row.table_row(include, "v1", ages))


def test_a_kept_row_is_encoded_once_and_served_with_the_age_of_now() -> None:
    views, cache, _ = rows()
    web = cache.objects[Key("Deployment", "demo", "web")] = hub_object(3)
    row = views.row(DEPLOYMENT, web, views.stale())
    created = datetime.fromisoformat(web["metadata"]["creationTimestamp"])
    for include in ("None", "Metadata", "Object"):
        for later in (timedelta(0), timedelta(hours=3)):
            now = created + timedelta(minutes=5) + later
            # What kubectl is sent is what the row's cells and object make, with today's Age.
            assert decoded_row(row, include, Ages(now)) == table.row(
                row.cells_now(now), row.view, include, "v1"
            )
    assert decoded_row(row, "Metadata", Ages(created + timedelta(hours=3)))["cells"][AGE] == "3h"
    assert len(row._rows) == 3  # one encoding per shape asked for, kept
    assert msgspec.json.decode(row.item()) == row.view and row.item() is row.item()


def test_ages_are_worked_out_once_per_timestamp() -> None:
    now = datetime(2026, 1, 1, 12, tzinfo=UTC)
    ages = Ages(now)
    assert ages("2026-01-01T11:00:00Z") == b'"60m"'
    assert ages("2026-01-01T11:59:30Z") == b'"30s"'
    assert ages(None) == b'"<unknown>"'
    assert ages("2026-01-01T11:00:00Z") is ages("2026-01-01T11:00:00Z")


def test_only_the_age_cell_is_replaced() -> None:
    """What the object holds after the cells is its own, whatever it reads like."""
    views, cache, _ = rows()
    web = hub_object(3)
    web["metadata"]["labels"] = {"note": "\x00age\x00"}
    cache.objects[Key("Deployment", "demo", "web")] = web
    row = views.row(DEPLOYMENT, web, views.stale())
    now = datetime.now(UTC)
    for include in ("Metadata", "Object"):
        shown = decoded_row(row, include, Ages(now))
        assert shown == table.row(row.cells_now(now), row.view, include, "v1")
        assert shown["object"]["metadata"]["labels"] == {"note": "\x00age\x00"}


def test_watchers_of_the_version_the_cache_holds_share_its_row() -> None:
    """A watch event's object is a copy parsed from the watcher's own stream: when it is
    the version the cache holds, its row is the cache object's, built once for all
    watchers; a version the cache does not hold (behind or ahead) has none."""
    views, cache, sync = rows()
    web = hub_object(3)
    web["metadata"]["resourceVersion"] = "7"
    cache.objects[Key("Deployment", "demo", "web")] = web
    copies = [msgspec.json.decode(msgspec.json.encode(web)) for _ in range(5)]
    shared = {id(views.kept_for(DEPLOYMENT, copy)) for copy in copies}
    assert len(shared) == 1 and sync.built == 1
    kept = views.kept_for(DEPLOYMENT, copies[0])
    assert kept is not None and kept.view["spec"]["replicas"] == 3

    newer = {**web, "metadata": {**web["metadata"], "resourceVersion": "8"}}
    assert views.kept_for(DEPLOYMENT, newer) is None
    gone = {**web, "metadata": {**web["metadata"], "name": "gone"}}
    assert views.kept_for(DEPLOYMENT, gone) is None
    assert sync.built == 1
