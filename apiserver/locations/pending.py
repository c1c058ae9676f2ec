"""Pods a child cannot schedule, by the workload they belong to.

A location can look roomy in its Location status and still refuse pods (taints on every node,
cordoned nodes, one huge request). The scheduler says so on the pod: `PodScheduled=False`,
reason `Unschedulable`, since some time. Work should go where it makes progress, so the
placement loop asks this index how many replicas of a workload have been stuck in a location
for longer than the grace period, and moves that many elsewhere.

The index is fed by the probe's pod watch (no extra requests) and keyed by the workload a pod
belongs to in the child: its Job, StatefulSet, DaemonSet or ReplicaSet, and for a ReplicaSet
made by a Deployment (its name ends in the pod's `pod-template-hash`), that Deployment.
"""

from __future__ import annotations

import datetime

from apiserver.kinds import PLACED
from apiserver.objects import ReadOnly

Owner = tuple[str, str, str]  # (kind, namespace, name) of the workload in the child

# Owners a pod names as its controller, and the workloads whose pods name an intermediary
# (a Deployment's pods name its ReplicaSet, whose name ends in their pod-template-hash).
_DIRECT = frozenset(k.kind for k in PLACED.values() if k.owns_pods)
_VIA = {k.pods_via: k.kind for k in PLACED.values() if k.pods_via}


def owner_of(pod: ReadOnly) -> Owner | None:
    """The workload a pod belongs to, as the hub knows it; None for a bare pod."""
    meta = pod.get("metadata") or {}
    namespace = meta.get("namespace", "")
    for ref in meta.get("ownerReferences") or []:
        if not ref.get("controller") or ref.get("kind") not in _DIRECT:
            continue
        kind, name = ref["kind"], ref.get("name", "")
        pod_hash = (meta.get("labels") or {}).get("pod-template-hash")
        if kind in _VIA and pod_hash and name.endswith(f"-{pod_hash}"):
            return (_VIA[kind], namespace, name[: -len(pod_hash) - 1])
        return (kind, namespace, name)
    return None


def unschedulable_since(pod: ReadOnly) -> float | None:
    """When the scheduler last gave up on this pod (epoch seconds); None if it has not."""
    status = pod.get("status") or {}
    if (pod.get("spec") or {}).get("nodeName") or status.get("phase", "Pending") != "Pending":
        return None
    for condition in status.get("conditions") or []:
        if (
            condition.get("type") == "PodScheduled"
            and condition.get("status") == "False"
            and condition.get("reason") == "Unschedulable"
        ):
            return _epoch(condition.get("lastTransitionTime"))
    return None


class Unschedulable:
    """Unschedulable pods of one location, grouped by owner; updated from pod events."""

    def __init__(self) -> None:
        self._pods: dict[str, tuple[Owner, float]] = {}  # pod key -> (owner, stuck since)

    def update(self, event: str, pod: ReadOnly) -> Owner | None:
        """Take one pod event; returns the owner whose count changed, if any."""
        meta = pod.get("metadata") or {}
        key = f"{meta.get('namespace', '')}/{meta.get('name', '')}"
        before = self._pods.get(key)
        since = None if event == "DELETED" else unschedulable_since(pod)
        owner = owner_of(pod) if since is not None else None
        if since is None or owner is None:
            self._pods.pop(key, None)
            return before[0] if before else None
        self._pods[key] = (owner, since)
        return owner if before is None or before[0] != owner else None

    def stuck(self, owner: Owner, before: float) -> int:
        """How many of `owner`'s pods have been unschedulable since before `before`."""
        return sum(1 for o, since in self._pods.values() if o == owner and since <= before)

    def earliest(self, owner: Owner) -> float | None:
        """When the longest-stuck pod of `owner` became unschedulable."""
        times = [since for o, since in self._pods.values() if o == owner]
        return min(times) if times else None


def _epoch(timestamp: object) -> float:
    if not isinstance(timestamp, str) or not timestamp:
        return 0.0
    try:
        return datetime.datetime.fromisoformat(timestamp.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return 0.0
