"""Largest-remainder apportionment: exact sums, bounds, determinism, the fewest moves, and
the same answers as the `Fraction` implementation it replaced."""

from __future__ import annotations

import math
import random
from collections.abc import Mapping
from fractions import Fraction
from itertools import combinations, pairwise

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from apiserver.placement.apportion import Apportionment, apportion, rendezvous

names = st.sampled_from([f"loc-{letter}" for letter in "abcdefgh"])
weight_maps = st.dictionaries(names, st.integers(0, 6), min_size=1, max_size=6)


def hamilton_quotas(total: int, weights: dict[str, int]) -> dict[str, Fraction]:
    weight_sum = sum(weights.values())
    if not weight_sum:
        return {name: Fraction(total, len(weights)) for name in weights}
    return {name: Fraction(total * weight, weight_sum) for name, weight in weights.items()}


def fewest_moves(total: int, weights: dict[str, int], current: dict[str, int]) -> int:
    """Brute force over every apportionment that keeps each share within one of its quota."""
    quotas = hamilton_quotas(total, weights)
    floors = {name: math.floor(quota) for name, quota in quotas.items()}
    fractional = sorted(name for name in quotas if quotas[name] != floors[name])
    seats = total - sum(floors.values())
    best = None
    for lucky in combinations(fractional, seats):
        shares = {name: floors[name] + (name in lucky) for name in quotas}
        moved = sum(max(0, share - current.get(name, 0)) for name, share in shares.items())
        best = moved if best is None else min(best, moved)
    assert best is not None
    return best


def test_five_over_three_equal_locations() -> None:
    result = apportion(5, {"c": 1, "a": 1, "b": 1})
    assert result == Apportionment(shares={"a": 2, "b": 2, "c": 1}, unplaced=0)
    assert list(result.shares) == ["a", "b", "c"]


def test_weights_divide_in_proportion() -> None:
    assert apportion(10, {"a": 1, "b": 4}).shares == {"a": 2, "b": 8}
    assert apportion(7, {"a": 1, "b": 2, "c": 4}).shares == {"a": 1, "b": 2, "c": 4}
    # quotas 1.4 / 2.8 / 2.8: floors 1, 2, 2, the two seats go to the largest remainders
    assert apportion(7, {"a": 1, "b": 2, "c": 2}).shares == {"a": 1, "b": 3, "c": 3}


def test_zero_weight_gets_only_the_minimum_and_all_zero_means_equal() -> None:
    assert apportion(6, {"a": 1, "b": 0}).shares == {"a": 6, "b": 0}
    assert apportion(6, {"a": 1, "b": 0}, minimum=2).shares == {"a": 4, "b": 2}
    assert apportion(6, {"a": 0, "b": 0, "c": 0}).shares == {"a": 2, "b": 2, "c": 2}


def test_zero_weight_takes_the_rest_once_the_others_are_full() -> None:
    assert apportion(10, {"a": 1, "b": 0, "c": 3}, minimum=1, maximum=4).shares == {
        "a": 4,
        "b": 2,
        "c": 4,
    }


def test_too_few_for_the_minimums_go_by_weight_then_name() -> None:
    result = apportion(5, {"a": 1, "b": 3, "c": 3, "d": 2}, minimum=2)
    assert result == Apportionment(shares={"a": 0, "b": 2, "c": 2, "d": 1}, unplaced=0)


def test_maximum_and_unplaced() -> None:
    assert apportion(10, {"a": 1, "b": 1}, maximum=4) == Apportionment({"a": 4, "b": 4}, 2)
    assert apportion(10, {"a": 9, "b": 1}, maximum=6).shares == {"a": 6, "b": 4}
    assert apportion(3, {}) == Apportionment({}, 3)


def test_caps_lower_single_locations() -> None:
    assert apportion(7, {"a": 1, "b": 1}, caps={"a": 2}).shares == {"a": 2, "b": 5}
    assert apportion(7, {"a": 1, "b": 1}, minimum=3, caps={"a": 1}).shares == {"a": 1, "b": 6}
    assert apportion(7, {"a": 1, "b": 1}, caps={"a": 2, "b": 3}) == Apportionment(
        {"a": 2, "b": 3}, 2
    )


