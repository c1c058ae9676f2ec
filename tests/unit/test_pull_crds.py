"""A pull location's CRDs reach API import (docs/pull.md, "CRDs for API import"): the hub
keeps them by digest as its agent's probe names them, asks for those it lacks in the
report's answer, takes them at `PUT …/locations/<name>/crds` (bad bodies refused naming the
field), and `LocationLoop.crds` gives them to the import loop as a pushed location's watch
would; the agent sends exactly what it is asked for, slimmed."""

from __future__ import annotations

import asyncio
import json
from types import SimpleNamespace
from typing import Any, cast

from aiohttp import web
from pytest_aiohttp import AiohttpClient

from apiserver.agent.report import Prober, Reporter, crds_path, report_path
from apiserver.api.errors import status_errors
from apiserver.feed import crds as feed_crds
from apiserver.feed import report as feed_report
from apiserver.feed.children import ReportedChildren
from apiserver.feed.report import PULLED_CRDS, REPORTED_CHILDREN, REPORTS
from apiserver.hubcache import HUB_CACHE
from apiserver.imports.negotiate import digest
from apiserver.kube.client import Kube
from apiserver.kube.informer import Informer
from apiserver.leader import Leadership
from apiserver.locations.fleet import Fleet
from apiserver.locations.probe import api_digests
from apiserver.locations.pulledcrds import PulledCRDs
from apiserver.locations.reports import Reports
from apiserver.loops.locations import LocationLoop
from apiserver.models.report import body, crds_body, slim_crd
from apiserver.objects import Obj

from .hub_fakes import hub_cache
from .test_pull_report import location, wait_for


def crd(plural: str = "widgets", maximum: int = 10, rv: str = "1") -> Obj:
    kind = plural[:-1].capitalize()
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {
            "name": f"{plural}.example.org",
            "uid": f"uid-{plural}",
            "resourceVersion": rv,
            "generation": 1,
            "annotations": {
                "kubectl.kubernetes.io/last-applied-configuration": "{...}",
                "api-approved.kubernetes.io": "https://github.com/kubernetes-sigs/gateway-api",
            },
            "managedFields": [{"manager": "kubectl"}],
        },
        "spec": {
            "group": "example.org",
            "names": {"kind": kind, "plural": plural, "singular": plural[:-1]},
            "scope": "Namespaced",
            "versions": [
                {
                    "name": "v1",
                    "served": True,
                    "storage": True,
                    "schema": {
                        "openAPIV3Schema": {
                            "type": "object",
                            "properties": {
                                "spec": {
                                    "type": "object",
                                    "properties": {"size": {"type": "integer", "maximum": maximum}},
                                }
                            },
                        }
                    },
                }
            ],
        },
        "status": {"acceptedNames": {"kind": kind, "plural": plural}},
    }


def probe_of(*crds: Obj) -> Obj:
    return {"nodes": 1, "readyNodes": 1, "apiDigests": api_digests(list(crds))}


def report(store: Reports, *crds: Obj) -> None:
    store.put("edge", {}, frozenset(), {}, probe_of(*crds))


# -- the hub's store ---------------------------------------------------------------------------


def test_the_hub_asks_for_what_the_probe_names_and_knows_them_once_it_has_all() -> None:
    reports = Reports()
    store = PulledCRDs(reports)
    told: list[str] = []
    store.changed.connect(told.append)
    widgets, gadgets = crd("widgets"), crd("gadgets")
    assert store.missing("edge") == [] and store.crds("edge") is None  # no report yet
    report(reports, widgets, gadgets)
    assert store.missing("edge") == sorted([digest(widgets), digest(gadgets)])
    assert store.put("edge", [slim_crd(widgets)]) == (1, 0)
    assert store.crds("edge") is None  # one of two: not known yet
    assert store.missing("edge") == [digest(gadgets)]
    assert told == []
    # A CRD the probe does not name is not kept (an agent cannot fill the hub's memory).
    assert store.put("edge", [slim_crd(gadgets), slim_crd(crd("others"))]) == (1, 1)
    known = store.crds("edge")
    assert known is not None and {c["metadata"]["name"] for c in known} == {
        "widgets.example.org",
        "gadgets.example.org",
    }
    assert told == ["edge"]
    # Reports that name the same CRDs change nothing and ask for nothing.
    report(reports, widgets, gadgets)
    assert store.missing("edge") == [] and told == ["edge"]


