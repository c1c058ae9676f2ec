"""Make-before-break across push and pull locations (docs/pull.md, issue #34 item 5): a
Deployment of 4 that may lose 1 is moved with `kubectl mc move` from a push location onto a
pull location (the spare cluster of `test_pull_location`, written by its agent only) and back.
The available replicas of both children, read straight from their apiservers all along,
never add up to fewer than 3, and each move ends with all 4 in the target and nothing left in
the other: the sync loop decides each step over both locations (the pull child's numbers from
its agent's report) and the pull location's feed serves that step, not the goal."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from .conftest import Kubectl
from .test_agent import stop, wait_until
from .test_placement import wait_locations_settled
from .test_pull_location import (
    NAME,
    PUSHED,
    placement,
    ready_is,
    replicas_in,
    spare,
    start_agent,
)
from .test_sync import AvailabilitySampler, moving

__all__ = ["spare"]  # the fixture, imported for pytest

REPLICAS, MAX_UNAVAILABLE = 4, 1


def all_in(hub: Kubectl, clusters: dict[str, Kubectl], target: str, namespace: str) -> Any:
    """Wait until the placement is all in `target`, its child runs all replicas available, and
    the other location holds nothing of it."""

    def check() -> tuple[Any, str | None]:
        where = placement(hub, namespace)
        there = {name: replicas_in(cluster, namespace) for name, cluster in clusters.items()}
        found = clusters[target].run(
            "get", "deployment", "web", "-n", namespace, "-o", "json", check=False
        )
        available = (
            (json.loads(found.stdout).get("status") or {}).get("availableReplicas")
            if found.returncode == 0
            else None
        )
        others = [n for n in clusters if n != target]
        if (
            where == {target: REPLICAS}
            and there[target] == REPLICAS
            and available == REPLICAS
            and all(there[n] is None for n in others)
        ):
            return there, None
        return there, f"placement {where}, replicas {there}, available in {target}: {available}"

    return wait_until(f"all in {target}", check)


def move(
    hub: Kubectl, clusters: dict[str, Kubectl], target: str, namespace: str
) -> AvailabilitySampler:
    """`kubectl mc move` to `target`, sampling both children's available replicas."""
    with AvailabilitySampler("web", namespace, period=0.05, clusters=list(clusters)) as sampler:
        sampler.begin()
        out = hub.mc("move", "deployment/web", "--to", target, "--wait", "-n", namespace)
        all_in(hub, clusters, target, namespace)
        sampler.end()
    assert out.stdout.splitlines()[-1] == f"deployment.apps/web moved to {target}", out.stdout
    return sampler


def test_a_move_between_a_push_and_a_pull_location_is_made_before_break(
    spare: Path, kubectl: dict[str, Kubectl], namespace: str
) -> None:
    hub, pushed, pulled = kubectl["hub"], kubectl[PUSHED], Kubectl(NAME)
    clusters = {PUSHED: pushed, NAME: pulled}
    hub.apply(
        {
            "apiVersion": "kmc.dev/v1alpha1",
            "kind": "Location",
            "metadata": {"name": NAME, "labels": {"topology.kubernetes.io/zone": NAME}},
            "spec": {"mode": "Pull"},
        }
    )
    agent = start_agent(spare)
    try:
        wait_until("Ready from the lease", ready_is(hub, NAME, "True", "AgentLease"))
        wait_locations_settled(hub)
        web = moving(REPLICAS, MAX_UNAVAILABLE)
        web["metadata"]["annotations"] = {
            "kmc.dev/strategy": json.dumps({"type": "Split", "pin": [PUSHED]})
        }
        hub.apply(web, namespace)
        all_in(hub, clusters, PUSHED, namespace)

        floor = REPLICAS - MAX_UNAVAILABLE
        for target in (NAME, PUSHED):  # push -> pull, then back
            sampler = move(hub, clusters, target, namespace)
            assert len(sampler.during) >= 5, sampler.report()  # sampled while it moved
            assert min(s.total for s in sampler.during) >= floor, sampler.report()
            # Both copies ran at once on the way: made before the old one was broken.
            assert max(s.total for s in sampler.during) > REPLICAS, sampler.report()
    finally:
        stop(agent)
