"""Scale: N Deployments (replicas 1 to 5) over five locations, on the running test bed.

Two more children join the bed for the run (and leave after), and every child gets kwok
nodes big enough for its share. The figure is the time from the first hub create until
every hub Deployment reports availableReplicas equal to its replicas for its generation
(placed, synced, running and folded back), with kmc-apiserver's peak RSS, the CPU seconds it
spent, and its idle CPU once everything has settled.

The floor, measured in the same run after the hub objects are gone: the same work done
directly. Each hub object's placement (its `kmc.dev/placement` record) tells which child got
how many replicas; the floor creates exactly those Deployments straight into the children
with one client and the same concurrency, and waits for them the same way.

Both sides are watched rather than listed: a list of ten thousand objects every few seconds
would cost the clusters more than the work itself.

    PYTHONPATH=hack .venv/bin/python -m bench.scale [COUNT]      # default 10,000
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

import aiohttp

from apiserver.contract import read_placement
from apiserver.kube import config as kubeconfig
from apiserver.kube.client import ApiError, Kube
from bench import namespaces
from bench.converge import _cpu_seconds, _rss_mb
from bench.objects import deployment, kwok_nodes
from bench.remote import children, testbed
from bench.report import row
from kmc_testbed import bed
from kmc_testbed import config as bedconfig

EXTRA = {
    "ap-south": "topology.kubernetes.io/region=ap,topology.kubernetes.io/zone=ap-south-1",
    "ap-east": "topology.kubernetes.io/region=ap,topology.kubernetes.io/zone=ap-east-1",
}
NAMESPACE = "bench-scale"
CONCURRENCY = 16
NODES = 8  # extra kwok nodes per child, each with room for BIG_NODE["pods"]
BIG_NODE = {"cpu": "1000", "memory": "4Ti", "pods": "1000"}
LIMIT = 3600.0  # seconds for one side to converge: generous, it is a benchmark


def replicas_of(i: int) -> int:
    return i % 5 + 1


class Converged:
    """Watch a Deployment path and count objects available at their replicas and generation."""

    def __init__(self, kube: Kube, path: str, expected: int) -> None:
        self.kube, self.path, self.expected = kube, path, expected
        self.done: set[str] = set()
        self.objects: dict[str, dict[str, Any]] = {}
        self.all_done = asyncio.Event()

    def _see(self, kind: str, obj: dict[str, Any]) -> None:
        name = obj["metadata"]["name"]
        if kind == "DELETED":
            self.done.discard(name)
            self.objects.pop(name, None)
            return
        self.objects[name] = obj
        status, spec = obj.get("status") or {}, obj.get("spec") or {}
        if (
            status.get("observedGeneration") == obj["metadata"].get("generation")
            and status.get("availableReplicas", 0) == spec.get("replicas")
            and status.get("replicas", 0) == spec.get("replicas")
        ):
            self.done.add(name)
        else:
            self.done.discard(name)
        if len(self.done) >= self.expected:
            self.all_done.set()

    async def run(self) -> None:
        while True:
            listing = await self.kube.get(self.path)
            self.done.clear()
            self.objects.clear()
            for obj in listing.get("items", []):
                self._see("ADDED", obj)
            try:
                async for event in self.kube.watch(
                    self.path, listing["metadata"]["resourceVersion"]
                ):
                    if event["type"] in ("ADDED", "MODIFIED", "DELETED"):
                        self._see(event["type"], event["object"])
            except (TimeoutError, ApiError, aiohttp.ClientError) as err:
                # A watch ends or expires: list again, as an informer would; say so.
                _log(f"watch of {self.kube.name} ended ({err!r}); listing again")
            await asyncio.sleep(1.0)


class Sampler:
    """kmc-apiserver's RSS every second, in a thread, so the peak is not missed."""

    def __init__(self, pid: int) -> None:
        self.pid, self.peak = pid, 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(1.0):
            with contextlib.suppress(OSError):
                self.peak = max(self.peak, _rss_mb(self.pid))

    def __enter__(self) -> Sampler:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()


async def _create_all(
    jobs: Iterable[tuple[Kube, str, dict[str, Any]]], progress: Callable[[int], None]
) -> None:
    gate = asyncio.Semaphore(CONCURRENCY)
    made = 0

    async def create(kube: Kube, path: str, body: dict[str, Any]) -> None:
        nonlocal made
        async with gate:
            await kube.create(path, body)
            made += 1
            if made % 1000 == 0:
                progress(made)

    await asyncio.gather(*(create(*job) for job in jobs))


async def _wait(watch: Converged, started: float, what: str) -> float:
    while not watch.all_done.is_set():
        elapsed = time.monotonic() - started
        if elapsed > LIMIT:
            raise TimeoutError(f"{what}: {len(watch.done)}/{watch.expected} after {LIMIT:g} s")
        print(f"  {what}: {len(watch.done)}/{watch.expected} at {elapsed:.0f} s", file=sys.stderr)
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(watch.all_done.wait(), 30)
    return time.monotonic() - started


def _log(message: str) -> None:
    print(f"scale: {message}", file=sys.stderr, flush=True)


