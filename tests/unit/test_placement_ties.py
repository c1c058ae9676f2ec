"""Ties spread: through `decide`, single-replica workloads with the default strategy over
equal locations land evenly by a rendezvous hash of (uid, location), and deciding again from
what was placed (a restart) moves none of them."""

from __future__ import annotations

import uuid
from collections import Counter
from typing import Any

from apiserver.placement.engine import decide
from tests.unit.test_placement_engine import NOW, deployment, loc, strategy

LOCATIONS = [loc("eu-west"), loc("us-east"), loc("us-west")]


def workload(index: int, replicas: int = 1) -> dict[str, Any]:
    obj = deployment(replicas)
    obj["metadata"] = {
        "name": f"web-{index}",
        "uid": str(uuid.uuid5(uuid.NAMESPACE_URL, str(index))),
    }
    return obj


def test_ninety_single_replica_deployments_spread_and_stay() -> None:
    placed = {}
    for index in range(90):
        decision = decide(workload(index), strategy(), LOCATIONS, {}, NOW)
        assert sum(v or 0 for v in decision.placement.values()) == 1
        placed[index] = decision.placement
    counts = Counter(name for p in placed.values() for name, share in p.items() if share)
    assert set(counts) == {"eu-west", "us-east", "us-west"}
    assert all(24 <= count <= 36 for count in counts.values()), counts
    for index, placement in placed.items():
        again = decide(workload(index), strategy(), LOCATIONS, placement, NOW)
        assert again.placement == placement and not again.changes


def test_a_workload_without_a_uid_still_breaks_ties_by_name() -> None:
    obj = deployment(5)
    assert decide(obj, strategy(), LOCATIONS, {}, NOW).placement == {
        "eu-west": 2,
        "us-east": 2,
        "us-west": 1,
    }
