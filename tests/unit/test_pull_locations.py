"""Pull locations on the hub side (docs/pull.md): `spec.mode: Pull` needs no Secret, nothing
dials one (punch-through says so), its Ready comes from its agent's Lease, which the agent's
heartbeat renews, and placement takes it to serve the built-in kinds until its agent reports."""

from __future__ import annotations

import asyncio
import datetime
from types import SimpleNamespace
from typing import Any, cast

import aiohttp
import pydantic
import pytest

from apiserver.agent.heartbeat import Heartbeat
from apiserver.contract import CLEANUP, PLACEMENT
from apiserver.hubcache import HubCache
from apiserver.kinds import BUILT_IN_APIS, DEPLOYMENT, Key
from apiserver.kube.client import ApiError, Credentials, Kube
from apiserver.kube.informer import Informer
from apiserver.leader import Leadership
from apiserver.locations import lease
from apiserver.locations.fleet import CredentialsError, Fleet
from apiserver.locations.reports import Reports
from apiserver.locations.tunnels import NOT_CONNECTED
from apiserver.loops import hubwrites
from apiserver.loops.locations import LocationLoop
from apiserver.loops.placement.deciding import _served
from apiserver.loops.sync.children import Children
from apiserver.loops.sync.loop import SyncLoop
from apiserver.models.location import Location
from apiserver.objects import Obj
from apiserver.remote.fanout import targets

T0 = datetime.datetime(2026, 12, 6, 18, 0, 0, tzinfo=datetime.UTC)


def location(name: str, mode: str | None = None, ready: str = "True", **spec: Any) -> Obj:
    body: Obj = {
        "apiVersion": "kmc.dev/v1alpha1",
        "kind": "Location",
        "metadata": {"name": name, "resourceVersion": "1"},
        "spec": {**({"mode": mode} if mode else {}), **spec},
        "status": {"conditions": [{"type": "Ready", "status": ready, "message": "m"}]},
    }
    return body


# -- the model -------------------------------------------------------------------------------


def test_a_location_is_pushed_unless_it_says_pull_and_a_pull_one_needs_no_secret() -> None:
    pushed = Location.model_validate(location("a", secretRef={"name": "location-a"}))
    assert pushed.spec.mode == "Push" and not pushed.pulled
    pulled = Location.model_validate(location("b", "Pull"))
    assert pulled.pulled and pulled.spec.secret_ref is None
    assert pulled.to_json()["spec"]["mode"] == "Pull"


def test_any_other_mode_is_refused() -> None:
    with pytest.raises(pydantic.ValidationError, match="'Push' or 'Pull'"):
        Location.model_validate(location("c", "Sideways"))


async def test_the_fleet_never_connects_to_a_pull_location() -> None:
    fleet = Fleet(cast(Kube, None), cast(Any, None))
    with pytest.raises(CredentialsError, match=r"no spec\.secretRef"):
        await fleet.connect(Location.model_validate(location("b", "Pull")))


# -- the lease ---------------------------------------------------------------------------------


def test_no_lease_is_not_ready_with_the_reason() -> None:
    verdict = lease.verdict("edge", None, T0)
    assert verdict.status == "False" and verdict.reason == lease.NO_LEASE
    assert verdict.message.startswith("no lease from its agent")
    assert "kmc-system/kmc-agent-edge" in verdict.message
    renewed_never = {"spec": {"holderIdentity": "x", "leaseDurationSeconds": 40}}
    assert lease.verdict("edge", renewed_never, T0).reason == lease.NO_LEASE


def test_ready_while_renewed_within_its_duration_then_expired_at_the_end() -> None:
    body = lease.body("edge", "pod-1_7", 40, T0)
    assert body["metadata"] == {"name": "kmc-agent-edge", "namespace": "kmc-system"}
    assert body["spec"]["renewTime"] == "2026-12-06T18:00:00.000000Z"
    fresh = lease.verdict("edge", body, T0 + datetime.timedelta(seconds=39))
    assert fresh.status == "True" and fresh.reason == lease.RENEWED
    # A renewal alone changes nothing a reader sees (no status write per renewal).
    later = lease.renewed(body, "pod-1_7", 40, T0 + datetime.timedelta(seconds=10))
    at = T0 + datetime.timedelta(seconds=20)
    assert lease.verdict("edge", later, at) == fresh
    expired = lease.verdict("edge", body, T0 + datetime.timedelta(seconds=40))
    assert expired.status == "False" and expired.reason == lease.EXPIRED
    assert expired.message == "its agent's lease expired at 2026-12-06T18:00:40Z"


