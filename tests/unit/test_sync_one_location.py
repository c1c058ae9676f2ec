"""The sync loop is built for whatever locations its `clients` know, and runs without the
placement loop: the pull agent runs it inside one location, with that location's client
alone and no hand-off (the placement is read from the hub object)."""

from __future__ import annotations

import asyncio
from typing import cast

import aiohttp

from apiserver.contract import ORIGIN, PLACEMENT
from apiserver.hubcache import HubCache
from apiserver.kinds import CONFIGMAP, DEPLOYMENT, SERVICE, Key
from apiserver.kube.client import Credentials, Kube
from apiserver.leader import Leadership
from apiserver.loops.sync.children import Children
from apiserver.loops.sync.loop import SyncLoop
from apiserver.objects import Obj


def location(name: str) -> Obj:
    ready = {"type": "Ready", "status": "True", "lastTransitionTime": "2026-12-06T00:00:00Z"}
    return {"metadata": {"name": name}, "status": {"conditions": [ready]}}


async def test_a_sync_loop_for_one_location_watches_that_one_and_reads_the_hubs_record() -> None:
    session = cast(aiohttp.ClientSession, None)
    hub = Kube(session, Credentials("https://hub.invalid", False), "hub")
    edge = Kube(session, Credentials("https://edge.invalid", False), "edge")
    sync = SyncLoop(HubCache(hub), {"edge": edge}.get, Leadership.solo())
    try:
        for name in ("edge", "elsewhere"):
            await sync._on_location("ADDED", location(name), None)
        assert list(sync.children.watches) == ["edge"]
        assert sync.children.watches["edge"].kube is edge
        placed: Obj = {
            "metadata": {
                "name": "web",
                "namespace": "shop",
                "annotations": {PLACEMENT: '{"edge":2}'},
            }
        }
        assert sync._placement(Key("Deployment", "shop", "web"), placed) == ({"edge": 2}, False)
    finally:
        sync.children.stop()
        await asyncio.sleep(0)


async def test_a_childs_change_moves_its_counter_and_a_new_watch_moves_every_one() -> None:
    """What a kept mc.kmc.dev row compares, in O(1): the counters of an object's children."""
    session = cast(aiohttp.ClientSession, None)
    edge = Kube(session, Credentials("https://edge.invalid", False), "edge")
    woken: list[Key] = []
    children = Children({"edge": edge}.get, (), woken.append)
    web, db = Key("Deployment", "shop", "web"), Key("Deployment", "shop", "db")
    first = children.changes(web)
    children._changed(web)
    assert children.changes(web) != first and children.changes(db) == (0, 0)
    assert woken == [web]
    before = children.changes(db)
    try:
        assert children.connect("edge")  # a location's watches start: every row looks again
        assert children.changes(db) != before
        assert not children.connect("edge")  # the same client: nothing changed
    finally:
        children.stop()
        await asyncio.sleep(0)


async def test_a_childs_apply_answer_is_seen_at_once_and_slim() -> None:
    """The next look at the hub object (its fold, above all) sees the child our apply made,
    not the one before: a child "not created yet" would be a status write of its own."""
    session = cast(aiohttp.ClientSession, None)
    edge = Kube(session, Credentials("https://edge.invalid", False), "edge")
    woken: list[Key] = []
    children = Children({"edge": edge}.get, (DEPLOYMENT,), woken.append)
    try:
        children.connect("edge")
        watch = children.watches["edge"]
        answer: Obj = {
            "metadata": {
                "name": "web",
                "namespace": "shop",
                "resourceVersion": "7",
                "labels": {ORIGIN: "u1"},
            },
            "spec": {"replicas": 2, "template": {"spec": {}}},
        }
        await watch.observe(DEPLOYMENT, answer)
        web = Key("Deployment", "shop", "web")
        seen = children.of(web, "u1")
        assert list(seen) == ["edge"] and "template" not in seen["edge"]["spec"]
        assert woken == [web]
    finally:
        children.stop()
        await asyncio.sleep(0)


async def test_the_last_workload_gone_from_a_namespace_wakes_what_stayed_for_it() -> None:
    """A ConfigMap or a Service leaving a location stays while the namespace still runs
    something there; when its last workload goes, nothing about them changes, so the child
    watch wakes them itself (else they would stay until something else did)."""
    session = cast(aiohttp.ClientSession, None)
    edge = Kube(session, Credentials("https://edge.invalid", False), "edge")
    woken: list[Key] = []
    children = Children({"edge": edge}.get, (DEPLOYMENT, CONFIGMAP, SERVICE), woken.append)

    def child(name: str, namespace: str = "shop") -> Obj:
        meta = {"name": name, "namespace": namespace, "resourceVersion": "1"}
        return {"metadata": {**meta, "labels": {ORIGIN: "u1"}}}

    try:
        children.connect("edge")
        watch = children.watches["edge"]
        for kind, obj in (
            (DEPLOYMENT, child("web")),
            (DEPLOYMENT, child("db")),
            (CONFIGMAP, child("settings")),
            (SERVICE, child("web")),
            (SERVICE, child("web", "other")),
        ):
            await watch.observe(kind, obj)
        deployments = watch.informers[DEPLOYMENT.key]
        woken.clear()
        await deployments._emit("DELETED", deployments.cache.pop("shop/web"), None)
        assert woken == [Key("Deployment", "shop", "web")]  # db still runs in shop
        woken.clear()
        await deployments._emit("DELETED", deployments.cache.pop("shop/db"), None)
        assert set(woken) == {
            Key("Deployment", "shop", "db"),
            Key("ConfigMap", "shop", "settings"),
            Key("Service", "shop", "web"),
        }
    finally:
        children.stop()
        await asyncio.sleep(0)


async def test_a_locations_new_labels_re_look_at_everything() -> None:
    """Overrides select locations by their labels and read them into values: a label change
    alone re-queues every object (an unchanged Location does not)."""
    session = cast(aiohttp.ClientSession, None)
    hub = Kube(session, Credentials("https://hub.invalid", False), "hub")
    edge = Kube(session, Credentials("https://edge.invalid", False), "edge")
    sync = SyncLoop(HubCache(hub), {"edge": edge}.get, Leadership.solo())
    looks: list[None] = []
    sync._enqueue_all = lambda: looks.append(None)  # type: ignore[method-assign]
    try:
        edge_location = location("edge")
        await sync._on_location("ADDED", edge_location, None)
        assert len(looks) == 1
        await sync._on_location("MODIFIED", edge_location, edge_location)
        assert len(looks) == 1
        relabelled = {**edge_location, "metadata": {"name": "edge", "labels": {"tier": "b"}}}
        await sync._on_location("MODIFIED", relabelled, edge_location)
        assert len(looks) == 2
    finally:
        sync.children.stop()
        await asyncio.sleep(0)
