"""The shared hub cache: one informer per resource, objects handed out as cached (never
copied), every change delivered with the object before it, and CRD kinds coming and going
with their CRDs."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from typing import Any, cast

from apiserver.contract import only_status_changed
from apiserver.hubcache import CRDS, HubCache
from apiserver.kinds import Key
from apiserver.kube.client import Kube
from apiserver.kube.informer import SETTLE_CAP, TRAIL_FACTOR, TRAIL_WINDOW
from apiserver.models.override import PATH as OVERRIDE_PATH
from apiserver.objects import Obj


def obj(name: str, version: int, **fields: Any) -> Obj:
    meta = {"name": name, "namespace": "demo", "resourceVersion": str(version)}
    return {"metadata": meta, **fields}


class FakeHub:
    """Lists what `items` holds per path; each watch plays what is put in its path's queue."""

    name = "hub"

    def __init__(self, items: dict[str, list[Obj]]) -> None:
        self.items = items
        self.events: dict[str, asyncio.Queue[Obj]] = {}

    def events_of(self, path: str) -> asyncio.Queue[Obj]:
        return self.events.setdefault(path, asyncio.Queue())

    async def get(self, path: str, **params: str) -> Obj:
        return {"metadata": {"resourceVersion": "1"}, "items": self.items.get(path, [])}

    async def watch(
        self, path: str, resource_version: str, params: Any = None
    ) -> AsyncIterator[Obj]:
        queue = self.events_of(path)
        while True:
            yield await queue.get()


async def settle(condition: Any, rounds: int = 200) -> None:
    for _ in range(rounds):
        if condition():
            return
        await asyncio.sleep(0.005)
    raise AssertionError("the cache did not get there")


async def test_objects_are_shared_not_copied_and_changes_come_with_the_object_before() -> None:
    web = obj("web", 2, spec={"replicas": 1})
    hub = FakeHub({"/apis/apps/v1/deployments": [web]})
    cache = HubCache(cast(Kube, hub))
    seen: list[tuple[str, str, Obj, Obj | None]] = []

    async def handler(kind: str, event: str, new: Obj, old: Obj | None) -> None:
        seen.append((kind, event, new, old))

    cache.subscribe(handler)
    task = asyncio.create_task(cache.run())
    try:
        await cache.wait_synced()
        key = Key("Deployment", "demo", "web")
        assert cache.get(key) is web  # the very object: read-only to everyone, never copied
        assert list(cache.list_keys("Deployment", "demo")) == [key]
        assert list(cache.list_keys("Deployment", "other")) == []
        scaled = obj("web", 3, spec={"replicas": 2})
        hub.events_of("/apis/apps/v1/deployments").put_nowait(
            {"type": "MODIFIED", "object": scaled}
        )
        await settle(lambda: cache.get(key) is scaled)
        assert seen[0] == ("Deployment", "ADDED", web, None)
        assert seen[-1] == ("Deployment", "MODIFIED", scaled, web)
    finally:
        task.cancel()


async def test_an_established_crd_brings_its_kind_and_its_deletion_takes_it_away() -> None:
    crd: Obj = {
        "metadata": {"name": "widgets.example.com", "resourceVersion": "5"},
        "spec": {
            "group": "example.com",
            "scope": "Namespaced",
            "names": {"kind": "Widget", "plural": "widgets"},
            "versions": [{"name": "v1", "storage": True}],
        },
        "status": {"conditions": [{"type": "Established", "status": "True"}]},
    }
    widget = obj("w1", 7, spec={})
    hub = FakeHub({"/apis/example.com/v1/widgets": [widget]})
    cache = HubCache(cast(Kube, hub))
    task = asyncio.create_task(cache.run())
    try:
        await cache.wait_synced()
        hub.events_of(CRDS).put_nowait({"type": "ADDED", "object": crd})
        key = Key("Widget.example.com", "demo", "w1")
        await settle(lambda: cache.get(key) is widget)
        assert cache.kinds["Widget.example.com"].collection == "/apis/example.com/v1/widgets"
        gone = {**crd, "metadata": {**crd["metadata"], "resourceVersion": "6"}}
        hub.events_of(CRDS).put_nowait({"type": "DELETED", "object": gone})
        await settle(lambda: "Widget.example.com" not in cache.kinds)
        assert cache.get(key) is None
    finally:
        task.cancel()


def test_a_status_only_change_is_told_apart_from_one_a_loop_acts_on() -> None:
    before = obj("web", 2, spec={"replicas": 1}, status={"replicas": 0})
    folded = obj("web", 3, spec={"replicas": 1}, status={"replicas": 1})
    scaled = obj("web", 4, spec={"replicas": 2}, status={"replicas": 1})
    labelled = {**folded, "metadata": {**folded["metadata"], "labels": {"tier": "web"}}}
    assert only_status_changed(folded, before)
    assert not only_status_changed(scaled, folded)
    assert not only_status_changed(labelled, folded)


