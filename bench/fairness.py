"""Fairness, on the running test bed with kubectl-mc installed.

One person creates single objects in their namespace while someone else's namespace is busy:
1,000 Deployments being created there, then the same being deleted. The figure is the
propagation p50 of the single creates (hub create → seen in every child, as in
`sync.propagation`) during each of those, against the same measured on an idle bed first.
Goal: at most 3x the idle p50; a queue served in arrival order makes the single create wait
behind the whole bulk.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import statistics
import sys
import time
import uuid
from typing import Any

import aiohttp

from apiserver.kube.client import ApiError, Kube
from bench import metrics, namespaces
from bench.converge import EXTRA_NODES, REQUESTS
from bench.objects import deployment, kwok_nodes
from bench.report import row
from bench.sync import CHILDREN, Seen, _client, seen_everywhere

SAMPLES = 20


async def _probe(
    hub: Kube, children: dict[str, Kube], seen: dict[str, Seen], path: str, prefix: str
) -> tuple[list[float], list[float]]:
    """Propagation latencies of SAMPLES ConfigMaps created one by one through the hub, half a
    second apart; and, before each, of one created straight into the three children at once
    (what the machine allows under the same load)."""
    strategy = json.dumps({"type": "Replicate"})
    times, direct = [], []
    for i in range(SAMPLES):
        name = f"direct-{prefix}-{i}"
        started = time.monotonic()
        await asyncio.gather(
            *(k.create(path, {"metadata": {"name": name}}) for k in children.values())
        )
        direct.append(await seen_everywhere(seen, name, started, 120))
        name = f"{prefix}-{i}"
        body = {
            "metadata": {"name": name, "annotations": {"kmc.dev/strategy": strategy}},
            "data": {"i": str(i)},
        }
        started = time.monotonic()
        await hub.create(path, body)
        times.append(await seen_everywhere(seen, name, started, 120))
        await asyncio.sleep(0.5)
    return times, direct


async def fairness(count: int) -> list[dict[str, Any]]:
    suffix = uuid.uuid4().hex[:5]
    mine, bulk = f"bench-fair-{suffix}", f"bench-bulk-{suffix}"
    async with aiohttp.ClientSession() as session:
        hub = await _client(session, "hub")
        children = {c: await _client(session, c) for c in CHILDREN}
        for ns in (mine, bulk):
            await hub.create("/api/v1/namespaces", {"metadata": {"name": ns}})
        for kube in children.values():  # so the watches below can start before any object
            with contextlib.suppress(ApiError):
                await kube.create("/api/v1/namespaces", {"metadata": {"name": mine}})
        path = f"/api/v1/namespaces/{mine}/configmaps"
        seen = {c: Seen(k, path, lambda o: True) for c, k in children.items()}
        watches = [asyncio.create_task(s.run()) for s in seen.values()]
        await asyncio.gather(*(s.ready.wait() for s in seen.values()))
        idle, _ = await _probe(hub, children, seen, path, "idle")
        before = metrics.scrape()

        gate = asyncio.Semaphore(16)
        bulk_path = f"/apis/apps/v1/namespaces/{bulk}/deployments"

        async def create(i: int) -> None:
            async with gate:
                await hub.create(bulk_path, deployment(f"d{i}", 3, REQUESTS))

        async def create_all() -> None:
            await asyncio.gather(*(create(i) for i in range(count)))

        creating = asyncio.create_task(create_all())
        await asyncio.sleep(1.0)
        during_creates = await _probe(hub, children, seen, path, "creates")
        await creating
        # Let the bulk be placed everywhere before it goes, so the delete has work to do.
        await asyncio.sleep(20.0)
        await hub.delete(f"/api/v1/namespaces/{bulk}")
        await asyncio.sleep(1.0)
        during_deletes = await _probe(hub, children, seen, path, "deletes")
        loops = metrics.Loops(before, metrics.scrape())
        for task in watches:
            task.cancel()
        await hub.delete(f"/api/v1/namespaces/{mine}")
        for kube in children.values():  # made by hand above: ours to delete
            with contextlib.suppress(ApiError):
                await kube.delete(f"/api/v1/namespaces/{mine}")
        await namespaces.gone(hub, bulk, every=1.0)
        await namespaces.gone(hub, mine, every=1.0)
    base = statistics.median(idle)
    rows = []
    for what, (times, direct) in (("creating", during_creates), ("deleting", during_deletes)):
        p50 = statistics.median(times)
        rows += [
            row("fairness", f"p50_ms_while_{what}_{count}", p50 * 1000, base * 1000),
            row(
                "fairness.floor",
                f"p50_ms_while_{what}_{count}_vs_direct_meanwhile",
                p50 * 1000,
                statistics.median(direct) * 1000,
            ),
        ]
    return rows + loops.rows("fairness")


def measure(count: int = 1000) -> list[dict[str, Any]]:
    kwok_nodes(True, EXTRA_NODES, "fair", CHILDREN)
    try:
        return asyncio.run(fairness(count))
    finally:
        kwok_nodes(False, EXTRA_NODES, "fair", CHILDREN)


def main(argv: list[str]) -> None:
    from bench.report import emit

    emit(measure(int(argv[0]) if argv else 1000))


if __name__ == "__main__":
    main(sys.argv[1:])
