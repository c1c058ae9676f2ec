"""Punch-through benchmarks, on the running test bed with kubectl-mc installed.

- fan-out: `GET pods.remote.kmc.dev` through the hub (a Table, as kubectl asks for it)
  against the slowest child's own pod list, each child listed directly in the same rounds;
  p50 over N rounds, with 3 locations and, with `--locations 6`, three more children added
  for the run (and removed after).
- load: 20 concurrent clients listing pods.remote.kmc.dev and deployments.mc.kmc.dev through
  the hub for a fixed time: requests/s, p50/p99, errors, and kmc-apiserver's peak RSS.

Run: `PYTHONPATH=hack .venv/bin/python -m bench.remote [--locations 6] [--rounds 40]`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import aiohttp

from apiserver.kube import config as kubeconfig
from apiserver.kube.client import Kube
from bench.report import emit
from kmc_testbed import bed
from kmc_testbed import config as bedconfig

TABLE = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"
EXTRA = {
    "ap-south": "topology.kubernetes.io/region=ap,topology.kubernetes.io/zone=ap-south-1",
    "ap-east": "topology.kubernetes.io/region=ap,topology.kubernetes.io/zone=ap-east-1",
    "sa-east": "topology.kubernetes.io/region=sa,topology.kubernetes.io/zone=sa-east-1",
}
PODS_PER_LOCATION = 10


def testbed(*args: str) -> None:
    subprocess.run([str(bedconfig.REPO_ROOT / "hack" / "testbed"), *args], check=True)


async def client(session: aiohttp.ClientSession, context: str) -> Kube:
    creds = await kubeconfig.from_file(bedconfig.user_kubeconfig_path(), context)
    return Kube(session, creds, context)


async def timed(kube: Kube, path: str) -> float:
    started = time.perf_counter()
    await kube.request("GET", path, headers={"Accept": TABLE})
    return time.perf_counter() - started


def children() -> list[str]:
    state = bed.load()
    assert state is not None, "the test bed is not up"
    return [c.name for c in state.clusters if c.role != bed.HUB]


async def setup(hub: Kube, namespace: str, locations: int) -> None:
    await hub.create(
        "/api/v1/namespaces",
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}},
    )
    labels = {"app": "bench"}
    await hub.create(
        f"/apis/apps/v1/namespaces/{namespace}/deployments",
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {
                "name": "bench",
                "annotations": {"kmc.dev/strategy": json.dumps({"type": "Replicate"})},
            },
            "spec": {
                "replicas": PODS_PER_LOCATION,
                "selector": {"matchLabels": labels},
                "template": {
                    "metadata": {"labels": labels},
                    "spec": {"containers": [{"name": "c", "image": "registry.example/bench:1"}]},
                },
            },
        },
    )
    wanted = PODS_PER_LOCATION * locations
    deadline = time.monotonic() + 180
    while True:
        listing = await hub.get(f"/apis/remote.kmc.dev/v1alpha1/namespaces/{namespace}/pods")
        if len(listing.get("items", [])) >= wanted:
            return
        if time.monotonic() > deadline:
            raise SystemExit(f"only {len(listing.get('items', []))} of {wanted} pods appeared")
        await asyncio.sleep(1)


async def fanout(hub: Kube, kids: dict[str, Kube], namespace: str, rounds: int) -> dict[str, Any]:
    through = f"/apis/remote.kmc.dev/v1alpha1/namespaces/{namespace}/pods"
    direct = f"/api/v1/namespaces/{namespace}/pods"
    hub_times: list[float] = []
    child_times: dict[str, list[float]] = {name: [] for name in kids}
    # The first list of another resource, whose caches kmc-apiserver has not started yet:
    # the cold path (every child asked live) that warms them.
    cold = await timed(hub, f"/apis/remote.kmc.dev/v1alpha1/namespaces/{namespace}/replicasets")
    for _ in range(3):  # warm connections and caches on every path
        await timed(hub, through)
        for kube in kids.values():
            await timed(kube, direct)
    for _ in range(rounds):
        for name, kube in kids.items():
            child_times[name].append(await timed(kube, direct))
        hub_times.append(await timed(hub, through))
    slowest = max(statistics.median(times) for times in child_times.values())
    p50 = statistics.median(hub_times)
    return {
        "benchmark": f"fanout-{len(kids)}",
        "figure": "list_p50_ms",
        "value": round(p50 * 1000, 2),
        "baseline": round(slowest * 1000, 2),
        "ratio": round(p50 / slowest, 2),
        "p99_ms": round(sorted(hub_times)[int(0.99 * (len(hub_times) - 1))] * 1000, 2),
        "cold_replicasets_ms": round(cold * 1000, 2),
        "locations": len(kids),
    }


def rss_kb() -> int:
    state = bed.load()
    assert state is not None
    status = Path(f"/proc/{state.pids[bed.KMC]}/status").read_text()
    return next(int(line.split()[1]) for line in status.splitlines() if line.startswith("VmRSS"))


async def load(hub: Kube, namespace: str, clients: int, seconds: float) -> list[dict[str, Any]]:
    paths = (
        f"/apis/remote.kmc.dev/v1alpha1/namespaces/{namespace}/pods",
        f"/apis/mc.kmc.dev/v1alpha1/namespaces/{namespace}/deployments",
    )
    times: list[float] = []
    errors = 0
    peak = rss_kb()
    stop = time.monotonic() + seconds

    async def worker(index: int) -> None:
        nonlocal errors
        turn = index
        while time.monotonic() < stop:
            try:
                times.append(await timed(hub, paths[turn % 2]))
            except Exception:
                errors += 1
            turn += 1

    async def sample() -> None:
        nonlocal peak
        while time.monotonic() < stop:
            peak = max(peak, rss_kb())
            await asyncio.sleep(0.5)

    started = time.monotonic()
    await asyncio.gather(sample(), *(worker(i) for i in range(clients)))
    elapsed = time.monotonic() - started
    ordered = sorted(times)
    return [
        {
            "benchmark": f"lists-{clients}-clients",
            "figure": "requests_per_s",
            "value": round(len(times) / elapsed, 1),
            "errors": errors,
        },
        {
            "benchmark": f"lists-{clients}-clients",
            "figure": "latency_p50_ms",
            "value": round(statistics.median(ordered) * 1000, 1),
            "p99_ms": round(ordered[int(0.99 * (len(ordered) - 1))] * 1000, 1),
        },
        {
            "benchmark": f"lists-{clients}-clients",
            "figure": "kmc_peak_rss_mb",
            "value": round(peak / 1024, 1),
        },
    ]


async def run(locations: int, rounds: int, clients: int, seconds: float) -> list[dict[str, Any]]:
    namespace = f"bench-remote-{uuid.uuid4().hex[:6]}"
    async with aiohttp.ClientSession() as session:
        hub = await client(session, "hub")
        kids = {name: await client(session, name) for name in children()}
        try:
            await setup(hub, namespace, len(kids))
            rows = [await fanout(hub, kids, namespace, rounds)]
            if clients:
                rows += await load(hub, namespace, clients, seconds)
            return rows
        finally:
            await hub.delete(f"/api/v1/namespaces/{namespace}")


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.remote")
    parser.add_argument("--locations", type=int, default=3, choices=(3, 6))
    parser.add_argument("--rounds", type=int, default=40)
    parser.add_argument("--clients", type=int, default=20)
    parser.add_argument("--seconds", type=float, default=20.0)
    args = parser.parse_args(argv)
    added = []
    if args.locations == 6:
        for name, labels in EXTRA.items():
            if name not in children():
                testbed("add", name, "--labels", labels)
                added.append(name)
        testbed("install")
    try:
        rows = asyncio.run(run(args.locations, args.rounds, args.clients, args.seconds))
    finally:
        for name in added:
            testbed("remove", name)
    emit(rows)


if __name__ == "__main__":
    main(sys.argv[1:])
