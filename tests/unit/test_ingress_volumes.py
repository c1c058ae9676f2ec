"""An Ingress follows the Services it names; claims and priority classes follow the pod
templates that name them (issue #31, items 4, 7 and 8): what each names, how each folds,
what a child of each holds, and the indexes that wake a follower."""

from __future__ import annotations

import asyncio
from typing import Any, cast

import aiohttp

from apiserver.contract import PLACEMENT
from apiserver.hubcache import HubCache
from apiserver.kinds import (
    DEPLOYMENT,
    INGRESS,
    LIMITRANGE,
    NETWORKPOLICY,
    PERSISTENTVOLUMECLAIM,
    PLACED,
    PRIORITYCLASS,
    SERVICE,
    Key,
    Kind,
    Role,
)
from apiserver.kube.client import Credentials, Kube
from apiserver.loops.handoff import Handoff
from apiserver.loops.placement.follow import Follower
from apiserver.loops.placement.place import dependency
from apiserver.loops.placement.records import Records
from apiserver.loops.placement.writes import Writer
from apiserver.loops.sync.apply import Applier
from apiserver.loops.sync.children import Children
from apiserver.loops.sync.records import Records as SyncRecords
from apiserver.objects import Obj
from apiserver.placement.dependencies import references
from apiserver.sync.desired import child_object
from apiserver.sync.status import fold

from .follow_fakes import RecordingEvents, RecordingWriter

INGRESS_OBJ: Obj = {
    "apiVersion": "networking.k8s.io/v1",
    "kind": "Ingress",
    "metadata": {"name": "web", "namespace": "shop", "uid": "ing-uid"},
    "spec": {
        "defaultBackend": {"service": {"name": "fallback", "port": {"number": 80}}},
        "tls": [{"hosts": ["shop.example"], "secretName": "shop-tls"}, {"hosts": ["x"]}],
        "rules": [
            {
                "host": "shop.example",
                "http": {
                    "paths": [
                        {
                            "path": "/",
                            "pathType": "Prefix",
                            "backend": {"service": {"name": "web", "port": {"number": 80}}},
                        },
                        {
                            "path": "/api",
                            "pathType": "Prefix",
                            "backend": {"service": {"name": "api", "port": {"name": "http"}}},
                        },
                        {
                            "path": "/static",
                            "pathType": "Prefix",
                            "backend": {
                                "resource": {
                                    "apiGroup": "k8s.example",
                                    "kind": "Bucket",
                                    "name": "b",
                                }
                            },
                        },
                    ]
                },
            },
            {"host": "bare.example"},  # no http: routes nothing
        ],
    },
}


def test_an_ingress_names_the_services_of_its_rules_and_default_backend() -> None:
    assert INGRESS.follows(INGRESS_OBJ) == {
        ("Service", "fallback"),
        ("Service", "web"),
        ("Service", "api"),
    }
    assert INGRESS.uses(INGRESS_OBJ) == {("Secret", "shop-tls")}
    assert INGRESS.follows({"spec": {"rules": [None, {"http": {"paths": "x"}}]}}) == frozenset()
    assert INGRESS.role is Role.REFERENCE_FOLLOWER and INGRESS.follows is not SERVICE.follows


def test_an_ingress_lists_every_locations_load_balancer_points() -> None:
    assert INGRESS.fold_rules is not None

    def child(**point: Any) -> Obj:
        return {"metadata": {"name": "web"}, "status": {"loadBalancer": {"ingress": [point]}}}

    children = {
        "eu-west": child(ip="192.0.2.1"),
        "us-east": child(hostname="lb.us-east.example", ports=[{"port": 443}]),
        "us-west": child(ip="192.0.2.1"),  # the same point twice is listed once
    }
    placement: dict[str, int | None] = dict.fromkeys(children)
    status = fold(INGRESS_OBJ, INGRESS.fold_rules, children, placement, {}, {}, "now")
    assert status["loadBalancer"] == {
        "ingress": [
            {"ip": "192.0.2.1"},
            {"hostname": "lb.us-east.example", "ports": [{"port": 443}]},
        ]
    }
    assert "conditions" not in status  # an Ingress's status has none to carry ours
    quiet = {loc: {"metadata": {"name": "web"}, "status": {}} for loc in children}
    assert (
        fold(INGRESS_OBJ, INGRESS.fold_rules, quiet, placement, {}, {}, "now")["loadBalancer"] == {}
    )