class ProbedHub(FakeHub):
    """A hub whose current resourceVersion is `current`, counting the probes for it."""

    def __init__(self, items: dict[str, list[Obj]], current: int) -> None:
        super().__init__(items)
        self.current = current
        self.probes = 0

    async def get(self, path: str, **params: str) -> Obj:
        if params.get("limit") == "1":
            self.probes += 1
            await asyncio.sleep(0.01)
            return {"metadata": {"resourceVersion": str(self.current)}, "items": []}
        return await super().get(path, **params)


DEPLOYMENTS = "/apis/apps/v1/deployments"


@contextlib.asynccontextmanager
async def watching(hub: ProbedHub) -> AsyncIterator[HubCache]:
    """A running cache of `hub`, synced and watching."""
    cache = HubCache(cast(Kube, hub))
    task = asyncio.create_task(cache.run())
    try:
        await cache.wait_synced()
        await settle(lambda: cache.objects["Deployment"].watching)
        yield cache
    finally:
        task.cancel()


async def test_a_consistent_read_waits_for_the_write_it_must_see() -> None:
    hub = ProbedHub({DEPLOYMENTS: [obj("web", 1)]}, current=5)
    async with watching(hub) as cache:
        reading = asyncio.create_task(cache.fresh("Deployment", settle=5.0, timeout=10.0))
        await asyncio.sleep(0.05)
        assert not reading.done()  # the hub is at 5, the cache at 1: it waits
        hub.events_of(DEPLOYMENTS).put_nowait({"type": "ADDED", "object": obj("new", 5)})
        assert await reading
        assert cache.get(Key("Deployment", "demo", "new")) is not None


async def test_a_quiet_watch_is_caught_up_though_the_hub_moved_on_elsewhere() -> None:
    async with watching(ProbedHub({DEPLOYMENTS: [obj("web", 1)]}, current=9)) as cache:
        assert await cache.fresh("Deployment", settle=0.05, timeout=10.0)


async def test_an_event_that_trails_the_probe_widens_the_quiet_that_counts_as_caught_up() -> None:
    hub = ProbedHub({DEPLOYMENTS: [obj("web", 1)]}, current=9)
    async with watching(hub) as cache:
        informer = cache.objects["Deployment"]
        assert informer._quiet(0.02, time.monotonic()) == 0.02
        reading = asyncio.create_task(cache.fresh("Deployment", settle=5.0, timeout=10.0))
        await asyncio.sleep(0.05)
        # Written before the hub said 9, seen only now: late.
        hub.events_of(DEPLOYMENTS).put_nowait({"type": "ADDED", "object": obj("late", 3)})
        await settle(lambda: len(informer._trails) == 1)
        trail = informer._trails[0][1]
        assert trail >= 0.03  # the probe took 0.01 of the 0.05
        assert informer._quiet(0.02, time.monotonic()) == min(SETTLE_CAP, TRAIL_FACTOR * trail)
        # An event past the version ends the wait and is no trail.
        hub.events_of(DEPLOYMENTS).put_nowait({"type": "ADDED", "object": obj("later", 10)})
        assert await reading
        assert len(informer._trails) == 1
        # Trails are forgotten after the window.
        assert informer._quiet(0.02, time.monotonic() + TRAIL_WINDOW + 1) == 0.02


async def test_an_event_after_the_read_answered_is_counted_and_widens_the_quiet() -> None:
    hub = ProbedHub({DEPLOYMENTS: [obj("web", 1)]}, current=9)
    async with watching(hub) as cache:
        informer = cache.objects["Deployment"]
        assert await cache.fresh("Deployment", settle=0.02, timeout=10.0)  # quiet: answered
        assert informer.late == 0
        await asyncio.sleep(0.1)
        hub.events_of(DEPLOYMENTS).put_nowait({"type": "ADDED", "object": obj("late", 4)})
        await settle(lambda: informer.late == 1)
        assert informer._quiet(0.02, time.monotonic()) == SETTLE_CAP  # 4 x 0.1 s, capped


async def test_a_bookmark_below_the_read_is_no_trail_and_no_miss() -> None:
    """kube-apiserver's bookmarks carry its watch cache's version, which may be below a
    read's: no write came late, so the quiet stays as it was."""
    hub = ProbedHub({DEPLOYMENTS: [obj("web", 1)]}, current=9)
    async with watching(hub) as cache:
        informer = cache.objects["Deployment"]
        assert await cache.fresh("Deployment", settle=0.02, timeout=10.0)
        await asyncio.sleep(0.1)
        bookmark = {"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": "4"}}}
        hub.events_of(DEPLOYMENTS).put_nowait(bookmark)
        await settle(lambda: informer.version == 4)
        assert informer.late == 0
        assert informer._quiet(0.02, time.monotonic()) == 0.02