def test_a_new_holder_counts_a_transition_and_the_version_is_kept() -> None:
    read = {**lease.body("edge", "pod-1_7", 40, T0), "metadata": {"resourceVersion": "9"}}
    same = lease.renewed(read, "pod-1_7", 40, T0 + datetime.timedelta(seconds=10))
    assert same["metadata"]["resourceVersion"] == "9"
    assert "leaseTransitions" not in same["spec"]
    other = lease.renewed(read, "pod-2_1", 40, T0 + datetime.timedelta(seconds=10))
    assert other["spec"]["leaseTransitions"] == 1
    assert other["spec"]["acquireTime"] == "2026-12-06T18:00:10.000000Z"


class FakeHub:
    def __init__(self) -> None:
        self.leases: dict[str, Obj] = {}
        self.calls: list[tuple[str, str]] = []
        self.fail: ApiError | None = None

    async def get(self, path: str, **_: str) -> Obj:
        self.calls.append(("GET", path))
        if self.fail:
            raise self.fail
        if path not in self.leases:
            raise ApiError.of(404, "NotFound", "leases not found")
        return self.leases[path]

    async def create(self, path: str, body: Obj) -> Obj:
        self.calls.append(("POST", path))
        made = {**body, "metadata": {**body["metadata"], "resourceVersion": "1"}}
        self.leases[f"{path}/{body['metadata']['name']}"] = made
        return made

    async def request(self, method: str, path: str, *, body: Obj, timeout: float) -> Obj:
        self.calls.append((method, path))
        read = self.leases[path]["metadata"]["resourceVersion"]
        assert body["metadata"]["resourceVersion"] == read
        version = str(int(body["metadata"]["resourceVersion"]) + 1)
        self.leases[path] = {**body, "metadata": {**body["metadata"], "resourceVersion": version}}
        return self.leases[path]


async def test_the_heartbeat_makes_its_lease_then_renews_it() -> None:
    hub = FakeHub()
    beat = Heartbeat(hub, "edge", 20, identity="pod-1_7")
    assert beat.every == 5.0
    await beat.renew()
    path = lease.path("edge")
    assert hub.calls == [("GET", path), ("POST", lease.COLLECTION)]
    first = hub.leases[path]["spec"]["renewTime"]
    await beat.renew()
    assert hub.calls[-1] == ("PUT", path)
    assert hub.leases[path]["spec"]["renewTime"] >= first
    assert hub.leases[path]["spec"]["holderIdentity"] == "pod-1_7"
    now = datetime.datetime.now(datetime.UTC)
    assert lease.verdict("edge", hub.leases[path], now).status == "True"


# -- the location loop ---------------------------------------------------------------------------


def loop_with(hub: FakeHub) -> LocationLoop:
    informer = SimpleNamespace(subscribe=lambda _: None)
    fleet = Fleet(cast(Kube, hub), cast(Any, None))
    return LocationLoop(cast(Kube, hub), cast(Informer, informer), fleet, Leadership.solo())


async def test_the_location_loop_reads_a_pull_locations_lease_and_never_dials_it() -> None:
    hub = FakeHub()
    loop = loop_with(hub)
    pulled = Location.model_validate(location("edge", "Pull"))
    fields, healthy = await loop._lease(pulled)
    assert healthy and fields["_ready"][:2] == ("False", lease.NO_LEASE)
    await Heartbeat(hub, "edge", 40).renew()
    fields, healthy = await loop._lease(pulled)
    assert fields["_ready"][:2] == ("True", lease.RENEWED)
    # The hub not answering says nothing about the agent: no verdict, nothing written.
    hub.fail = ApiError.of(503, "ServiceUnavailable", "busy")
    fields, healthy = await loop._lease(pulled)
    assert fields == {} and not healthy
    assert await loop._write("edge", pulled, fields, None) is None
    assert loop.fleet.names() == []


