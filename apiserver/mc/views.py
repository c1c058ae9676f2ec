"""`mc.kmc.dev` objects: a placement view of one hub workload, and how a row of it prints.

The view is computed, never stored: the hub object (spec, placement annotation, folded status)
plus the strategy in force and the sync loop's rows per location. Its metadata is the hub
object's, resourceVersion included, so a watch on the view is a watch on the hub object.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from apiserver.api.table import Column, age
from apiserver.contract import MC_GROUP, PLACED, SYNCED, VERSION, read_placement
from apiserver.kinds import Kind
from apiserver.objects import Obj
from apiserver.placement.strategy import Strategy
from apiserver.subresources.meta import metadata_of
from apiserver.sync.report import LocationState

GROUP = MC_GROUP
API_VERSION = f"{GROUP}/{VERSION}"

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


def view(
    kind: Kind,
    hub: Obj,
    strategy: Strategy | None,
    source: str,
    locations: Sequence[LocationState],
) -> Obj:
    """The `mc.kmc.dev` object for one hub workload (a kind with a `view`)."""
    assert kind.view is not None
    hub_status = hub.get("status") or {}
    spec: Obj = {}
    if kind.view.replicas_doc is not None:
        spec["replicas"] = kind.size(hub).total
    if strategy is not None:
        spec["strategy"] = strategy.model_dump(by_alias=True, exclude_defaults=True, mode="json")
        spec["strategySource"] = source
    counters = kind.view.counters
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


def cells(kind: Kind, obj: Obj, now: Any, strategy_error: str | None = None) -> list[Any]:
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
    placed = (conditions.get(PLACED) or {}).get("reason", "")
    if not where:  # held by placement gates, or not placed (yet)
        where = "<gated>" if placed == "Gated" else "<none>"
    return [
        obj["metadata"]["name"],
        shown,
        where,
        _ready(kind, obj),
        age(obj["metadata"].get("creationTimestamp"), now),
        placed,
        (conditions.get(SYNCED) or {}).get("reason", ""),
    ]


def _ready(kind: Kind, obj: Obj) -> str:
    """Ready (succeeded, for a Job) over what is asked for."""
    assert kind.view is not None
    status, spec = obj["status"], obj["spec"]
    wanted = spec.get("replicas", status.get("replicas", 0))
    return f"{status.get(kind.view.ready, 0)}/{wanted}"
