"""Make-before-break across push and pull locations (docs/pull.md): the sync loop decides
one step per object over all its locations, pushed children from their watches and pulled
ones from their agents' reports, and the work feed serves a pull location that step, not the
placement's goal."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from contextlib import contextmanager
from types import SimpleNamespace

import pytest

from apiserver.contract import ORIGIN, PLACEMENT
from apiserver.feed import work
from apiserver.feed.work import Feeds
from apiserver.hubcache import HubCache
from apiserver.kinds import CONFIGMAP, DEPLOYMENT, Key
from apiserver.kube.client import Kube
from apiserver.leader import Leadership
from apiserver.locations.reports import SILENT_AFTER, Reports, keyed
from apiserver.loops.sync.loop import SILENT, SyncLoop
from apiserver.loops.sync.steps import FOLLOWERS_STAY, Step, Steps, kept_where
from apiserver.objects import Obj
from apiserver.sync.report import WAITING
from apiserver.sync.work import Kept

from .hub_fakes import conf, hub_cache, placed, web_deployment

WEB = Key(DEPLOYMENT.key, "shop", "web")
CONF = Key(CONFIGMAP.key, "shop", "conf")
KINDS = {(k.api_version, k.kind): k for k in (DEPLOYMENT, CONFIGMAP)}
BY_KEY = {k.key: k for k in (DEPLOYMENT, CONFIGMAP)}


def location(name: str, pull: bool, ready: str = "True") -> Obj:
    spec: Obj = {"mode": "Pull"} if pull else {"secretRef": {"name": f"location-{name}"}}
    return {
        "apiVersion": "kmc.dev/v1alpha1",
        "kind": "Location",
        "metadata": {"name": name, "generation": 1, "labels": {}},
        "spec": spec,
        "status": {
            "conditions": [
                {"type": "Ready", "status": ready, "lastTransitionTime": "2026-12-07T01:00:00Z"}
            ]
        },
    }


def web(placement: dict[str, int]) -> Obj:
    hub = web_deployment(placed(placement), 4, generation=2)
    hub["spec"]["strategy"] = {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1}}
    return hub


def deployed(replicas: int, available: int) -> Obj:
    """A child Deployment of ours, as a watch or a report has it."""
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "shop", "labels": {ORIGIN: "u-web"}},
        "spec": {"replicas": replicas},
        "status": {"availableReplicas": available},
    }


def configured() -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "conf", "namespace": "shop", "labels": {ORIGIN: "u-conf"}},
    }


class Watched:
    """A pushed location's watches, as the loop reads them: its children of ours."""

    def __init__(self, *children: Obj) -> None:
        self.children = {Key.of(BY_KEY[c["kind"]].key, c): c for c in children}
        self.made = SimpleNamespace(cache={})  # the namespaces it made: none

    def get(self, key: Key) -> Obj | None:
        return self.children.get(key)

    def namespace_has_workloads(self, namespace: str) -> bool:
        return any(k.namespace == namespace and k.kind == DEPLOYMENT.key for k in self.children)

    def stop(self) -> None:
        pass


class Bed:
    """A hub with push location `us-east` and pull location `edge`, a sync loop reading
    `us-east`'s watches and `edge`'s reports, and the work feed over the loop's steps."""

    def __init__(self, edge_ready: str = "True") -> None:
        self.now = 1000.0
        self.cache: HubCache = hub_cache()
        self.cache.locations.cache.clear()
        self.cache.locations.cache["us-east"] = location("us-east", pull=False)
        self.cache.locations.cache["edge"] = location("edge", pull=True, ready=edge_ready)
        self.reports = Reports(clock=lambda: self.now)
        none: dict[str, Kube] = {}
        self.sync = SyncLoop(self.cache, none.get, Leadership.solo(), reports=self.reports)
        self.sync.steps.primed.set()
        self.feeds = Feeds(self.cache, self.sync.steps)

    def hub(self, obj: Obj) -> None:
        kind = BY_KEY[obj["kind"]]
        self.cache.objects[kind.key].cache[f"shop/{obj['metadata']['name']}"] = obj

    def push(self, *children: Obj) -> None:
        self.sync.children.watches["us-east"] = Watched(*children)  # type: ignore[assignment]

    def report(self, *children: Obj) -> None:
        self.reports.put("edge", keyed(list(children), KINDS), frozenset({"shop"}), BY_KEY)

    def decide(self, key: Key = WEB) -> tuple[dict[str, int | None], set[str], tuple[str, ...]]:
        """What the loop's reconcile decides for `key` (its placement from the hub)."""
        kind = BY_KEY[key.kind]
        hub = kind.typed(self.cache.get(key) or {})
        placement = json.loads(hub["metadata"]["annotations"][PLACEMENT])
        children = self.sync.children.of(key, hub["metadata"]["uid"])
        stale = self.sync.progress.stale()
        return self.sync._decide(key, kind, hub, placement, children, stale)

    def served(self, key: Key = WEB) -> Obj | Kept | None:
        """What `edge`'s feed serves of `key`."""
        found = self.feeds.entry("edge", key)
        return None if found is None else found[1]


