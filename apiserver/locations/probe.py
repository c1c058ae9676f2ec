"""Probe one child cluster: is it ready, what version, how big, what does it serve.

The answers become the Location's status, which the placement loop reads. All requests of a
probe run concurrently under one timeout, so a slow child costs one timeout, not five.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from fractions import Fraction

from apiserver.imports.negotiate import digest
from apiserver.kube.client import ApiError, Kube, Unreachable
from apiserver.kube.informer import Informer
from apiserver.locations.pending import Owner, Unschedulable
from apiserver.objects import Obj
from apiserver.quantity import format_quantity, parse_quantity

DISCOVERY_V2 = (
    "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json"
)
SUMMED = ("cpu", "memory", "pods")
RUNNING = "status.phase!=Succeeded,status.phase!=Failed"
# Taint effects that keep new pods off a node (PreferNoSchedule only discourages them).
KEEPS_OFF = ("NoSchedule", "NoExecute")
CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"


class Watched:
    """A child's nodes, running pods and CRDs, kept by watches: a probe reads them instead of
    listing everything every time, and a change wakes the prober at once. The pods also
    feed the index of unschedulable ones; `stuck` hears of each owner whose count changed.
    The CRDs are what API import negotiates with (`crds()`)."""

    def __init__(
        self,
        kube: Kube,
        wake: Callable[[], None],
        stuck: Callable[[Owner], None] = lambda _: None,
    ) -> None:
        self.kube = kube
        self.wake = wake
        self.stuck = stuck
        self.unschedulable = Unschedulable()
        self.nodes = Informer(kube, "/api/v1/nodes", self._changed)
        self.pods = Informer(
            kube, "/api/v1/pods", self._changed, {"fieldSelector": RUNNING}, slim=slim_pod
        )
        self.pods.subscribe(self._pod)
        self.crds = Informer(kube, CRDS, self._changed)
        self.digests: dict[tuple[str, str], str] = {}  # (uid, resourceVersion) -> digest
        self.requested = Requested()
        self.tasks = [asyncio.create_task(i.run()) for i in (self.nodes, self.pods, self.crds)]

    async def _changed(self, _: str, __: Obj, ___: Obj | None) -> None:
        self.wake()

    def room(self) -> Obj | None:
        """`room` of the watched nodes and pods, None until both have synced. The pods'
        requests are kept summed per node as they change (a child can run tens of thousands
        of pods): a probe adds up nodes, not pods."""
        if not (self.nodes.synced.is_set() and self.pods.synced.is_set()):
            return None
        return _room_of(list(self.nodes.cache.values()), self.requested.on)

    async def _pod(self, event: str, pod: Obj, old: Obj | None) -> None:
        self.requested.change(old, None if event == "DELETED" else pod)
        owner = self.unschedulable.update(event, pod)
        if owner is not None:
            self.stuck(owner)

    def stop(self) -> None:
        for task in self.tasks:
            task.cancel()


async def probe(kube: Kube, watched: Watched | None = None, timeout: float = 5.0) -> Obj:
    """The status fields a probe learns (camelCase, as stored); ApiError when it fails."""
    async with asyncio.timeout(timeout):
        _, version, kinds, space, crds = await asyncio.gather(
            _readyz(kube, timeout),
            kube.get("/version"),
            served_kinds(kube, timeout),
            _room(kube, watched),
            _crds(kube, watched.crds if watched else None),
        )
    return {
        "kubernetesVersion": version.get("gitVersion", ""),
        **space,
        "resources": kinds,
        "apiDigests": api_digests(crds, watched.digests if watched else None),
    }


async def _room(kube: Kube, watched: Watched | None) -> Obj:
    known = watched.room() if watched is not None else None
    if known is not None:
        return known
    nodes, pods = await asyncio.gather(
        _items(kube, "/api/v1/nodes", watched.nodes if watched else None),
        _items(kube, "/api/v1/pods", watched.pods if watched else None, RUNNING),
    )
    return room(nodes, pods)


def room(nodes: list[Obj], pods: list[Obj]) -> Obj:
    """The nodes and room status fields. `capacity` is what the Ready nodes have; `allocatable`
    and `requested` count only the nodes a new pod can go to (`schedulable`), so a child whose
    nodes are cordoned, tainted or not Ready has no room, however big they are. With no such
    node every resource is 0 — known to be nothing, not unknown."""
    requested = Requested()
    for pod in pods:
        requested.change(None, pod)
    return _room_of(nodes, requested.on)


def _room_of(nodes: list[Obj], on: dict[str, NodeRequests]) -> Obj:
    ready = [n for n in nodes if _node_ready(n)]
    open_ = [n for n in ready if schedulable(n)]
    names = {n.get("metadata", {}).get("name") for n in open_}
    return {
        "nodes": len(nodes),
        "readyNodes": len(ready),
        "schedulableNodes": len(open_),
        "capacity": _total(n.get("status", {}).get("capacity", {}) for n in ready),
        "allocatable": _total(n.get("status", {}).get("allocatable", {}) for n in open_),
        "requested": _requested([on[name] for name in names if name in on]),
    }


@dataclass
class NodeRequests:
    """What the scheduled pods on one node request: cpu and memory summed, and how many."""

    pods: int = 0
    sums: dict[str, Fraction] = field(default_factory=dict)
    like: dict[str, str] = field(default_factory=dict)  # a quantity as written, for its format


class Requested:
    """Running pods' requests summed per node, kept as pods come, change and go: a pod's old
    contribution is taken off, its new one added."""

    def __init__(self) -> None:
        self.on: dict[str, NodeRequests] = {}

    def change(self, old: Obj | None, new: Obj | None) -> None:
        if old is not None:
            self._add(old, -1)
        if new is not None:
            self._add(new, 1)

    def _add(self, pod: Obj, sign: int) -> None:
        node = (pod.get("spec") or {}).get("nodeName")
        if not node:
            return
        requests = [
            (name, text, parse_quantity(text))
            for container in pod["spec"].get("containers") or []
            for name, text in ((container.get("resources") or {}).get("requests") or {}).items()
            if name in ("cpu", "memory")
        ]  # parsed first: a quantity that does not parse changes nothing
        here = self.on.setdefault(node, NodeRequests())
        here.pods += sign
        for name, text, value in requests:
            here.sums[name] = here.sums.get(name, Fraction(0)) + sign * value
            here.like.setdefault(name, text)
        if here.pods <= 0:
            del self.on[node]


def schedulable(node: Obj) -> bool:
    """Would the scheduler put a new pod on this node: Ready, not cordoned
    (`spec.unschedulable`), and no taint that keeps pods off (NoSchedule, NoExecute). A
    workload that tolerates such a taint may find more room than this counts: room only ever
    holds a move back, so counting too little keeps replicas where they are, never sends them
    where they cannot run."""
    spec = node.get("spec", {})
    if spec.get("unschedulable"):
        return False
    if any(t.get("effect") in KEEPS_OFF for t in spec.get("taints") or []):
        return False
    return _node_ready(node)


async def _crds(kube: Kube, informer: Informer | None) -> list[Obj]:
    """The child's CRDs; none when it will not show them (a child's RBAC may forbid it: that
    costs the API import, never the location's readiness)."""
    try:
        return await _items(kube, CRDS, informer)
    except Unreachable:
        raise
    except ApiError:
        return []


