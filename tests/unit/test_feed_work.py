"""The work feed on kmc-apiserver: a location's children computed from the hub cache, as a
list and as kubectl's watch (whole state, the initial-events-end bookmark, then changes) of
`workfeeds` pinned to the location's name."""

from __future__ import annotations

import asyncio
import json
from typing import Any, cast

from aiohttp import web
from pytest_aiohttp import AiohttpClient

from apiserver import metrics
from apiserver.api.errors import status_errors
from apiserver.contract import HUB_GENERATION, ORIGIN
from apiserver.feed import handlers
from apiserver.feed.work import FEEDS, Feeds
from apiserver.hubcache import HUB_CACHE, HubCache
from apiserver.kinds import CONFIGMAP, DEPLOYMENT, Key
from apiserver.loops.sync.steps import Steps
from apiserver.objects import Obj
from apiserver.sync.desired import location_child
from apiserver.sync.work import WorkKey

from .hub_fakes import conf, hub_cache, placed, put, web_deployment


def deployment(placement: dict[str, int], image: str = "nginx") -> Obj:
    return web_deployment(placed(placement), sum(placement.values()), image=image)


def decided() -> Steps:
    """No step recorded, and the sync loop's first pass done: the feed serves placements."""
    steps = Steps()
    steps.primed.set()
    return steps


def test_a_locations_work_is_what_the_push_loop_applies_there_and_nothing_else() -> None:
    cache = hub_cache()
    hub = deployment({"east": 3, "west": 2})
    put(cache, DEPLOYMENT.key, hub)
    put(cache, CONFIGMAP.key, conf({"west": None}))
    feeds = Feeds(cache, decided())
    east = [o for o in feeds.work("east").values() if isinstance(o, dict)]
    assert [o["kind"] for o in east] == ["Namespace", "Deployment"]
    labels = {"region": "us"}
    want = location_child(hub, DEPLOYMENT, "east", {"east": 3, "west": 2}, labels)
    # What the push loop applies, and the hub generation it was made from (for the report).
    want["metadata"]["annotations"] = {HUB_GENERATION: "0"}
    assert east[1] == want
    assert east[0]["metadata"]["labels"] == {ORIGIN: "u-shop"}
    west = [o["kind"] for o in feeds.work("west").values() if isinstance(o, dict)]
    assert west == ["Namespace", "ConfigMap", "Deployment"]
    assert feeds.work("nowhere") == {}


async def test_a_watcher_hears_which_objects_changed_and_when_everything_may_have() -> None:
    cache = hub_cache()
    feeds = Feeds(cache, decided())
    watcher = feeds.watch("east")
    hub = deployment({"east": 3})
    await feeds._on_object(DEPLOYMENT.key, "ADDED", hub, None)
    assert watcher.woken.is_set()
    assert watcher.take() == (False, {Key(DEPLOYMENT.key, "shop", "web")})
    assert not watcher.woken.is_set()
    folded = {**hub, "status": {"replicas": 0}}
    status_only = {**hub, "status": {"replicas": 3}}
    await feeds._on_object(DEPLOYMENT.key, "MODIFIED", status_only, folded)
    assert not watcher.woken.is_set()  # no child carries the hub's status
    meta = hub["metadata"]
    finalized = {**hub, "metadata": {**meta, "finalizers": ["kmc.dev/cleanup"]}}
    await feeds._on_object(DEPLOYMENT.key, "MODIFIED", finalized, hub)
    assert not watcher.woken.is_set()  # nor its finalizers (the sync loop's, added once)
    going = {**finalized, "metadata": {**finalized["metadata"], "deletionTimestamp": "now"}}
    await feeds._on_object(DEPLOYMENT.key, "MODIFIED", going, finalized)
    assert watcher.take() == (False, {Key(DEPLOYMENT.key, "shop", "web")})
    relabelled_too = {**hub, "metadata": {**meta, "finalizers": [], "labels": {"a": "b"}}}
    await feeds._on_object(DEPLOYMENT.key, "MODIFIED", relabelled_too, finalized)
    assert watcher.take() == (False, {Key(DEPLOYMENT.key, "shop", "web")})
    east = cache.locations.cache["east"]
    probed = {**east, "status": {"lastProbeTime": "2026-12-06T00:00:02Z"}}
    await feeds._on_location("MODIFIED", probed, east)
    assert not watcher.woken.is_set()  # a probe changes nothing a child is made from
    relabelled = {"metadata": {"name": "east", "labels": {"region": "eu"}}}
    await feeds._on_location("MODIFIED", relabelled, east)
    assert watcher.take() == (True, set())
    west = cache.locations.cache["west"]
    await feeds._on_location("MODIFIED", {"metadata": {"name": "west"}}, west)
    assert not watcher.woken.is_set()  # another location's labels: not east's business
    shop = cache.namespaces.cache["shop"]
    await feeds._on_namespace("MODIFIED", {**shop, "status": {"phase": "Active"}}, shop)
    assert not watcher.woken.is_set()
    team = {"metadata": {**shop["metadata"], "labels": {"team": "a"}}}
    await feeds._on_namespace("MODIFIED", team, shop)
    assert watcher.take() == (True, set())
    await feeds._on_context("ADDED", {"metadata": {"name": "policy"}}, None)
    assert watcher.take() == (True, set())
    feeds.close(watcher)
    await feeds._on_object(DEPLOYMENT.key, "ADDED", hub, None)
    assert not watcher.woken.is_set()


