"""Sync benchmarks, on the running test bed with kubectl-mc installed.

- propagation: hub create → the object in every placed child (ConfigMaps with a Replicate
  strategy, all three children), p50/p99 over N objects, one at a time. Floors measured in
  the same run: (a) a direct create into one child, seen through that child's own watch;
  (b) the same object created directly into the three children at once from one client,
  until all three watches saw it. Also the hub create calls themselves (p50).
- hub creates: a burst of N Deployments created on the hub (16 at once), with kmc-apiserver
  stopped (as without kubectl-mc) and then with it running: what our own writes cost the
  user's.
- fold-up: Deployments of 1 pinned to one child; from the hub create, the time until the
  child says Available (baseline) and until the hub object says so; p50 over N.
- kmc-apiserver at rest: CPU (% of one core over 30 s) and RSS, before the run above.

Latencies are taken from watch events, never from polling.
"""

from __future__ import annotations

import asyncio
import json
import statistics
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import aiohttp

from apiserver.kube import config as kubeconfig
from apiserver.kube.client import Kube
from apiserver.objects import Obj
from bench import namespaces
from bench.objects import deployment
from bench.report import row
from kmc_testbed import bed
from kmc_testbed import config as bedconfig

CHILDREN = ("us-east", "us-west", "eu-west")


async def _client(session: aiohttp.ClientSession, context: str) -> Kube:
    creds = await kubeconfig.from_file(bedconfig.user_kubeconfig_path(), context)
    return Kube(session, creds, context)


class Seen:
    """Time each named object first appears in a watch of one cluster."""

    def __init__(self, kube: Kube, path: str, wanted: Callable[[Obj], bool]) -> None:
        self.kube, self.path, self.wanted = kube, path, wanted
        self.at: dict[str, float] = {}
        self.ready = asyncio.Event()

    async def run(self) -> None:
        listing = await self.kube.get(self.path)
        listed = time.monotonic()
        for obj in listing.get("items", []):
            if self.wanted(obj):
                self.at.setdefault(obj["metadata"]["name"], listed)
        self.ready.set()
        async for event in self.kube.watch(self.path, listing["metadata"]["resourceVersion"]):
            obj = event["object"]
            if event["type"] in ("ADDED", "MODIFIED") and self.wanted(obj):
                self.at.setdefault(obj["metadata"]["name"], time.monotonic())


async def seen_everywhere(
    seen: dict[str, Seen], name: str, started: float, limit: float = 60, poll: float = 0.002
) -> float:
    """Seconds from `started` until every watch in `seen` has seen `name`."""
    while not all(name in s.at for s in seen.values()):
        if time.monotonic() > started + limit:
            raise TimeoutError(f"{name} did not reach every child in {limit:g} s")
        await asyncio.sleep(poll)
    return max(s.at[name] for s in seen.values()) - started


async def watched(
    session: aiohttp.ClientSession, hub: Kube, ns: str
) -> tuple[dict[str, Kube], str, dict[str, Seen], list[asyncio.Task[None]]]:
    """A propagation run's set-up: the namespace `ns` on the hub and in every child, and a
    watch of its ConfigMaps in each child, listed before this returns. The children, the
    ConfigMaps' path, the watches and their tasks (the caller cancels them)."""
    children = {c: await _client(session, c) for c in CHILDREN}
    await hub.create("/api/v1/namespaces", {"metadata": {"name": ns}})
    for kube in children.values():
        await kube.create("/api/v1/namespaces", {"metadata": {"name": ns}})
    path = f"/api/v1/namespaces/{ns}/configmaps"
    seen = {c: Seen(k, path, lambda o: True) for c, k in children.items()}
    tasks = [asyncio.create_task(s.run()) for s in seen.values()]
    try:
        await asyncio.gather(*(s.ready.wait() for s in seen.values()))
    except BaseException:
        for task in tasks:
            task.cancel()
        raise
    return children, path, seen, tasks


