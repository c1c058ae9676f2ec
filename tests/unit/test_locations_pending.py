"""The index of unschedulable pods: which workload a pod belongs to, and since when."""

from __future__ import annotations

from typing import Any

from apiserver.locations.pending import Unschedulable, owner_of, unschedulable_since

STUCK_AT = "2026-12-02T10:00:00Z"
EPOCH = 1796205600.0  # STUCK_AT


def pod(
    name: str,
    owner_kind: str = "ReplicaSet",
    owner: str = "web-5d8f7",
    hash_: str | None = "5d8f7",
    stuck: bool = True,
    node: str = "",
) -> dict[str, Any]:
    conditions = (
        [
            {
                "type": "PodScheduled",
                "status": "False",
                "reason": "Unschedulable",
                "lastTransitionTime": STUCK_AT,
            }
        ]
        if stuck
        else [{"type": "PodScheduled", "status": "True"}]
    )
    return {
        "metadata": {
            "name": name,
            "namespace": "demo",
            "labels": {"pod-template-hash": hash_} if hash_ else {},
            "ownerReferences": [{"kind": owner_kind, "name": owner, "controller": True}],
        },
        "spec": {"nodeName": node} if node else {},
        "status": {"phase": "Pending", "conditions": conditions},
    }


def test_a_deployments_pod_belongs_to_the_deployment() -> None:
    assert owner_of(pod("a")) == ("Deployment", "demo", "web")


def test_a_bare_replicasets_pod_belongs_to_the_replicaset() -> None:
    assert owner_of(pod("a", owner="cache", hash_=None)) == ("ReplicaSet", "demo", "cache")


def test_statefulset_and_job_pods_belong_to_them() -> None:
    assert owner_of(pod("a", "StatefulSet", "db", None)) == ("StatefulSet", "demo", "db")
    assert owner_of(pod("a", "Job", "batch", None)) == ("Job", "demo", "batch")


def test_a_pod_without_controller_belongs_to_nobody() -> None:
    bare = pod("a")
    bare["metadata"]["ownerReferences"][0]["controller"] = False
    assert owner_of(bare) is None


def test_only_pods_the_scheduler_gave_up_on_count() -> None:
    assert unschedulable_since(pod("a")) == EPOCH
    assert unschedulable_since(pod("a", stuck=False)) is None
    assert unschedulable_since(pod("a", node="n1")) is None


def test_counts_follow_pod_events() -> None:
    index = Unschedulable()
    web = ("Deployment", "demo", "web")
    assert index.update("ADDED", pod("a")) == web
    assert index.update("ADDED", pod("b")) == web
    assert index.update("MODIFIED", pod("b")) is None  # nothing changed for the owner
    assert index.stuck(web, before=EPOCH + 1) == 2
    assert index.stuck(web, before=EPOCH - 1) == 0  # not stuck for long enough yet
    assert index.earliest(web) == EPOCH
    assert index.update("MODIFIED", pod("a", node="n1")) == web  # scheduled after all
    assert index.update("DELETED", pod("b")) == web
    assert index.stuck(web, before=EPOCH + 1) == 0
    assert index.earliest(web) is None
