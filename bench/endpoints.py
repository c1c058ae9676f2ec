"""The children's endpoints on the hub (issue 31), on the running test bed with kubectl-mc
installed: how soon a ready endpoint shows ready on the hub, and what mirroring costs the hub.

- fold latency: D hub Deployments of 3 (1/1/1 over the three children), each with a Service,
  are converged first; then each is scaled up by 3 on the hub, one at a time, and for every
  new pod three moments are taken from watches opened before the first scale, on this
  process's one monotonic clock, when the event arrives: its pod turns Ready (a watch of the
  child's pods), its address is ready in the child's EndpointSlice (a watch of the child's
  slices) and in the hub's mirrored slice (a watch of the hub's slices managed by kmc.dev).
  The floor is the child's own EndpointSlice controller, measured on the same pods:
  pod Ready → child slice ready. Ours is child slice ready → hub slice ready. Both watches
  of a child come from the same apiserver; one can deliver before the other, so a sample
  can be slightly negative, and is kept as measured.
- hub writes: N Deployments of 3 with a headless Service each (the bed's service range has
  room for 254 cluster IPs, not 1,000; a headless Service's slices are made and mirrored the
  same way), created on the hub and waited for until every Deployment is available and
  every Service has 3 ready endpoints on the hub, then 10 s more. The hub's own
  `apiserver_request_total` for endpointslices writes (every writer, every answer: what the
  hub paid) against the children's successful endpointslices writes in the same window
  (each a change of a child slice, which is what the endpoints loop mirrors). The hub runs
  its own EndpointSlice controller, which writes one empty slice per hub Service (the hub
  has no pods); those are counted apart (the generations of the hub's slices not managed by
  kmc.dev) and left out of the goal's figure.

    PYTHONPATH=hack .venv/bin/python -m bench.endpoints [COUNT] [--deployments D] [--steps S]
"""

from __future__ import annotations

import argparse
import asyncio
import math
import statistics
import sys
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import aiohttp

from apiserver.contract import MANAGED_BY, SERVICE_NAME, SLICE_MANAGER, SOURCE_CLUSTER
from apiserver.kube import config as kubeconfig
from apiserver.kube.client import Kube
from apiserver.objects import Obj
from bench import hubwrites, namespaces
from bench.converge import CONCURRENCY, REQUESTS, SETTLED_WINDOW
from bench.objects import deployment, kwok_nodes
from bench.report import row
from kmc_testbed import config as bedconfig

CHILDREN = ("us-east", "us-west", "eu-west")
OURS = f"{MANAGED_BY}={SLICE_MANAGER}"
SLICES = "discovery.k8s.io/endpointslices"
EXTRA_NODES = 7  # as bench.converge: room for 1,000 pods in each child
STEP_LIMIT = 60.0  # seconds one scale-up may take before its pods are given up on

Where = tuple[str, str]  # (location, address)


# -- pure helpers ---------------------------------------------------------------------------


def percentile(values: Iterable[float], q: float) -> float:
    """The nearest-rank percentile: the smallest value at least `q` of the values reach."""
    ordered = sorted(values)
    if not ordered:
        raise ValueError("no values")
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)]


def ready_addresses(endpoint_slice: Obj) -> set[str]:
    """The addresses an EndpointSlice says are ready."""
    return {
        address
        for endpoint in endpoint_slice.get("endpoints") or []
        if (endpoint.get("conditions") or {}).get("ready") is True
        for address in endpoint.get("addresses") or []
    }


def pod_ready_address(pod: Obj) -> str | None:
    """A pod's IP once it is Ready, else None."""
    status = pod.get("status") or {}
    ready = any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in status.get("conditions") or []
    )
    address = status.get("podIP")
    return address if ready and isinstance(address, str) and address else None


def slice_writes(counts: Mapping[hubwrites.Key, float]) -> dict[str, float]:
    """The endpointslices writes among a scrape's (or a difference's) counts, by verb."""
    by_verb: dict[str, float] = {}
    for (what, verb), count in counts.items():
        if what == SLICES and count:
            by_verb[verb] = by_verb.get(verb, 0.0) + count
    return by_verb


def difference(
    before: Mapping[hubwrites.Key, float], after: Mapping[hubwrites.Key, float]
) -> dict[hubwrites.Key, float]:
    return hubwrites.HubWrites(dict(before), dict(after)).by_kind()


