"""Nothing lost, nothing doubled: kmc-apiserver is SIGKILLed at random points while
Deployments are created and scaled, then restarted; once it has converged, every hub
object's children are counted.

- lost: a location in a hub object's placement without its child (or with a child of the
  wrong size) once the run has settled;
- duplicated: a child of ours whose hub object is gone, or that sits in a location the
  placement does not name, or that carries another hub object's uid.

Also: a move sampled every 100 ms, the least available replicas seen against what the
Deployment allows (replicas - maxUnavailable): `move_min_available_ratio` >= 1 means the
move never went below it.

Run: `PYTHONPATH=hack .venv/bin/python -m bench.integrity [--seed N]`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import signal
import subprocess
import sys
import time
import uuid
from typing import Any

import aiohttp

from apiserver.kube import config as kubeconfig
from apiserver.kube.client import ApiError, Kube
from bench.objects import deployment
from bench.report import emit
from kmc_testbed import bed
from kmc_testbed import config as bedconfig

ORIGIN = "kmc.dev/origin-uid"


async def client(session: aiohttp.ClientSession, context: str) -> Kube:
    return Kube(session, await kubeconfig.from_file(bedconfig.kubeconfig_path(), context), context)


def children() -> list[str]:
    state = bed.load()
    assert state is not None, "the test bed is not up"
    return [c.name for c in state.clusters if c.role != bed.HUB]


def kill_kmc() -> None:
    state = bed.load()
    assert state is not None
    os.kill(state.pids[bed.KMC], signal.SIGKILL)


def start_kmc() -> None:
    testbed = str(bedconfig.REPO_ROOT / "hack" / "testbed")
    subprocess.run([testbed, "start", bed.KMC], check=True, capture_output=True)


async def namespace(hub: Kube, kids: dict[str, Kube], prefix: str) -> str:
    name = f"{prefix}-{uuid.uuid4().hex[:5]}"
    for kube in (hub, *kids.values()):
        await kube.create("/api/v1/namespaces", {"metadata": {"name": name}})
    return name


async def count(hub: Kube, kids: dict[str, Kube], ns: str) -> tuple[int, int, int]:
    """(settled hub objects, lost, duplicated) as the clusters say now."""
    hub_items = (await hub.get(f"/apis/apps/v1/namespaces/{ns}/deployments"))["items"]
    by_name = {d["metadata"]["name"]: d for d in hub_items}
    held: dict[str, dict[str, Any]] = {}
    duplicated = 0
    for location, kube in kids.items():
        listing = await kube.get(f"/apis/apps/v1/namespaces/{ns}/deployments", labelSelector=ORIGIN)
        for child in listing["items"]:
            name = child["metadata"]["name"]
            hub_obj = by_name.get(name)
            placement = _placement(hub_obj) if hub_obj else {}
            if (
                hub_obj is None
                or location not in placement
                or child["metadata"]["labels"][ORIGIN] != hub_obj["metadata"]["uid"]
            ):
                duplicated += 1
                continue
            held.setdefault(name, {})[location] = child["spec"].get("replicas")
    lost = settled = 0
    for name, hub_obj in by_name.items():
        placement = _placement(hub_obj)
        wanted = {loc: share for loc, share in placement.items()}
        total = sum(share or 0 for share in placement.values())
        ok = held.get(name, {}) == wanted and total == hub_obj["spec"]["replicas"]
        settled += ok
        lost += 0 if ok else sum(1 for loc in wanted if held.get(name, {}).get(loc) != wanted[loc])
    return settled, lost, duplicated


def _placement(obj: dict[str, Any]) -> dict[str, Any]:
    text = (obj["metadata"].get("annotations") or {}).get("kmc.dev/placement")
    return dict(json.loads(text)) if text else {}


async def integrity(seed: int, objects: int) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    async with aiohttp.ClientSession() as session:
        hub = await client(session, "hub")
        kids = {name: await client(session, name) for name in children()}
        ns = await namespace(hub, kids, "bench-integrity")
        path = f"/apis/apps/v1/namespaces/{ns}/deployments"
        kill_at = {rng.randrange(objects // 4, objects // 2), rng.randrange(objects // 2, objects)}
        for i in range(objects):
            if i in kill_at:
                kill_kmc()
                await asyncio.sleep(rng.uniform(0.5, 2.0))
                start_kmc()
            await hub.create(path, deployment(f"d{i}", rng.randint(1, 5)))
            await asyncio.sleep(rng.uniform(0, 0.05))
        # Scale half of them, with one more kill in the middle of it.
        scaled = rng.sample(range(objects), objects // 2)
        for n, i in enumerate(scaled):
            if n == len(scaled) // 2:
                kill_kmc()
                start_kmc()
            patch = {"spec": {"replicas": rng.randint(0, 6)}}
            await hub.merge_patch(f"{path}/d{i}", patch)
        deadline = time.monotonic() + 180
        while True:
            settled, lost, duplicated = await count(hub, kids, ns)
            if (settled == objects and duplicated == 0) or time.monotonic() > deadline:
                break
            await asyncio.sleep(2)
        await hub.delete(f"/api/v1/namespaces/{ns}")
    return [
        {"benchmark": "integrity", "figure": "lost_objects", "value": lost, "seed": seed},
        {"benchmark": "integrity", "figure": "duplicate_objects", "value": duplicated},
        {"benchmark": "integrity", "figure": "settled_objects", "value": settled, "of": objects},
    ]


async def move(replicas: int = 6) -> list[dict[str, Any]]:
    """A pin to one location, sampled every 100 ms in every child."""
    async with aiohttp.ClientSession() as session:
        hub = await client(session, "hub")
        kids = {name: await client(session, name) for name in children()}
        ns = await namespace(hub, kids, "bench-move")
        path = f"/apis/apps/v1/namespaces/{ns}/deployments"
        await hub.create(path, deployment("web", replicas))
        max_unavailable = max(0, replicas // 4)  # the Deployment default: 25%, rounded down

        async def one_pass() -> dict[str, tuple[str, int]]:
            seen: dict[str, tuple[str, int]] = {}
            for name, kube in kids.items():
                try:
                    child = await kube.get(f"{path}/web")
                except ApiError:
                    seen[name] = ("", 0)
                    continue
                available = int(child.get("status", {}).get("availableReplicas") or 0)
                seen[name] = (child["metadata"]["resourceVersion"], available)
            return seen

        async def available() -> tuple[int, dict[str, int]]:
            """A snapshot: two passes that agree on every resourceVersion (children are read
            one after another, so a single pass can miss a make and count its break)."""
            previous, now = None, await one_pass()
            while now != previous:
                previous, now = now, await one_pass()
            counts = {name: count for name, (_, count) in now.items()}
            return sum(counts.values()), counts

        deadline = time.monotonic() + 120
        while (await available())[0] < replicas:
            if time.monotonic() > deadline:
                raise TimeoutError("the Deployment never became available")
            await asyncio.sleep(0.5)
        target = sorted(kids)[0]
        strategy = json.dumps({"type": "Split", "pin": [target]})
        await hub.merge_patch(
            f"{path}/web", {"metadata": {"annotations": {"kmc.dev/strategy": strategy}}}
        )
        lowest = replicas
        started = time.monotonic()
        while True:
            total, counts = await available()
            lowest = min(lowest, total)
            if counts[target] == replicas and total == replicas:
                break
            if time.monotonic() - started > 180:
                raise TimeoutError(f"the move did not finish: {counts}")
            await asyncio.sleep(0.1)
        took = time.monotonic() - started
        await hub.delete(f"/api/v1/namespaces/{ns}")
    return [
        {
            "benchmark": "move",
            "figure": "min_available_ratio",
            "value": round(lowest / (replicas - max_unavailable), 2),
            "lowest_available": lowest,
            "allowed_minimum": replicas - max_unavailable,
            "seconds": round(took, 1),
        }
    ]


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.integrity")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--objects", type=int, default=40)
    args = parser.parse_args(argv)
    rows = asyncio.run(integrity(args.seed, args.objects))
    rows += asyncio.run(move())
    emit(rows)


if __name__ == "__main__":
    main(sys.argv[1:])
