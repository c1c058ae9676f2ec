"""A pull location's status report (docs/pull.md): the body's model, the hub's memory of
the last report per location, how the sync loop reads it where it reads a pushed
location's watches, and the agent's reporter (coalesced, at least every `every` seconds, at
once after a reconnect)."""

from __future__ import annotations

import asyncio
import json
from typing import Any, cast

import aiohttp
import pydantic
import pytest
from aiohttp import web
from pytest_aiohttp import AiohttpClient

from apiserver.agent.report import Reporter, report_path
from apiserver.api.errors import status_errors
from apiserver.contract import HUB_GENERATION, ORIGIN, PLACEMENT
from apiserver.feed import report as feed_report
from apiserver.feed.children import ReportedChildren
from apiserver.feed.report import PULLED_CRDS, REPORTED_CHILDREN, REPORTS, _field
from apiserver.hubcache import HUB_CACHE, HubCache
from apiserver.kinds import CONFIGMAP, DEPLOYMENT, NAMESPACE, Key
from apiserver.kube.client import Credentials, Kube
from apiserver.leader import Leadership
from apiserver.locations.pulledcrds import PulledCRDs
from apiserver.locations.reports import Reports, changed_keys, keyed
from apiserver.loops.sync.loop import SyncLoop, reported_applied
from apiserver.models.report import LocationReport, body, slim_child
from apiserver.objects import Obj
from apiserver.sync.report import WAITING

from .hub_fakes import hub_cache

KINDS = {(k.api_version, k.kind): k for k in (DEPLOYMENT, CONFIGMAP)}
BY_KEY = {k.key: k for k in (DEPLOYMENT, CONFIGMAP)}


def child(ready: int = 2, generation: int = 3, hub_generation: str = "5") -> Obj:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {
            "name": "web",
            "namespace": "shop",
            "generation": generation,
            "labels": {ORIGIN: "u-web"},
            "annotations": {HUB_GENERATION: hub_generation},
        },
        "spec": {"replicas": 2},
        "status": {"observedGeneration": generation, "replicas": 2, "readyReplicas": ready},
    }


def location(name: str, mode: str | None = None) -> Obj:
    spec: Obj = {"mode": mode} if mode else {"secretRef": {"name": f"location-{name}"}}
    return {
        "apiVersion": "kmc.dev/v1alpha1",
        "kind": "Location",
        "metadata": {"name": name, "resourceVersion": "1", "generation": 1},
        "spec": spec,
        "status": {"conditions": [{"type": "Ready", "status": "True"}]},
    }


# -- the body --------------------------------------------------------------------------------


def test_a_report_is_what_the_child_watch_keeps_slimmed_to_what_the_hub_reads() -> None:
    watched = child()
    watched["metadata"] |= {"uid": "x", "managedFields": [{"manager": "kmc-sync"}]}
    watched["metadata"]["labels"]["app"] = "web"
    watched["spec"]["template"] = {"spec": {"containers": []}}
    slim = slim_child("apps/v1", "Deployment", watched)
    assert slim == child()
    report = LocationReport.model_validate(body([slim], ["shop"]))
    assert report.children[0].metadata.annotations == {HUB_GENERATION: "5"}
    assert report.namespaces == ["shop"]


def test_a_bad_report_names_each_field_that_is_wrong() -> None:
    bad = body([{"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": 3}}], [])
    bad["kind"] = "Report"
    bad["probe"] = {"nodes": "three", "resources": ["v1/Pod"]}
    with pytest.raises(pydantic.ValidationError) as caught:
        LocationReport.model_validate(bad)
    fields = {_field(d["loc"]) for d in caught.value.errors()}
    assert fields == {"kind", "children[0].metadata.name", "probe.nodes"}


def test_a_report_may_carry_the_agents_probe_as_a_locations_status_says_it() -> None:
    probed = {"kubernetesVersion": "v1.33.0", "nodes": 2, "readyNodes": 2, "schedulableNodes": 1}
    report = LocationReport.model_validate({**body([], []), "probe": probed})
    assert report.probe is not None
    dumped = report.probe.model_dump()
    assert {k: dumped[k] for k in probed} == probed and dumped["resources"] == []


