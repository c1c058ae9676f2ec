"""A pull location's status report (`PUT …/locations/<name>/report`), ours, so typed.

What its agent sees of our objects in its cluster, whole each time: per child the slim copy
the push loop's `ChildWatch` keeps (identity, generation, the labels and annotations that say
whose it is and which hub generation it was made from, the spec without its pod template,
the status), the namespaces it made, and its probe of its cluster (nodes, room, served kinds,
CRD digests). kmc-apiserver keeps the last one per location in memory
(`locations/reports.py`). See docs/pull.md.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictInt, StrictStr

from apiserver.contract import HUB_GENERATION, MC_GROUP, ORIGIN, VERSION
from apiserver.objects import Obj

API_VERSION = f"{MC_GROUP}/{VERSION}"
KIND = "LocationReport"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ChildMeta(_Strict):
    name: StrictStr = Field(min_length=1)
    namespace: StrictStr = ""
    generation: StrictInt | None = None
    resourceVersion: StrictStr | None = None
    labels: dict[StrictStr, StrictStr] = {}
    annotations: dict[StrictStr, StrictStr] = {}


class Child(_Strict):
    apiVersion: StrictStr = Field(min_length=1)
    kind: StrictStr = Field(min_length=1)
    metadata: ChildMeta
    spec: dict[str, Any] | None = None
    status: dict[str, Any] | None = None


class Probe(_Strict):
    """What its agent's probe learned (`locations/probe.probe`), as a Location's status says
    it: the hub writes these fields there, as it writes a pushed location's probe."""

    kubernetesVersion: StrictStr = ""
    nodes: StrictInt = 0
    readyNodes: StrictInt = 0
    schedulableNodes: StrictInt = 0
    capacity: dict[StrictStr, StrictStr] = {}
    allocatable: dict[StrictStr, StrictStr] = {}
    requested: dict[StrictStr, StrictStr] = {}
    resources: list[StrictStr] = []
    apiDigests: dict[StrictStr, StrictStr] = {}


class LocationReport(_Strict):
    apiVersion: Literal["mc.kmc.dev/v1alpha1"]
    kind: Literal["LocationReport"]
    children: list[Child] = []
    namespaces: list[StrictStr] = []  # the namespaces its agent made there (origin label)
    probe: Probe | None = None  # none until its agent's first probe answered


def slim_child(api_version: str, kind: str, obj: Obj) -> Obj:
    """What a report says of one child (`obj`, as `ChildWatch` keeps it): only what the
    hub's fold, rows and handover read, and whose it is."""
    meta = obj.get("metadata") or {}
    labels = meta.get("labels") or {}
    annotations = meta.get("annotations") or {}
    slim_meta: Obj = {"name": meta["name"]}
    if meta.get("namespace"):
        slim_meta["namespace"] = meta["namespace"]
    for field in ("generation", "resourceVersion"):
        if meta.get(field) is not None:
            slim_meta[field] = meta[field]
    if ORIGIN in labels:
        slim_meta["labels"] = {ORIGIN: labels[ORIGIN]}
    if HUB_GENERATION in annotations:
        slim_meta["annotations"] = {HUB_GENERATION: annotations[HUB_GENERATION]}
    child: Obj = {"apiVersion": api_version, "kind": kind, "metadata": slim_meta}
    spec = {k: v for k, v in (obj.get("spec") or {}).items() if k != "template"}
    if spec:
        child["spec"] = spec
    if obj.get("status"):
        child["status"] = obj["status"]
    return child


def body(children: list[Obj], namespaces: list[str]) -> Obj:
    return {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "children": children,
        "namespaces": sorted(namespaces),
    }
