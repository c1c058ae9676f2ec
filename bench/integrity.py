"""Nothing lost, nothing doubled: kmc-apiserver is SIGKILLed at random points while
Deployments are created and scaled, then restarted; once it has converged, every hub
object's children are counted.

- lost: a location in a hub object's placement without its child (or with a child of the
  wrong size) once the run has settled;
- duplicated: a child of ours whose hub object is gone, or that sits in a location the
  placement does not name, or that carries another hub object's uid.

Also: a move sampled every 25 ms, the least available replicas seen against what the
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
    return Kube(
        session, await kubeconfig.from_file(bedconfig.user_kubeconfig_path(), context), context
    )


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
        if _never_placed(hub_obj):
            lost += 1  # nothing of it runs anywhere: it counts, though no child is missing
            continue
        placement = _placement(hub_obj)
        wanted = {loc: share for loc, share in placement.items()}
        total = sum(share or 0 for share in placement.values())
        ok = held.get(name, {}) == wanted and total == hub_obj["spec"]["replicas"]
        settled += ok
        lost += 0 if ok else sum(1 for loc in wanted if held.get(name, {}).get(loc) != wanted[loc])
    return settled, lost, duplicated


def _never_placed(obj: dict[str, Any]) -> bool:
    return "kmc.dev/placement" not in (obj["metadata"].get("annotations") or {})


async def never_placed(hub: Kube, ns: str) -> int:
    """Hub objects with no placement at all (and so in no child)."""
    items = (await hub.get(f"/apis/apps/v1/namespaces/{ns}/deployments"))["items"]
    return sum(map(_never_placed, items))


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
        unplaced = await never_placed(hub, ns)
        await hub.delete(f"/api/v1/namespaces/{ns}")
    return [
        {"benchmark": "integrity", "figure": "lost_objects", "value": lost, "seed": seed},
        {"benchmark": "integrity", "figure": "unplaced_objects", "value": unplaced},
        {"benchmark": "integrity", "figure": "duplicate_objects", "value": duplicated},
        {"benchmark": "integrity", "figure": "settled_objects", "value": settled, "of": objects},
    ]


PERIOD = 0.025  # seconds between samples of the move


async def move(replicas: int = 6) -> list[dict[str, Any]]:
    """A pin to one location, sampled every 25 ms in every child (moves on the bed take a few
    tenths of a second: at 100 ms only two samples fell inside one)."""
    async with aiohttp.ClientSession() as session:
        hub = await client(session, "hub")
        kids = {name: await client(session, name) for name in children()}
        ns = await namespace(hub, kids, "bench-move")
        path = f"/apis/apps/v1/namespaces/{ns}/deployments"
        await hub.create(path, deployment("web", replicas))
        max_unavailable = max(0, replicas // 4)  # the Deployment default: 25%, rounded down

        async def read(kube: Kube) -> tuple[int, float]:
            """(availableReplicas, when the answer came); no child is 0."""
            try:
                child = await kube.get(f"{path}/web")
            except ApiError as err:
                if err.code != 404:
                    raise
                return 0, time.monotonic()
            return int(child.get("status", {}).get("availableReplicas") or 0), time.monotonic()

        async def available() -> tuple[int, dict[str, int], float]:
            """Every child read at once: the sum, each count, and the spread of read times
            (the sum is a snapshot to within it)."""
            answers = await asyncio.gather(*(read(kube) for kube in kids.values()))
            counts = {name: count for name, (count, _) in zip(kids, answers, strict=True)}
            times = [answered for _, answered in answers]
            return sum(counts.values()), counts, max(times) - min(times)

        deadline = time.monotonic() + 120
        while (await available())[0] < replicas:
            if time.monotonic() > deadline:
                raise TimeoutError("the Deployment never became available")
            await asyncio.sleep(0.5)
        target = sorted(kids)[0]
        strategy = json.dumps({"type": "Split", "pin": [target]})
        started = time.monotonic()
        await hub.merge_patch(
            f"{path}/web", {"metadata": {"annotations": {"kmc.dev/strategy": strategy}}}
        )
        # Every 25 ms, whatever changes: a sample taken during the move counts.
        lowest, during, spread, tick = replicas, 0, 0.0, 0
        while True:
            total, counts, skew = await available()
            lowest, spread = min(lowest, total), max(spread, skew)
            if (
                counts[target] == replicas
                and total == replicas
                and set(counts.values())
                <= {
                    0,
                    replicas,
                }
            ):
                break
            during += 1
            if time.monotonic() - started > 180:
                raise TimeoutError(f"the move did not finish: {counts}")
            tick = max(tick + 1, int((time.monotonic() - started) / PERIOD) + 1)
            await asyncio.sleep(max(0.0, started + tick * PERIOD - time.monotonic()))
        took = time.monotonic() - started
        await hub.delete(f"/api/v1/namespaces/{ns}")
    return [
        {
            "benchmark": "move",
            "figure": "min_available_ratio",
            "value": round(lowest / (replicas - max_unavailable), 2),
            "lowest_available": lowest,
            "allowed_minimum": replicas - max_unavailable,
            "samples_during_move": during,
            "read_spread_ms": round(spread * 1000, 1),
            "seconds": round(took, 1),
        },
        {"benchmark": "move", "figure": "samples_during_move", "value": during},
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