@contextmanager
def bed(edge_ready: str = "True") -> Iterator[Bed]:
    made = Bed(edge_ready)
    try:
        yield made
    finally:
        made.sync.children.stop()


def replicas(entry: Obj | Kept | None) -> int | None:
    assert isinstance(entry, dict), entry
    return int(entry["spec"]["replicas"])


async def test_push_to_pull_makes_the_pull_copy_first_then_shrinks_the_push_one() -> None:
    with bed() as b:
        b.hub(web({"edge": 4}))
        b.push(deployed(4, 4))
        b.report()  # the agent reported: nothing of ours there yet
        shares, deletable, waiting = b.decide()
        # The whole goal in edge at once; us-east gives up only what maxUnavailable allows.
        assert shares == {"edge": 4, "us-east": 3} and deletable == set()
        assert waiting == ("us-east: 3 -> 0 waits for 3 more available elsewhere",)
        assert replicas(b.served()) == 4
        # edge's report says 2 available: us-east may go down by 2 more.
        b.push(deployed(3, 3))
        b.report(deployed(4, 2))
        assert b.decide()[0] == {"edge": 4, "us-east": 1}
        b.push(deployed(1, 1))
        b.report(deployed(4, 4))
        assert b.decide()[0] == {"edge": 4, "us-east": 0}
        b.push(deployed(0, 0))
        assert b.decide()[:2] == ({"edge": 4}, {"us-east"})
        assert replicas(b.served()) == 4


async def test_a_move_from_pull_to_push_serves_the_pull_location_each_step_then_nothing() -> None:
    with bed() as b:
        b.hub(web({"us-east": 4}))
        b.push()
        b.report(deployed(4, 4))
        steps: list[int | None] = []
        assert b.decide()[0] == {"edge": 3, "us-east": 4}
        steps.append(replicas(b.served()))
        b.push(deployed(4, 2))
        b.report(deployed(3, 3))
        assert b.decide()[0] == {"edge": 1, "us-east": 4}
        steps.append(replicas(b.served()))
        b.push(deployed(4, 4))
        b.report(deployed(1, 1))
        assert b.decide()[0] == {"edge": 0, "us-east": 4}
        steps.append(replicas(b.served()))
        assert steps == [3, 1, 0]  # never the goal (nothing) before the copies elsewhere run
        b.report(deployed(0, 0))
        assert b.decide()[:2] == ({"us-east": 4}, {"edge"})
        assert b.served() is None  # its agent deletes it


async def test_a_pull_location_with_no_report_counts_nothing_and_is_kept_as_it_is() -> None:
    with bed() as b:
        b.hub(web({"edge": 4}))
        b.push(deployed(4, 4))
        # kmc-apiserver restarted: no report from edge's agent since.
        assert b.sync.progress.stale() == {"edge": WAITING}
        assert b.decide()[0] == {"edge": 4, "us-east": 3}
        served = b.served()
        assert isinstance(served, Kept) and WAITING in served.reason  # nothing changes there
        assert b.sync.steps.get(WEB) == Step(
            {"edge": 4, "us-east": 3}, {"edge": f"left as it is: {WAITING}"}
        )


async def test_a_silent_agents_last_report_is_not_counted_on() -> None:
    with bed() as b:
        b.hub(web({"edge": 4}))
        b.push(deployed(4, 4))
        b.report(deployed(4, 4))
        # Fresh: edge's 4 available let us-east go at once.
        assert b.decide()[0] == {"edge": 4, "us-east": 0}
        assert replicas(b.served()) == 4
        b.push(deployed(4, 4))
        b.now += SILENT_AFTER + 1
        assert b.sync.progress.stale() == {"edge": SILENT}
        # Stale: edge's numbers are last known ones, so us-east keeps all but one, and edge
        # is left as it is (its 4 kept, not sent again).
        shares, _, waiting = b.decide()
        assert shares == {"edge": 4, "us-east": 3}
        assert "us-east: 3 -> 0 waits for 3 more available elsewhere" in waiting
        assert isinstance(b.served(), Kept)
        b.report(deployed(4, 4))  # it speaks again
        assert b.decide()[0] == {"edge": 4, "us-east": 0}
        assert replicas(b.served()) == 4