@dataclass
class FirstSeen:
    """When each (location, address) was first seen ready by one watch. What was ready when
    the watch listed is remembered apart: it turned ready before we looked."""

    at: dict[Where, float] = field(default_factory=dict)
    before: set[Where] = field(default_factory=set)

    def see(self, where: Iterable[Where], now: float, listed: bool = False) -> None:
        for key in where:
            if listed:
                self.before.add(key)
            elif key not in self.before:
                self.at.setdefault(key, now)


# -- watching -------------------------------------------------------------------------------


async def _client(session: aiohttp.ClientSession, context: str) -> Kube:
    creds = await kubeconfig.from_file(bedconfig.user_kubeconfig_path(), context)
    return Kube(session, creds, context)


async def follow(
    kube: Kube,
    path: str,
    on: Callable[[Obj, float, bool], None],
    listed: asyncio.Event,
    **params: str,
) -> None:
    """List, then watch from there, calling `on(obj, now, listed)` with the clock read as
    each event arrives; a watch that ends is opened again where it left off."""
    listing = await kube.get(path, **params)
    now = time.monotonic()
    for obj in listing.get("items") or []:
        on(obj, now, True)
    listed.set()
    version = listing["metadata"]["resourceVersion"]
    while True:
        async for event in kube.watch(path, version, params=params):
            now = time.monotonic()
            obj = event["object"]
            version = obj["metadata"].get("resourceVersion") or version
            if event["type"] in ("ADDED", "MODIFIED"):
                on(obj, now, False)


@dataclass
class Watches:
    """The three moments of every new endpoint in one namespace, and which Service's pod it is."""

    pod_ready: FirstSeen = field(default_factory=FirstSeen)
    child_ready: FirstSeen = field(default_factory=FirstSeen)
    hub_ready: FirstSeen = field(default_factory=FirstSeen)
    app_of: dict[Where, str] = field(default_factory=dict)

    def on_pod(self, location: str) -> Callable[[Obj, float, bool], None]:
        def on(pod: Obj, now: float, listed: bool) -> None:
            address = pod_ready_address(pod)
            if address is None:
                return
            key = (location, address)
            self.app_of.setdefault(key, (pod["metadata"].get("labels") or {}).get("app", ""))
            self.pod_ready.see([key], now, listed)

        return on

    def on_child_slice(self, location: str) -> Callable[[Obj, float, bool], None]:
        def on(obj: Obj, now: float, listed: bool) -> None:
            self.child_ready.see(((location, a) for a in ready_addresses(obj)), now, listed)

        return on

    def on_hub_slice(self, obj: Obj, now: float, listed: bool) -> None:
        location = (obj["metadata"].get("labels") or {}).get(SOURCE_CLUSTER)
        if location:
            self.hub_ready.see(((location, a) for a in ready_addresses(obj)), now, listed)

    def new_of(self, app: str) -> list[Where]:
        return [k for k in self.pod_ready.at if self.app_of.get(k) == app]

    def complete(self, key: Where) -> bool:
        return key in self.child_ready.at and key in self.hub_ready.at


# -- setting up and tearing down -------------------------------------------------------------


def service(name: str, headless: bool = False) -> Obj:
    spec: Obj = {"selector": {"app": name}, "ports": [{"port": 80, "targetPort": 8080}]}
    if headless:
        spec["clusterIP"] = "None"
    return {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name}, "spec": spec}


async def _create_all(
    hub: Kube, namespace: str, count: int, replicas: int, headless: bool = False
) -> None:
    """`count` Deployments with a Service each, `CONCURRENCY` pairs at once."""
    await hub.create("/api/v1/namespaces", {"metadata": {"name": namespace}})
    gate = asyncio.Semaphore(CONCURRENCY)

    async def create(i: int) -> None:
        async with gate:
            name = f"d{i}"
            await hub.create(
                f"/apis/apps/v1/namespaces/{namespace}/deployments",
                deployment(name, replicas, REQUESTS),
            )
            await hub.create(f"/api/v1/namespaces/{namespace}/services", service(name, headless))

    await asyncio.gather(*(create(i) for i in range(count)))


def ready_on_hub(slices: list[Obj]) -> dict[str, int]:
    """Ready addresses per Service among the hub's mirrored slices."""
    counts: dict[str, int] = {}
    for obj in slices:
        name = (obj["metadata"].get("labels") or {}).get(SERVICE_NAME, "")
        counts[name] = counts.get(name, 0) + len(ready_addresses(obj))
    return counts


