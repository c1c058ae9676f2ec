"""Quantities and the division of a hub ResourceQuota across locations: exact to the unit."""

from __future__ import annotations

from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from apiserver.placement.quota import divide_quota
from apiserver.quantity import Format, format_quantity, parse_quantity, quantity_format


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("250m", Fraction(1, 4)),
        ("1", Fraction(1)),
        ("0", Fraction(0)),
        ("1.5", Fraction(3, 2)),
        (".5", Fraction(1, 2)),
        ("2.", Fraction(2)),
        ("+3k", Fraction(3000)),
        ("-1M", Fraction(-(10**6))),
        ("5n", Fraction(5, 10**9)),
        ("7u", Fraction(7, 10**6)),
        ("2G", Fraction(2 * 10**9)),
        ("1T", Fraction(10**12)),
        ("1P", Fraction(10**15)),
        ("1E", Fraction(10**18)),
        ("1Ki", Fraction(1024)),
        ("1.5Gi", Fraction(3 * 2**29)),
        ("64Mi", Fraction(64 * 2**20)),
        ("1Ti", Fraction(2**40)),
        ("1Pi", Fraction(2**50)),
        ("1Ei", Fraction(2**60)),
        ("1e3", Fraction(1000)),
        ("1E3", Fraction(1000)),
        ("12e-3", Fraction(12, 1000)),
        ("1.5e+2", Fraction(150)),
    ],
)
def test_parse_quantity(text: str, value: Fraction) -> None:
    assert parse_quantity(text) == value


@pytest.mark.parametrize(
    "garbage", ["", " 1", "1 ", ".", "-", "abc", "1e", "1Gb", "1ki", "1.2.3", "1m5", "٣", "--1"]
)
def test_garbage_is_refused_with_a_clear_message(garbage: str) -> None:
    with pytest.raises(ValueError, match="invalid quantity"):
        parse_quantity(garbage)


def test_absurd_exponents_are_refused_instead_of_computed() -> None:
    with pytest.raises(ValueError, match="out of range"):
        parse_quantity("1e999999999")


@pytest.mark.parametrize(
    ("text", "fmt"),
    [("1Gi", Format.BINARY_SI), ("1e3", Format.DECIMAL_EXPONENT), ("250m", Format.DECIMAL_SI)],
)
def test_quantity_format(text: str, fmt: Format) -> None:
    assert quantity_format(text) is fmt


@pytest.mark.parametrize(
    ("value", "like", "text"),
    [
        (Fraction(1, 4), "1", "250m"),
        (Fraction(3, 2), "2", "1500m"),
        (Fraction(2), "500m", "2"),
        (Fraction(2000), "1", "2k"),
        (Fraction(1500), "1", "1500"),
        (Fraction(0), "1Gi", "0"),
        (Fraction(1, 2000), "1", "500u"),
        (Fraction(1, 3), "1", "333333334n"),  # finer than nano rounds up, like Kubernetes
        (Fraction(3 * 2**29), "1Gi", "1536Mi"),
        (Fraction(2**30), "512Mi", "1Gi"),
        (Fraction(1025), "1Ki", "1025"),
        (Fraction(512), "1Gi", "512"),  # below 1024: decimal
        (Fraction(3, 2), "1Ki", "1500m"),  # not whole: decimal
        (Fraction(2**70), "1Ei", "1024Ei"),
        (Fraction(-3 * 2**20), "1Mi", "-3Mi"),
        (Fraction(1000), "1e3", "1e3"),
        (Fraction(1500), "1e3", "1500"),
        (Fraction(3, 2), "1e3", "1500e-3"),
    ],
)
def test_format_quantity_is_kubernetes_canonical(value: Fraction, like: str, text: str) -> None:
    assert format_quantity(value, like) == text


quantities = st.builds(
    lambda n, suffix: f"{n}{suffix}",
    st.integers(min_value=0, max_value=10**7),
    st.sampled_from(["", "m", "k", "M", "G", "Ki", "Mi", "Gi", "Ti", "e2", "e-3", "u", "n"]),
)


