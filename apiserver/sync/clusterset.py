"""What an exported Service puts in each location (the Multi-Cluster Services API, KEP-1645).

A `ServiceExport` beside a hub Service makes every location the Service is placed in hold a
`ServiceImport` of the same name (`ClusterSetIP`, or `Headless` for a headless Service; the
Service's ports) and one EndpointSlice per hub-mirrored slice of every *other* location,
holding its ready endpoints and labelled `multicluster.kubernetes.io/service-name`,
`multicluster.kubernetes.io/source-cluster` and `endpointslice.kubernetes.io/managed-by:
kmc.dev` — what an MCS-aware DNS (CoreDNS's multicluster plugin) reads to answer
`<svc>.<ns>.svc.clusterset.local`. They carry no `kubernetes.io/service-name`: the location's
own Service must not take the other locations' endpoints as its own.

Pure: the loop (`loops/exports.py`) reads the hub and the children and writes what differs.
Each derived slice stands for one hub slice (same name), so a change in one location's
endpoints rewrites only the slices derived from it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import NamedTuple

from apiserver.contract import (
    MANAGED_BY,
    MCS_SERVICE_NAME,
    SERVICE_NAME,
    SLICE_MANAGER,
    SOURCE_CLUSTER,
)
from apiserver.objects import Obj, ReadOnly

GROUP_VERSION = "multicluster.x-k8s.io/v1alpha1"
# On the ServiceImports we write, so a location's watch sees exactly ours.
IMPORT_MANAGED_BY = "app.kubernetes.io/managed-by"


class Want(NamedTuple):
    """What one location should hold for one exported Service."""

    service_import: Obj
    slices: dict[str, Obj]  # by name; no owner yet (the location's ServiceImport, see `owned`)


def service_import(service: ReadOnly) -> Obj:
    """The ServiceImport of a Service: its type and ports, named and labelled as we own it."""
    meta, spec = service["metadata"], service.get("spec") or {}
    ports = []
    for port in spec.get("ports") or []:
        kept = {k: port[k] for k in ("name", "protocol", "appProtocol", "port") if k in port}
        ports.append(kept)
    body: Obj = {
        "type": "Headless" if spec.get("clusterIP") == "None" else "ClusterSetIP",
        "ports": ports,
    }
    if spec.get("sessionAffinity"):
        body["sessionAffinity"] = spec["sessionAffinity"]
    if spec.get("sessionAffinityConfig"):
        body["sessionAffinityConfig"] = spec["sessionAffinityConfig"]
    return {
        "apiVersion": GROUP_VERSION,
        "kind": "ServiceImport",
        "metadata": {
            "name": meta["name"],
            "namespace": meta["namespace"],
            "labels": {IMPORT_MANAGED_BY: SLICE_MANAGER},
        },
        "spec": body,
    }


def derived_slice(mirror: ReadOnly, service: str) -> Obj:
    """One location's slice as another location gets it: its ready endpoints only (a
    condition left unset counts as ready, as the API says)."""
    labels = mirror["metadata"].get("labels") or {}
    endpoints = [
        dict(e)
        for e in mirror.get("endpoints") or []
        if (e.get("conditions") or {}).get("ready") is not False
    ]
    slice_: Obj = {
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": {
            "name": mirror["metadata"]["name"],
            "namespace": mirror["metadata"]["namespace"],
            "labels": {
                MCS_SERVICE_NAME: service,
                MANAGED_BY: SLICE_MANAGER,
                SOURCE_CLUSTER: labels.get(SOURCE_CLUSTER, ""),
            },
        },
        "addressType": mirror.get("addressType", "IPv4"),
        "endpoints": endpoints,
    }
    if mirror.get("ports") is not None:
        slice_["ports"] = mirror["ports"]
    return slice_


def placed_in(placement: Mapping[str, int | None]) -> set[str]:
    """The locations a Service is in: any share but 0."""
    return {location for location, share in placement.items() if share is None or share}


def wanted(
    service: ReadOnly | None, placement: Mapping[str, int | None], mirrors: Iterable[ReadOnly]
) -> dict[str, Want]:
    """Per location the Service is placed in, what it should hold; nothing anywhere without
    a Service (or for an ExternalName one, which has no endpoints to share). `mirrors` are
    the hub's slices of the Service (one per child slice, labelled with its location)."""
    if service is None or (service.get("spec") or {}).get("type") == "ExternalName":
        return {}
    name = service["metadata"]["name"]
    mine = [
        m
        for m in mirrors
        if m["metadata"]["namespace"] == service["metadata"]["namespace"]
        and (m["metadata"].get("labels") or {}).get(SERVICE_NAME) == name
        and (m["metadata"].get("labels") or {}).get(SOURCE_CLUSTER)
    ]
    imported = service_import(service)
    out = {}
    for location in sorted(placed_in(placement)):
        slices = {
            m["metadata"]["name"]: derived_slice(m, name)
            for m in mine
            if m["metadata"]["labels"][SOURCE_CLUSTER] != location
        }
        out[location] = Want(imported, slices)
    return out


