"""kmc-apiserver SIGKILLed in the middle of `kubectl mc drain --wait`: the drain still ends,
the drained location is left with nothing of ours, and every other object is where its
placement says — 0 lost, 0 duplicated.

Seeded like the other fault tests (KMC_FAULT_SEEDS): the seed picks the location, the
workloads' sizes and the moment of the kill.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import subprocess
import time

import aiohttp
import pytest

from apiserver.kube.client import Kube
from bench import integrity
from bench.objects import deployment
from kmc_testbed import bed, config
from tests.e2e.conftest import VENV_BIN, Kubectl
from tests.faults.test_kills import SEEDS

OBJECTS = 8


@pytest.mark.parametrize("seed", SEEDS)
def test_kmc_apiserver_killed_during_a_drain_loses_nothing(
    installed: bed.State, kubectl: dict[str, Kubectl], seed: int
) -> None:
    rng = random.Random(seed)
    hub = kubectl["hub"]
    drained = rng.choice(["us-east", "us-west", "eu-west"])
    ns = asyncio.run(_settled_workloads(rng))
    try:
        placements = _placements(hub, ns)
        assert any(drained in p for p in placements.values()), placements
        drain = subprocess.Popen(
            [
                hub.binary,
                *("mc", "drain", drained, "--wait", "--timeout", "4m"),
                *("--kubeconfig", str(config.kubeconfig_path()), "--context", "hub"),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "PATH": f"{VENV_BIN}{os.pathsep}{os.environ['PATH']}"},
        )
        assert drain.stdout is not None
        said = [drain.stdout.readline()]
        assert "cordoned" in said[0], said
        time.sleep(rng.uniform(0.0, 0.5))
        integrity.kill_kmc()
        # The kill must land in the middle: the drain still waiting, children still there.
        assert drain.poll() is None, f"the drain ended before the kill: {said}"
        there = kubectl[drained].run("get", "deployments", "-n", ns, "-o", "name").stdout
        assert there.strip(), f"{drained} was empty before the kill"
        time.sleep(rng.uniform(0.5, 2.0))
        integrity.start_kmc()
        out, err = drain.communicate(timeout=300)
        out = "".join(said) + out
        assert drain.returncode == 0, f"{out}\n{err}"
        assert f"location.kmc.dev/{drained} drained" in out
        placements = _placements(hub, ns)
        assert not any(drained in p for p in placements.values()), placements
        settled, lost, duplicated = asyncio.run(_count(ns))
        assert (settled, lost, duplicated) == (OBJECTS, 0, 0)
    finally:
        hub.mc("uncordon", drained)
        hub.run("delete", "namespace", ns, "--wait=false")


async def _settled_workloads(rng: random.Random) -> str:
    async with aiohttp.ClientSession() as session:
        hub = await integrity.client(session, "hub")
        kids = {name: await integrity.client(session, name) for name in integrity.children()}
        ns = await integrity.namespace(hub, kids, "fault-drain")
        path = f"/apis/apps/v1/namespaces/{ns}/deployments"
        for i in range(OBJECTS):
            await hub.create(path, deployment(f"d{i}", rng.randint(3, 6)))
        await _until_settled(hub, kids, ns)
        return ns


async def _count(ns: str) -> tuple[int, int, int]:
    async with aiohttp.ClientSession() as session:
        hub = await integrity.client(session, "hub")
        kids = {name: await integrity.client(session, name) for name in integrity.children()}
        return await _until_settled(hub, kids, ns)


async def _until_settled(hub: Kube, kids: dict[str, Kube], ns: str) -> tuple[int, int, int]:
    deadline = time.monotonic() + 180
    while True:
        settled, lost, duplicated = await integrity.count(hub, kids, ns)
        if (settled == OBJECTS and duplicated == 0) or time.monotonic() > deadline:
            return settled, lost, duplicated
        await asyncio.sleep(1)


def _placements(hub: Kubectl, ns: str) -> dict[str, dict[str, int]]:
    listing = hub.json("get", "deployments", "-n", ns)
    return {
        d["metadata"]["name"]: json.loads(d["metadata"]["annotations"]["kmc.dev/placement"])
        for d in listing["items"]
    }
