"""Convergence at scale, on the running test bed with kubectl-mc installed.

N Deployments of 3 replicas are created on the hub (split 1/1/1 over the three children);
the figure is the time from the first create until every hub object reports
availableReplicas 3 for its current generation, i.e. placed, synced, running in every child
and folded back. Each child gets extra kwok nodes for the run so that 1,000 pods fit, and
kmc-apiserver's RSS with all of them placed and its CPU during the run are reported.

The hub's own count of the writes it served from the first create until convergence
(`hubwrites`), per created Deployment, by resource and verb: what kubectl-mc costs the
hub everyone shares. The Deployments are created as the bed's ordinary user, not an admin,
so the hub's priority and fairness treats them as a person's (an admin's are exempt).

The floor, measured first in the same run: the same work done directly, N Deployments of 1
replica created into each of the three children by one client with the same concurrency,
and waited for the same way (every one available for its generation, lists every 3 s).
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
import time
from pathlib import Path
from typing import Any

import aiohttp

from apiserver.kube import config as kubeconfig
from apiserver.kube.client import ApiError, Kube
from bench import hubwrites, metrics, namespaces
from bench.objects import deployment, kwok_nodes
from bench.report import row
from kmc_testbed import bed
from kmc_testbed import config as bedconfig

CHILDREN = ("us-east", "us-west", "eu-west")
EXTRA_NODES = 7
NAMESPACE = "bench-converge"
REQUESTS = {"cpu": "10m", "memory": "16Mi"}


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / 100.0


def _rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS"):
            return int(line.split()[1]) / 1024
    return 0.0


CONCURRENCY = 16  # creates in flight at once, through the hub or directly
SETTLED_WINDOW = 10.0  # seconds after convergence in which the hub's writes are counted apart


def _available(items: list[dict[str, Any]], replicas: int) -> int:
    return sum(
        1
        for d in items
        if (d.get("status") or {}).get("availableReplicas") == replicas
        and (d.get("status") or {}).get("observedGeneration") == d["metadata"]["generation"]
    )


async def direct(count: int) -> float:
    """Seconds to create `count` Deployments of 1 into every child and see them available."""
    namespace = f"{NAMESPACE}-direct"
    async with aiohttp.ClientSession() as session:
        creds = {
            c: await kubeconfig.from_file(bedconfig.user_kubeconfig_path(), c) for c in CHILDREN
        }
        kubes = {c: Kube(session, creds[c], c) for c in CHILDREN}
        for kube in kubes.values():
            await kube.create("/api/v1/namespaces", {"metadata": {"name": namespace}})
        path = f"/apis/apps/v1/namespaces/{namespace}/deployments"
        gate = asyncio.Semaphore(CONCURRENCY)
        started = time.monotonic()

        async def create(kube: Kube, i: int) -> None:
            async with gate:
                await kube.create(path, deployment(f"d{i}", 1, REQUESTS))

        await asyncio.gather(*(create(k, i) for i in range(count) for k in kubes.values()))
        while True:
            lists = await asyncio.gather(*(k.get(path) for k in kubes.values()))
            if all(_available(listing["items"], 1) == count for listing in lists):
                break
            if time.monotonic() - started > 900:
                raise TimeoutError("direct: not converged after 900 s")
            await asyncio.sleep(3.0)
        took = time.monotonic() - started
        for kube in kubes.values():
            await kube.delete(f"/api/v1/namespaces/{namespace}")
        for kube in kubes.values():
            await namespaces.gone(kube, namespace)
    return took


async def converge(count: int) -> list[dict[str, Any]]:
    floor = await direct(count)
    before = metrics.scrape()
    state = bed.load()
    assert state is not None
    pid = state.pids[bed.KMC]
    async with aiohttp.ClientSession() as session:
        hub = Kube(
            session, await kubeconfig.from_file(bedconfig.user_kubeconfig_path(), "hub"), "hub"
        )
        await hub.create("/api/v1/namespaces", {"metadata": {"name": NAMESPACE}})
        path = f"/apis/apps/v1/namespaces/{NAMESPACE}/deployments"
        hub_before = hubwrites.scrape()
        cpu_before, started = _cpu_seconds(pid), time.monotonic()
        gate = asyncio.Semaphore(CONCURRENCY)

        async def create(i: int) -> None:
            async with gate:
                await hub.create(path, deployment(f"d{i}", 3, REQUESTS))

        await asyncio.gather(*(create(i) for i in range(count)))
        created = time.monotonic() - started
        while True:
            done = _available((await hub.get(path))["items"], 3)
            if done == count:
                break
            if time.monotonic() - started > 900:
                raise TimeoutError(f"{done}/{count} converged after 900 s")
            await asyncio.sleep(3.0)  # listing 1,000 objects is not free: do not crowd the run
        converged = time.monotonic() - started
        hub_after = hubwrites.scrape()
        loops = metrics.Loops(before, metrics.scrape())
        cpu = (_cpu_seconds(pid) - cpu_before) / converged * 100
        rss = _rss_mb(pid)
        # Settled means quiet: what the hub still writes in the next 10 s (Events, a late
        # fold, Location status) shows whether anything keeps writing once all is done.
        await asyncio.sleep(SETTLED_WINDOW)
        hub_settled = hubwrites.scrape()
        with contextlib.suppress(ApiError):
            await hub.delete(f"/api/v1/namespaces/{NAMESPACE}")
        await namespaces.gone(hub, NAMESPACE)
    return [
        {
            "benchmark": "sync.converge",
            "figure": f"converge_{count}_s",
            "value": round(converged, 1),
            "baseline": round(floor, 1),
            "ratio": round(converged / floor, 2),
        },
        {
            "benchmark": "sync.converge",
            "figure": f"create_{count}_on_hub_s",
            "value": round(created, 1),
            "baseline": None,
            "ratio": None,
        },
        {
            "benchmark": "kmc-apiserver",
            "figure": f"rss_mb_{count}",
            "value": round(rss, 1),
            "baseline": None,
            "ratio": None,
        },
        {
            "benchmark": "kmc-apiserver",
            "figure": "cpu_pct_while_converging",
            "value": round(cpu, 1),
            "baseline": None,
            "ratio": None,
        },
        *loops.rows("sync.converge"),
        *loops.status_writes("hub.writes", count),
        *hubwrites.HubWrites(hub_before, hub_after).rows("hub.writes", "hub_writes", count),
        row(
            "hub.writes",
            f"hub_writes_in_{SETTLED_WINDOW:.0f}s_after_converged",
            hubwrites.HubWrites(hub_after, hub_settled).total(),
        ),
    ]


def main(argv: list[str]) -> None:
    from bench.report import emit

    count = int(argv[0]) if argv else 1000
    kwok_nodes(True, EXTRA_NODES, "bench", CHILDREN)
    try:
        rows = asyncio.run(converge(count))
    finally:
        kwok_nodes(False, EXTRA_NODES, "bench", CHILDREN)
    emit(rows)


if __name__ == "__main__":
    main(sys.argv[1:])