def test_again_computes_only_the_changed_objects_and_says_which_left() -> None:
    cache = hub_cache()
    put(cache, DEPLOYMENT.key, deployment({"east": 3}))
    put(cache, CONFIGMAP.key, conf({"east": None}))
    feeds = Feeds(cache, decided())
    web = WorkKey("apps/v1", "Deployment", "shop", "web")
    assert set(feeds.objects("east")) == {web, WorkKey("v1", "ConfigMap", "shop", "conf")}
    put(cache, DEPLOYMENT.key, deployment({"west": 3}))
    assert feeds.again("east", {Key(DEPLOYMENT.key, "shop", "web")}) == {web: None}
    west = feeds.again("west", {Key(DEPLOYMENT.key, "shop", "web")})
    assert list(west) == [web] and isinstance(west[web], dict)
    assert feeds.again("east", {Key("NoSuchKind", "shop", "x")}) == {}


def app_for(cache: HubCache) -> web.Application:
    app = web.Application(middlewares=[status_errors])  # as make_app has it
    app[HUB_CACHE] = cache
    app[FEEDS] = Feeds(cache, decided())
    handlers.add_routes(app)
    return app


FEED = "/apis/mc.kmc.dev/v1alpha1/workfeeds"


def one(location: str, **more: str) -> dict[str, str]:
    """The query of a list (or, with watch=true, a watch) of one location's feed."""
    return {"fieldSelector": f"metadata.name={location}", **more}


async def test_a_list_of_one_name_answers_that_locations_work(
    aiohttp_client: AiohttpClient,
) -> None:
    cache = hub_cache()
    put(cache, DEPLOYMENT.key, deployment({"east": 3}))
    client = await aiohttp_client(app_for(cache))
    answer = await client.get(FEED, params=one("east"))
    assert answer.status == 200
    body = await answer.json()
    assert body["kind"] == "WorkFeedList" and body["apiVersion"] == "mc.kmc.dev/v1alpha1"
    assert [o["kind"] for o in body["items"]] == ["Namespace", "Deployment"]
    assert body["kept"] == []
    west = await (await client.get(FEED, params=one("west"))).json()
    assert west["items"] == []  # a location that holds nothing: an empty feed
    missing = await client.get(FEED, params=one("nowhere"))
    assert missing.status == 404
    assert (await missing.json())["message"] == 'workfeeds.mc.kmc.dev "nowhere" not found'
    bad = await client.get(FEED, params=one("east", watch="true", timeoutSeconds="soon"))
    assert bad.status == 400


async def test_anything_but_one_locations_feed_is_refused_with_a_status(
    aiohttp_client: AiohttpClient,
) -> None:
    """A list or watch that does not pin exactly one name (the one authorized) is a 400; a
    get of a name a 405 (the feed is not one object); both as Kubernetes Status objects."""
    cache = hub_cache()
    put(cache, DEPLOYMENT.key, deployment({"east": 3}))
    client = await aiohttp_client(app_for(cache))
    refused = [
        {},
        {"watch": "true"},
        {"fieldSelector": "metadata.name!=east"},
        {"fieldSelector": "metadata.namespace=east"},
        {"fieldSelector": "metadata.name=east,metadata.name=west"},
        {"fieldSelector": "metadata.name=east,spec.x=y"},
        {"fieldSelector": "metadata.name=a/b"},
        one("east", labelSelector="app=web"),
        one("east", watch="true", labelSelector="app=web"),
    ]
    for query in refused:
        answer = await client.get(FEED, params=query)
        body = await answer.json()
        assert (answer.status, body["kind"], body["reason"]) == (400, "Status", "BadRequest"), query
        assert "metadata.name=<location>" in body["message"] or "selector" in body["message"]
    got = await client.get(f"{FEED}/east")
    body = await got.json()
    assert (got.status, body["reason"]) == (405, "MethodNotAllowed")
    assert "(get workfeeds.mc.kmc.dev)" in body["message"]
    assert (await client.post(FEED, json={})).status == 405


