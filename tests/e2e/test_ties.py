"""Ties spread: 90 single-replica Deployments with the default strategy over three equal
locations land 30 ± 6 on each (a rendezvous hash of uid and location, not the first name),
and a kmc-apiserver restart, which decides every one of them again, moves none."""

from __future__ import annotations

import json
from collections import Counter

from bench import objects
from kmc_testbed import bed

from .conftest import CHILDREN, Kubectl, run_testbed
from .test_locations import wait_until
from .test_placement import wait_locations_settled, wait_placement
from .test_testbed import deployment

COUNT = 90


def placements(hub: Kubectl, namespace: str) -> dict[str, dict[str, int]]:
    found = {}
    for item in hub.json("get", "deployments", "-n", namespace)["items"]:
        text = (item["metadata"].get("annotations") or {}).get("kmc.dev/placement")
        if text:
            found[item["metadata"]["name"]] = json.loads(text)
    return found


def wait_all_placed(
    hub: Kubectl, namespace: str, timeout: float = 240
) -> dict[str, dict[str, int]]:
    def placed() -> dict[str, dict[str, int]] | None:
        found = placements(hub, namespace)
        return found if len(found) >= COUNT else None

    done: dict[str, dict[str, int]] = wait_until(f"all {COUNT} placed", placed, timeout)
    return done


def test_ninety_single_replicas_spread_evenly_and_a_restart_moves_none(
    installed: bed.State, kubectl: dict[str, Kubectl], namespace: str
) -> None:
    hub = kubectl["hub"]
    wait_locations_settled(hub)
    # Small requests: 30 more pods per child fit beside whatever other tests run.
    small = {"cpu": "1m", "memory": "1Mi"}
    items = [
        objects.deployment(f"web-{index:02d}", 1, small, container_name="web")
        for index in range(COUNT)
    ]
    hub.apply({"apiVersion": "v1", "kind": "List", "items": items}, namespace)
    before = wait_all_placed(hub, namespace)
    counts = Counter(loc for p in before.values() for loc, share in p.items() if share)
    assert set(counts) == set(CHILDREN), counts
    assert all(24 <= count <= 36 for count in counts.values()), counts

    run_testbed("stop", bed.KMC)
    run_testbed("start", bed.KMC)
    # A Deployment made after the restart waits in the same namespace's lane behind the 90
    # the new process decides again first: once it is placed, they have been looked at.
    hub.apply(deployment("after-restart", 1), namespace)
    wait_placement(hub, "deployment", "after-restart", namespace, timeout=120)
    after = placements(hub, namespace)
    after.pop("after-restart")
    assert after == before
    hub.run("delete", "deployments", "--all", "-n", namespace, "--wait=false")
