"""Ties spread: through `decide`, single-replica workloads with the default strategy over
equal locations land evenly by a rendezvous hash of (uid, location), and deciding again from
what was placed (a restart) moves none of them."""

from __future__ import annotations

import uuid
from collections import Counter
from typing import Any

from apiserver.kinds import Key
from apiserver.loops.placement.load import Load
from apiserver.placement.engine import decide
from tests.unit.shapes import shape
from tests.unit.test_placement_engine import NOW, deployment, loc, strategy

LOCATIONS = [loc("eu-west"), loc("us-east"), loc("us-west")]


def workload(index: int, replicas: int = 1) -> dict[str, Any]:
    obj = deployment(replicas)
    obj["metadata"] = {
        "name": f"web-{index}",
        "uid": str(uuid.uuid5(uuid.NAMESPACE_URL, str(index))),
    }
    return obj


def key(index: int) -> Key:
    return Key("apps/v1/deployments", "demo", f"web-{index}")


def test_ninety_single_replica_deployments_spread_and_stay() -> None:
    """As the placement loop decides a burst: each decision sees the load of those before."""
    load, placed = Load(), {}
    for index in range(90):
        decision = decide(
            workload(index),
            shape(workload(index)),
            strategy(),
            LOCATIONS,
            {},
            NOW,
            load=load.besides(key(index)),
        )
        assert sum(v or 0 for v in decision.placement.values()) == 1
        load.note(key(index), decision.placement)
        placed[index] = decision.placement
    counts = Counter(name for p in placed.values() for name, share in p.items() if share)
    assert counts == {"eu-west": 30, "us-east": 30, "us-west": 30}
    # A restart: the tally is primed from the placements, and every one is decided again.
    again_load = Load()
    for index, placement in placed.items():
        again_load.note(key(index), placement)
    for index, placement in reversed(placed.items()):
        own = again_load.besides(key(index))
        again = decide(
            workload(index), shape(workload(index)), strategy(), LOCATIONS, placement, NOW, load=own
        )
        assert again.placement == placement and not again.changes


def test_without_a_tally_the_hash_still_spreads() -> None:
    counts = Counter(
        name
        for index in range(90)
        for name, share in decide(
            workload(index), shape(workload(index)), strategy(), LOCATIONS, {}, NOW
        ).placement.items()
        if share
    )
    assert set(counts) == {"eu-west", "us-east", "us-west"} and sum(counts.values()) == 90


def test_a_new_location_takes_new_work_first_and_moves_nothing_placed() -> None:
    load = Load()
    for index in range(6):
        load.note(key(index), {"eu-west": 1} if index % 2 else {"us-east": 1})
    fresh = [*LOCATIONS[:2], LOCATIONS[2]]
    decision = decide(
        workload(99), shape(workload(99)), strategy(), fresh, {}, NOW, load=load.besides(key(99))
    )
    assert decision.placement == {"us-west": 1}
    kept = decide(
        workload(1),
        shape(workload(1)),
        strategy(),
        fresh,
        {"eu-west": 1},
        NOW,
        load=load.besides(key(1)),
    )
    assert kept.placement == {"eu-west": 1}


def test_a_workload_without_a_uid_still_breaks_ties_by_name() -> None:
    obj = deployment(5)
    assert decide(obj, shape(obj), strategy(), LOCATIONS, {}, NOW).placement == {
        "eu-west": 2,
        "us-east": 2,
        "us-west": 1,
    }