def owned(slice_: Obj, owner: ReadOnly) -> Obj:
    """The slice owned by the location's ServiceImport, so it goes with it (whoever deletes
    the import: us, or someone cleaning up after kubectl-mc)."""
    meta = owner["metadata"]
    reference = {
        "apiVersion": GROUP_VERSION,
        "kind": "ServiceImport",
        "name": meta["name"],
        "uid": meta["uid"],
    }
    return {**slice_, "metadata": {**slice_["metadata"], "ownerReferences": [reference]}}


def import_content(obj: ReadOnly) -> tuple[object, ...]:
    """What a ServiceImport says that we write: equal content, no write."""
    return ((obj["metadata"].get("labels") or {}).get(IMPORT_MANAGED_BY), obj.get("spec"))


def slice_content(obj: ReadOnly) -> tuple[object, ...]:
    """What a derived slice says: equal content, no write."""
    meta = obj["metadata"]
    return (
        meta.get("labels") or {},
        [o.get("uid") for o in meta.get("ownerReferences") or []],
        obj.get("addressType"),
        obj.get("endpoints") or [],
        obj.get("ports") or [],
    )


class Verdict(NamedTuple):
    """A ServiceExport's conditions: (status, reason, message) of Valid and of Ready."""

    valid: tuple[str, str, str]
    ready: tuple[str, str, str]


def verdict(
    namespace: str,
    name: str,
    service: ReadOnly | None,
    placement: Mapping[str, int | None],
    failed: Mapping[str, str],
) -> Verdict:
    """What the export's status says: whether there is a Service to export, and whether every
    location it is placed in holds its import (`failed`: location → why not)."""
    if service is None:
        why = f"Service {namespace}/{name} does not exist; nothing is exported"
        return Verdict(("False", "ServiceNotFound", why), ("False", "ServiceNotFound", why))
    if (service.get("spec") or {}).get("type") == "ExternalName":
        why = "an ExternalName Service has no endpoints to export"
        return Verdict(("False", "ExternalName", why), ("False", "ExternalName", why))
    valid = ("True", "ServiceFound", f"Service {namespace}/{name} is exported")
    where = sorted(placed_in(placement))
    if not where:
        why = f"Service {namespace}/{name} is in no location yet (no workload it selects runs)"
        return Verdict(valid, ("False", "NotPlaced", why))
    if failed:
        why = "; ".join(f"{loc}: {err}" for loc, err in sorted(failed.items()))
        return Verdict(valid, ("False", "ImportFailed", why))
    return Verdict(valid, ("True", "Imported", f"imported in {', '.join(where)}"))


def conditions(
    verdict_: Verdict, current: Iterable[ReadOnly], now: str, generation: int | None
) -> list[Obj] | None:
    """The conditions to write, or None when the export already says this (a transition
    time moves only when a status does)."""
    have = {c.get("type"): c for c in current}
    out, changed = [], False
    for type_, (status, reason, message) in (("Valid", verdict_.valid), ("Ready", verdict_.ready)):
        old = have.get(type_) or {}
        same_status = old.get("status") == status
        cond: Obj = {
            "type": type_,
            "status": status,
            "reason": reason,
            "message": message,
            "lastTransitionTime": old.get("lastTransitionTime", now) if same_status else now,
        }
        if generation is not None:
            cond["observedGeneration"] = generation
        changed |= any(old.get(k) != cond[k] for k in cond)
        out.append(cond)
    return out if changed else None