async def through_hub(
    hub: Kube, path: str, seen: dict[str, Seen], count: int
) -> tuple[list[float], list[float]]:
    """Create `count` ConfigMaps with a Replicate strategy on the hub, one at a time so each
    latency is its own: for each, seconds until every watch in `seen` has it, and seconds the
    hub create call itself took."""
    ours, creates = [], []
    strategy = json.dumps({"type": "Replicate"})
    for i in range(count):
        name = f"hub-{i}"
        body: Obj = {
            "metadata": {"name": name, "annotations": {"kmc.dev/strategy": strategy}},
            "data": {"i": str(i)},
        }
        started = time.monotonic()
        await hub.create(path, body)
        creates.append(time.monotonic() - started)
        ours.append(await seen_everywhere(seen, name, started))
    return ours, creates


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def propagation(count: int) -> list[dict[str, Any]]:
    ns = f"bench-prop-{uuid.uuid4().hex[:5]}"
    async with aiohttp.ClientSession() as session:
        hub = await _client(session, "hub")
        children, path, seen, tasks = await watched(session, hub, ns)
        # Baseline: straight into one child, seen by that child's watch.
        direct = []
        for i in range(count):
            name = f"direct-{i}"
            started = time.monotonic()
            await children["us-east"].create(
                path, {"metadata": {"name": name}, "data": {"i": str(i)}}
            )
            while name not in seen["us-east"].at:  # noqa: ASYNC110 - a 1 ms poll is the clock
                await asyncio.sleep(0.001)
            direct.append(seen["us-east"].at[name] - started)
        # The same into all three at once, from one client.
        everywhere = []
        for i in range(count):
            name = f"direct3-{i}"
            body: Obj = {"metadata": {"name": name}, "data": {"i": str(i)}}
            started = time.monotonic()
            await asyncio.gather(*(kube.create(path, body) for kube in children.values()))
            everywhere.append(await seen_everywhere(seen, name, started, poll=0.001))
        ours, creates = await through_hub(hub, path, seen, count)
        for task in tasks:
            task.cancel()
        await hub.delete(f"/api/v1/namespaces/{ns}")
        await children["us-east"].delete(f"/api/v1/namespaces/{ns}")
    p50, p50_direct = statistics.median(ours), statistics.median(direct)
    p50_three = statistics.median(everywhere)
    return [
        {
            "benchmark": "sync.propagation",
            "figure": "p50_ms",
            "value": round(p50 * 1000, 1),
            "baseline": round(p50_direct * 1000, 1),
            "ratio": round(p50 / p50_direct, 2),
            "samples": [round(t * 1000, 2) for t in ours],
            "baseline_samples": [round(t * 1000, 2) for t in direct],
        },
        {
            "benchmark": "sync.propagation",
            "figure": "p99_ms",
            "value": round(_pct(ours, 0.99) * 1000, 1),
            "baseline": round(_pct(direct, 0.99) * 1000, 1),
            "ratio": round(_pct(ours, 0.99) / _pct(direct, 0.99), 2),
        },
        row("sync.propagation", "p50_ms_vs_three_direct", p50 * 1000, p50_three * 1000),
        row(
            "sync.propagation",
            "p99_ms_vs_three_direct",
            _pct(ours, 0.99) * 1000,
            _pct(everywhere, 0.99) * 1000,
        ),
        row("sync.propagation", "hub_create_p50_ms", statistics.median(creates) * 1000),
        # The path's own floor: the hub create (our webhook judges the strategy), then the
        # three child creates at once; the hub's watch and our loops are what lies between.
        row(
            "sync.propagation",
            "p50_ms_vs_hub_create_then_three_direct",
            p50 * 1000,
            (statistics.median(creates) + p50_three) * 1000,
        ),
    ]


async def _burst(hub: Kube, ns: str, count: int) -> float:
    """Seconds to create `count` Deployments on the hub, 16 at once."""
    await hub.create("/api/v1/namespaces", {"metadata": {"name": ns}})
    path = f"/apis/apps/v1/namespaces/{ns}/deployments"
    gate = asyncio.Semaphore(16)

    async def create(i: int) -> None:
        async with gate:
            await hub.create(path, deployment(f"b{i}", 3))

    started = time.monotonic()
    await asyncio.gather(*(create(i) for i in range(count)))
    return time.monotonic() - started


def hub_creates(count: int) -> list[dict[str, Any]]:
    """The user's burst of creates on the hub: without kmc-apiserver running, without it while
    the children do the same work (each gets the Deployments created directly), then with it.

    On the bed the hub and the children share one etcd and two cores, so the children's
    own work (ReplicaSets, pods, their statuses) slows the hub's writes too; the second floor
    separates that from what kmc-apiserver itself adds."""
    testbed = str(bedconfig.REPO_ROOT / "hack" / "testbed")

    async def burst(ns: str, children: tuple[str, ...] = ()) -> float:
        async with aiohttp.ClientSession() as session:
            hub = await _client(session, "hub")
            kubes = [await _client(session, c) for c in children]
            took, *_ = await asyncio.gather(
                # (Another namespace in the children: kmc-apiserver places the hub's later.)
                _burst(hub, ns, count),
                *(_burst(k, f"{ns}-direct", count) for k in kubes),
            )
            return took

    async def clean_up(ns: str, clusters: tuple[str, ...] = ("hub",)) -> None:
        async with aiohttp.ClientSession() as session:
            for cluster in clusters:
                kube = await _client(session, cluster)
                await kube.delete(f"/api/v1/namespaces/{ns}")
                await namespaces.gone(kube, ns, every=1.0)

    alone, working, with_ns = (
        f"bench-burst-{w}-{uuid.uuid4().hex[:5]}" for w in ("alone", "working", "with")
    )
    subprocess.run([testbed, "stop", bed.KMC], check=True, capture_output=True)
    try:
        without = asyncio.run(burst(alone))
        children_working = asyncio.run(burst(working, CHILDREN))
        asyncio.run(clean_up(f"{working}-direct", CHILDREN))
    finally:
        # (Namespaces are deleted only while every aggregated API answers discovery.)
        subprocess.run([testbed, "start", bed.KMC], check=True, capture_output=True)
    asyncio.run(clean_up(alone))
    asyncio.run(clean_up(working))
    with_kmc = asyncio.run(burst(with_ns))
    asyncio.run(clean_up(with_ns))
    return [
        row("hub.creates", f"burst_{count}_s", with_kmc, without, digits=2),
        row("hub.creates", f"burst_{count}_s_vs_children_working", with_kmc, children_working, 2),
    ]