def test_current_keeps_the_extra_seats_where_they_are() -> None:
    assert apportion(5, {"a": 1, "b": 1, "c": 1}, current={"b": 2, "c": 2, "a": 1}).shares == {
        "a": 1,
        "b": 2,
        "c": 2,
    }


@pytest.mark.parametrize(
    ("arguments", "error"),
    [
        ({"total": -1, "weights": {"a": 1}}, "total and minimum"),
        ({"total": 1, "weights": {"a": -1}}, "weights must be"),
        ({"total": 1, "weights": {"a": math.nan}}, "weights must be"),
        ({"total": 1, "weights": {"a": 1}, "minimum": 2, "maximum": 1}, "below minimum"),
        ({"total": 1, "weights": {"a": 1}, "caps": {"a": -1}}, "caps must be"),
    ],
)
def test_bad_arguments_raise(arguments: dict[str, object], error: str) -> None:
    with pytest.raises(ValueError, match=error):
        apportion(**arguments)  # type: ignore[arg-type]


@given(
    st.integers(0, 60),
    weight_maps,
    st.integers(0, 4),
    st.one_of(st.none(), st.integers(0, 8)),
    st.dictionaries(names, st.integers(0, 12)),
)
def test_sum_and_bounds_hold(
    total: int, weights: dict[str, int], low: int, extra: int | None, current: dict[str, int]
) -> None:
    high = None if extra is None else low + extra
    result = apportion(total, weights, minimum=low, maximum=high, current=current)
    shares = result.shares
    assert set(shares) == set(weights)
    assert sum(shares.values()) + result.unplaced == total
    assert result.unplaced >= 0
    if result.unplaced:
        assert high is not None and all(share == high for share in shares.values())
    if total >= low * len(weights):
        assert all(share >= low for share in shares.values())
    else:
        assert all(share <= low for share in shares.values())
    if high is not None:
        assert all(share <= high for share in shares.values())
    if any(weights.values()) and total >= low * len(weights):
        zero = [name for name, weight in weights.items() if weight == 0]
        positive_full = all(shares[n] == high for n in weights if weights[n] > 0)
        assert positive_full or all(shares[name] == low for name in zero)


@given(st.integers(0, 60), weight_maps, st.dictionaries(names, st.integers(0, 12)))
def test_unbounded_shares_are_within_one_of_their_quota(
    total: int, weights: dict[str, int], current: dict[str, int]
) -> None:
    quotas = hamilton_quotas(total, weights)
    for use_current in (None, current):
        shares = apportion(total, weights, current=use_current).shares
        for name, share in shares.items():
            assert math.floor(quotas[name]) <= share <= math.ceil(quotas[name])


@given(
    st.integers(0, 60),
    weight_maps,
    st.integers(0, 3),
    st.dictionaries(names, st.integers(0, 12)),
    st.randoms(use_true_random=False),
)
def test_equal_inputs_give_equal_outputs_whatever_the_order(
    total: int, weights: dict[str, int], low: int, current: dict[str, int], rng: random.Random
) -> None:
    def shuffled(mapping: dict[str, int]) -> dict[str, int]:
        items = list(mapping.items())
        rng.shuffle(items)
        return dict(items)

    expected = apportion(total, weights, minimum=low, maximum=low + 5, current=current)
    again = apportion(
        total, shuffled(weights), minimum=low, maximum=low + 5, current=shuffled(current)
    )
    assert again == expected
    assert list(again.shares) == sorted(weights)


@given(st.integers(0, 40), weight_maps, st.dictionaries(names, st.integers(0, 12)))
def test_moves_are_the_fewest_among_quota_respecting_apportionments(
    total: int, weights: dict[str, int], current: dict[str, int]
) -> None:
    result = apportion(total, weights, current=current)
    assert result.moved(current) == fewest_moves(total, weights, current)


@given(st.integers(0, 60), st.integers(1, 7))
def test_adding_a_location_to_an_even_split_moves_the_minimum(total: int, count: int) -> None:
    before = {f"old-{index}": 1 for index in range(count)}
    current = apportion(total, before).shares
    after = {**before, "new": 1}
    result = apportion(total, after, current=current)
    assert result.moved(current) == fewest_moves(total, after, current)
    assert result.moved(current) == total // (count + 1)
    assert result.shares["new"] == total // (count + 1)


