"""Kubernetes resource quantities ("250m", "1.5Gi", "1e3"), read and printed as Kubernetes does.

Dividing a hub ResourceQuota across locations must add up exactly, so amounts are `Fraction`s,
never floats. Printing follows Kubernetes' canonical form (`resource.Quantity.String()`): the
suffix family of the original (binary, decimal SI or decimal exponent) and the largest suffix
that loses no precision, so a value we write reads back equal and does not show up as a diff.
"""

from __future__ import annotations

import enum
import math
import re
from fractions import Fraction

_DECIMAL_SI = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_SI_BY_EXPONENT = {exponent: suffix for suffix, exponent in _DECIMAL_SI.items()}
_BINARY_SI = {"Ki": 1, "Mi": 2, "Gi": 3, "Ti": 4, "Pi": 5, "Ei": 6}
_BINARY_BY_POWER = {power: suffix for suffix, power in _BINARY_SI.items()}

# Kubernetes keeps at most nano precision and magnitudes below 2**63; far beyond either a
# "quantity" is garbage, and refusing it keeps `1e999999999` from eating the CPU.
_MAX_EXPONENT = 64

_QUANTITY = re.compile(
    r"(?P<sign>[+-]?)(?P<int>\d*)(?:\.(?P<frac>\d*))?"
    r"(?:(?P<binary>[KMGTPE]i)|(?P<exp>[eE][+-]?\d+)|(?P<si>[numkMGTPE]?))",
    re.ASCII,
)


class Format(enum.Enum):
    """The suffix family a quantity was written in; Kubernetes prints it back in the same."""

    DECIMAL_SI = "DecimalSI"
    BINARY_SI = "BinarySI"
    DECIMAL_EXPONENT = "DecimalExponent"


def parse_quantity(text: str) -> Fraction:
    """The exact value of a quantity: `"250m"` → 1/4, `"1Gi"` → 1073741824."""
    return _parse(text)[0]


def quantity_format(text: str) -> Format:
    """The suffix family `text` is written in (ValueError if it is not a quantity)."""
    return _parse(text)[1]


def format_quantity(value: Fraction, like: str) -> str:
    """`value` in the canonical form Kubernetes would print it, in the suffix family of `like`.

    Decimal: the largest SI suffix (n…E) or exponent multiple of 3 that keeps the value whole
    ("250m", "1500m", "2k"). Binary: the largest of Ki…Ei dividing the value, and decimal when the
    value is below 1024 or not whole, like Kubernetes. Precision finer than nano rounds up.
    """
    fmt = _parse(like)[1]
    if fmt is Format.BINARY_SI and abs(value) >= 1024 and value.denominator == 1:
        return _format_binary(int(value))
    return _format_decimal(value, exponent_form=fmt is Format.DECIMAL_EXPONENT)


def _parse(text: str) -> tuple[Fraction, Format]:
    match = _QUANTITY.fullmatch(text) if isinstance(text, str) else None
    if match is None or not (match["int"] or match["frac"]):
        raise ValueError(
            f"invalid quantity {text!r}: want a number with an optional suffix "
            "(n u m k M G T P E, Ki Mi Gi Ti Pi Ei, or an exponent like e3), e.g. 250m or 1.5Gi"
        )
    digits = match["frac"] or ""
    value = Fraction(int((match["int"] or "0") + digits), 10 ** len(digits))
    if match["sign"] == "-":
        value = -value
    if match["binary"]:
        return value * 1024 ** _BINARY_SI[match["binary"]], Format.BINARY_SI
    if match["exp"]:
        exponent = int(match["exp"][1:])
        if abs(exponent) > _MAX_EXPONENT:
            raise ValueError(f"invalid quantity {text!r}: exponent {exponent} is out of range")
        return value * Fraction(10) ** exponent, Format.DECIMAL_EXPONENT
    return value * Fraction(10) ** _DECIMAL_SI[match["si"]], Format.DECIMAL_SI


def _format_binary(value: int) -> str:
    power = 0
    while value % 1024 == 0 and power < max(_BINARY_BY_POWER):
        value //= 1024
        power += 1
    return f"{value}{_BINARY_BY_POWER.get(power, '')}"


def _format_decimal(value: Fraction, exponent_form: bool) -> str:
    """Largest exponent, a multiple of 3 in [-9, 18], with an integer mantissa."""
    if value == 0:
        return "0"
    nanos = value * 10**9
    magnitude = math.ceil(abs(nanos))  # Kubernetes rounds finer precision up
    mantissa, exponent = (magnitude if nanos > 0 else -magnitude), -9
    while mantissa % 10 == 0 and exponent < max(_SI_BY_EXPONENT):
        mantissa //= 10
        exponent += 1
    while exponent % 3:
        mantissa *= 10
        exponent -= 1
    if exponent_form:
        return f"{mantissa}e{exponent}" if exponent else str(mantissa)
    return f"{mantissa}{_SI_BY_EXPONENT[exponent]}"