def api_digests(crds: list[Obj], memo: dict[tuple[str, str], str] | None = None) -> dict[str, str]:
    """group/version/Kind -> digest of its CRD, for every served version of every CRD.
    `memo` keeps each CRD's digest by uid and resourceVersion from one probe to the next: a
    CRD can carry hundreds of kilobytes of schema (the Gateway API's do), and a probe runs
    every few seconds, so digesting them all each time was most of an idle server's CPU."""
    out, seen = {}, {}
    for crd in crds:
        spec, meta = crd.get("spec") or {}, crd.get("metadata") or {}
        key = (str(meta.get("uid") or ""), str(meta.get("resourceVersion") or ""))
        found = memo.get(key) if memo is not None and all(key) else None
        seen[key] = found = found or digest(crd)
        kind = (spec.get("names") or {}).get("kind")
        for version in spec.get("versions") or []:
            if version.get("served") and kind:
                out[f"{spec.get('group')}/{version['name']}/{kind}"] = found
    if memo is not None:
        memo.clear()
        memo.update(seen)
    return dict(sorted(out.items()))


async def _items(
    kube: Kube, path: str, informer: Informer | None, field_selector: str = ""
) -> list[Obj]:
    """From the watch's cache once it has synced (read only, never changed); else a list."""
    if informer is not None and informer.synced.is_set():
        return list(informer.cache.values())
    params = {"fieldSelector": field_selector} if field_selector else {}
    listing = await kube.get(path, **params)
    return list(listing.get("items", []))


