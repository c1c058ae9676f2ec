"""Bare Pods on the hub: gated from the hub's scheduler, sent whole without what the hub's own
admission added, and shown on the hub as their child has them."""

from __future__ import annotations

import base64
import json
from typing import Any

from apiserver.admission import gate
from apiserver.contract import PLACED_ELSEWHERE
from apiserver.kinds import DEPLOYMENT, POD
from apiserver.loops.placement.writes import Writer
from apiserver.objects import Obj
from apiserver.placement.engine import Decision
from apiserver.sync.desired import child_object
from apiserver.sync.status import fold

from .follow_fakes import RecordingEvents

PLACED_NS: Obj = {"metadata": {"name": "demo"}}


def pod(**spec: Any) -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "debug", "namespace": "demo", "uid": "u1"},
        "spec": {"containers": [{"name": "c", "image": "busybox"}], **spec},
    }


def patched(answer: Obj) -> list[Obj]:
    assert answer["allowed"] is True and answer["patchType"] == "JSONPatch"
    patch: list[Obj] = json.loads(base64.b64decode(answer["patch"]))
    return patch


def test_a_bare_pod_in_a_placed_namespace_gets_our_scheduling_gate() -> None:
    assert patched(gate({"object": pod()}, PLACED_NS)) == [
        {"op": "add", "path": "/spec/schedulingGates", "value": [{"name": PLACED_ELSEWHERE}]}
    ]
    others = pod(schedulingGates=[{"name": "example.com/wait"}])
    assert patched(gate({"object": others}, PLACED_NS)) == [
        {"op": "add", "path": "/spec/schedulingGates/-", "value": {"name": PLACED_ELSEWHERE}}
    ]


def test_the_hubs_own_pods_are_left_alone() -> None:
    owned = pod()
    owned["metadata"]["ownerReferences"] = [{"kind": "ReplicaSet", "name": "x", "controller": True}]
    assert gate({"object": owned}, PLACED_NS) == {"allowed": True}
    assert gate({"object": pod()}, {"metadata": {"name": "kube-system"}}) == {"allowed": True}
    excluded = {"metadata": {"name": "ops", "labels": {"kmc.dev/exclude": "true"}}}
    assert gate({"object": pod()}, excluded) == {"allowed": True}
    already = pod(schedulingGates=[{"name": PLACED_ELSEWHERE}])
    assert gate({"object": already}, PLACED_NS) == {"allowed": True}
    assert not POD.syncable(owned) and POD.syncable(pod())


def test_the_child_goes_without_what_the_hub_added() -> None:
    token = "kube-api-access-x7k2p"
    hub = pod(
        nodeName="nowhere",
        priority=0,
        schedulingGates=[{"name": PLACED_ELSEWHERE}, {"name": "example.com/wait"}],
        volumes=[{"name": token, "projected": {"sources": []}}, {"name": "data", "emptyDir": {}}],
        containers=[
            {
                "name": "c",
                "image": "busybox",
                "volumeMounts": [
                    {"name": token, "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount"},
                    {"name": "data", "mountPath": "/data"},
                ],
            }
        ],
    )
    spec = child_object(hub, POD, "us-east", {"us-east": None})["spec"]
    assert spec == {
        "schedulingGates": [{"name": "example.com/wait"}],
        "volumes": [{"name": "data", "emptyDir": {}}],
        "containers": [
            {
                "name": "c",
                "image": "busybox",
                "volumeMounts": [{"name": "data", "mountPath": "/data"}],
            }
        ],
    }


def test_the_hub_pod_shows_its_childs_status() -> None:
    assert POD.fold_rules is not None
    running = {
        "phase": "Running",
        "podIP": "10.0.0.7",
        "podIPs": [{"ip": "10.0.0.7"}],
        "startTime": "2026-12-06T05:00:00Z",
        "containerStatuses": [{"name": "c", "ready": True, "restartCount": 0}],
        "conditions": [{"type": "Ready", "status": "True"}],
    }
    child = {"metadata": {"name": "debug"}, "status": running}
    status = fold(pod(), POD.fold_rules, {"us-east": child}, {"us-east": None}, {}, {}, "now")
    assert {
        k: status[k] for k in ("phase", "podIP", "podIPs", "startTime", "containerStatuses")
    } == {k: running[k] for k in ("phase", "podIP", "podIPs", "startTime", "containerStatuses")}
    ready = {c["type"]: c["status"] for c in status["conditions"]}
    assert ready == {"Ready": "True", "kmc.dev/Synced": "True"}


def test_a_pods_move_says_it_is_made_anew_and_a_deployments_does_not() -> None:
    writer = Writer.__new__(Writer)  # only its Events are asked for here
    events = RecordingEvents()
    writer.events = events  # type: ignore[assignment]
    moved = Decision({"eu-west": None}, (), None, before={"us-east": None})
    writer.announce(POD, pod(), {"us-east": None}, moved)
    writer.announce(DEPLOYMENT, pod(), {"us-east": None}, moved)
    pods, deployments = events.posted[:2], events.posted[2:]
    assert [reason for _, reason, _ in pods] == ["Evacuated", "SpilledOver"]
    assert all("made anew where it goes" in message for _, _, message in pods)
    assert [m for _, _, m in deployments] == [m.removesuffix(POD.moved_note) for _, _, m in pods]
