"""Dividing a whole number of replicas between locations by weight.

This is the seat-apportionment problem, and we solve it the way parliaments do: Hamilton's
largest-remainder method. Every location gets the whole part of its exact quota and the seats
left over go to the largest fractional parts, so each share is within one of its quota and the
shares always add up exactly.

Two things matter more here than in parliaments:

- Bounds (`minPerLocation`, `maxPerLocation`, capacity caps). A location pushed outside its
  bounds is fixed at the bound and the rest is re-apportioned among the others until nothing
  moves, which gives every unbounded location the same replicas-per-weight.
- Stability. Moving a replica means killing a pod and starting one elsewhere, so when the
  current shares are known, the leftover seats go first to locations that already hold them.
  Among all the apportionments that keep every share within one of its quota, the result moves
  the fewest replicas.

Arithmetic is exact. Ties among equal candidates go first to the location that holds the
least `load` (the replicas of every workload placed there, as the engine's caller counts
them), then by rendezvous hashing: each location's rank is a hash of (`tiebreak`, its name),
the workload's uid as the engine calls it. So many small workloads spread evenly over equal
locations instead of all going to the first name — the load keeps a burst of them within one
of even, where independent hashes alone would scatter 90 over three locations by ±5 — and
where loads are equal each workload keeps its own order across restarts (the hash is stable),
which a location added or removed does not change for any other pair. Without a `tiebreak`,
ties go by name. Equal inputs give equal outputs whatever the order of the mappings.

It is also done in whole numbers: the weights are scaled to integers in the same proportions
(a float is an integer over a power of two), every quota of one round is an integer numerator
over the round's one denominator, and so floors are integer divisions and remainders compare
as integers. `fractions.Fraction` gave the same answers at twenty times the
cost, and the engine apportions on every decision.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import cast


@dataclass(frozen=True)
class Apportionment:
    """Shares per location (sorted by name) and what no location had room for."""

    shares: dict[str, int]
    unplaced: int

    def moved(self, current: Mapping[str, int]) -> int:
        """Replicas that must start somewhere they do not run now."""
        return sum(max(0, share - current.get(name, 0)) for name, share in self.shares.items())


def apportion(
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
    """Divide `total` between the locations of `weights`.

    `minimum`/`maximum` bound every share; `caps` lowers the maximum of single locations (a cap
    below `minimum` wins). `current` makes the result stable. `unplaced` is non-zero only when
    every location is at its maximum. Leftover seats among otherwise equal locations go to
    the least `load` first, then by `rendezvous(tiebreak, name)`, highest first (by name when
    `tiebreak` is None).
    """
    _check(total, weights, minimum, maximum, caps)
    exact = _whole(weights)
    if not any(exact.values()):
        exact = dict.fromkeys(exact, 1)
    if not minimum and maximum is None and not caps:
        # Nothing bounds a share (the usual Split): one round of Hamilton's method, whose
        # shares come out in name order.
        names = sorted(exact)
        numerators = [total * exact[name] for name in names]
        quotas = _Quotas({}, names, numerators, sum(exact.values()))
        shares = _round(total, quotas, current, tiebreak, load)
        return Apportionment(shares=shares, unplaced=total - sum(shares.values()))
    high = _upper_bounds(exact, maximum, caps or {})
    low = {name: minimum if bound is None else min(minimum, bound) for name, bound in high.items()}
    if total <= sum(low.values()):
        return _finish(_minimums_first(total, exact, low), total)
    bounded = [bound for bound in high.values() if bound is not None]
    if len(bounded) == len(high) and total >= sum(bounded):
        return _finish({name: bound or 0 for name, bound in high.items()}, total)
    quotas = _bounded_quotas(total, exact, low, high)
    return _finish(_round(total, quotas, current, tiebreak, load), total)


def _check(
    total: int,
    weights: Mapping[str, float],
    minimum: int,
    maximum: int | None,
    caps: Mapping[str, int] | None,
) -> None:
    if total < 0 or minimum < 0:
        raise ValueError(f"total and minimum must be >= 0, got {total} and {minimum}")
    if maximum is not None and maximum < minimum:
        raise ValueError(f"maximum {maximum} is below minimum {minimum}")
    values = weights.values()
    if values and (not all(map(math.isfinite, values)) or min(values) < 0):
        raise ValueError(f"weights must be finite and >= 0, got {dict(weights)}")
    if caps and any(cap < 0 for cap in caps.values()):
        raise ValueError(f"caps must be >= 0, got {dict(caps)}")


def _whole(weights: Mapping[str, float]) -> Mapping[str, int]:
    """The weights as whole numbers in the same proportions: each times the least common
    denominator of all of them (1 when they are ints, a power of two for floats)."""
    values = weights.values()
    kinds = set(map(type, values))
    if kinds <= {int}:
        return cast("Mapping[str, int]", weights)  # read only, never changed
    if kinds == {float} and all(map(float.is_integer, values)):
        return dict(zip(weights, map(int, values), strict=True))
    ratios = {
        name: (weight, 1) if isinstance(weight, int) else weight.as_integer_ratio()
        for name, weight in weights.items()
    }
    common = math.lcm(*(denominator for _, denominator in ratios.values()))
    return {name: top * (common // bottom) for name, (top, bottom) in ratios.items()}


def _upper_bounds(
    weights: Mapping[str, int], maximum: int | None, caps: Mapping[str, int]
) -> dict[str, int | None]:
    """Each location's highest share, None for no bound."""
    bounds: dict[str, int | None] = {}
    for name in weights:
        cap = caps.get(name)
        bounds[name] = maximum if cap is None else cap if maximum is None else min(maximum, cap)
    return bounds