@given(st.integers(0, 60), st.integers(2, 7), st.data())
def test_removing_a_location_moves_only_its_replicas(
    total: int, count: int, data: st.DataObject
) -> None:
    weights = {f"loc-{index}": 1 for index in range(count)}
    current = apportion(total, weights).shares
    removed = data.draw(st.sampled_from(sorted(weights)))
    del weights[removed]
    result = apportion(total, weights, current=current)
    assert result.moved(current) == current[removed]
    assert all(result.shares[name] >= current[name] for name in weights)


def test_stability_is_a_fixed_point() -> None:
    weights = {"a": 3, "b": 1, "c": 2}
    first = apportion(17, weights, minimum=1, maximum=8)
    assert apportion(17, weights, minimum=1, maximum=8, current=first.shares) == first


def water_filled(total: int, weights: dict[str, int], low: int, high: int) -> dict[str, Fraction]:
    """Reference quotas: clamp(level * weight, low, high), the level solved exactly."""

    def filled(level: Fraction) -> list[Fraction]:
        return [min(Fraction(high), max(Fraction(low), level * w)) for w in weights.values()]

    points = sorted({Fraction(0)} | {Fraction(b, w) for w in weights.values() for b in (low, high)})
    for start, end in pairwise(points):
        below, above = sum(filled(start)), sum(filled(end))
        if below <= total <= above and above > below:
            level = start + (total - below) * (end - start) / (above - below)
            return dict(zip(weights, filled(level), strict=True))
    return dict(zip(weights, filled(points[-1]), strict=True))


@given(
    st.data(),
    st.dictionaries(names, st.integers(1, 6), min_size=1, max_size=6),
    st.integers(0, 4),
    st.integers(0, 8),
)
def test_bounded_shares_are_within_one_of_the_water_filled_quota(
    data: st.DataObject, weights: dict[str, int], low: int, extra: int
) -> None:
    high = low + extra
    # Only totals the bounds can hold: drawn inside them rather than filtered.
    total = data.draw(st.integers(low * len(weights), high * len(weights)))
    quotas = water_filled(total, weights, low, high)
    assert sum(quotas.values()) == total
    for name, share in apportion(total, weights, minimum=low, maximum=high).shares.items():
        assert math.floor(quotas[name]) <= share <= math.ceil(quotas[name])


# --- the Fraction implementation apportion.py used until it moved to integers -------------------
# Kept verbatim (bar names and the argument check) as the reference the integer arithmetic must
# agree with exactly.


def fraction_apportion(
    total: int,
    weights: Mapping[str, float],
    *,
    minimum: int = 0,
    maximum: int | None = None,
    current: Mapping[str, int] | None = None,
    caps: Mapping[str, int] | None = None,
    tiebreak: str | None = None,
    load: Mapping[str, int] | None = None,
) -> Apportionment:
    exact = {name: Fraction(weight) for name, weight in weights.items()}
    if not any(exact.values()):
        exact = dict.fromkeys(exact, Fraction(1))
    ceiling = math.inf if maximum is None else maximum
    high = {name: min(ceiling, (caps or {}).get(name, math.inf)) for name in exact}
    low = {name: int(min(minimum, bound)) for name, bound in high.items()}
    if total <= sum(low.values()):
        return _fraction_finish(_fraction_minimums_first(total, exact, low), total)
    if all(bound < math.inf for bound in high.values()) and total >= sum(high.values()):
        return _fraction_finish({name: int(bound) for name, bound in high.items()}, total)
    quotas = _fraction_bounded_quotas(total, exact, low, high)
    return _fraction_finish(_fraction_round(total, quotas, current, tiebreak, load), total)


def _fraction_minimums_first(
    total: int, weights: Mapping[str, Fraction], low: Mapping[str, int]
) -> dict[str, int]:
    shares: dict[str, int] = {}
    for name in sorted(weights, key=lambda name: (-weights[name], name)):
        shares[name] = min(low[name], total)
        total -= shares[name]
    return shares


def _fraction_proportional(total: Fraction, weights: Mapping[str, Fraction]) -> dict[str, Fraction]:
    weight_sum = sum(weights.values())
    if not weight_sum:
        return {name: total / len(weights) for name in weights}
    return {name: total * weight / weight_sum for name, weight in weights.items()}


