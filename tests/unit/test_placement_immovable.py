"""Immovable strategies (`"movable": false`): once placed, only a lost or incompatible
location or a pin (what `kubectl mc move` writes) moves the object."""

from __future__ import annotations

import pytest

from apiserver.placement.strategy import StrategyError

from .test_placement_engine import NOW, deployment, loc, run, strategy

FIXED = strategy(movable=False)


def test_a_new_location_gets_nothing() -> None:
    current = {"a": 2, "b": 1}
    decision = run([loc("a"), loc("b"), loc("c")], current, how=FIXED)
    assert decision.placement == current
    assert decision.changes == ()
    # What a movable strategy would have done:
    assert "c" in run([loc("a"), loc("b"), loc("c")], current).placement


def test_no_rebalancing_and_no_capacity_moves() -> None:
    current = {"a": 3, "b": 0}
    assert run([loc("a"), loc("b")], current, how=FIXED).placement == current
    moved = run([loc("a"), loc("b")], {"a": 2, "b": 1}, how=FIXED, missing_capacity={"a": 2})
    assert moved.placement == {"a": 2, "b": 1}


def test_a_lost_location_gives_its_share_to_the_ones_it_is_in() -> None:
    current = {"a": 2, "b": 1}
    cordoned = [loc("a"), loc("b", unschedulable=True), loc("c")]
    assert run(cordoned, current, how=FIXED).placement == {"a": 3}
    gone = run([loc("a"), loc("c")], current, how=FIXED)
    assert gone.placement == {"a": 3}


def test_losing_every_location_places_it_anew() -> None:
    lost = [loc("a", ready=False, ready_changed_at=NOW - 3600), loc("b"), loc("c")]
    assert run(lost, {"a": 3}, how=FIXED).placement == {"b": 2, "c": 1}


def test_scaling_divides_among_the_locations_it_is_in() -> None:
    decision = run([loc("a"), loc("b"), loc("c")], {"a": 1, "b": 1}, deployment(6), FIXED)
    assert decision.placement == {"a": 3, "b": 3}


def test_a_pin_moves_it() -> None:
    moved = strategy(movable=False, pin=["c"])
    assert run([loc("a"), loc("b"), loc("c")], {"a": 2, "b": 1}, how=moved).placement == {"c": 3}
    widened = strategy(movable=False, pin=["a", "c"])
    placement = run([loc("a"), loc("b"), loc("c")], {"a": 3}, how=widened).placement
    assert set(placement) == {"a", "c"} and sum(v or 0 for v in placement.values()) == 3


def test_replicate_and_single_stay_put_and_follow_a_scale() -> None:
    copies = strategy(type="Replicate", movable=False)
    assert run([loc("a"), loc("b")], {"a": 3}, how=copies).placement == {"a": 3}
    assert run([loc("a"), loc("b")], {"a": 3}, deployment(5), copies).placement == {"a": 5}
    one = strategy(type="Single", movable=False, weights={"b": 5})
    assert run([loc("a"), loc("b")], {"a": 3}, how=one).placement == {"a": 3}


def test_the_first_placement_is_a_normal_one() -> None:
    assert run([loc("a"), loc("b"), loc("c")], {}, how=FIXED).placement == {
        "a": 1,
        "b": 1,
        "c": 1,
    }


def test_movable_must_be_a_boolean() -> None:
    with pytest.raises(StrategyError, match=r"\.movable: must be a boolean, got \"no\""):
        strategy(movable="no")
    assert FIXED.to_json() == '{"type":"Split","movable":false}'
    assert strategy().to_json() == '{"type":"Split"}'
