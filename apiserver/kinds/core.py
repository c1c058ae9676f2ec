"""Kinds the hub does not place (yet), read in the children through `remote.kmc.dev`; and
`REMOTE`, every kind punch-through serves (the entries with a `remote`, whichever family).

A Service's share is here already, for the day Services follow their workloads: each cluster
allocates its own addresses and node ports.
"""

from __future__ import annotations

from apiserver.contract import Placement
from apiserver.kinds import config, job, workloads
from apiserver.kinds.kind import Kind, Remote
from apiserver.objects import Obj


def service_share(child: Obj, location: str, placement: Placement) -> None:
    """Addresses and node ports are allocated by each cluster from its own ranges."""
    spec = child.get("spec")
    if not isinstance(spec, dict):
        return
    if spec.get("clusterIP") != "None":  # headless stays headless
        spec.pop("clusterIP", None)
        spec.pop("clusterIPs", None)
    spec.pop("healthCheckNodePort", None)
    for port in spec.get("ports") or []:
        if isinstance(port, dict):
            port.pop("nodePort", None)


POD = Kind(
    "Pod",
    "Pod",
    "v1",
    "pods",
    pod_spec_path=("spec",),
    remote=Remote("pod", "pods", "core v1"),
)
SERVICE = Kind(
    "Service",
    "Service",
    "v1",
    "services",
    share=service_share,
    remote=Remote("service", "services", "core v1"),
)
ENDPOINTSLICE = Kind(
    "EndpointSlice",
    "EndpointSlice",
    "discovery.k8s.io/v1",
    "endpointslices",
    remote=Remote("endpointslice", "endpointslices.discovery.k8s.io", "discovery.k8s.io/v1"),
)
EVENT = Kind("Event", "Event", "v1", "events", remote=Remote("event", "events", "core v1"))

ENTRIES = (POD, SERVICE, ENDPOINTSLICE, EVENT)

# remote.kmc.dev's resources, by plural (namespace followers are never punched through).
REMOTE: dict[str, Kind] = {
    k.plural: k
    for k in (*workloads.ENTRIES, *job.ENTRIES, *config.ENTRIES, *ENTRIES)
    if k.remote is not None
}