async def _kube(session: aiohttp.ClientSession, context: str) -> Kube:
    return Kube(
        session, await kubeconfig.from_file(bedconfig.user_kubeconfig_path(), context), context
    )


async def through_hub(count: int) -> tuple[list[dict[str, Any]], dict[str, dict[str, int]]]:
    """Converge `count` Deployments through kubectl-mc; the rows, and where each one went."""
    state = bed.load()
    assert state is not None
    pid = state.pids[bed.KMC]
    path = f"/apis/apps/v1/namespaces/{NAMESPACE}/deployments"
    async with aiohttp.ClientSession() as session:
        hub = await _kube(session, "hub")
        await hub.create("/api/v1/namespaces", {"metadata": {"name": NAMESPACE}})
        watch = Converged(hub, path, count)
        watching = asyncio.create_task(watch.run())
        with Sampler(pid) as sampler:
            cpu_before, started = _cpu_seconds(pid), time.monotonic()
            await _create_all(
                ((hub, path, deployment(f"s{i}", replicas_of(i))) for i in range(count)),
                lambda n: _log(f"hub: {n} created"),
            )
            created = time.monotonic() - started
            converged = await _wait(watch, started, "through the hub")
            cpu = _cpu_seconds(pid) - cpu_before
        # Idle: a minute after everything converged, nothing should be going on.
        await asyncio.sleep(10)
        idle_before, idle_started = _cpu_seconds(pid), time.monotonic()
        await asyncio.sleep(60)
        idle = (_cpu_seconds(pid) - idle_before) / (time.monotonic() - idle_started) * 100
        placements: dict[str, dict[str, int]] = {}
        for name, obj in watch.objects.items():
            placed = read_placement(obj)
            placements[name] = {loc: n or 0 for loc, n in placed.items()}
        watching.cancel()
        _log("deleting the hub namespace (kubectl-mc deletes the children's objects)")
        with contextlib.suppress(ApiError):
            await hub.delete(f"/api/v1/namespaces/{NAMESPACE}")
        await namespaces.gone(hub, NAMESPACE, limit=LIMIT)
    _log(f"converged in {converged:.1f} s; peak RSS {sampler.peak:.0f} MB, {cpu:.0f} CPU s")
    rows = [
        row("scale", f"converge_{count}_s", converged),
        row("scale", f"create_{count}_on_hub_s", created),
        row("kmc-apiserver", f"peak_rss_mb_{count}", sampler.peak),
        row("kmc-apiserver", f"cpu_s_{count}", cpu),
        row("kmc-apiserver", f"idle_cpu_pct_after_{count}", idle, digits=2),
    ]
    return rows, placements


async def direct(placements: dict[str, dict[str, int]], locations: list[str]) -> float:
    """The same child Deployments created straight into the children; seconds to converge."""
    path = f"/apis/apps/v1/namespaces/{NAMESPACE}/deployments"
    async with aiohttp.ClientSession() as session:
        kubes = {loc: await _kube(session, loc) for loc in locations}
        for kube in kubes.values():
            # kubectl-mc deletes the namespaces it made in the children when the hub's goes.
            await namespaces.gone(kube, NAMESPACE, limit=LIMIT)
            await kube.create("/api/v1/namespaces", {"metadata": {"name": NAMESPACE}})
        jobs = [
            (kubes[loc], path, deployment(name, replicas))
            for name, placed in placements.items()
            for loc, replicas in placed.items()
            if loc in kubes
        ]
        per_child = {loc: sum(1 for k, _, _ in jobs if k is kubes[loc]) for loc in locations}
        watches = {loc: Converged(kubes[loc], path, per_child[loc]) for loc in locations}
        watching = [asyncio.create_task(w.run()) for w in watches.values()]
        started = time.monotonic()
        await _create_all(jobs, lambda n: _log(f"direct: {n} created"))
        for loc, watch in watches.items():
            await _wait(watch, started, f"directly in {loc}")
        took = time.monotonic() - started
        for task in watching:
            task.cancel()
        for kube in kubes.values():
            await kube.delete(f"/api/v1/namespaces/{NAMESPACE}")
        for kube in kubes.values():
            await namespaces.gone(kube, NAMESPACE, limit=LIMIT)
    return took


def measure(count: int) -> list[dict[str, Any]]:
    added = []
    for name, labels in EXTRA.items():
        if name not in children():
            testbed("add", name, "--labels", labels)
            added.append(name)
    testbed("install")
    locations = children()
    kwok_nodes(True, NODES, "scale", locations, capacity=BIG_NODE)
    try:
        _log(f"{count} Deployments through the hub over {len(locations)} locations")
        rows, placements = asyncio.run(through_hub(count))
        _log("the same child Deployments, directly")
        floor = asyncio.run(direct(placements, locations))
    finally:
        kwok_nodes(False, NODES, "scale", locations)
        for name in added:
            testbed("remove", name)
    converged = rows[0]["value"]
    rows[0] = row("scale", f"converge_{count}_s", converged, floor)
    rows.append(
        row("scale", "child_deployments", sum(len(p) for p in placements.values()), digits=0)
    )
    return rows


def main(argv: list[str]) -> None:
    from bench.report import emit

    emit(measure(int(argv[0]) if argv else 10_000))


if __name__ == "__main__":
    main(sys.argv[1:])