CLAIM: Obj = {
    "apiVersion": "v1",
    "kind": "PersistentVolumeClaim",
    "metadata": {
        "name": "data",
        "namespace": "shop",
        "uid": "pvc-uid",
        "annotations": {
            "pv.kubernetes.io/bind-completed": "yes",
            "pv.kubernetes.io/bound-by-controller": "yes",
            "volume.kubernetes.io/storage-provisioner": "hub.example/csi",
            "team": "shop",
        },
    },
    "spec": {
        "accessModes": ["ReadWriteOnce"],
        "resources": {"requests": {"storage": "1Gi"}},
        "volumeName": "pvc-hub-123",
    },
    "status": {"phase": "Bound"},
}


def test_a_pod_template_names_its_claims_and_its_priority_class() -> None:
    spec = {
        "priorityClassName": "high",
        "volumes": [
            {"name": "data", "persistentVolumeClaim": {"claimName": "data", "readOnly": True}},
            {"name": "bad", "persistentVolumeClaim": {"claimName": ""}},
            {"name": "eph", "ephemeral": {"volumeClaimTemplate": {"spec": {}}}},
        ],
    }
    assert references(spec) == {("PersistentVolumeClaim", "data"), ("PriorityClass", "high")}
    # A claim is in the workload's namespace; a priority class is cluster-scoped.
    assert dependency("PersistentVolumeClaim", "shop", "data") == Key(
        "PersistentVolumeClaim", "shop", "data"
    )
    assert dependency("PriorityClass", "shop", "high") == Key("PriorityClass", "", "high")
    assert {PERSISTENTVOLUMECLAIM.role, PRIORITYCLASS.role} == {Role.DEPENDENCY}


def test_a_child_claim_binds_its_own_volume() -> None:
    child = child_object(CLAIM, PERSISTENTVOLUMECLAIM, "us-east", {"us-east": None})
    assert child["metadata"]["annotations"] == {"team": "shop"}
    assert "volumeName" not in child["spec"] and "status" not in child
    assert child["spec"]["resources"] == {"requests": {"storage": "1Gi"}}
    # A volume its author named (no binder bound it) stays named.
    named: Obj = {**CLAIM, "metadata": {"name": "data", "namespace": "shop", "uid": "u"}}
    child = child_object(named, PERSISTENTVOLUMECLAIM, "us-east", {"us-east": None})
    assert child["spec"]["volumeName"] == "pvc-hub-123"
    assert "annotations" not in child["metadata"]
    assert CLAIM["metadata"]["annotations"]["pv.kubernetes.io/bind-completed"] == "yes"


def _claim_child(phase: str | None, storage: str = "1Gi") -> Obj:
    status: Obj = {"phase": phase} if phase else {}
    if phase == "Bound":
        status.update(accessModes=["ReadWriteOnce"], capacity={"storage": storage})
    return {"metadata": {"name": "data"}, "status": status}


def _claim_status(children: dict[str, Obj], placed: tuple[str, ...]) -> Obj:
    assert PERSISTENTVOLUMECLAIM.fold_rules is not None
    placement: dict[str, int | None] = dict.fromkeys(placed)
    return fold(CLAIM, PERSISTENTVOLUMECLAIM.fold_rules, children, placement, {}, {}, "now")