async def test_a_pull_location_that_is_not_ready_is_handled_as_an_unreachable_pushed_one() -> None:
    def decided(pull: bool) -> tuple[dict[str, int | None], set[str], tuple[str, ...]]:
        with bed() as b:
            # "far" is the location that stopped answering, pushed or pulled.
            b.cache.locations.cache["far"] = location("far", pull=pull, ready="False")
            b.hub(web({"us-east": 4}))
            b.push(deployed(4, 1))
            b.report()  # edge, reported, holds nothing of it
            far = deployed(4, 4)
            if pull:
                b.reports.put("far", keyed([far], KINDS), frozenset({"shop"}), BY_KEY)
            else:
                b.sync.children.watches["far"] = Watched(far)  # type: ignore[assignment]
            assert b.sync.progress.stale() == {
                "far": "unreachable since 2026-12-07T01:00:00Z, showing its last known status"
            }
            step = b.decide()
            kept = b.feeds.entry("far", WEB)
            assert kept is not None and isinstance(kept[1], Kept)
            assert "unreachable since" in kept[1].reason
            return step

    pulled, pushed = decided(pull=True), decided(pull=False)
    # Its child keeps its 4 and is never deleted; its available ones are not counted.
    assert (
        pulled
        == pushed
        == (
            {"far": 4, "us-east": 4},
            set(),
            ("far: 4 -> 0 and delete waits for the location to become reachable",),
        )
    )


async def test_a_follower_stays_in_a_pull_location_while_its_namespaces_workloads_run() -> None:
    with bed() as b:
        b.hub(web({"us-east": 4}))
        b.hub(conf({"us-east": None}))
        b.push(deployed(4, 4), configured())
        b.report(deployed(1, 1), configured())
        shares, deletable, _ = b.decide(CONF)
        assert (shares, deletable) == ({"us-east": None}, set())
        assert b.served(CONF) == Kept(FOLLOWERS_STAY)
        b.report(configured())  # the last workload of shop left edge
        assert b.decide(CONF)[:2] == ({"us-east": None}, {"edge"})
        assert b.served(CONF) is None


def test_a_new_step_wakes_the_feeds_watchers_of_that_object_only_when_it_changed() -> None:
    steps = Steps()
    feeds = Feeds(hub_cache(), steps)
    watcher = feeds.watch("edge")
    assert steps.record(WEB, Step({"edge": 4, "us-east": 3}))
    assert watcher.take() == (False, {WEB})
    assert not steps.record(WEB, Step({"edge": 4, "us-east": 3}))
    assert not watcher.woken.is_set()
    steps.forget(WEB)
    assert watcher.take() == (False, {WEB})


def test_kept_names_stale_locations_and_followers_waiting_for_their_workloads() -> None:
    stale = {"far": "unreachable since then"}
    kept = kept_where({"a", "b", "far"}, {"a": 1, "new": 2, "far": 3}, {"gone"}, stale)
    assert kept == {"b": FOLLOWERS_STAY, "far": "left as it is: unreachable since then"}


async def test_the_feed_waits_for_the_loops_first_pass_but_not_forever(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with bed() as b:
        b.sync.steps.primed.clear()
        gone = Key("NoSuchKind", "shop", "gone")
        b.sync._unprimed = {WEB, gone}
        monkeypatch.setattr(work, "PRIMED_WAIT", 0.05)
        started = time.monotonic()
        await b.feeds.decided()  # not primed: gives up after PRIMED_WAIT
        assert time.monotonic() - started >= 0.05
        await b.sync._look(gone)  # a hub object gone since: looked at all the same
        assert not b.sync.steps.primed.is_set()
        b.sync._unprimed.discard(WEB)
        b.sync._primed_if_done()
        assert b.sync.steps.primed.is_set()
        monkeypatch.setattr(work, "PRIMED_WAIT", 30.0)
        async with asyncio.timeout(5):
            await b.feeds.decided()  # primed: at once
