"""Pods, and the kinds the hub does not place (yet), read in the children through
`remote.kmc.dev`; and `REMOTE`, every kind punch-through serves (the entries with a
`remote`, whichever family).

A bare Pod on the hub (`kubectl run`, a chart's test hook: no controller owns it) is placed
whole in one location, `Single` by default, and its status is the child's, so `kubectl get
pod`, `kubectl wait --for=condition=Ready` and a wait on its phase work on the hub. A Pod's
spec cannot change where it runs: a move makes it anew in the new location. Pods a
controller owns are the hub's own business, never placed.

A Service goes wherever the workloads its selector matches run (wherever its namespace's
workloads run when it has no selector, as an ExternalName Service): each cluster allocates its
own addresses and node ports, a headless one stays headless, and a LoadBalancer's hub status
lists every location's ingress points. Each child's own EndpointSlices of it are mirrored on
the hub (`loops/endpoints.py`).
"""

from __future__ import annotations

from apiserver.contract import PLACED_ELSEWHERE, Placement
from apiserver.kinds import config, job, workloads
from apiserver.kinds.kind import Kind, Remote, Role, Selects
from apiserver.objects import Obj, ReadOnly
from apiserver.sync.status import Children, Rules, status_of


def _not_the_apiserver(service: ReadOnly) -> bool:
    """`default/kubernetes` is every cluster's own way to its API server: never sent."""
    meta = service.get("metadata") or {}
    return (meta.get("namespace"), meta.get("name")) != ("default", "kubernetes")


def _service_selector(service: ReadOnly) -> Selects | None:
    wanted = (service.get("spec") or {}).get("selector") or {}
    if not wanted:
        return None
    return lambda labels: all(labels.get(key) == value for key, value in wanted.items())


def load_balancer_fields(status: Obj, hub: ReadOnly, seen: Children, previous: ReadOnly) -> None:
    """A LoadBalancer's ingress points: every location's, once each, in location order."""
    points: list[Obj] = []
    for child in seen.present.values():
        for point in (status_of(child).get("loadBalancer") or {}).get("ingress") or []:
            if point not in points:
                points.append(point)
    status["loadBalancer"] = {"ingress": points} if points else {}


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


# Where the hub's ServiceAccount admission mounts the account's token: the child's mounts its own.
_ACCOUNT_MOUNT = "/var/run/secrets/kubernetes.io/serviceaccount"
# Status fields the hub Pod shows as its child has them (counters and conditions: the fold).
_POD_STATUS = (
    "phase",
    "message",
    "reason",
    "startTime",
    "podIP",
    "podIPs",
    "qosClass",
    "initContainerStatuses",
    "containerStatuses",
    "ephemeralContainerStatuses",
)


def bare(pod: ReadOnly) -> bool:
    """No controller owns it: a Pod someone made by hand (controllers' Pods stay theirs)."""
    owners = (pod.get("metadata") or {}).get("ownerReferences") or []
    return not any(isinstance(o, dict) and o.get("controller") for o in owners)


def _pod_share(child: Obj, location: str, placement: Placement) -> None:
    """What the hub's own admission added for the hub, the child's adds for itself: the
    account token's volume, the priority computed from the class; our scheduling gate and a
    node name (the hub's scheduler never binds one) are the hub's business too."""
    spec = child.get("spec")
    if not isinstance(spec, dict):
        return
    spec.pop("nodeName", None)
    spec.pop("priority", None)
    gates = [g for g in spec.get("schedulingGates") or [] if g.get("name") != PLACED_ELSEWHERE]
    if gates:
        spec["schedulingGates"] = gates
    else:
        spec.pop("schedulingGates", None)
    tokens = {
        v.get("name")
        for v in spec.get("volumes") or []
        if str(v.get("name", "")).startswith("kube-api-access-") and "projected" in v
    }
    if not tokens:
        return
    spec["volumes"] = [v for v in spec["volumes"] if v.get("name") not in tokens]
    if not spec["volumes"]:
        del spec["volumes"]
    for container in (
        *(spec.get("initContainers") or []),
        *(spec.get("containers") or []),
        *(spec.get("ephemeralContainers") or []),
    ):
        mounts = [
            m
            for m in container.get("volumeMounts") or []
            if m.get("name") not in tokens or m.get("mountPath") != _ACCOUNT_MOUNT
        ]
        if mounts:
            container["volumeMounts"] = mounts
        else:
            container.pop("volumeMounts", None)


def _pod_fields(status: Obj, hub: ReadOnly, seen: Children, previous: ReadOnly) -> None:
    """The placed child's status, as it has it (a Pod is whole in one location)."""
    placed = next((seen.present[loc] for loc in seen.placed if loc in seen.present), None)
    if placed is None:
        return
    mine = status_of(placed)
    status.update({field: mine[field] for field in _POD_STATUS if field in mine})


POD = Kind(
    "Pod",
    "Pod",
    "v1",
    "pods",
    role=Role.WORKLOAD,
    pod_spec_path=("spec",),
    default_type="Single",
    syncable=bare,
    share=_pod_share,
    # A Pod's observedGeneration is its kubelet's, and not every kubelet writes one.
    fold_rules=Rules(fields=_pod_fields, observes_generation=False),
    # log, exec, attach and portforward: served by the child that holds the pod (streams).
    remote=Remote("pod", "pods", "core v1", ("log", "exec", "attach", "portforward")),
    moved_note=" (a Pod cannot change where it runs: it is made anew where it goes)",
)
SERVICE = Kind(
    "Service",
    "Service",
    "v1",
    "services",
    role=Role.SELECTOR_FOLLOWER,
    syncable=_not_the_apiserver,
    share=service_share,
    selector=_service_selector,
    fold_rules=Rules(fields=load_balancer_fields, observes_generation=False),
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
