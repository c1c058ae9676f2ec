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

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictInt, StrictStr

from apiserver.contract import API_APPROVED, HUB_GENERATION, MC_GROUP, ORIGIN, VERSION
from apiserver.objects import Obj

API_VERSION = f"{MC_GROUP}/{VERSION}"
KIND = "LocationReport"
CRDS_KIND = "LocationCRDs"
CRD_API_VERSION = "apiextensions.k8s.io/v1"


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


# -- the CRDs a pull location serves (`PUT …/locations/<name>/crds`) -------------------------


class _Open(BaseModel):
    """A part of a CRD whose other fields the hub keeps as they are (the schema, printer
    columns…): only what the import loop reads without checking is checked here."""

    model_config = ConfigDict(extra="allow")


class CRDNames(_Open):
    kind: StrictStr = Field(min_length=1)
    plural: StrictStr = Field(min_length=1)


class CRDVersion(_Open):
    name: StrictStr = Field(min_length=1)
    served: StrictBool
    storage: StrictBool
    schema_: dict[str, Any] | None = Field(default=None, alias="schema")


class CRDSpec(_Open):
    group: StrictStr = Field(min_length=1)
    names: CRDNames
    scope: Literal["Namespaced", "Cluster"]
    versions: list[CRDVersion] = Field(min_length=1)


class CRDMeta(_Strict):
    name: StrictStr = Field(min_length=1)
    uid: StrictStr = Field(min_length=1)
    resourceVersion: StrictStr = Field(min_length=1)
    generation: StrictInt | None = None
    annotations: dict[StrictStr, StrictStr] = {}


class CRD(_Strict):
    apiVersion: Literal["apiextensions.k8s.io/v1"]
    kind: Literal["CustomResourceDefinition"]
    metadata: CRDMeta
    spec: CRDSpec


class LocationCRDs(_Strict):
    """Some of the CRDs a pull location serves: those the hub said it lacks."""

    apiVersion: Literal["mc.kmc.dev/v1alpha1"]
    kind: Literal["LocationCRDs"]
    items: list[CRD] = []


def slim_crd(crd: Obj) -> Obj:
    """What the agent sends of one of its cluster's CRDs: what API import reads (its spec)
    and what the import loop knows it by (uid, resourceVersion), and its API review approval
    (the hub CRD of a `*.k8s.io` group needs it). Not its status, managed fields or other
    annotations (a `kubectl apply`'d CRD carries its whole self again in one)."""
    meta = crd.get("metadata") or {}
    slim_meta = {k: meta[k] for k in ("name", "uid", "resourceVersion", "generation") if k in meta}
    approval = (meta.get("annotations") or {}).get(API_APPROVED)
    if approval:
        slim_meta["annotations"] = {API_APPROVED: approval}
    return {
        "apiVersion": CRD_API_VERSION,
        "kind": "CustomResourceDefinition",
        "metadata": slim_meta,
        "spec": crd.get("spec") or {},
    }


def crds_body(crds: list[Obj]) -> Obj:
    return {"apiVersion": API_VERSION, "kind": CRDS_KIND, "items": crds}