def _by_weight(weights: Mapping[str, int]) -> list[str]:
    return sorted(weights, key=lambda name: (-weights[name], name))


def _minimums_first(
    total: int, weights: Mapping[str, int], low: Mapping[str, int]
) -> dict[str, int]:
    """Not even the minimums fit: hand them out by weight, then name, until nothing is left."""
    shares: dict[str, int] = {}
    for name in _by_weight(weights):
        shares[name] = min(low[name], total)
        total -= shares[name]
    return shares


@dataclass(frozen=True)
class _Quotas:
    """Exact quotas: `fixed` ones are whole; those of `names` (in name order) are their
    `numerators` over the one `denominator` (> 0)."""

    fixed: dict[str, int]
    names: list[str]
    numerators: list[int]
    denominator: int


def _bounded_quotas(
    total: int,
    weights: Mapping[str, int],
    low: Mapping[str, int],
    high: Mapping[str, int | None],
) -> _Quotas:
    """Exact quotas within bounds, summing to `total`.

    Unbounded quotas that overshoot their bounds by more, in total, than others undershoot
    would stay over them whatever the rest gets, so they are fixed at the bound (and the other
    way around); the rest is re-apportioned until every quota is within bounds. Once all
    weighted locations are full, zero-weight locations share what remains equally.

    A round's quotas are `remaining * weight / weight_sum` (or `remaining / count` when all its
    weights are zero): numerators over one denominator, compared with a bound `b` as
    `numerator` against `b * denominator`.
    """
    fixed: dict[str, int] = {}
    free = sorted(weights)
    while free:
        remaining = total - sum(fixed.values())
        weight_sum = sum(weights[name] for name in free)
        if weight_sum:
            scaled = {name: remaining * weights[name] for name in free}
            denominator = weight_sum
        else:
            scaled = dict.fromkeys(free, remaining)
            denominator = len(free)
        over: dict[str, int] = {}
        under: dict[str, int] = {}
        for name, numerator in scaled.items():
            bound = high[name]
            if bound is not None and numerator > bound * denominator:
                over[name] = bound
            elif numerator < low[name] * denominator:
                under[name] = low[name]
        if not over and not under:
            return _Quotas(fixed, list(scaled), list(scaled.values()), denominator)
        # Both sums are over the same denominator: only the sign of the difference matters.
        excess = sum(scaled[name] - bound * denominator for name, bound in over.items()) - sum(
            bound * denominator - scaled[name] for name, bound in under.items()
        )
        if excess >= 0:
            fixed.update(over)
        if excess <= 0:
            fixed.update(under)
        free = [name for name in free if name not in fixed]
    return _Quotas(fixed, [], [], 1)


def rendezvous(tiebreak: str, name: str) -> int:
    """A location's rank for one workload: stable across processes and restarts (not Python's
    salted `hash`), independent of which other locations exist."""
    digest = hashlib.blake2b(f"{tiebreak}\0{name}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big")


def _round(
    total: int,
    quotas: _Quotas,
    current: Mapping[str, int] | None,
    tiebreak: str | None,
    load: Mapping[str, int] | None,
) -> dict[str, int]:
    """Floors first, then one extra seat each for the `total - sum(floors)` best remainders:
    a location that already holds the seat before one that does not, then the larger
    remainder, then the smaller load, then the rendezvous rank (or the name)."""
    names, numerators, denominator = quotas.names, quotas.numerators, quotas.denominator
    floors = [numerator // denominator for numerator in numerators]
    remainders = [numerator % denominator for numerator in numerators]
    seats = total - sum(floors) - sum(quotas.fixed.values())
    if seats > 0:
        # The remainders add up to `seats * denominator` and each is below the denominator, so
        # more locations have one than there are seats: the best `seats` all have one. A
        # location already holding the seat ranks above every other: its key is raised by the
        # denominator, more than any remainder. `names` is in name order and sorting is stable
        # (in reverse too), so equal keys go by name.
        keys = remainders
        if current:
            keys = [
                remainder + denominator if remainder and current.get(name, 0) > floor else remainder
                for name, floor, remainder in zip(names, floors, remainders, strict=True)
            ]
        if tiebreak is None and not load:
            best = sorted(range(len(names)), key=keys.__getitem__, reverse=True)[:seats]
        else:
            held = load or {}
            # Higher is better, and equal ranks keep name order (the sort is stable): the
            # least loaded first, then the highest hash.
            ranks = [
                (-held.get(name, 0), rendezvous(tiebreak, name) if tiebreak is not None else 0)
                for name in names
            ]
            best = sorted(range(len(names)), key=lambda i: (keys[i], ranks[i]), reverse=True)
            best = best[:seats]
        for index in best:
            floors[index] += 1
    shares = dict(quotas.fixed)
    shares.update(zip(names, floors, strict=True))
    return shares


def _finish(shares: Mapping[str, int], total: int) -> Apportionment:
    ordered = dict(sorted(shares.items()))
    return Apportionment(shares=ordered, unplaced=total - sum(ordered.values()))
