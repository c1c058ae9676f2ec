"""Kill things at random points while objects are created, scaled and moved; after every
fault the bed converges and each hub object has exactly the children its placement names.

Seeded: CI runs the seeds in KMC_FAULT_SEEDS (default "1"); `hack/faults` runs more.
"""

from __future__ import annotations

import asyncio
import os
import random
import time

import aiohttp
import pytest

from apiserver.kube.client import ApiError, Kube
from bench import integrity
from bench.objects import deployment
from kmc_testbed import bed
from tests.e2e.conftest import run_testbed

SEEDS = [int(s) for s in os.environ.get("KMC_FAULT_SEEDS", "1").split(",") if s.strip()]


@pytest.mark.parametrize("seed", SEEDS)
def test_kmc_apiserver_killed_during_creates_and_scales_loses_nothing(
    installed: bed.State, seed: int
) -> None:
    rows = asyncio.run(integrity.integrity(seed, 12))
    found = {row["figure"]: row["value"] for row in rows}
    assert found == {
        "lost_objects": 0,
        "unplaced_objects": 0,
        "duplicate_objects": 0,
        "settled_objects": 12,
    }


@pytest.mark.parametrize("seed", SEEDS)
def test_apiservers_and_etcd_killed_during_creates_lose_nothing(
    installed: bed.State, seed: int
) -> None:
    rng = random.Random(seed)
    faults = ["us-east", "hub-apiserver", "etcd"]
    rng.shuffle(faults)
    lost, duplicated, settled = asyncio.run(_with_faults(rng, faults, objects=10))
    assert (lost, duplicated, settled) == (0, 0, 10)


async def _with_faults(rng: random.Random, faults: list[str], objects: int) -> tuple[int, int, int]:
    async with aiohttp.ClientSession() as session:
        hub = await integrity.client(session, "hub")
        kids = {name: await integrity.client(session, name) for name in integrity.children()}
        ns = await integrity.namespace(hub, kids, "fault-kills")
        path = f"/apis/apps/v1/namespaces/{ns}/deployments"
        at = sorted(rng.sample(range(1, objects), len(faults)))
        for i in range(objects):
            if at and i == at[0]:
                at.pop(0)
                component = faults.pop(0)
                run_testbed("stop", component)
                await asyncio.sleep(rng.uniform(0.5, 2.0))
                run_testbed("start", component)
            await _create(hub, path, deployment(f"d{i}", rng.randint(1, 4)))
        deadline = time.monotonic() + 240
        while True:
            settled, lost, duplicated = await integrity.count(hub, kids, ns)
            if (settled == objects and duplicated == 0) or time.monotonic() > deadline:
                break
            await asyncio.sleep(2)
        await hub.delete(f"/api/v1/namespaces/{ns}")
        return lost, duplicated, settled


async def _create(hub: Kube, path: str, body: dict[str, object]) -> None:
    """A create right after a restart may meet a hub that is not serving yet: retry."""
    for _ in range(60):
        try:
            await hub.create(path, body)
            return
        except ApiError as err:
            if err.code < 500 and err.code != 429:
                raise
            await asyncio.sleep(1)
    raise TimeoutError(f"the hub did not take {path}")