async def _readyz(kube: Kube, timeout: float) -> None:
    """/readyz; a failure becomes reason NotReady naming the checks that failed."""
    try:
        await kube.request("GET", "/readyz", timeout=timeout)
    except Unreachable:
        raise
    except ApiError as err:
        raise ApiError.of(err.code, "NotReady", str(err)) from err


async def served_kinds(kube: Kube, timeout: float = 5.0) -> list[str]:
    """Every kind the child serves, as group/version/Kind (core kinds: v1/Kind), sorted."""
    core, groups = await asyncio.gather(
        kube.get_revalidated("/api", DISCOVERY_V2, timeout),
        kube.get_revalidated("/apis", DISCOVERY_V2, timeout),
    )
    if (
        core.get("kind") == "APIGroupDiscoveryList"
        and groups.get("kind") == "APIGroupDiscoveryList"
    ):
        return sorted(_kinds_v2(core) | _kinds_v2(groups))
    return sorted(await _kinds_v1(kube, timeout))


def _kinds_v2(listing: Obj) -> set[str]:
    kinds = set()
    for group in listing.get("items", []):
        name = group.get("metadata", {}).get("name", "")
        for version in group.get("versions", []):
            prefix = f"{name}/{version['version']}" if name else version["version"]
            for resource in version.get("resources", []):
                kind = (resource.get("responseKind") or {}).get("kind")
                if kind:
                    kinds.add(f"{prefix}/{kind}")
    return kinds


async def _kinds_v1(kube: Kube, timeout: float) -> set[str]:
    """Discovery the old way (servers before aggregated discovery): one request per version."""
    groups = await kube.get("/apis")
    paths = ["/api/v1"] + [
        f"/apis/{v['groupVersion']}" for g in groups.get("groups", []) for v in g["versions"]
    ]
    lists = await asyncio.gather(*(kube.request("GET", p, timeout=timeout) for p in paths))
    kinds = set()
    for listing in lists:
        for resource in listing.get("resources", []):
            if "/" not in resource["name"]:
                kinds.add(f"{listing['groupVersion']}/{resource['kind']}")
    return kinds


def slim_pod(pod: Obj) -> Obj:
    """What probes and the unschedulable index read of a pod; a child can hold thousands."""
    meta, spec, status = pod.get("metadata", {}), pod.get("spec", {}), pod.get("status", {})
    return {
        "metadata": {
            k: meta[k]
            for k in ("name", "namespace", "uid", "resourceVersion", "labels", "ownerReferences")
            if k in meta
        },
        "spec": {
            "nodeName": spec.get("nodeName", ""),
            "containers": [
                {"resources": {"requests": (c.get("resources") or {}).get("requests") or {}}}
                for c in spec.get("containers") or []
            ],
        },
        "status": {
            "phase": status.get("phase", ""),
            "conditions": [
                c for c in status.get("conditions") or [] if c.get("type") == "PodScheduled"
            ],
        },
    }


def _node_ready(node: Obj) -> bool:
    conditions = node.get("status", {}).get("conditions", [])
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def _sum(lists: Iterable[dict[str, str]]) -> dict[str, str]:
    totals: dict[str, Fraction] = {}
    like: dict[str, str] = {}
    for resources in lists:
        for name in SUMMED:
            if name in resources:
                totals[name] = totals.get(name, Fraction(0)) + parse_quantity(resources[name])
                like.setdefault(name, resources[name])
    return {name: format_quantity(totals[name], like[name]) for name in sorted(totals)}


def _total(lists: Iterable[dict[str, str]]) -> dict[str, str]:
    """cpu, memory and pods summed, each said even when 0: the status is merged into, and a
    resource left out would keep its last value."""
    return {**dict.fromkeys(SUMMED, "0"), **_sum(lists)}


def _requested(nodes: list[NodeRequests]) -> dict[str, str]:
    """cpu/memory requested by the scheduled pods on `nodes`, and how many pods are there,
    each said even when 0 (`_total`)."""
    totals: dict[str, Fraction] = {}
    like: dict[str, str] = {}
    for node in nodes:
        for name, value in node.sums.items():
            totals[name] = totals.get(name, Fraction(0)) + value
            like.setdefault(name, node.like[name])
    summed = dict.fromkeys(SUMMED, "0")
    summed.update({name: format_quantity(totals[name], like[name]) for name in sorted(totals)})
    summed["pods"] = str(sum(node.pods for node in nodes))
    return summed
