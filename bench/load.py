"""Load: 2,000 workloads over 5 locations, then 20 clients listing and watching both
groups through the hub for 60 s.

Two locations are added to the test bed for the run (and removed after). The workloads are
Deployments of 1 replica, split by the default strategy, so each location runs about 400
pods. Half of the clients list (`pods.remote.kmc.dev` and `deployments.mc.kmc.dev` in the
workloads' namespace, in turn), half keep watches open on the same and count events. Reported:
errors, list latency p50/p99, requests/s, events seen, and kmc-apiserver's peak RSS.

Run: `PYTHONPATH=hack .venv/bin/python -m bench.load [--workloads 2000] [--seconds 60]`.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import subprocess
import sys
import time
from typing import Any

import aiohttp

from apiserver.kube.client import ApiError, Kube
from bench import remote
from bench.objects import deployment, kwok_nodes
from bench.report import emit, row
from kmc_testbed import config as bedconfig

NAMESPACE = "bench-load"
ADDED = {k: v for k, v in remote.EXTRA.items() if k in ("ap-south", "sa-east")}
NODES_PER_CHILD = 2  # beside the three each child has: room for about 550 pods
CHURNED = 50  # workloads scaled up and down while the clients run


async def populate(hub: Kube, count: int) -> float:
    await hub.create("/api/v1/namespaces", {"metadata": {"name": NAMESPACE}})
    path = f"/apis/apps/v1/namespaces/{NAMESPACE}/deployments"
    gate = asyncio.Semaphore(16)
    started = time.monotonic()

    async def create(i: int) -> None:
        async with gate:
            await hub.create(path, deployment(f"w{i}", 1))

    await asyncio.gather(*(create(i) for i in range(count)))
    while True:
        items = (await hub.get(path))["items"]
        done = sum(1 for d in items if (d.get("status") or {}).get("availableReplicas") == 1)
        if done == count:
            return time.monotonic() - started
        if time.monotonic() - started > 1800:
            raise TimeoutError(f"{done}/{count} available after 30 min")
        await asyncio.sleep(5)


async def clients(hub: Kube, count: int, seconds: float) -> list[dict[str, Any]]:
    lists = (
        f"/apis/remote.kmc.dev/v1alpha1/namespaces/{NAMESPACE}/pods",
        f"/apis/mc.kmc.dev/v1alpha1/namespaces/{NAMESPACE}/deployments",
    )
    times: list[float] = []
    errors: list[str] = []
    partial: list[str] = []
    events = 0
    peak = remote.rss_kb()
    auth = {"Authorization": f"Bearer {hub.creds.token}"} if hub.creds.token else {}
    stop = time.monotonic() + seconds

    async def lister(index: int) -> None:
        turn = index
        while time.monotonic() < stop:
            started = time.perf_counter()
            async with hub.session.get(
                hub.creds.server + lists[turn % 2],
                headers={"Accept": remote.TABLE, **auth},
                ssl=hub.creds.ssl,
            ) as resp:
                await resp.read()
                if resp.status != 200:
                    errors.append(f"{resp.status} {(await resp.text())[:200]}")
                else:
                    times.append(time.perf_counter() - started)
                    # A location left out (slow, failing) is named in a Warning: a partial list.
                    partial.extend(resp.headers.getall("Warning", []))
            turn += 1

    async def watcher(index: int) -> None:
        nonlocal events
        path = lists[index % 2]
        # Only the end of the run may end a watch: a timeout of any other kind, or a stream
        # the server closed early, is an error (it was once swallowed with the run's end).
        until: asyncio.Timeout | None = None
        try:
            listing = await hub.get(path, limit="1")
            version = listing["metadata"]["resourceVersion"]
            until = asyncio.timeout(max(0.0, stop - time.monotonic()))
            async with until:
                async for _ in hub.watch(path, version, timeout_seconds=int(seconds) + 5):
                    events += 1
            errors.append(f"watch {path}: ended {stop - time.monotonic():.1f}s before the run")
        except TimeoutError:
            if until is None or not until.expired():
                errors.append(f"watch {path}: timed out")
        except ApiError as err:
            errors.append(f"watch {path}: {err}")

    async def churn() -> None:
        """Something to watch: scale workloads up and down while the clients run."""
        n = 0
        while time.monotonic() < stop:
            path = f"/apis/apps/v1/namespaces/{NAMESPACE}/deployments/w{n % CHURNED}"
            await hub.merge_patch(path, {"spec": {"replicas": 1 + (n // CHURNED) % 2}})
            n += 1
            await asyncio.sleep(0.2)

    async def sample() -> None:
        nonlocal peak
        while time.monotonic() < stop:
            peak = max(peak, remote.rss_kb())
            await asyncio.sleep(0.5)

    started = time.monotonic()
    half = count // 2
    await asyncio.gather(
        sample(),
        churn(),
        *(lister(i) for i in range(half)),
        *(watcher(i) for i in range(count - half)),
    )
    elapsed = time.monotonic() - started
    ordered = sorted(times)
    return [
        {"benchmark": "load", "figure": "errors", "value": len(errors), "first": errors[:3]},
        {
            "benchmark": "load",
            "figure": "locations_left_out",
            "value": len(partial),
            "first": partial[:3],
        },
        {"benchmark": "load", "figure": "lists_per_s", "value": round(len(times) / elapsed, 1)},
        {
            "benchmark": "load",
            "figure": "list_p50_ms",
            "value": round(statistics.median(ordered) * 1000, 1),
            "p99_ms": round(ordered[int(0.99 * (len(ordered) - 1))] * 1000, 1),
        },
        {"benchmark": "load", "figure": "watch_events", "value": events},
        {"benchmark": "load", "figure": "kmc_peak_rss_mb", "value": round(peak / 1024, 1)},
    ]


def views_at_scale(workloads: int, rounds: int = 9) -> dict[str, Any]:
    """`kubectl get deployments.mc.kmc.dev -A` against `kubectl get deployments -A` on the hub,
    the same objects, turn about; medians."""

    def kubectl(resource: str) -> float:
        cmd = ["kubectl", "get", resource, "-A", "--kubeconfig", str(bedconfig.kubeconfig_path())]
        started = time.perf_counter()
        done = subprocess.run([*cmd, "--context", "hub"], capture_output=True, text=True)
        took = time.perf_counter() - started
        lines = done.stdout.count("\n")
        assert done.returncode == 0 and lines > workloads, done.stderr[-300:]
        return took

    views, hub = [], []
    for _ in range(rounds):
        views.append(kubectl("deployments.mc.kmc.dev"))
        hub.append(kubectl("deployments.apps"))
    ours, floor = statistics.median(views), statistics.median(hub)
    return row("views", f"get_{workloads}_deployments_ms", ours * 1000, floor * 1000)


async def run(workloads: int, count: int, seconds: float) -> list[dict[str, Any]]:
    async with aiohttp.ClientSession() as session:
        hub = await remote.client(session, "hub")
        try:
            took = await populate(hub, workloads)
            rows = [
                {
                    "benchmark": "load",
                    "figure": f"populate_{workloads}_s",
                    "value": round(took, 1),
                    "locations": len(remote.children()),
                },
                views_at_scale(workloads),
            ]
            return rows + await clients(hub, count, seconds)
        finally:
            await hub.delete(f"/api/v1/namespaces/{NAMESPACE}")


def measure(workloads: int = 2000, count: int = 20, seconds: float = 60.0) -> list[dict[str, Any]]:
    """The whole benchmark: locations and nodes added for it, and taken away after."""
    added = []
    for name, labels in ADDED.items():
        if name not in remote.children():
            remote.testbed("add", name, "--labels", labels)
            added.append(name)
    remote.testbed("install")
    kwok_nodes(True, NODES_PER_CHILD, "load")
    try:
        return asyncio.run(run(workloads, count, seconds))
    finally:
        kwok_nodes(False, NODES_PER_CHILD, "load")
        for name in added:
            remote.testbed("remove", name)


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.load")
    parser.add_argument("--workloads", type=int, default=2000)
    parser.add_argument("--clients", type=int, default=20)
    parser.add_argument("--seconds", type=float, default=60.0)
    args = parser.parse_args(argv)
    emit(measure(args.workloads, args.clients, args.seconds))


if __name__ == "__main__":
    main(sys.argv[1:])
