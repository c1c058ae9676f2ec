"""Load: 2,000 workloads over 5 locations, then 20 clients listing and watching both
groups through the hub for 60 s, with one location slow.

Two locations are added to the test bed for the run (and removed after). The workloads are
Deployments of 1 replica, split by the default strategy, so each location runs about 400
pods. Half of the clients list (`pods.remote.kmc.dev` and `deployments.mc.kmc.dev` in the
workloads' namespace, in turn), half keep watches open on the same and count events, while
50 workloads are scaled up and down. Reported: errors, list latency p50/p99, requests/s,
events seen, and kmc-apiserver's peak RSS.

For the client phase one location (`SLOW`) answers through the slow TCP proxy
(`kmc_testbed.slowproxy`, 5 s before every chunk, as in the slow-location fault test): it is
not stopped, only late. Lists must still answer within the per-location timeout, with a
Warning naming it — first as timed out while it is still Ready, then as not Ready once its
probes say so. Those answers are reported on their own (`slow_lists`: how many, the slowest,
which locations their Warnings named); p50/p99 are of the lists that waited on no one. After
the clients stop, `converge_others_s` is how long until every workload placed only on the
other locations (and not on the slow one before it turned slow) has its hub status caught
up (observed generation, replicas available): the sync loop keeps converging them while one
location drags.

Run: `PYTHONPATH=hack .venv/bin/python -m bench.load [--workloads 2000] [--seconds 60]`.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import statistics
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from typing import Any

import aiohttp

from apiserver.kube.client import ApiError, Kube
from bench import namespaces, remote
from bench.objects import deployment, kwok_nodes
from bench.report import emit, row
from kmc_testbed import bed
from kmc_testbed import config as bedconfig
from kmc_testbed.slowproxy import DELAY, SlowProxy, pointed_at

NAMESPACE = "bench-load"
ADDED = {k: v for k, v in remote.EXTRA.items() if k in ("ap-south", "sa-east")}
NODES_PER_CHILD = 2  # beside the three each child has: room for about 550 pods
CHURNED = 50  # workloads scaled up and down while the clients run
SLOW = "sa-east"  # behind the slow proxy while the clients run
REMOTE_TIMEOUT = 3.0  # kmc-apiserver's --remote-timeout (its default, as the bed runs it)


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
    slow_times: list[float] = []
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
                took = time.perf_counter() - started
                if resp.status != 200:
                    errors.append(f"{resp.status} {(await resp.text())[:200]}")
                else:
                    # A location left out (slow, failing) is named in a Warning: a partial list.
                    warnings = resp.headers.getall("Warning", [])
                    partial.extend(warnings)
                    (slow_times if warnings else times).append(took)
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
    named = sorted({name for w in partial for name in remote.children() if f" {name} " in w})
    return [
        {"benchmark": "load", "figure": "errors", "value": len(errors), "first": errors[:3]},
        {
            "benchmark": "load",
            "figure": "locations_left_out",
            "value": len(partial),
            "named": named,
            "others": sum(1 for w in partial if f" {SLOW} " not in w),
            "first": sorted(set(partial))[:3],
        },
        {
            "benchmark": "load",
            "figure": "slow_lists",
            "value": len(slow_times),
            "max_ms": round(max(slow_times, default=0.0) * 1000, 1),
            "timeout_ms": REMOTE_TIMEOUT * 1000,
            "slow_location": SLOW,
        },
        {
            "benchmark": "load",
            "figure": "lists_per_s",
            "value": round((len(times) + len(slow_times)) / elapsed, 1),
        },
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
        cmd = [
            "kubectl",
            "get",
            resource,
            "-A",
            "--kubeconfig",
            str(bedconfig.user_kubeconfig_path()),
        ]
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


@contextlib.asynccontextmanager
async def behind_proxy(hub: Kube, name: str) -> AsyncIterator[SlowProxy]:
    """Location `name` reached through the slow proxy, once kmc-apiserver talks to it through
    it; pointed back at its apiserver after."""
    state = bed.load()
    assert state is not None, "the test bed is not up"
    port = state.cluster(name).ports["apiserver"]
    path = f"/api/v1/namespaces/kmc-system/secrets/location-{name}"
    data = (await hub.get(path))["data"]
    with SlowProxy(port, DELAY) as proxy:
        await hub.merge_patch(path, {"data": pointed_at(data, proxy.port)})
        try:
            deadline = time.monotonic() + 30
            while not proxy.connections:  # its client is rebuilt at the next probe
                assert time.monotonic() < deadline, f"{name} is not reached through the proxy"
                await asyncio.sleep(0.05)
            yield proxy
        finally:
            await hub.merge_patch(path, {"data": data})


async def placed_on(hub: Kube, name: str) -> set[str]:
    """The workloads placed on location `name` now."""
    items = (await hub.get(f"/apis/apps/v1/namespaces/{NAMESPACE}/deployments"))["items"]
    return {d["metadata"]["name"] for d in items if name in _placement(d)}


async def converge_others(
    hub: Kube, slow: str, was_there: set[str], limit: float = 120.0
) -> dict[str, Any]:
    """Seconds until every workload that is not, and was not before it turned slow, placed
    on the slow location has caught up. (Those that were there move out once it is not
    Ready: their handover waits on it, and they are not "the others".)"""
    path = f"/apis/apps/v1/namespaces/{NAMESPACE}/deployments"
    started = time.monotonic()
    while True:
        items = (await hub.get(path))["items"]
        others = [
            d for d in items if slow not in _placement(d) and d["metadata"]["name"] not in was_there
        ]
        behind = [d["metadata"]["name"] for d in others if not _caught_up(d)]
        took = time.monotonic() - started
        if not behind or took > limit:
            return {
                "benchmark": "load",
                "figure": "converge_others_s",
                "value": round(took, 1) if not behind else None,
                "workloads": len(others),
                "behind": len(behind),
                "first_behind": behind[:3],
            }
        await asyncio.sleep(1)


def _placement(obj: dict[str, Any]) -> dict[str, Any]:
    text = (obj["metadata"].get("annotations") or {}).get("kmc.dev/placement") or "{}"
    placement: dict[str, Any] = json.loads(text)
    return placement


def _caught_up(obj: dict[str, Any]) -> bool:
    status = obj.get("status") or {}
    return bool(
        status.get("observedGeneration") == obj["metadata"].get("generation")
        and status.get("availableReplicas") == obj["spec"].get("replicas")
        and _placement(obj)
    )


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
            was_there = await placed_on(hub, SLOW)
            async with behind_proxy(hub, SLOW):
                rows += await clients(hub, count, seconds)
                rows.append(await converge_others(hub, SLOW, was_there))
            return rows
        finally:  # gone before the next phase (push against pull) measures anything
            await hub.delete(f"/api/v1/namespaces/{NAMESPACE}")
            await namespaces.gone(hub, NAMESPACE)


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