async def _converged(hub: Kube, namespace: str, count: int, replicas: int, limit: float) -> None:
    """Until every Deployment is available and every Service has `replicas` ready endpoints
    on the hub (lists every 3 s: listing 1,000 objects is not free)."""
    started = time.monotonic()
    deployments = f"/apis/apps/v1/namespaces/{namespace}/deployments"
    slices = f"/apis/discovery.k8s.io/v1/namespaces/{namespace}/endpointslices"
    while True:
        items = (await hub.get(deployments))["items"]
        available = sum(
            1
            for d in items
            if (d.get("status") or {}).get("availableReplicas") == replicas
            and (d.get("status") or {}).get("observedGeneration") == d["metadata"]["generation"]
        )
        ready = ready_on_hub((await hub.get(slices, labelSelector=OURS))["items"])
        served = sum(1 for n in ready.values() if n >= replicas)
        if available == count and served == count:
            return
        if time.monotonic() - started > limit:
            raise TimeoutError(
                f"{available}/{count} available, {served}/{count} Services with {replicas} "
                f"ready endpoints on the hub after {limit:.0f} s"
            )
        await asyncio.sleep(3.0)


# -- fold latency ---------------------------------------------------------------------------


async def fold(deployments: int = 30, steps: int = 2) -> list[dict[str, Any]]:
    namespace = "bench-endpoints-fold"
    async with aiohttp.ClientSession() as session:
        hub = await _client(session, "hub")
        children = {c: await _client(session, c) for c in CHILDREN}
        tasks: list[asyncio.Task[None]] = []
        try:
            await _create_all(hub, namespace, deployments, 3)
            await _converged(hub, namespace, deployments, 3, 600)
            watches = Watches()
            followed: list[tuple[Kube, str, Callable[[Obj, float, bool], None], str]] = [
                (hub, "endpointslices", watches.on_hub_slice, OURS)
            ]
            for name, kube in children.items():
                followed.append((kube, "pods", watches.on_pod(name), ""))
                followed.append((kube, "endpointslices", watches.on_child_slice(name), ""))
            listed = []
            for kube, resource, on, selector in followed:
                group = "/api/v1" if resource == "pods" else "/apis/discovery.k8s.io/v1"
                path = f"{group}/namespaces/{namespace}/{resource}"
                params = {"labelSelector": selector} if selector else {}
                event = asyncio.Event()
                tasks.append(asyncio.create_task(follow(kube, path, on, event, **params)))
                listed.append(event)
            await asyncio.gather(*(e.wait() for e in listed))
            missed = 0
            for step in range(steps):
                replicas = 3 * (step + 2)
                for i in range(deployments):
                    app = f"d{i}"
                    await hub.merge_patch(
                        f"/apis/apps/v1/namespaces/{namespace}/deployments/{app}",
                        {"spec": {"replicas": replicas}},
                    )
                    deadline = time.monotonic() + STEP_LIMIT
                    while time.monotonic() < deadline:  # the watches fill `watches`
                        new = watches.new_of(app)
                        if len(new) >= replicas - 3 and all(watches.complete(k) for k in new):
                            break
                        await asyncio.sleep(0.01)
                    else:
                        missed += 1
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            await namespaces.delete(hub, namespace)
    keys = [k for k in watches.pod_ready.at if watches.complete(k)]
    if not keys:
        raise RuntimeError("no endpoint was seen ready in a child and on the hub")
    child = [watches.child_ready.at[k] - watches.pod_ready.at[k] for k in keys]
    ours = [watches.hub_ready.at[k] - watches.child_ready.at[k] for k in keys]
    whole = [watches.hub_ready.at[k] - watches.pod_ready.at[k] for k in keys]
    ms = 1000.0
    return [
        {
            **row(
                "endpoints.fold",
                "p50_ms",
                statistics.median(ours) * ms,
                statistics.median(child) * ms,
            ),
            "samples": [round(t * ms, 2) for t in ours],
            "baseline_samples": [round(t * ms, 2) for t in child],
        },
        row("endpoints.fold", "p99_ms", percentile(ours, 0.99) * ms, percentile(child, 0.99) * ms),
        row("endpoints.fold", "pod_ready_to_hub_ready_p50_ms", statistics.median(whole) * ms),
        row("endpoints.fold", "pod_ready_to_hub_ready_p99_ms", percentile(whole, 0.99) * ms),
        row("endpoints.fold", "samples", len(keys), digits=0),
        # Taken as each event is read, in one process: under load one watch's event can be
        # read after another's that followed it. How often, so the lowest samples are read right.
        row("endpoints.fold", "samples_hub_read_before_child", sum(t < 0 for t in ours), digits=0),
        row("endpoints.fold", "samples_child_read_before_pod", sum(t < 0 for t in child), digits=0),
        row("endpoints.fold", "scale_ups_not_complete_in_60s", missed, digits=0),
    ]


