"""Convergence at scale, on the running test bed with kubectl-mc installed.

N Deployments of 3 replicas are created on the hub (split 1/1/1 over the three children);
the figure is the time from the first create until every hub object reports
availableReplicas 3 for its current generation, i.e. placed, synced, running in every child
and folded back. Each child gets extra kwok nodes for the run so that 1,000 pods fit, and
kmc-apiserver's RSS with all of them placed and its CPU during the run are reported.
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
from bench.objects import deployment, kwok_nodes
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


async def converge(count: int) -> list[dict[str, Any]]:
    state = bed.load()
    assert state is not None
    pid = state.pids[bed.KMC]
    async with aiohttp.ClientSession() as session:
        hub = Kube(session, await kubeconfig.from_file(bedconfig.kubeconfig_path(), "hub"), "hub")
        await hub.create("/api/v1/namespaces", {"metadata": {"name": NAMESPACE}})
        path = f"/apis/apps/v1/namespaces/{NAMESPACE}/deployments"
        cpu_before, started = _cpu_seconds(pid), time.monotonic()
        gate = asyncio.Semaphore(16)

        async def create(i: int) -> None:
            async with gate:
                await hub.create(path, deployment(f"d{i}", 3, REQUESTS))

        await asyncio.gather(*(create(i) for i in range(count)))
        created = time.monotonic() - started
        done = 0
        while True:
            items = (await hub.get(path))["items"]
            done = sum(
                1
                for d in items
                if (d.get("status") or {}).get("availableReplicas") == 3
                and (d.get("status") or {}).get("observedGeneration") == d["metadata"]["generation"]
            )
            if done == count:
                break
            if time.monotonic() - started > 900:
                raise TimeoutError(f"{done}/{count} converged after 900 s")
            await asyncio.sleep(3.0)  # listing 1,000 objects is not free: do not crowd the run
        converged = time.monotonic() - started
        cpu = (_cpu_seconds(pid) - cpu_before) / converged * 100
        rss = _rss_mb(pid)
        with contextlib.suppress(ApiError):
            await hub.delete(f"/api/v1/namespaces/{NAMESPACE}")
    return [
        {
            "benchmark": "sync.converge",
            "figure": f"converge_{count}_s",
            "value": round(converged, 1),
            "baseline": None,
            "ratio": None,
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