async def test_trailing_events_one_after_another_count_the_gap_not_the_total() -> None:
    hub = ProbedHub({DEPLOYMENTS: [obj("web", 1)]}, current=99)
    async with watching(hub) as cache:
        informer = cache.objects["Deployment"]
        reading = asyncio.create_task(cache.fresh("Deployment", settle=5.0, timeout=10.0))
        await asyncio.sleep(0.02)
        started = time.monotonic()
        for version in range(2, 12):  # ten writes from before the probe, 20 ms apart
            hub.events_of(DEPLOYMENTS).put_nowait(
                {"type": "ADDED", "object": obj(f"w{version}", version)}
            )
            await asyncio.sleep(0.02)
        await settle(lambda: len(informer._trails) == 10)
        assert time.monotonic() - started >= 0.2
        gaps = [trail for _, trail in informer._trails]
        assert max(gaps[1:]) < 0.1  # each gap, not the time since the read began
        hub.events_of(DEPLOYMENTS).put_nowait({"type": "ADDED", "object": obj("now", 100)})
        assert await reading


async def test_a_cache_without_a_watch_is_not_fresh() -> None:
    async with watching(ProbedHub({DEPLOYMENTS: [obj("web", 1)]}, current=9)) as cache:
        cache.objects["Deployment"].watching = False  # as between a watch's end and the next
        assert not await cache.fresh("Deployment", settle=0.02, timeout=0.2)


async def test_reads_that_arrive_together_share_one_probe() -> None:
    hub = ProbedHub({DEPLOYMENTS: []}, current=1)
    async with watching(hub) as cache:
        before = hub.probes
        results = await asyncio.gather(
            *(cache.fresh("Deployment", settle=0.05, timeout=5.0) for _ in range(10))
        )
        assert all(results)
        assert hub.probes - before == 1
        # A read that comes after a probe was sent needs a probe of its own.
        await cache.fresh("Deployment", settle=0.05, timeout=5.0)
        assert hub.probes - before == 2


async def test_the_policies_of_a_namespace_are_those_that_select_its_labels() -> None:
    def policy(name: str, version: int, tier: str) -> Obj:
        return {
            "metadata": {"name": name, "resourceVersion": str(version)},
            "spec": {"namespaceSelector": {"matchLabels": {"tier": tier}}, "locations": ["a"]},
        }

    restricted = {"metadata": {"name": "secure", "labels": {"tier": "restricted"}}}
    hub = FakeHub(
        {
            "/api/v1/namespaces": [restricted, {"metadata": {"name": "open"}}],
            "/apis/kmc.dev/v1alpha1/placementpolicies": [
                policy("z-second", 3, "restricted"),
                policy("a-first", 4, "restricted"),
                policy("other", 5, "other"),
            ],
        }
    )
    cache = HubCache(cast(Kube, hub))
    task = asyncio.create_task(cache.run())
    try:
        await cache.wait_synced()
        assert [p.name for p in cache.policies_for("secure")] == ["a-first", "z-second"]
        assert cache.policies_for("open") == []
        assert cache.policies_for("unknown") == []
    finally:
        task.cancel()


async def test_overrides_are_filed_by_what_they_target_and_name_only_their_targets() -> None:
    """An Override's change names the objects it targets, as it is and as it was, and no
    other; its deletion takes it out of every child it shaped."""
    deployments = "/apis/apps/v1/deployments"
    web, api = obj("web", 2), obj("api", 2)
    web["metadata"]["labels"] = {"tier": "front"}
    target = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "labelSelector": {"matchLabels": {"tier": "front"}},
    }
    ovr = obj("front", 5, spec={"targets": [target], "rules": [{"env": {"set": {"A": "b"}}}]})
    hub = FakeHub({deployments: [web, api], OVERRIDE_PATH: [ovr]})
    cache = HubCache(cast(Kube, hub))
    task = asyncio.create_task(cache.run())
    try:
        await cache.wait_synced()
        deployment = cache.kinds["Deployment"]
        assert [s.label for s in cache.overrides_of(deployment, web)] == ["Override demo/front"]
        assert cache.overrides_of(deployment, api) == []
        (source,) = cache.overrides_of(deployment, web)
        assert list(cache.override_targets(source)) == [Key("Deployment", "demo", "web")]
        hub.events_of(OVERRIDE_PATH).put_nowait({"type": "DELETED", "object": ovr})
        await settle(lambda: not cache.overrides_of(deployment, web))
        # As it was: still names what it targeted, so those go back to the plain object.
        assert list(cache.override_targets(source)) == [Key("Deployment", "demo", "web")]
    finally:
        task.cancel()