# -- the hub's memory of it ------------------------------------------------------------------


def test_reports_say_which_keys_changed_and_whether_a_location_appeared_or_went() -> None:
    reports = Reports(clock=lambda: 1.0)
    heard: list[tuple[str, set[Key], bool]] = []
    reports.subscribe(lambda loc, keys, first: heard.append((loc, keys, first)))
    web = Key("Deployment", "shop", "web")
    reports.put("edge", keyed([child()], KINDS), frozenset({"shop"}), BY_KEY)
    assert heard[-1] == ("edge", {web, Key(NAMESPACE, "", "shop")}, True)
    reports.put("edge", keyed([child()], KINDS), frozenset({"shop"}), BY_KEY)
    assert heard[-1] == ("edge", set(), False)  # the same again: nothing changed
    reports.put("edge", keyed([child(ready=1)], KINDS), frozenset({"shop"}), BY_KEY)
    assert heard[-1] == ("edge", {web}, False)
    seen = reports.get("edge")
    assert seen is not None and seen.count() == 1 and seen.namespace_has_workloads("shop")
    assert seen.get(Key(NAMESPACE, "", "shop")) is not None
    reports.drop("edge")
    assert heard[-1] == ("edge", {web, Key(NAMESPACE, "", "shop")}, True)
    assert changed_keys(None, None) == set()


def test_a_child_of_a_kind_the_hub_does_not_know_is_left_out() -> None:
    other = child() | {"apiVersion": "example.com/v1", "kind": "Widget"}
    assert list(keyed([other, child()], KINDS)) == [Key("Deployment", "shop", "web")]


def test_the_hub_generation_a_reported_child_reflects_comes_from_the_feeds_annotation() -> None:
    assert reported_applied(child(generation=3, hub_generation="5")) == (5, 3)
    assert reported_applied(child(hub_generation="five")) is None
    unstamped = child()
    del unstamped["metadata"]["annotations"]
    assert reported_applied(unstamped) is None


# -- the sync loop reads it like a watch -------------------------------------------------------


async def test_a_pull_locations_rows_wait_for_its_agent_then_read_its_report() -> None:
    session = cast(aiohttp.ClientSession, None)
    cache = HubCache(Kube(session, Credentials("https://hub.invalid", False), "hub"))
    cache.locations.cache["edge"] = location("edge", "Pull")
    reports = Reports()
    no_clients: dict[str, Kube] = {}
    sync = SyncLoop(cache, no_clients.get, Leadership.solo(), reports=reports)
    hub: Obj = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {
            "name": "web",
            "namespace": "shop",
            "uid": "u-web",
            "generation": 5,
            "annotations": {PLACEMENT: '{"edge":2}'},
        },
        "spec": {"replicas": 2},
    }
    assert sync.progress.stale() == {"edge": WAITING}
    [row] = sync.progress.rows(DEPLOYMENT, hub)
    assert (row["state"], row["message"], row["ready"]) == ("Waiting", WAITING, None)

    key = Key("Deployment", "shop", "web")
    reports.put("edge", keyed([child()], KINDS), frozenset({"shop"}), BY_KEY)
    assert sync.progress.stale() == {}
    children = sync.children.of(key, "u-web")
    assert children == {"edge": child()}
    sync._note_reported(key, children)
    [row] = sync.progress.rows(DEPLOYMENT, hub)
    assert (row["state"], row["ready"], row["syncedGeneration"]) == ("Synced", 2, 5)
    # Not ours (another origin): not its child.
    assert sync.children.of(key, "u-other") == {}
    # Turned Push: its report is forgotten.
    await sync._on_location("MODIFIED", location("edge"), None)
    assert reports.get("edge") is None and sync.children.of(key, "u-web") == {}


# -- the agent's reporter ----------------------------------------------------------------------


