"""The children's watch caches: rows encoded once say what the live path says, the cache
follows the child's watch (changes, deletions, bookmarks, a relist after 410), a resource
too big is given up, and an idle cache is stopped."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any, cast

import pytest

from apiserver.api import selectors
from apiserver.kinds import REMOTE as KINDS
from apiserver.kube.client import ApiError, Kube
from apiserver.objects import Obj
from apiserver.remote import handlers
from apiserver.remote.cache import Change, Gone, RemoteCaches, TableCache, entry
from apiserver.remote.handlers import _Cached, _seen_as

PODS = KINDS["pods"]
COLUMNS = [{"name": "Name", "type": "string", "format": "name", "description": "", "priority": 0}]


def row(name: str, version: int, namespace: str = "demo", **labels: str) -> Obj:
    meta = {
        "name": name,
        "namespace": namespace,
        "resourceVersion": str(version),
        "labels": labels,
        "managedFields": [{"manager": "kubelet"}],
    }
    obj = {"kind": "Pod", "apiVersion": "v1", "metadata": meta, "spec": {"nodeName": "n1"}}
    return {"cells": [name, "Running"], "object": obj}


def test_an_entry_is_what_the_live_path_makes_of_the_same_row() -> None:
    child = row("web-1", 7, app="web")
    made = entry("us-east", json.loads(json.dumps(child)))
    live = handlers._row(json.loads(json.dumps(child)), "us-east")
    assert json.loads(made.cells) == live["cells"] == ["us-east", "web-1", "Running"]
    typed = json.loads(made.typed)
    assert typed["metadata"]["annotations"] == {"kmc.dev/location": "us-east"}
    assert "managedFields" not in typed["metadata"]
    assert typed["kind"] == "Pod" and typed["spec"] == {"nodeName": "n1"}
    item = json.loads(made.item)
    assert "kind" not in item and item["metadata"] == typed["metadata"]
    partial = json.loads(made.metadata)
    assert partial["kind"] == "PartialObjectMetadata"
    assert partial["metadata"] == typed["metadata"]
    assert live["object"]["metadata"]["annotations"] == typed["metadata"]["annotations"]
    shown = json.loads(made.row("Metadata"))
    assert shown["cells"] == live["cells"] and shown["object"] == partial
    assert "object" not in json.loads(made.row("None"))
    assert json.loads(made.row("Object"))["object"] == typed


class Child:
    """A child that lists `items` as a Table and plays `events` on its watches; a watch from
    a version in `gone` answers 410."""

    name = "us-east"

    def __init__(self, items: list[Obj]) -> None:
        self.items = items
        self.version = 10
        self.events: asyncio.Queue[Obj] = asyncio.Queue()
        self.gone: set[str] = set()
        self.lists = 0

    async def request(self, method: str, path: str, **kwargs: Any) -> Obj:
        self.lists += 1
        return {
            "kind": "Table",
            "metadata": {"resourceVersion": str(self.version)},
            "columnDefinitions": COLUMNS,
            "rows": self.items,
        }

    async def watch(self, path: str, resource_version: str, **kwargs: Any) -> AsyncIterator[Obj]:
        if resource_version in self.gone:
            raise ApiError.of(410, "Expired", "too old resource version")
        while True:
            event = await self.events.get()
            if event["type"] == "END":
                return
            yield event


async def until(condition: Any) -> None:
    for _ in range(400):
        if condition():
            return
        await asyncio.sleep(0.005)
    raise AssertionError("the cache did not get there")


def table_event(kind: str, one: Obj) -> Obj:
    return {"type": kind, "object": {"kind": "Table", "rows": [one]}}


async def test_the_cache_follows_the_childs_watch() -> None:
    child = Child([row("a", 1), row("b", 2, namespace="other")])
    cache = TableCache("us-east", cast(Kube, child), PODS, max_objects=100)
    cache.start()
    try:
        await until(lambda: cache.ready)
        assert sorted(e.name for e in cache.in_namespace(None)) == ["a", "b"]
        assert [e.name for e in cache.in_namespace("other")] == ["b"]
        assert cache.version == "10" and json.loads(cache.columns) == COLUMNS
        child.events.put_nowait(table_event("ADDED", row("c", 11)))
        child.events.put_nowait(table_event("MODIFIED", row("a", 12, tier="x")))
        child.events.put_nowait(table_event("DELETED", row("b", 13, namespace="other")))
        child.events.put_nowait(
            {"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": "20"}}}
        )
        await until(lambda: cache.version == "20")
        names = {e.name: e for e in cache.in_namespace(None)}
        assert sorted(names) == ["a", "c"] and names["a"].labels == {"tier": "x"}
        # The watch ends and cannot resume: the cache lists again, and is right again.
        child.gone.add("20")
        child.items = [row("z", 30)]
        child.version = 30
        child.events.put_nowait({"type": "END"})
        await until(lambda: [e.name for e in cache.in_namespace(None)] == ["z"])
        assert child.lists == 2
    finally:
        await cache.stop()


async def test_a_resource_with_too_many_objects_is_not_cached() -> None:
    child = Child([row(f"p{i}", i) for i in range(5)])
    cache = TableCache("us-east", cast(Kube, child), PODS, max_objects=3)
    cache.start()
    try:
        await until(lambda: bool(cache.given_up))
        assert not cache.ready and not cache.entries
        assert "more than --remote-cache-max-objects" in cache.given_up
    finally:
        await cache.stop()


async def test_a_cache_nobody_reads_is_stopped() -> None:
    caches = RemoteCaches(idle=0.05, max_objects=100)
    child = Child([row("a", 1)])
    cache = caches.get("us-east", cast(Kube, child), PODS)
    assert caches.get("us-east", cast(Kube, child), PODS) is cache  # one per pair
    janitor = asyncio.create_task(caches.run())
    try:
        assert cache.task is not None
        await until(lambda: len(caches) == 0 and cache.task is not None and cache.task.done())
    finally:
        janitor.cancel()


async def test_watches_resume_from_the_history_or_hear_gone() -> None:
    child = Child([row("a", 11)])
    cache = TableCache("us-east", cast(Kube, child), PODS, max_objects=100)
    cache.start()
    heard: list[tuple[str, str, int]] = []

    def hear(location: str, change: Change) -> None:
        name = change.entry.name if change.entry else ""
        heard.append((change.type, name, change.version))

    try:
        await until(lambda: cache.ready)
        everything = cache.follow(hear, None)
        assert [(c.type, c.entry.name if c.entry else "") for c in everything] == [("ADDED", "a")]
        child.events.put_nowait(table_event("ADDED", row("b", 12)))
        child.events.put_nowait(table_event("DELETED", row("a", 13)))
        await until(lambda: len(heard) == 2)
        assert heard == [("ADDED", "b", 12), ("DELETED", "a", 13)]
        # A watch resuming from 12 gets what came after it, and nothing before.
        assert [(c.type, c.version) for c in cache.follow(lambda *_: None, 12)] == [("DELETED", 13)]
        with pytest.raises(Gone):
            cache.follow(lambda *_: None, 5)  # before the first list: not in the history
        # A relist after 410: followers hear the difference, as changes.
        child.gone.add("13")
        child.items = [row("b", 12), row("c", 30)]
        child.version = 31
        child.events.put_nowait({"type": "END"})
        await until(lambda: ("ADDED", "c", 31) in heard)
        assert ("DELETED", "b", 31) not in heard  # b did not change: nothing said of it
    finally:
        cache.unfollow(hear)
        await cache.stop()


def test_a_change_is_the_event_the_selection_makes_of_it() -> None:
    web = _Cached({}, [], selectors.parse_labels("app=web"), selectors.parse_fields(""), "demo")
    was_web = entry("us-east", row("p", 1, app="web"))
    now_db = entry("us-east", row("p", 2, app="db"))
    still_web = entry("us-east", row("p", 3, app="web"))
    assert _seen_as(Change("MODIFIED", now_db, was_web, 2), web) == "DELETED"
    assert _seen_as(Change("MODIFIED", still_web, now_db, 3), web) == "ADDED"
    assert _seen_as(Change("MODIFIED", still_web, was_web, 3), web) == "MODIFIED"
    assert _seen_as(Change("MODIFIED", now_db, now_db, 3), web) is None
    assert _seen_as(Change("DELETED", still_web, still_web, 4), web) == "DELETED"
    other = entry("us-east", row("p", 5, namespace="elsewhere", app="web"))
    assert _seen_as(Change("ADDED", other, None, 5), web) is None