async def test_the_watch_sends_the_state_a_bookmark_then_changes(
    aiohttp_client: AiohttpClient,
) -> None:
    cache = hub_cache()
    put(cache, DEPLOYMENT.key, deployment({"east": 3}))
    app = app_for(cache)
    feeds = app[FEEDS]
    client = await aiohttp_client(app)
    opened = sample("kmc_feed_watches_total", "east")
    answer = await client.get(FEED, params=one("east", watch="true", timeoutSeconds="30"))
    assert answer.status == 200

    async def event() -> dict[str, Any]:
        line = await asyncio.wait_for(answer.content.readline(), 10)
        return cast(dict[str, Any], json.loads(line))

    first = [await event() for _ in range(3)]
    assert [(e["type"], e["object"]["kind"]) for e in first] == [
        ("ADDED", "Namespace"),
        ("ADDED", "Deployment"),
        ("BOOKMARK", "WorkFeed"),
    ]
    assert first[2]["object"]["metadata"]["name"] == "east"  # the feed, named like its location
    annotations = first[2]["object"]["metadata"]["annotations"]
    assert annotations[handlers.INITIAL_EVENTS_END] == "true"
    assert json.loads(annotations[handlers.KEPT]) == []
    assert json.loads(annotations[handlers.KINDS]) == []  # no imported kinds on this hub
    assert sample("kmc_feed_watches_total", "east") == opened + 1
    assert sample("kmc_feed_watches_open", "east") == 1

    edited = deployment({"east": 3}, image="nginx:2")
    put(cache, DEPLOYMENT.key, edited)
    await feeds._on_object(DEPLOYMENT.key, "MODIFIED", edited, None)
    modified = await event()
    assert modified["type"] == "MODIFIED"
    assert modified["object"]["spec"]["template"]["spec"]["containers"][0]["image"] == "nginx:2"

    moved = deployment({"west": 3}, image="nginx:2")
    put(cache, DEPLOYMENT.key, moved)
    await feeds._on_object(DEPLOYMENT.key, "MODIFIED", moved, None)
    gone = [await event() for _ in range(2)]
    assert [(e["type"], e["object"]["kind"]) for e in gone] == [
        ("DELETED", "Deployment"),
        ("DELETED", "Namespace"),
    ]
    answer.close()
    for _ in range(100):  # the server sees the client gone at its next write or wake
        await feeds._on_object(DEPLOYMENT.key, "MODIFIED", moved, None)
        if not feeds.watchers:
            break
        await asyncio.sleep(0.01)
    assert not feeds.watchers and sample("kmc_feed_watches_open", "east") == 0


def sample(name: str, location: str) -> float:
    value = metrics.REGISTRY.get_sample_value(name, {"location": location})
    return value or 0.0


async def test_override_objects_reach_the_feed_as_they_reach_a_pushed_child() -> None:
    cache = hub_cache()
    put(cache, DEPLOYMENT.key, deployment({"east": 3, "west": 2}))
    feeds = Feeds(cache, decided())
    watcher = feeds.watch("east")
    mirror = {
        "apiVersion": "kmc.dev/v1alpha1",
        "kind": "Override",
        "metadata": {"name": "mirror", "namespace": "shop"},
        "spec": {
            "targets": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}],
            "locations": {"names": ["east"]},
            "rules": [{"image": {"registry": "mirror.example"}}],
        },
    }
    cache.override_index.put(mirror)  # as the hub cache's own watch files it
    await feeds._on_override("ADDED", mirror, None)
    assert watcher.take() == (False, {Key(DEPLOYMENT.key, "shop", "web")})
    web_key = WorkKey("apps/v1", "Deployment", "shop", "web")

    def image(location: str) -> str:
        child = feeds.objects(location)[web_key]
        assert isinstance(child, dict)
        return str(child["spec"]["template"]["spec"]["containers"][0]["image"])

    assert (image("east"), image("west")) == ("mirror.example/nginx", "nginx")
    cache.override_index.drop(mirror)
    await feeds._on_override("DELETED", mirror, None)
    assert watcher.take() == (False, {Key(DEPLOYMENT.key, "shop", "web")})
    assert image("east") == "nginx"
