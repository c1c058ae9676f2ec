"""Services follow the workloads their selector matches; their children's endpoints are
mirrored on the hub, one hub slice per child slice, marked not ready once a location has been
unreachable for its grace period."""

from __future__ import annotations

from apiserver.kinds import DEPLOYMENT, POD, SERVICE
from apiserver.loops.endpoints import Slot, _content, _mirrored, _not_ready
from apiserver.objects import Obj
from apiserver.sync.status import fold

SERVICE_OBJ: Obj = {
    "apiVersion": "v1",
    "kind": "Service",
    "metadata": {"name": "web", "namespace": "shop", "uid": "svc-uid"},
    "spec": {"selector": {"app": "web"}, "ports": [{"port": 80}]},
}


def test_a_selector_matches_pod_template_labels() -> None:
    selects = SERVICE.selector(SERVICE_OBJ)
    assert selects is not None
    web = {"spec": {"template": {"metadata": {"labels": {"app": "web", "tier": "front"}}}}}
    db = {"spec": {"template": {"metadata": {"labels": {"app": "db"}}}}}
    assert selects(DEPLOYMENT.pod_labels(web)) and not selects(DEPLOYMENT.pod_labels(db))
    assert selects(POD.pod_labels({"metadata": {"labels": {"app": "web"}}, "spec": {}}))
    external = {"spec": {"type": "ExternalName", "externalName": "db.example.com"}}
    assert SERVICE.selector(external) is None  # follows its namespace's workloads instead


def test_the_apiservers_own_service_is_never_sent() -> None:
    assert not SERVICE.syncable({"metadata": {"namespace": "default", "name": "kubernetes"}})
    assert SERVICE.syncable(SERVICE_OBJ)


def test_a_load_balancers_ingress_is_every_locations() -> None:
    assert SERVICE.fold_rules is not None

    def child(ip: str) -> Obj:
        return {"metadata": {"name": "web"}, "status": {"loadBalancer": {"ingress": [{"ip": ip}]}}}

    children = {"eu-west": child("192.0.2.1"), "us-east": child("198.51.100.7")}
    placement: dict[str, int | None] = {"eu-west": None, "us-east": None}
    status = fold(SERVICE_OBJ, SERVICE.fold_rules, children, placement, {}, {}, "now")
    assert status["loadBalancer"] == {"ingress": [{"ip": "192.0.2.1"}, {"ip": "198.51.100.7"}]}


CHILD_SLICE: Obj = {
    "metadata": {
        "name": "web-x7k2p",
        "namespace": "shop",
        "labels": {"kubernetes.io/service-name": "web", "kmc.dev/origin-uid": "svc-uid"},
    },
    "addressType": "IPv4",
    "endpoints": [
        {
            "addresses": ["10.0.0.12"],
            "conditions": {"ready": True, "serving": True, "terminating": False},
            "nodeName": "us-east-node-1",
            "targetRef": {"kind": "Pod", "name": "web-abc", "namespace": "shop"},
            "zone": "us-east-1",
        }
    ],
    "ports": [{"name": "", "port": 8080, "protocol": "TCP"}],
}


def test_a_child_slice_is_mirrored_without_what_names_the_childs_objects() -> None:
    mirrored = _mirrored(CHILD_SLICE, SERVICE_OBJ, Slot("shop", "web", "us-east"))
    assert mirrored["metadata"]["name"] == "web-x7k2p-us-east"
    assert mirrored["metadata"]["labels"] == {
        "kubernetes.io/service-name": "web",
        "endpointslice.kubernetes.io/managed-by": "kmc.dev",
        "multicluster.kubernetes.io/source-cluster": "us-east",
    }
    assert mirrored["metadata"]["ownerReferences"][0]["uid"] == "svc-uid"
    assert mirrored["endpoints"] == [
        {
            "addresses": ["10.0.0.12"],
            "conditions": {"ready": True, "serving": True, "terminating": False},
            "zone": "us-east-1",
        }
    ]
    assert mirrored["ports"] == CHILD_SLICE["ports"]


def test_an_unreachable_locations_slices_turn_not_ready_and_nothing_else_changes() -> None:
    mirrored = _mirrored(CHILD_SLICE, SERVICE_OBJ, Slot("shop", "web", "us-east"))
    stored = {**mirrored, "metadata": {**mirrored["metadata"], "resourceVersion": "9"}}
    stale = _not_ready(stored)
    assert [e["conditions"]["ready"] for e in stale["endpoints"]] == [False]
    assert stale["endpoints"][0]["addresses"] == ["10.0.0.12"]
    assert _content(stale) != _content(stored)
    assert _content(_not_ready(stale)) == _content(stale)  # said once, not written again
    assert _content(stored) == _content(mirrored)  # the server's own fields do not count