def _fraction_bounded_quotas(
    total: int,
    weights: Mapping[str, Fraction],
    low: Mapping[str, int],
    high: Mapping[str, float],
) -> dict[str, Fraction]:
    fixed: dict[str, Fraction] = {}
    free = sorted(weights)
    while free:
        remaining = total - sum(fixed.values(), Fraction(0))
        quotas = _fraction_proportional(remaining, {name: weights[name] for name in free})
        over = {name: q - Fraction(high[name]) for name, q in quotas.items() if q > high[name]}
        under = {name: low[name] - q for name, q in quotas.items() if q < low[name]}
        if not over and not under:
            return {**fixed, **quotas}
        excess = sum(over.values(), Fraction(0)) - sum(under.values(), Fraction(0))
        if excess >= 0:
            fixed.update({name: Fraction(int(high[name])) for name in over})
        if excess <= 0:
            fixed.update({name: Fraction(low[name]) for name in under})
        free = [name for name in free if name not in fixed]
    return fixed


def _fraction_round(
    total: int,
    quotas: Mapping[str, Fraction],
    current: Mapping[str, int] | None,
    tiebreak: str | None,
    load: Mapping[str, int] | None,
) -> dict[str, int]:
    shares = {name: math.floor(quota) for name, quota in quotas.items()}
    seats = total - sum(shares.values())
    held = current or {}

    def priority(name: str) -> tuple[bool, Fraction, int, int, str]:
        already_there = held.get(name, 0) > shares[name]
        rank = -rendezvous(tiebreak, name) if tiebreak is not None else 0
        busy = (load or {}).get(name, 0)
        return (not already_there, -(quotas[name] - shares[name]), busy, rank, name)

    fractional = [name for name in quotas if quotas[name] != shares[name]]
    for name in sorted(fractional, key=priority)[:seats]:
        shares[name] += 1
    return shares


def _fraction_finish(shares: Mapping[str, int], total: int) -> Apportionment:
    ordered = dict(sorted(shares.items()))
    return Apportionment(shares=ordered, unplaced=total - sum(ordered.values()))


# What callers pass: the engine's written weights and capacity weights (millicores, large) as
# floats, Jobs' placements as floats, the tests' small ints; and beyond that any finite float
# (a power-of-two denominator up to 2**1074) and ints too large for a float to hold exactly.
any_weight = st.one_of(
    st.integers(0, 6),
    st.integers(0, 6).map(float),
    st.integers(0, 128_000),
    st.integers(0, 128_000).map(float),
    st.integers(0, 2**70),
    st.floats(0, 10, allow_nan=False, allow_infinity=False),
    st.floats(min_value=0, allow_nan=False, allow_infinity=False),
)
many_names = st.sampled_from([f"loc-{index:02d}" for index in range(12)])
# Small worlds too, where zero weights, bounds that bind and remainders that tie are common.
small_weight = st.one_of(st.integers(0, 4), st.sampled_from([0.0, 0.1, 0.5, 1.0, 1.5, 2.0, 3.0]))
weight_mixes = st.one_of(
    st.dictionaries(names, small_weight, max_size=6),
    st.dictionaries(many_names, any_weight, max_size=12),
)


@settings(max_examples=400)
@given(
    st.one_of(st.integers(0, 40), st.integers(0, 400)),
    weight_mixes,
    st.integers(0, 6),
    st.one_of(st.none(), st.integers(0, 8), st.integers(0, 60)),
    st.one_of(st.none(), st.dictionaries(st.one_of(names, many_names), st.integers(0, 200))),
    st.one_of(st.none(), st.dictionaries(st.one_of(names, many_names), st.integers(0, 60))),
    st.one_of(st.none(), st.uuids().map(str)),
    st.one_of(st.none(), st.dictionaries(st.one_of(names, many_names), st.integers(0, 3))),
)
def test_integer_arithmetic_agrees_with_fractions(
    total: int,
    weights: dict[str, float],
    low: int,
    extra: int | None,
    current: dict[str, int] | None,
    caps: dict[str, int] | None,
    tiebreak: str | None,
    load: dict[str, int] | None,
) -> None:
    high = None if extra is None else low + extra
    bounds = {"minimum": low, "maximum": high, "current": current, "caps": caps}
    expected = fraction_apportion(total, weights, **bounds, tiebreak=tiebreak, load=load)  # type: ignore[arg-type]
    got = apportion(total, weights, **bounds, tiebreak=tiebreak, load=load)  # type: ignore[arg-type]
    assert got == expected
    assert list(got.shares) == list(expected.shares)