async def test_a_pull_locations_status_carries_its_agents_probe_from_its_report() -> None:
    hub = FakeHub()
    reports = Reports()
    informer = SimpleNamespace(subscribe=lambda _: None)
    fleet = Fleet(cast(Kube, hub), cast(Any, None))
    loop = LocationLoop(
        cast(Kube, hub), cast(Informer, informer), fleet, Leadership.solo(), reports=reports
    )
    pulled = Location.model_validate(location("edge", "Pull"))
    await Heartbeat(hub, "edge", 40).renew()
    fields, _ = await loop._pulled(pulled)
    assert set(fields) == {"_ready"}  # no report yet: only Ready
    probed = {"kubernetesVersion": "v1.33.0", "nodes": 1, "readyNodes": 1, "resources": ["v1/Pod"]}
    reports.put("edge", {}, frozenset(), {}, probed)
    fields, healthy = await loop._pulled(pulled)
    assert healthy and fields["_ready"][:2] == ("True", lease.RENEWED)
    assert {k: fields[k] for k in probed} == probed
    # The hub not answering for the lease: nothing learned, nothing written.
    hub.fail = ApiError.of(503, "ServiceUnavailable", "busy")
    assert await loop._pulled(pulled) == ({}, False)


# -- placement and punch-through -------------------------------------------------------------------


def test_a_pull_location_serves_the_built_in_kinds_until_its_agent_reports() -> None:
    pulled = Location.model_validate(location("edge", "Pull"))
    assert "apps/v1/Deployment" in _served(pulled) and _served(pulled) == BUILT_IN_APIS
    pushed = Location.model_validate(location("a", secretRef={"name": "s"}))
    assert _served(pushed) == frozenset()  # not probed yet: nothing known


def test_punch_through_reads_a_pull_location_only_through_its_agents_tunnel() -> None:
    cache = {
        "a": location("a", secretRef={"name": "s"}),
        "edge": location("edge", "Pull"),
    }
    informer = cast(Informer, SimpleNamespace(cache=cache))
    tunnels: dict[str, Kube] = {}
    fleet = cast(
        Fleet,
        SimpleNamespace(get=lambda name: cast(Kube, f"client {name}"), tunnel=tunnels.get),
    )
    clients, warnings = targets(informer, fleet)
    assert list(clients) == ["a"]
    assert warnings == [f"location edge left out: {NOT_CONNECTED}"]
    assert NOT_CONNECTED == "its agent's tunnel is not connected"
    tunnels["edge"] = cast(Kube, "tunnel to edge")
    clients, warnings = targets(informer, fleet)
    assert {k: str(v) for k, v in clients.items()} == {"a": "client a", "edge": "tunnel to edge"}
    assert warnings == []


# -- the sync loop ---------------------------------------------------------------------------------


async def test_a_location_whose_client_went_has_its_watches_dropped() -> None:
    """A Push location turned Pull: the fleet forgets its client, and its watches stop."""
    session = cast(aiohttp.ClientSession, None)
    edge = Kube(session, Credentials("https://edge.invalid", False), "edge")
    clients: dict[str, Kube] = {"edge": edge}
    children = Children(clients.get, (), lambda _: None)
    try:
        assert children.connect("edge")
        del clients["edge"]
        assert children.connect("edge") and "edge" not in children.watches
        assert not children.connect("edge")
    finally:
        children.stop()
        await asyncio.sleep(0)


async def test_a_hub_object_going_does_not_wait_on_a_pull_locations_child(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Only its agent can remove it (the feed leaves out an object being deleted): the
    finalizer goes at once, or nothing placed there could ever be deleted."""
    session = cast(aiohttp.ClientSession, None)
    hub = Kube(session, Credentials("https://hub.invalid", False), "hub")
    cache = HubCache(hub)
    cache.locations.cache["edge"] = location("edge", "Pull")
    no_clients: dict[str, Kube] = {}
    sync = SyncLoop(cache, no_clients.get, Leadership.solo())
    removed: list[str] = []

    async def remove_finalizer(_: Kube, __: Any, obj: Obj, finalizer: str) -> None:
        removed.append(f"{obj['metadata']['name']} {finalizer}")

    monkeypatch.setattr(hubwrites, "remove_finalizer", remove_finalizer)
    going: Obj = {
        "metadata": {
            "name": "web",
            "namespace": "shop",
            "finalizers": [CLEANUP],
            "annotations": {PLACEMENT: '{"edge":2}'},
            "deletionTimestamp": "2026-12-06T18:00:00Z",
        }
    }
    key = Key("Deployment", "shop", "web")
    await sync.cleaner.hub_object_going(key, DEPLOYMENT, going, ())
    assert removed == [f"web {CLEANUP}"]
    # A Push location with no client yet is still waited for.
    cache.locations.cache["edge"] = location("edge", secretRef={"name": "s"})
    await sync.cleaner.hub_object_going(key, DEPLOYMENT, going, ())
    assert removed == [f"web {CLEANUP}"]