async def foldup(count: int) -> list[dict[str, Any]]:
    ns = f"bench-fold-{uuid.uuid4().hex[:5]}"

    def available(obj: Obj) -> bool:
        return bool((obj.get("status") or {}).get("availableReplicas") == 1)

    async with aiohttp.ClientSession() as session:
        hub = await _client(session, "hub")
        child = await _client(session, "us-east")
        await hub.create("/api/v1/namespaces", {"metadata": {"name": ns}})
        path = f"/apis/apps/v1/namespaces/{ns}/deployments"
        on_hub, in_child = Seen(hub, path, available), Seen(child, path, available)
        tasks = [asyncio.create_task(on_hub.run())]
        await on_hub.ready.wait()
        child_ready = False
        strategy = json.dumps({"type": "Single", "pin": ["us-east"]})
        hub_times, child_times = [], []
        for i in range(count):
            name = f"f{i}"
            labels = {"app": name}
            body = {
                "metadata": {"name": name, "annotations": {"kmc.dev/strategy": strategy}},
                "spec": {
                    "replicas": 1,
                    "selector": {"matchLabels": labels},
                    "template": {
                        "metadata": {"labels": labels},
                        "spec": {"containers": [{"name": "c", "image": "x"}]},
                    },
                },
            }
            started = time.monotonic()
            await hub.create(path, body)
            if not child_ready:  # the child namespace exists once the first object is synced
                while True:
                    try:
                        await child.get(path)
                        break
                    except Exception:
                        await asyncio.sleep(0.01)
                tasks.append(asyncio.create_task(in_child.run()))
                await in_child.ready.wait()
                child_ready = True
            deadline = started + 60
            while name not in on_hub.at or name not in in_child.at:
                if time.monotonic() > deadline:
                    raise TimeoutError(f"{name} not Available on the hub within 60 s")
                await asyncio.sleep(0.002)
            hub_times.append(on_hub.at[name] - started)
            child_times.append(in_child.at[name] - started)
        for task in tasks:
            task.cancel()
        await hub.delete(f"/api/v1/namespaces/{ns}")
    hub_p50, child_p50 = statistics.median(hub_times), statistics.median(child_times)
    return [
        {
            "benchmark": "sync.foldup",
            "figure": "create_to_available_on_hub_p50_ms",
            "value": round(hub_p50 * 1000, 1),
            "baseline": round(child_p50 * 1000, 1),
            "ratio": round(hub_p50 / child_p50, 2),
        },
        {
            "benchmark": "sync.foldup",
            "figure": "fold_latency_p50_ms",
            "value": round(
                statistics.median(h - c for h, c in zip(hub_times, child_times, strict=True))
                * 1000,
                1,
            ),
            "baseline": None,
            "ratio": None,
        },
    ]


def kmc_usage(seconds: float = 30.0) -> list[dict[str, Any]]:
    """CPU (% of one core) and RSS of kmc-apiserver, from /proc, over `seconds` at rest."""
    state = bed.load()
    assert state is not None
    pid = state.pids[bed.KMC]

    def cpu() -> float:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / 100.0  # utime + stime, in seconds

    before, started = cpu(), time.monotonic()
    time.sleep(seconds)
    used = (cpu() - before) / (time.monotonic() - started) * 100
    rss = next(
        int(line.split()[1])
        for line in Path(f"/proc/{pid}/status").read_text().splitlines()
        if line.startswith("VmRSS")
    )
    return [
        {
            "benchmark": "kmc-apiserver",
            "figure": "idle_cpu_pct",
            "value": round(used, 2),
            "baseline": None,
            "ratio": None,
        },
        {
            "benchmark": "kmc-apiserver",
            "figure": "rss_mb",
            "value": round(rss / 1024, 1),
            "baseline": None,
            "ratio": None,
        },
    ]


def main(argv: list[str]) -> None:
    from bench.report import emit

    count = int(argv[0]) if argv else 200
    rows = kmc_usage()  # first: after the propagation run, cleaning up is not rest
    rows += asyncio.run(propagation(count))
    rows += asyncio.run(foldup(min(count, 50)))
    emit(rows)


if __name__ == "__main__":
    main(sys.argv[1:])