# --- ties: rendezvous hashing of (workload uid, location) ---------------------------------------

uids = st.uuids().map(str)


@given(st.integers(0, 60), weight_maps, st.dictionaries(names, st.integers(0, 12)), uids)
def test_a_tiebreak_keeps_quotas_and_fewest_moves(
    total: int, weights: dict[str, int], current: dict[str, int], uid: str
) -> None:
    quotas = hamilton_quotas(total, weights)
    result = apportion(total, weights, current=current, tiebreak=uid)
    for name, share in result.shares.items():
        assert math.floor(quotas[name]) <= share <= math.ceil(quotas[name])
    if total <= 40:
        assert result.moved(current) == fewest_moves(total, weights, current)


@given(st.integers(0, 60), weight_maps, uids, st.randoms(use_true_random=False))
def test_a_tiebreak_is_deterministic_and_a_fixed_point(
    total: int, weights: dict[str, int], uid: str, rng: random.Random
) -> None:
    first = apportion(total, weights, tiebreak=uid)
    items = list(weights.items())
    rng.shuffle(items)
    assert apportion(total, dict(items), tiebreak=uid) == first
    # Decided again from what it placed (a restart): nothing moves.
    assert apportion(total, weights, current=first.shares, tiebreak=uid) == first


def test_five_over_three_is_not_always_two_two_one_in_name_order() -> None:
    seen = {
        tuple(apportion(5, {"a": 1, "b": 1, "c": 1}, tiebreak=f"uid-{i}").shares.values())
        for i in range(30)
    }
    assert seen == {(2, 2, 1), (2, 1, 2), (1, 2, 2)}


def test_ninety_single_replicas_spread_evenly_over_three_equal_locations() -> None:
    """Hashes alone scatter them (a multinomial: about ±5 around 30); the load keeps every
    location within one of the others."""
    weights = {"eu-west": 1, "us-east": 1, "us-west": 1}
    hashed = dict.fromkeys(weights, 0)
    loaded = dict.fromkeys(weights, 0)
    for index in range(90):
        uid = f"3f0c8a2e-{index:04d}-4b7e-9a51-6d2c0e1f{index:04x}"
        (where,) = (n for n, share in apportion(1, weights, tiebreak=uid).shares.items() if share)
        hashed[where] += 1
        shares = apportion(1, weights, tiebreak=uid, load=loaded).shares
        (where,) = (name for name, share in shares.items() if share)
        loaded[where] += 1
    assert set(hashed.values()) != {30} and sum(hashed.values()) == 90
    assert loaded == {"eu-west": 30, "us-east": 30, "us-west": 30}


def test_the_load_breaks_ties_only() -> None:
    """A larger remainder, or a seat already held, wins whatever the load."""
    assert apportion(7, {"a": 1, "b": 2, "c": 2}, load={"b": 50, "c": 50}).shares == {
        "a": 1,
        "b": 3,
        "c": 3,
    }
    held = {"a": 2, "b": 2, "c": 1}
    assert apportion(5, {"a": 1, "b": 1, "c": 1}, current=held, load={"a": 9, "b": 9}).shares == (
        held
    )
    assert apportion(5, {"a": 1, "b": 1, "c": 1}, load={"a": 9, "b": 9}).shares["c"] == 2


@given(st.integers(1, 6), st.lists(uids, min_size=1, max_size=30))
def test_adding_a_location_moves_only_what_it_takes(count: int, workloads: list[str]) -> None:
    """Single replicas: with one more equal location, a workload either stays or moves to
    the new one, never between old ones (rendezvous hashing's promise)."""
    before = {f"old-{index}": 1 for index in range(count)}
    after = {**before, "new": 1}
    for uid in workloads:
        current = apportion(1, before, tiebreak=uid).shares
        fresh = apportion(1, after, tiebreak=uid).shares
        (was,) = (name for name, share in current.items() if share)
        (now,) = (name for name, share in fresh.items() if share)
        assert now in (was, "new")