def test_a_claim_is_bound_only_when_bound_everywhere_it_is_placed() -> None:
    both = {"us-east": _claim_child("Bound"), "us-west": _claim_child("Bound")}
    status = _claim_status(both, ("us-east", "us-west"))
    assert status["phase"] == "Bound"
    assert status["capacity"] == {"storage": "1Gi"}
    assert status["accessModes"] == ["ReadWriteOnce"]
    one = {"us-east": _claim_child("Bound"), "us-west": _claim_child("Pending")}
    status = _claim_status(one, ("us-east", "us-west"))
    assert status["phase"] == "Pending" and "capacity" not in status
    # Not created yet in one location: not bound there.
    status = _claim_status({"us-east": _claim_child("Bound")}, ("us-east", "us-west"))
    assert status["phase"] == "Pending"
    assert _claim_status({}, ())["phase"] == "Pending"  # placed nowhere
    # Bound everywhere, but not alike: no capacity to show.
    unlike = {"us-east": _claim_child("Bound"), "us-west": _claim_child("Bound", "2Gi")}
    status = _claim_status(unlike, ("us-east", "us-west"))
    assert status["phase"] == "Bound" and "capacity" not in status
    assert status["accessModes"] == ["ReadWriteOnce"]


def test_a_read_write_once_claim_in_two_locations_says_it_is_two_volumes() -> None:
    assert PERSISTENTVOLUMECLAIM.note(CLAIM, {"us-east": None}) is None
    note = PERSISTENTVOLUMECLAIM.note(CLAIM, {"us-west": None, "us-east": None})
    assert note is not None
    reason, message = note
    assert reason == "VolumePerLocation"
    assert message.startswith("ReadWriteOnce claim used in 2 locations (us-east, us-west)")
    shared: Obj = {"spec": {"accessModes": ["ReadWriteMany"]}}
    assert PERSISTENTVOLUMECLAIM.note(shared, {"us-east": None, "us-west": None}) is None
    assert DEPLOYMENT.note(CLAIM, {"us-east": None, "us-west": None}) is None


def test_a_priority_class_goes_cluster_scoped_and_never_as_a_default() -> None:
    assert not PRIORITYCLASS.namespaced
    high: Obj = {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": "high", "uid": "pc-uid", "resourceVersion": "7"},
        "value": 1000,
        "globalDefault": True,
        "preemptionPolicy": "Never",
    }
    child = child_object(high, PRIORITYCLASS, "eu-west", {"eu-west": None})
    assert child["metadata"] == {"name": "high", "labels": {"kmc.dev/origin-uid": "pc-uid"}}
    assert (child["value"], child["preemptionPolicy"]) == (1000, "Never")
    assert "globalDefault" not in child
    assert PRIORITYCLASS.path(None, "high") == "/apis/scheduling.k8s.io/v1/priorityclasses/high"
    assert PRIORITYCLASS.syncable(high)
    assert not PRIORITYCLASS.syncable({"metadata": {"name": "system-node-critical"}})


def test_namespace_policy_follows_the_namespace() -> None:
    assert {LIMITRANGE.role, NETWORKPOLICY.role} == {Role.NAMESPACE_FOLLOWER}
    assert {"PersistentVolumeClaim", "PriorityClass", "Ingress"} <= set(PLACED)


def test_a_follower_is_looked_at_again_when_what_it_names_changes_and_forgotten_with_it() -> None:
    touched: list[Key] = []
    records = Records(touched=touched.append)
    ingress, web, api = (
        Key("Ingress", "shop", "web"),
        Key("Service", "shop", "web"),
        Key("Service", "shop", "api"),
    )
    records.follow(ingress, frozenset({web, api}))
    assert records.followers == {web: {ingress}, api: {ingress}}
    records.follow(ingress, frozenset({web}))
    assert records.followers == {web: {ingress}}
    records.forget(ingress)
    assert records.followers == {}


# --- the reference follower itself, over a cache and a writer that only record -----------------


class _Cache:
    def __init__(self, objects: dict[Key, Obj]) -> None:
        self.objects = objects
        self.kinds = dict(PLACED)

    def get(self, key: Key) -> Obj | None:
        return self.objects.get(key)


def _service(name: str, placement: str | None) -> Obj:
    annotations = {PLACEMENT: placement} if placement is not None else {}
    return {"metadata": {"name": name, "namespace": "shop", "annotations": annotations}}


