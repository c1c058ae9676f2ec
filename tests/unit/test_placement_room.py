"""No move without room: replicas stuck for want of room move only as far as the other
locations' free CPU, memory and pod slots fit them; what fits nowhere stays where it is, the
decision says what each location lacks, and deciding again changes nothing (no flapping)."""

from __future__ import annotations

from typing import Any

from apiserver.kinds import DEPLOYMENT
from apiserver.placement.engine import Resources
from apiserver.placement.room import Ask, Free, ask_of, fits, shortfall
from tests.unit.test_placement_engine import deployment, loc, run

FULL = Resources(cpu_milli=8000, memory=16 << 30, pods=0)


def asking(replicas: int, cpu: str = "100m", memory: str = "64Mi") -> dict[str, Any]:
    obj = deployment(replicas)
    obj["spec"]["template"] = {
        "spec": {
            "containers": [
                {"name": "a", "resources": {"requests": {"cpu": cpu, "memory": memory}}},
                {"name": "b", "resources": {"requests": {"cpu": cpu}}},
            ],
            "initContainers": [{"name": "i", "resources": {"requests": {"memory": "1Gi"}}}],
        }
    }
    return obj


def test_one_replica_asks_what_the_scheduler_counts() -> None:
    assert ask_of(DEPLOYMENT.pod_spec(asking(1))) == Ask(200, 1 << 30)  # init's memory is larger
    assert ask_of(DEPLOYMENT.pod_spec(deployment(1))) == Ask(0, 0)


def test_what_fits_and_what_is_short() -> None:
    free = Free(cpu_milli=500, memory=3 << 30, pods=10)
    assert fits(free, Ask(200, 1 << 30)) == 2
    assert fits(Free(10_000, 10 << 30, 1), Ask(0, 0)) == 1
    assert shortfall(free, Ask(200, 1 << 30), 4) == "cpu 300m, memory 1Gi"
    assert shortfall(Free(0, 0, 0), Ask(0, 0), 2) == "pods 2"
    assert shortfall(free, Ask(200, 1 << 30), 2) == ""


def test_with_no_room_anywhere_the_placement_holds_and_says_why() -> None:
    candidates = [loc("a", free=FULL), loc("b", free=FULL), loc("c", free=FULL)]
    current = {"a": 2, "b": 2, "c": 2}
    decision = run(candidates, current=current, obj=asking(6), missing_capacity={"a": 1})
    assert decision.placement == current and not decision.changes
    assert decision.unplaceable == (
        "no location has room for 1 replica: a: short of pods 1; b: short of pods 1; "
        "c: short of pods 1"
    )
    again = run(candidates, current=current, obj=asking(6), missing_capacity={"a": 1})
    assert again.placement == current


def test_a_share_moves_only_as_far_as_room_goes() -> None:
    roomy = Resources(cpu_milli=250, memory=8 << 30, pods=50)  # one replica of 200m
    candidates = [loc("a", free=FULL), loc("b", free=roomy), loc("c", free=FULL)]
    current = {"a": 4, "b": 1, "c": 1}
    decision = run(candidates, current=current, obj=asking(6), missing_capacity={"a": 3})
    assert decision.placement == {"a": 3, "b": 2, "c": 1}  # one of its 3 stuck moves
    assert decision.unplaceable is not None
    assert decision.unplaceable.startswith("no location has room for 2 replicas: ")
    assert "b: short of cpu 150m after 1 more" in decision.unplaceable


def test_room_everywhere_moves_the_whole_share() -> None:
    roomy = Resources(cpu_milli=10_000, memory=64 << 30, pods=100)
    candidates = [loc("a", free=FULL), loc("b", free=roomy), loc("c", free=roomy)]
    current = {"a": 4, "b": 1, "c": 1}
    decision = run(candidates, current=current, obj=asking(6), missing_capacity={"a": 2})
    assert decision.placement["a"] == 2 and decision.unplaceable is None
    assert sum(v or 0 for v in decision.placement.values()) == 6


def test_unknown_room_does_not_hold_a_move_back() -> None:
    candidates = [loc("a", free=FULL), loc("b"), loc("c")]
    current = {"a": 4, "b": 1, "c": 1}
    decision = run(candidates, current=current, obj=asking(6), missing_capacity={"a": 2})
    assert decision.placement["a"] == 2 and decision.unplaceable is None


def test_a_scale_up_beyond_every_locations_room_spreads_as_the_strategy_says() -> None:
    """The stuck replica stays where it is; the new ones pend where a Split puts them, not
    all on the location that is short."""
    candidates = [loc("a", free=FULL), loc("b", free=FULL), loc("c", free=FULL)]
    current = {"a": 2, "b": 2, "c": 2}
    decision = run(candidates, current=current, obj=asking(9), missing_capacity={"a": 1})
    assert decision.placement == {"a": 3, "b": 3, "c": 3}
    assert decision.unplaceable is not None and "room for 4 replicas" in decision.unplaceable


def test_with_every_location_short_the_condition_names_each_shortfall() -> None:
    """A scale-up on a full fleet: every location has a replica stuck; none can take another."""
    candidates = [loc("a", free=FULL), loc("b", free=FULL), loc("c", free=FULL)]
    current = {"a": 2, "b": 2, "c": 2}
    stuck = {"a": 1, "b": 1, "c": 1}
    decision = run(candidates, current=current, obj=asking(6), missing_capacity=stuck)
    assert decision.placement == current and not decision.changes
    assert decision.unplaceable == (
        "no location has room for 3 replicas: a: short of pods 3; b: short of pods 3; "
        "c: short of pods 3"
    )


def test_a_scale_up_beyond_every_locations_room_goes_where_the_strategy_puts_it() -> None:
    candidates = [loc("a", free=FULL), loc("b", free=FULL), loc("c", free=FULL)]
    decision = run(candidates, current={"a": 1, "b": 1, "c": 1}, obj=asking(6))
    assert decision.placement == {"a": 2, "b": 2, "c": 2}


def test_replicas_do_not_go_back_into_full_locations_when_the_hold_ends() -> None:
    """a freed room and took the replicas stuck in b and c; b and c were held at 1 for a while.
    Once the hold ends they are still full: moving back would only get stuck again (and move
    back to a after the grace period: the flapping #16 measured)."""
    roomy = Resources(cpu_milli=8000, memory=16 << 30, pods=7)
    candidates = [loc("a", free=roomy), loc("b", free=FULL), loc("c", free=FULL)]
    current = {"a": 4, "b": 1, "c": 1}
    assert run(candidates, current=current, obj=asking(6)).placement == current
    # With room again, b and c are tried again: the strategy's even split.
    again = [loc("a", free=roomy), loc("b", free=roomy), loc("c", free=roomy)]
    assert run(again, current=current, obj=asking(6)).placement == {"a": 2, "b": 2, "c": 2}


def test_a_location_whose_counted_room_fits_says_its_replicas_are_unschedulable() -> None:
    """Room is summed over nodes; the scheduler may still find no node for a replica."""
    roomy = Resources(cpu_milli=8000, memory=16 << 30, pods=7)
    candidates = [loc("a", free=roomy), loc("b", free=FULL)]
    current = {"a": 2, "b": 2}
    decision = run(candidates, current=current, obj=asking(4), missing_capacity={"a": 1, "b": 1})
    assert decision.placement == current
    assert decision.unplaceable == (
        "no location has room for 2 replicas: a: 1 unschedulable there; b: short of pods 2"
    )
