"""`mc.kmc.dev` objects: a placement view of one hub workload, and how a row of it prints.

The view is computed, never stored: the hub object (spec, placement annotation, folded status)
plus the strategy in force and the sync loop's rows per location. Its metadata is the hub
object's, resourceVersion included, so a watch on the view is a watch on the hub object.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from apiserver.api.table import Column, age
from apiserver.kinds import Kind
from apiserver.placement.loop import read_placement
from apiserver.placement.strategy import Strategy
from apiserver.sync.report import LocationState

GROUP = "mc.kmc.dev"
VERSION = "v1alpha1"
API_VERSION = f"{GROUP}/{VERSION}"

Obj = dict[str, Any]

# Hub status counters shown on the view, by kind: view field -> hub status field.
_COUNTERS: dict[str, dict[str, str]] = {
    "DaemonSet": {
        "replicas": "desiredNumberScheduled",
        "readyReplicas": "numberReady",
        "availableReplicas": "numberAvailable",
    },
    "Job": {"active": "active", "succeeded": "succeeded", "failed": "failed"},
}
_REPLICA_COUNTERS = {k: k for k in ("replicas", "readyReplicas", "availableReplicas")}
_KEPT_METADATA = (
    "name",
    "namespace",
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "labels",
)

COLUMNS = (
    Column("Name", format="name", description="Name of the hub object."),
    Column("Strategy", description="The strategy in force, and where it comes from if inherited."),
    Column(
        "Locations",
        description="Replicas per location, as placed; <gated> while placement gates hold it.",
    ),
    Column("Ready", description="Ready pods over the pods asked for, summed over locations."),
    Column("Age", description="Time since the hub object was created."),
    Column("Placed", priority=1, description="The kmc.dev/Placed condition's reason."),
    Column("Synced", priority=1, description="The kmc.dev/Synced condition's reason."),
)


def metadata_of(hub: Obj) -> Obj:
    meta = hub.get("metadata") or {}
    return {key: meta[key] for key in _KEPT_METADATA if key in meta}


def view(
    kind: Kind,
    hub: Obj,
    strategy: Strategy | None,
    source: str,
    locations: Sequence[LocationState],
) -> Obj:
    """The `mc.kmc.dev` object for one hub workload."""
    hub_spec = hub.get("spec") or {}
    hub_status = hub.get("status") or {}
    spec: Obj = {}
    if kind.kind == "Job":
        spec["replicas"] = hub_spec.get("completions", hub_spec.get("parallelism", 1))
    elif kind.kind != "DaemonSet":
        spec["replicas"] = hub_spec.get("replicas", 1)
    if strategy is not None:
        spec["strategy"] = strategy.model_dump(by_alias=True, exclude_defaults=True, mode="json")
        spec["strategySource"] = source
    counters = _COUNTERS.get(kind.kind, _REPLICA_COUNTERS)
    status: Obj = {
        "placement": read_placement(hub),
        "locations": list(locations),
        **{field: hub_status[f] for field, f in counters.items() if f in hub_status},
        "conditions": hub_status.get("conditions") or [],
    }
    return {
        "apiVersion": API_VERSION,
        "kind": kind.kind,
        "metadata": metadata_of(hub),
        "spec": spec,
        "status": status,
    }


def cells(obj: Obj, now: Any, strategy_error: str | None = None) -> list[Any]:
    """A row of `kubectl get deployments.mc.kmc.dev`, formatted as kubectl would print it."""
    spec, status = obj["spec"], obj["status"]
    if strategy_error is not None:
        shown = "<invalid>"
    else:
        shown = (spec.get("strategy") or {}).get("type", "<none>")
        if spec.get("strategySource") == "namespace":
            shown += " (namespace)"
    placement = status.get("placement") or {}
    where = ",".join(
        name if share is None else f"{name}={share}" for name, share in sorted(placement.items())
    )
    conditions = {c.get("type"): c for c in status.get("conditions") or []}
    placed = (conditions.get("kmc.dev/Placed") or {}).get("reason", "")
    if not where:  # held by placement gates, or not placed (yet)
        where = "<gated>" if placed == "Gated" else "<none>"
    return [
        obj["metadata"]["name"],
        shown,
        where,
        _ready(obj),
        age(obj["metadata"].get("creationTimestamp"), now),
        placed,
        (conditions.get("kmc.dev/Synced") or {}).get("reason", ""),
    ]


def _ready(obj: Obj) -> str:
    status, spec = obj["status"], obj["spec"]
    if obj["kind"] == "Job":
        return f"{status.get('succeeded', 0)}/{spec.get('replicas', 1)}"
    wanted = spec.get("replicas", status.get("replicas", 0))
    return f"{status.get('readyReplicas', 0)}/{wanted}"
