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

Arithmetic is exact (fractions), and ties break by name, so equal inputs give equal outputs
whatever the order of the mappings.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from fractions import Fraction


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
) -> Apportionment:
    """Divide `total` between the locations of `weights`.

    `minimum`/`maximum` bound every share; `caps` lowers the maximum of single locations (a cap
    below `minimum` wins). `current` makes the result stable. `unplaced` is non-zero only when
    every location is at its maximum.
    """
    _check(total, weights, minimum, maximum, caps)
    exact = {name: Fraction(weight) for name, weight in weights.items()}
    if not any(exact.values()):
        exact = dict.fromkeys(exact, Fraction(1))
    high = _upper_bounds(exact, maximum, caps or {})
    low = {name: int(min(minimum, bound)) for name, bound in high.items()}
    if total <= sum(low.values()):
        return _finish(_minimums_first(total, exact, low), total)
    if all(bound < math.inf for bound in high.values()) and total >= sum(high.values()):
        return _finish({name: int(bound) for name, bound in high.items()}, total)
    quotas = _bounded_quotas(total, exact, low, high)
    return _finish(_round(total, quotas, exact, current), total)


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
    if any(not math.isfinite(w) or w < 0 for w in weights.values()):
        raise ValueError(f"weights must be finite and >= 0, got {dict(weights)}")
    if caps and any(cap < 0 for cap in caps.values()):
        raise ValueError(f"caps must be >= 0, got {dict(caps)}")


def _upper_bounds(
    weights: Mapping[str, Fraction], maximum: int | None, caps: Mapping[str, int]
) -> dict[str, float]:
    ceiling = math.inf if maximum is None else maximum
    return {name: min(ceiling, caps.get(name, math.inf)) for name in weights}


def _by_weight(weights: Mapping[str, Fraction]) -> list[str]:
    return sorted(weights, key=lambda name: (-weights[name], name))


def _minimums_first(
    total: int, weights: Mapping[str, Fraction], low: Mapping[str, int]
) -> dict[str, int]:
    """Not even the minimums fit: hand them out by weight, then name, until nothing is left."""
    shares: dict[str, int] = {}
    for name in _by_weight(weights):
        shares[name] = min(low[name], total)
        total -= shares[name]
    return shares


def _proportional(total: Fraction, weights: Mapping[str, Fraction]) -> dict[str, Fraction]:
    weight_sum = sum(weights.values())
    if not weight_sum:
        return {name: total / len(weights) for name in weights}
    return {name: total * weight / weight_sum for name, weight in weights.items()}


def _bounded_quotas(
    total: int,
    weights: Mapping[str, Fraction],
    low: Mapping[str, int],
    high: Mapping[str, float],
) -> dict[str, Fraction]:
    """Exact quotas within bounds, summing to `total`.

    Unbounded quotas that overshoot their bounds by more, in total, than others undershoot
    would stay over them whatever the rest gets, so they are fixed at the bound (and the other
    way around); the rest is re-apportioned until every quota is within bounds. Once all
    weighted locations are full, zero-weight locations share what remains equally.
    """
    fixed: dict[str, Fraction] = {}
    free = sorted(weights)
    while free:
        remaining = total - sum(fixed.values(), Fraction(0))
        quotas = _proportional(remaining, {name: weights[name] for name in free})
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


def _round(
    total: int,
    quotas: Mapping[str, Fraction],
    weights: Mapping[str, Fraction],
    current: Mapping[str, int] | None,
) -> dict[str, int]:
    """Floors first, then one extra seat each for the `total - sum(floors)` best remainders."""
    shares = {name: math.floor(quota) for name, quota in quotas.items()}
    seats = total - sum(shares.values())
    held = current or {}

    def priority(name: str) -> tuple[bool, Fraction, str]:
        already_there = held.get(name, 0) > shares[name]
        return (not already_there, -(quotas[name] - shares[name]), name)

    fractional = [name for name in quotas if quotas[name] != shares[name]]
    for name in sorted(fractional, key=priority)[:seats]:
        shares[name] += 1
    return shares


def _finish(shares: Mapping[str, int], total: int) -> Apportionment:
    ordered = dict(sorted(shares.items()))
    return Apportionment(shares=ordered, unplaced=total - sum(ordered.values()))
