"""Divide a hub namespace's ResourceQuota across the locations the namespace is placed in.

A quota on the hub means "this namespace may use this much", wherever it runs. Each location
enforces its own copy, so the copies must add up to exactly the hub amount: never more (the
quota would leak), never less (a user would hit a limit they did not set). Each resource is
divided in whole units — milli for CPU and fractional amounts, 1 for bytes and counts — by
largest remainder in proportion to each location's share, so the rounding is exact and stable.
"""

from __future__ import annotations

from collections.abc import Mapping
from fractions import Fraction

from apiserver.quantity import format_quantity, parse_quantity

_MILLI = Fraction(1, 1000)


def divide_quota(hard: Mapping[str, str], shares: Mapping[str, int]) -> dict[str, dict[str, str]]:
    """`{location: {resource: amount}}` whose amounts sum to `hard` exactly, per resource.

    `shares` weighs the locations (e.g. replicas placed there). A location with share 0 gets 0;
    when every share is 0 the quota is divided evenly. Ties go to the location first by name.
    """
    if any(share < 0 for share in shares.values()):
        raise ValueError(f"quota shares must not be negative: {dict(shares)}")
    locations = sorted(shares)
    weights = [shares[name] for name in locations]
    if not any(weights):
        weights = [1] * len(locations)
    divided: dict[str, dict[str, str]] = {name: {} for name in locations}
    if not locations:
        return divided
    for resource in sorted(hard):
        amount = _amount(resource, hard[resource])
        unit = _unit(resource, amount)
        counts = _largest_remainder(int(amount / unit), weights)
        for name, count in zip(locations, counts, strict=True):
            divided[name][resource] = format_quantity(count * unit, like=hard[resource])
    return divided


def _amount(resource: str, text: str) -> Fraction:
    try:
        amount = parse_quantity(text)
    except ValueError as error:
        raise ValueError(f"quota for {resource!r}: {error}") from None
    if amount < 0:
        raise ValueError(f"quota for {resource!r} is negative: {text!r}")
    return amount


def _is_cpu(resource: str) -> bool:
    """`cpu`, `requests.cpu`, `limits.cpu`: amounts people write in millicores."""
    return resource == "cpu" or resource.endswith(".cpu")


def _unit(resource: str, amount: Fraction) -> Fraction:
    """The smallest amount handed out: milli for CPU, 1 otherwise, finer if `amount` needs it."""
    unit = _MILLI if _is_cpu(resource) else Fraction(1)
    while (amount / unit).denominator != 1:
        unit *= _MILLI  # decimal quantities always come out whole after a few steps
    return unit


def _largest_remainder(total: int, weights: list[int]) -> list[int]:
    """`total` split in proportion to `weights` (some positive), summing exactly to `total`.

    Everyone gets the floor of their exact quota; the units left over go to the largest
    remainders, ties to the earlier position (the callers sort by location name).
    """
    weight_sum = sum(weights)
    counts = [total * weight // weight_sum for weight in weights]
    left_over = total - sum(counts)
    by_remainder = sorted(
        range(len(weights)), key=lambda i: (-(total * weights[i] % weight_sum), i)
    )
    for i in by_remainder[:left_over]:
        counts[i] += 1
    return counts