async def test_an_ingress_goes_where_any_of_its_services_is_and_takes_its_tls_secret() -> None:
    objects = {
        Key("Service", "shop", "web"): _service("web", '{"us-east": null, "eu-west": null}'),
        Key("Service", "shop", "api"): _service("api", '{"us-west": null}'),
        Key("Service", "shop", "fallback"): _service("fallback", None),
    }
    touched: list[Key] = []
    records = Records(touched=touched.append)
    writer = RecordingWriter()
    follower = Follower(cast(HubCache, _Cache(objects)), records, cast(Writer, writer))
    key = Key("Ingress", "shop", "web")
    await follower.named(INGRESS, key, INGRESS_OBJ)
    assert writer.placements == [{"eu-west": None, "us-east": None, "us-west": None}]
    status, reason, message = writer.conditions[-1]
    assert (status, reason) == ("True", "Placed")
    assert message.startswith("with services/api, services/web:")
    assert records.users[Key("Secret", "shop", "shop-tls")] == {key}
    assert Key("Secret", "shop", "shop-tls") in touched


async def test_an_ingress_whose_services_are_placed_nowhere_stays_on_the_hub_and_says_why() -> None:
    objects = {Key("Service", "shop", "web"): _service("web", None)}
    writer = RecordingWriter()
    records = Records(touched=lambda _: None)
    follower = Follower(cast(HubCache, _Cache(objects)), records, cast(Writer, writer))
    lonely: Obj = {
        "metadata": {"name": "lonely", "namespace": "shop"},
        "spec": {"defaultBackend": {"service": {"name": "web", "port": {"number": 80}}}},
    }
    await follower.named(INGRESS, Key("Ingress", "shop", "lonely"), lonely)
    assert writer.placements == []  # nothing to write: it had no placement and has none
    assert writer.conditions == [
        ("False", "NothingPlaced", "nothing it names is placed (services/web): it stays on the hub")
    ]
    assert records.followers == {Key("Service", "shop", "web"): {Key("Ingress", "shop", "lonely")}}


def test_the_hub_cache_names_cluster_scoped_objects_without_a_namespace() -> None:
    cache = HubCache(cast(Any, object()))
    cache.objects["PriorityClass"].cache["high"] = {"metadata": {"name": "high"}}
    cache.objects["ConfigMap"].cache["shop/web"] = {"metadata": {"name": "web"}}
    assert list(cache.list_keys("PriorityClass")) == [Key("PriorityClass", "", "high")]
    assert list(cache.list_keys("PriorityClass", "shop")) == []
    assert list(cache.list_keys("ConfigMap", "shop")) == [Key("ConfigMap", "shop", "web")]
    assert cache.get(Key("PriorityClass", "", "high")) == {"metadata": {"name": "high"}}


class _HubOnly:
    hub = None


def _writer() -> tuple[Writer, Handoff, RecordingEvents]:
    handoff = Handoff()
    writer = Writer(cast(HubCache, _HubOnly()), handoff, Records(touched=lambda _: None))
    events = RecordingEvents()
    writer.events = cast(Any, events)
    return writer, handoff, events


def test_an_ingress_not_placed_says_so_in_an_event_once_having_no_condition_to_say_it() -> None:
    writer, handoff, events = _writer()
    key = Key("Ingress", "shop", "lonely")
    obj: Obj = {"metadata": {"name": "lonely", "namespace": "shop"}}
    for _ in range(2):
        writer.condition(INGRESS, key, obj, "False", "NothingPlaced", "nothing it names")
    assert events.posted == [("Warning", "NothingPlaced", "nothing it names")]
    assert handoff.condition_of(key) is None  # no condition to write in its status
    writer.condition(INGRESS, key, obj, "True", "Placed", "with services/web")
    assert len(events.posted) == 1
    # A Service says the same in its condition, with no Event.
    service = Key("Service", "shop", "web")
    writer.condition(SERVICE, service, obj, "False", "NothingSelected", "no pods")
    assert len(events.posted) == 1
    assert (handoff.condition_of(service) or {}).get("reason") == "NothingSelected"