def test_a_changed_crd_is_asked_for_again_and_a_removed_one_forgotten() -> None:
    reports = Reports()
    store = PulledCRDs(reports)
    told: list[str] = []
    store.changed.connect(told.append)
    widgets, gadgets = crd("widgets"), crd("gadgets")
    report(reports, widgets, gadgets)
    store.put("edge", [slim_crd(widgets), slim_crd(gadgets)])
    upgraded = crd("widgets", maximum=5, rv="2")
    report(reports, upgraded, gadgets)
    assert store.missing("edge") == [digest(upgraded)]
    assert store.crds("edge") is None  # the import loop keeps what it saw meanwhile
    store.put("edge", [slim_crd(upgraded)])
    known = store.crds("edge") or []
    assert [c["metadata"]["resourceVersion"] for c in known] == ["1", "2"]  # gadgets, widgets
    assert digest(widgets) not in store.kept["edge"]  # the old one forgotten
    report(reports, gadgets)  # widgets removed in the location
    assert [c["metadata"]["name"] for c in store.crds("edge") or []] == ["gadgets.example.org"]
    assert told == ["edge"] * 4  # known, not known, known again, smaller
    reports.drop("edge")  # the Location gone or turned Push
    assert "edge" not in store.kept and store.crds("edge") is None


def test_the_location_loop_gives_a_pull_locations_crds_to_the_import_loop() -> None:
    reports = Reports()
    store = PulledCRDs(reports)
    locations = {"edge": location("edge", "Pull"), "east": location("east")}
    informer = SimpleNamespace(subscribe=lambda _: None, get=locations.get)
    fleet = Fleet(cast(Kube, None), cast(Any, None))
    loop = LocationLoop(
        cast(Kube, None),
        cast(Informer, informer),
        fleet,
        Leadership.solo(),
        reports=reports,
        pulled_crds=store.crds,
    )
    assert loop.crds("edge") is None and loop.crds("east") is None
    widgets = crd()
    report(reports, widgets)
    store.put("edge", [slim_crd(widgets)])
    assert loop.crds("edge") == [slim_crd(widgets)]
    assert loop.crds("east") is None  # a pushed one's come from its watch, not yet synced


# -- the endpoint ------------------------------------------------------------------------------


async def test_the_endpoint_takes_the_crds_asked_for_and_refuses_bad_bodies(
    aiohttp_client: AiohttpClient,
) -> None:
    cache = hub_cache()  # every informer synced; Locations east and west, pushed
    cache.locations.cache["edge"] = location("edge", "Pull")
    app = web.Application(middlewares=[status_errors])
    app[HUB_CACHE] = cache
    app[REPORTS] = Reports()
    app[PULLED_CRDS] = PulledCRDs(app[REPORTS])
    app[REPORTED_CHILDREN] = ReportedChildren(app[REPORTS])
    feed_report.add_routes(app)
    feed_crds.add_routes(app)
    client = await aiohttp_client(app)

    async def put(path: str, data: Any) -> tuple[int, Obj]:
        raw = data if isinstance(data, bytes) else json.dumps(data).encode()
        answer = await client.put(path, data=raw)
        return answer.status, await answer.json()

    widgets = crd()
    code, said = await put(report_path("edge"), {**body([], []), "probe": probe_of(widgets)})
    assert code == 200 and said["missingCRDs"] == [digest(widgets)], said
    code, said = await put(crds_path("edge"), crds_body([slim_crd(widgets)]))
    assert code == 200 and said["accepted"] == {"kept": 1, "ignored": 0}, said
    assert said["missingCRDs"] == []
    assert app[PULLED_CRDS].crds("edge") == [slim_crd(widgets)]
    code, said = await put(report_path("edge"), {**body([], []), "probe": probe_of(widgets)})
    assert said["missingCRDs"] == []  # not asked again

    code, said = await put(crds_path("east"), crds_body([]))
    assert code == 409 and "CRDs are for pull locations" in said["message"], said
    code, said = await put(crds_path("nowhere"), crds_body([]))
    assert code == 404, said
    code, said = await put(crds_path("edge"), b"[")
    assert code == 400 and said["message"].startswith("the list of CRDs is not JSON"), said
    code, said = await put(crds_path("edge"), b"")
    assert code == 400 and "a LocationCRDs" in said["message"], said
    broken = slim_crd(crd())
    broken["spec"]["scope"] = "Galactic"
    del broken["spec"]["names"]["plural"]
    broken["spec"]["versions"][0]["served"] = "yes"
    del broken["metadata"]["uid"]
    code, said = await put(crds_path("edge"), crds_body([broken]))
    assert code == 422 and said["reason"] == "Invalid", said
    assert said["details"]["kind"] == "LocationCRDs", said
    fields = {cause["field"] for cause in said["details"]["causes"]}
    assert fields == {
        "items[0].metadata.uid",
        "items[0].spec.names.plural",
        "items[0].spec.scope",
        "items[0].spec.versions[0].served",
    }, said
    assert app[PULLED_CRDS].crds("edge") == [slim_crd(widgets)]  # changed nothing