# -- hub writes per child slice change ------------------------------------------------------


async def writes(count: int) -> list[dict[str, Any]]:
    namespace = "bench-endpoints-writes"
    async with aiohttp.ClientSession() as session:
        hub = await _client(session, "hub")
        try:
            hub_before = hubwrites.scrape()
            children_before = {c: hubwrites.scrape(c, succeeded=True) for c in CHILDREN}
            started = time.monotonic()
            # Headless: the bed's service range holds 254 cluster IPs a cluster, and a
            # headless Service's slices are made and mirrored the same way.
            await _create_all(hub, namespace, count, 3, headless=True)
            await _converged(hub, namespace, count, 3, 900)
            converged = time.monotonic() - started
            # Settled means quiet: a write that trails the convergence is counted too.
            await asyncio.sleep(SETTLED_WINDOW)
            hub_after = hubwrites.scrape()
            children_after = {c: hubwrites.scrape(c, succeeded=True) for c in CHILDREN}
            slices = f"/apis/discovery.k8s.io/v1/namespaces/{namespace}/endpointslices"
            theirs = (await hub.get(slices, labelSelector=f"{MANAGED_BY}!={SLICE_MANAGER}"))[
                "items"
            ]
        finally:
            await namespaces.delete(hub, namespace)
    on_hub = slice_writes(difference(hub_before, hub_after))
    in_children = {
        c: sum(slice_writes(difference(children_before[c], children_after[c])).values())
        for c in CHILDREN
    }
    changes = sum(in_children.values())
    if not changes:
        raise RuntimeError("the children wrote no EndpointSlice: nothing to mirror")
    total = sum(on_hub.values())
    # The hub's own EndpointSlice controller: one write per generation of its slices.
    hub_controller = float(sum(int(s["metadata"].get("generation") or 1) for s in theirs))
    ours = total - hub_controller
    rows = [
        row(
            "endpoints.writes",
            f"hub_endpointslice_writes_per_child_slice_change_{count}",
            ours / changes,
            digits=2,
        ),
        row(
            "endpoints.writes",
            f"hub_endpointslice_writes_all_writers_per_child_slice_change_{count}",
            total / changes,
            digits=2,
        ),
        row("endpoints.writes", f"hub_endpointslice_writes_{count}", total, digits=0),
        row("endpoints.writes", "hub_controller_endpointslice_writes", hub_controller, digits=0),
        row("endpoints.writes", f"child_endpointslice_changes_{count}", changes, digits=0),
        row(
            "endpoints.writes",
            f"converge_{count}_with_services_s",
            converged,
        ),
    ]
    for verb, n in sorted(on_hub.items()):
        rows.append(row("endpoints.writes", f"hub_endpointslice_writes.{verb}", n, digits=0))
    for child, n in in_children.items():
        rows.append(row("endpoints.writes", f"child_endpointslice_changes.{child}", n, digits=0))
    return rows


def measure(count: int = 1000, deployments: int = 30, steps: int = 2) -> list[dict[str, Any]]:
    rows = asyncio.run(fold(deployments, steps))
    kwok_nodes(True, EXTRA_NODES, "endpoints", CHILDREN)
    try:
        rows += asyncio.run(writes(count))
    finally:
        kwok_nodes(False, EXTRA_NODES, "endpoints", CHILDREN)
    return rows


def main(argv: list[str]) -> None:
    from bench.report import emit

    parser = argparse.ArgumentParser(prog="python -m bench.endpoints")
    parser.add_argument("count", type=int, nargs="?", default=1000)
    parser.add_argument("--deployments", type=int, default=30, help="for the fold latency")
    parser.add_argument("--steps", type=int, default=2, help="scale-ups by 3 of each")
    args = parser.parse_args(argv)
    emit(measure(args.count, args.deployments, args.steps))


if __name__ == "__main__":
    main(sys.argv[1:])