def test_a_claim_in_two_locations_is_said_once_per_change() -> None:
    writer, _, events = _writer()
    key = Key("PersistentVolumeClaim", "shop", "data")
    two = PERSISTENTVOLUMECLAIM.note(CLAIM, {"us-east": None, "us-west": None})
    three = PERSISTENTVOLUMECLAIM.note(CLAIM, dict.fromkeys(["eu-west", "us-east", "us-west"]))
    for note in (two, two, three, None, None, two):
        writer.note(key, CLAIM, note)
    assert [message[2].split(":")[0] for message in events.posted] == [
        "ReadWriteOnce claim used in 2 locations (us-east, us-west)",
        "ReadWriteOnce claim used in 3 locations (eu-west, us-east, us-west)",
        "ReadWriteOnce claim used in 2 locations (us-east, us-west)",
    ]


# --- a cluster-scoped child: applied and deleted with no namespace to make --------------------


class _ChildKube:
    def __init__(self) -> None:
        self.calls: list[tuple[str, str]] = []

    async def apply(self, path: str, body: Obj, manager: str) -> Obj:
        self.calls.append(("apply", path))
        return {**body, "metadata": {**body["metadata"], "resourceVersion": "1"}}

    async def create(self, path: str, body: Obj) -> Obj:
        self.calls.append(("create", path))
        return body

    async def delete(self, path: str) -> Obj:
        self.calls.append(("delete", path))
        return {}


class _Watch:
    def __init__(self) -> None:
        self.kube = _ChildKube()
        self.namespaces: set[str] = set()

    def ensure(self, kind: Kind) -> None:
        pass

    def get(self, key: Key) -> Obj | None:
        return None

    async def observe(self, kind: Kind, answer: Obj) -> None:
        pass


class _Locations:
    def get(self, name: str) -> Obj | None:
        return None


class _SyncCache:
    locations = _Locations()
    namespaces = _Locations()

    def policies_for(self, namespace: str) -> list[Any]:
        raise AssertionError("a cluster-scoped object has no namespace's policies")

    def overrides_of(self, kind: Any, obj: Any) -> list[Any]:
        return []

    def location_labels(self, name: str) -> dict[str, str]:
        return {}

    child_inputs = HubCache.child_inputs  # the real reading, over this cache


async def test_a_priority_class_is_applied_and_deleted_in_a_child_without_a_namespace() -> None:
    watch = _Watch()
    children = cast(Any, type("C", (), {"get": lambda self, loc: watch})())
    applier = Applier(
        cast(Any, _SyncCache()), children, SyncRecords(), cast(Any, RecordingEvents())
    )
    high: Obj = {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": "high", "uid": "pc-uid"},
        "value": 1000,
    }
    key = Key("PriorityClass", "", "high")
    assert await applier.apply(key, PRIORITYCLASS, high, "us-east", {"us-east": None}, ())
    assert await applier.delete(key, PRIORITYCLASS, high, "us-east")
    path = "/apis/scheduling.k8s.io/v1/priorityclasses/high"
    assert watch.kube.calls == [("apply", path), ("delete", path)]


async def test_a_workload_leaving_a_child_looks_again_at_what_stays_only_for_it() -> None:
    """A claim (a ConfigMap, a Service) that left the placement during a move stays while its
    namespace still runs workloads there: the last one leaving looks at it again."""
    session = cast(aiohttp.ClientSession, None)
    edge = Kube(session, Credentials("https://edge.invalid", False), "edge")
    woken: list[Key] = []
    children = Children({"edge": edge}.get, (DEPLOYMENT, PERSISTENTVOLUMECLAIM), woken.append)
    try:
        children.connect("edge")
        watch = children.watches["edge"]
        watch.informers["PersistentVolumeClaim"].cache.update(
            {"shop/data": {"metadata": {}}, "other/data": {"metadata": {}}}
        )
        web: Obj = {"metadata": {"name": "web", "namespace": "shop"}}
        moved = watch.informers["Deployment"].handlers[0]
        await moved("MODIFIED", web, None)
        assert woken == [Key("Deployment", "shop", "web")]
        await moved("DELETED", web, web)
        assert woken[1:] == [
            Key("Deployment", "shop", "web"),
            Key("PersistentVolumeClaim", "shop", "data"),
        ]
    finally:
        children.stop()
        await asyncio.sleep(0)