@given(quantities)
def test_format_reads_back_equal(text: str) -> None:
    value = parse_quantity(text)
    assert parse_quantity(format_quantity(value, like=text)) == value


def test_divide_in_proportion_with_exact_sums() -> None:
    hard = {
        "requests.cpu": "10",
        "limits.memory": "10Gi",
        "pods": "10",
        "requests.storage": "1.5Ti",
        "cpu": "1",
    }
    assert divide_quota(hard, {"us-east": 2, "us-west": 1, "eu-west": 0}) == {
        "eu-west": {
            "cpu": "0",
            "limits.memory": "0",
            "pods": "0",
            "requests.cpu": "0",
            "requests.storage": "0",
        },
        "us-east": {
            "cpu": "667m",
            "limits.memory": "7158278827",
            "pods": "7",
            "requests.cpu": "6667m",
            "requests.storage": "1Ti",
        },
        "us-west": {
            "cpu": "333m",
            "limits.memory": "3579139413",
            "pods": "3",
            "requests.cpu": "3333m",
            "requests.storage": "512Gi",
        },
    }


def test_ties_go_to_the_first_location_by_name() -> None:
    divided = divide_quota({"pods": "5", "cpu": "100m"}, {"c": 1, "a": 1, "b": 1})
    assert divided == {
        "a": {"cpu": "34m", "pods": "2"},
        "b": {"cpu": "33m", "pods": "2"},
        "c": {"cpu": "33m", "pods": "1"},
    }
    assert list(divided) == ["a", "b", "c"]


def test_all_zero_shares_divide_evenly() -> None:
    assert divide_quota({"pods": "10"}, {"x": 0, "y": 0, "z": 0}) == {
        "x": {"pods": "4"},
        "y": {"pods": "3"},
        "z": {"pods": "3"},
    }


def test_fractional_counts_are_divided_in_milli() -> None:
    assert divide_quota({"memory": "1.5"}, {"a": 1, "b": 1}) == {
        "a": {"memory": "750m"},
        "b": {"memory": "750m"},
    }


def test_no_locations_no_quota() -> None:
    assert divide_quota({"pods": "10"}, {}) == {}


@pytest.mark.parametrize(
    ("hard", "shares", "message"),
    [
        ({"pods": "ten"}, {"a": 1}, "quota for 'pods'"),
        ({"pods": "-1"}, {"a": 1}, "negative"),
        ({"pods": "1"}, {"a": -1}, "negative"),
    ],
)
def test_bad_input_is_refused(hard: dict[str, str], shares: dict[str, int], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        divide_quota(hard, shares)


resources = st.sampled_from(
    ["cpu", "requests.cpu", "limits.memory", "pods", "count/configmaps", "requests.storage"]
)
share_maps = st.dictionaries(
    st.text("abcdefgh", min_size=1, max_size=4), st.integers(0, 50), min_size=1, max_size=6
)


@given(st.dictionaries(resources, quantities, min_size=1), share_maps)
def test_every_resource_sums_exactly_to_the_hub_amount(
    hard: dict[str, str], shares: dict[str, int]
) -> None:
    divided = divide_quota(hard, shares)
    assert sorted(divided) == sorted(shares)
    for resource, text in hard.items():
        amounts = {name: parse_quantity(divided[name][resource]) for name in divided}
        assert sum(amounts.values()) == parse_quantity(text)
        assert all(amount >= 0 for amount in amounts.values())
        if any(shares.values()):
            assert all(amounts[name] == 0 for name, share in shares.items() if share == 0)
    assert divide_quota(hard, dict(reversed(shares.items()))) == divided


@given(st.integers(0, 10**6), share_maps)
def test_each_location_is_within_one_unit_of_its_exact_share(
    pods: int, shares: dict[str, int]
) -> None:
    divided = divide_quota({"pods": str(pods)}, shares)
    weights = shares if any(shares.values()) else dict.fromkeys(shares, 1)
    total = sum(weights.values())
    for name, weight in weights.items():
        exact = Fraction(pods * weight, total)
        assert abs(parse_quantity(divided[name]["pods"]) - exact) < 1