# -- the agent ---------------------------------------------------------------------------------


class AskingHub:
    """A hub that lacks the CRDs of the probe it is sent until they are sent."""

    def __init__(self) -> None:
        self.reports = Reports()
        self.store = PulledCRDs(self.reports)
        self.sent: list[Obj] = []

    async def request(self, method: str, path: str, *, body: Any = None) -> Any:
        self.sent.append(body)
        if path == report_path("edge"):
            self.reports.put("edge", {}, frozenset(), {}, body.get("probe"))
        else:
            assert path == crds_path("edge")
            self.store.put("edge", body["items"])
        return {"missingCRDs": self.store.missing("edge")}


def prober_seeing(*crds: Obj) -> Prober:
    prober = Prober(cast(Kube, None), lambda: None)
    crd_informer = SimpleNamespace(
        synced=asyncio.Event(), cache={c["metadata"]["name"]: c for c in crds}
    )
    crd_informer.synced.set()
    prober.watched = cast(Any, SimpleNamespace(crds=crd_informer, digests={}))
    prober.fields = probe_of(*crds)
    return prober


async def test_the_agent_sends_the_crds_it_is_asked_for_and_only_then() -> None:
    hub = AskingHub()
    reporter = Reporter(hub, "edge", every=0.3, least=0.02)
    widgets, gadgets = crd("widgets"), crd("gadgets")
    reporter.prober = prober_seeing(widgets, gadgets)
    state: dict[str, Obj | None] = {"report": body([], [])}
    task = asyncio.create_task(reporter._send(lambda: reporter._report(lambda: state["report"])))
    try:
        reporter.changed()
        await wait_for(lambda: reporter.crds_sent == 2)
        crds_sent = [b for b in hub.sent if b["kind"] == "LocationCRDs"]
        assert len(crds_sent) == 1
        names = [c["metadata"]["name"] for c in crds_sent[0]["items"]]
        assert names == ["gadgets.example.org", "widgets.example.org"]
        assert "status" not in crds_sent[0]["items"][0]  # slimmed: spec and identity
        # Of its annotations only the API review approval (a `*.k8s.io` hub CRD needs it).
        assert crds_sent[0]["items"][0]["metadata"]["annotations"] == {
            "api-approved.kubernetes.io": "https://github.com/kubernetes-sigs/gateway-api"
        }
        assert hub.store.crds("edge") is not None
        # Reports go on (at least every `every`), and the CRDs are not sent with them.
        reports_before = reporter.sent
        await wait_for(lambda: reporter.sent >= reports_before + 2)
        assert reporter.crds_sent == 2
        # One CRD upgraded: its new digest is asked for, and only that one goes.
        upgraded = crd("widgets", maximum=5, rv="2")
        reporter.prober = prober_seeing(upgraded, gadgets)
        reporter.changed()
        await wait_for(lambda: reporter.crds_sent == 3)
        last = [b for b in hub.sent if b["kind"] == "LocationCRDs"][-1]
        assert [c["metadata"]["resourceVersion"] for c in last["items"]] == ["2"]
        # The hub restarted and forgot them: asked again, sent again.
        hub.store.kept.clear()
        reporter.connected()
        await wait_for(lambda: reporter.crds_sent == 5)
    finally:
        task.cancel()