class FakeHub:
    def __init__(self, fail: int = 0) -> None:
        self.bodies: list[Obj] = []
        self.fail = fail

    async def request(self, method: str, path: str, *, body: Any = None) -> Any:
        assert (method, path) == ("PUT", report_path("edge"))
        if self.fail:
            self.fail -= 1
            raise ConnectionError("hub unreachable")
        self.bodies.append(body)
        return {}


async def wait_for(test: Any, seconds: float = 5.0) -> None:
    async with asyncio.timeout(seconds):
        while not test():  # noqa: ASYNC110 - a fake's state, polled
            await asyncio.sleep(0.01)


async def test_the_agent_reports_when_ready_then_on_change_coalesced_and_every_so_often() -> None:
    hub = FakeHub(fail=1)
    reporter = Reporter(hub, "edge", every=0.5, least=0.05)
    state: dict[str, Obj | None] = {"report": None}
    task = asyncio.create_task(reporter.run(lambda: state["report"]))
    try:
        reporter.connected()
        await asyncio.sleep(0.1)
        assert hub.bodies == []  # nothing before a whole state and listed watches
        state["report"] = body([child()], ["shop"])
        reporter.changed()
        await wait_for(lambda: len(hub.bodies) == 1)  # after one failure, again
        for ready in (0, 1, 2):  # a burst: at most one report per `least`
            state["report"] = body([child(ready=ready)], ["shop"])
            reporter.changed()
        await wait_for(lambda: hub.bodies[-1] == state["report"])
        assert len(hub.bodies) <= 3
        sent = len(hub.bodies)
        reporter.changed()  # nothing new: not sent
        await asyncio.sleep(0.1)
        assert len(hub.bodies) == sent
        await wait_for(lambda: len(hub.bodies) == sent + 1, 2.0)  # the `every` one
        reporter.connected()  # a reconnect: at once, even unchanged
        await wait_for(lambda: len(hub.bodies) == sent + 2, 0.4)
    finally:
        task.cancel()


# -- the endpoint ------------------------------------------------------------------------------


async def test_the_endpoint_keeps_a_pull_locations_report_and_refuses_bad_ones(
    aiohttp_client: AiohttpClient,
) -> None:
    cache = hub_cache()  # every informer synced; Locations east and west, pushed
    cache.locations.cache["edge"] = location("edge", "Pull")
    app = web.Application(middlewares=[status_errors])  # as make_app has it
    app[HUB_CACHE] = cache
    app[REPORTS] = Reports()
    app[PULLED_CRDS] = PulledCRDs(app[REPORTS])
    app[REPORTED_CHILDREN] = ReportedChildren(app[REPORTS])
    feed_report.add_routes(app)
    client = await aiohttp_client(app)

    async def put(location: str, data: Any) -> tuple[int, Obj]:
        raw = data if isinstance(data, bytes) else json.dumps(data).encode()
        answer = await client.put(report_path(location), data=raw)
        return answer.status, await answer.json()

    code, said = await put("edge", body([child()], ["shop"]))
    assert code == 200 and said["accepted"] == {"children": 1, "changed": 2}
    assert said["missingCRDs"] == []  # no probe, no CRDs to ask for
    kept = app[REPORTS].get("edge")
    assert kept is not None and kept.get(Key("Deployment", "shop", "web")) == child()

    code, said = await put("east", body([], []))
    assert code == 409 and "reports are for pull locations" in said["message"], said
    code, said = await put("nowhere", body([], []))
    assert code == 404, said
    code, said = await put("edge", b"{not json")
    assert code == 400 and said["message"].startswith("the report is not JSON"), said
    bad = {**body([], []), "children": [{"kind": "Deployment", "metadata": {}}]}
    code, said = await put("edge", bad)
    assert code == 422 and said["reason"] == "Invalid", said
    fields = {cause["field"] for cause in said["details"]["causes"]}
    assert fields == {"children[0].apiVersion", "children[0].metadata.name"}, said
    assert app[REPORTS].get("edge") is kept  # a bad report changes nothing
