"""Per-location overrides benchmarks (issue #32), on the running test bed with kubectl-mc
installed.

- propagation with overrides: hub create → the object in every child, p50/p99 over N
  ConfigMaps (Replicate), in a namespace with 10 Overrides that target every ConfigMap in it
  (each sets a label) against a namespace with none, creates alternating between the two in
  the same run, one at a time. Goal: with at most 1.1 times without.
- an Override change: N ConfigMaps placed in every child, one Override targeting them all;
  from the Override's change (a new label value) until every child of every target wears it.

Latencies are taken from the children's watch events, never from polling the children.
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
from apiserver.objects import Obj
from bench.report import row
from bench.sync import CHILDREN, Seen, _client, _pct, seen_everywhere

OVERRIDES = "/apis/kmc.dev/v1alpha1/namespaces/{ns}/overrides"
REPLICATE = json.dumps({"type": "Replicate"})


def configmap(name: str, i: int) -> Obj:
    return {
        "metadata": {"name": name, "annotations": {"kmc.dev/strategy": REPLICATE}},
        "data": {"i": str(i)},
    }


def override(name: str, label: str, value: str, priority: int = 0) -> Obj:
    return {
        "apiVersion": "kmc.dev/v1alpha1",
        "kind": "Override",
        "metadata": {"name": name},
        "spec": {
            "targets": [{"apiVersion": "v1", "kind": "ConfigMap"}],
            "priority": priority,
            "rules": [{"labels": {"set": {label: value}}}],
        },
    }


async def _namespace(hub: Kube, children: dict[str, Kube], ns: str) -> None:
    await hub.create("/api/v1/namespaces", {"metadata": {"name": ns}})
    for kube in children.values():
        await kube.create("/api/v1/namespaces", {"metadata": {"name": ns}})


async def _drop(hub: Kube, children: dict[str, Kube], ns: str) -> None:
    await hub.delete(f"/api/v1/namespaces/{ns}")
    for kube in children.values():
        with contextlib.suppress(ApiError):  # gone with the hub's already
            await kube.delete(f"/api/v1/namespaces/{ns}")


async def propagation(count: int) -> list[dict[str, Any]]:
    plain, overridden = (f"bench-ovr-{kind}-{uuid.uuid4().hex[:5]}" for kind in ("none", "ten"))
    async with aiohttp.ClientSession() as session:
        hub = await _client(session, "hub")
        children = {c: await _client(session, c) for c in CHILDREN}
        for ns in (plain, overridden):
            await _namespace(hub, children, ns)
        for i in range(10):
            await hub.create(
                OVERRIDES.format(ns=overridden), override(f"o{i}", f"o{i}", "yes", priority=i)
            )

        def every_label(obj: Obj) -> bool:
            labels = obj["metadata"].get("labels") or {}
            return all(labels.get(f"o{i}") == "yes" for i in range(10))

        seen = {
            ns: {
                c: Seen(k, f"/api/v1/namespaces/{ns}/configmaps", wanted)
                for c, k in children.items()
            }
            for ns, wanted in ((plain, lambda o: True), (overridden, every_label))
        }
        tasks = [asyncio.create_task(s.run()) for by in seen.values() for s in by.values()]
        await asyncio.gather(*(s.ready.wait() for by in seen.values() for s in by.values()))
        await asyncio.sleep(2)  # the Overrides reach kmc-apiserver's cache
        took: dict[str, list[float]] = {plain: [], overridden: []}
        for i in range(count):
            for ns in (plain, overridden) if i % 2 else (overridden, plain):
                name = f"cm-{i}"
                started = time.monotonic()
                await hub.create(f"/api/v1/namespaces/{ns}/configmaps", configmap(name, i))
                took[ns].append(await seen_everywhere(seen[ns], name, started))
        for task in tasks:
            task.cancel()
        for ns in (plain, overridden):
            await _drop(hub, children, ns)
    with_, without = took[overridden], took[plain]
    return [
        row(
            "overrides.propagation",
            "p50_ms_10_overrides_vs_none",
            statistics.median(with_) * 1000,
            statistics.median(without) * 1000,
        ),
        row(
            "overrides.propagation",
            "p99_ms_10_overrides_vs_none",
            _pct(with_, 0.99) * 1000,
            _pct(without, 0.99) * 1000,
        ),
    ]


async def change(count: int) -> list[dict[str, Any]]:
    ns = f"bench-ovr-change-{uuid.uuid4().hex[:5]}"
    path = f"/api/v1/namespaces/{ns}/configmaps"
    async with aiohttp.ClientSession() as session:
        hub = await _client(session, "hub")
        children = {c: await _client(session, c) for c in CHILDREN}
        await _namespace(hub, children, ns)

        def rev(value: str) -> Any:
            return lambda o: (o["metadata"].get("labels") or {}).get("rev") == value

        seen = {
            value: {c: Seen(k, path, rev(value)) for c, k in children.items()} for value in "12"
        }
        tasks = [asyncio.create_task(s.run()) for by in seen.values() for s in by.values()]
        await asyncio.gather(*(s.ready.wait() for by in seen.values() for s in by.values()))
        await hub.create(OVERRIDES.format(ns=ns), override("rev", "rev", "1"))
        await asyncio.sleep(2)
        gate = asyncio.Semaphore(16)

        async def create(i: int) -> None:
            async with gate:
                await hub.create(path, configmap(f"cm-{i}", i))

        started = time.monotonic()
        await asyncio.gather(*(create(i) for i in range(count)))
        for i in range(count):
            await seen_everywhere(seen["1"], f"cm-{i}", started, limit=600, poll=0.05)
        placed = time.monotonic() - started
        ours = f"{OVERRIDES.format(ns=ns)}/rev"
        started = time.monotonic()
        await hub.merge_patch(ours, {"spec": {"rules": [{"labels": {"set": {"rev": "2"}}}]}})
        latest = 0.0
        for i in range(count):
            latest = max(
                latest, await seen_everywhere(seen["2"], f"cm-{i}", started, limit=600, poll=0.05)
            )
        for task in tasks:
            task.cancel()
        await _drop(hub, children, ns)
    return [
        row("overrides.change", f"s_to_{count}_targets_updated", latest, digits=2),
        row("overrides.change", f"s_to_{count}_placed_with_override", placed, digits=2),
    ]


def main(argv: list[str]) -> None:
    from bench.report import emit

    count = int(argv[0]) if argv else 200
    targets = int(argv[1]) if len(argv) > 1 else 1000
    rows = asyncio.run(propagation(count))
    rows += asyncio.run(change(targets))
    emit(rows)


if __name__ == "__main__":
    main(sys.argv[1:])
