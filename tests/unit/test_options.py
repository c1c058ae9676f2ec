"""kmc-apiserver's flags: the leader election's timing, as kube's components take it."""

from __future__ import annotations

import pytest

from apiserver.leader import Timing
from apiserver.options import OptionsError, parse


def test_the_defaults_are_kubes() -> None:
    assert parse([]).leader_timing == Timing(lease=15.0, renew_deadline=10.0, retry=2.0)


def test_a_slow_hub_can_be_given_a_longer_lease() -> None:
    options = parse(
        [
            "--leader-elect-lease-duration=60",
            "--leader-elect-renew-deadline=40",
            "--leader-elect-retry-period=5",
        ]
    )
    assert options.leader_timing == Timing(lease=60.0, renew_deadline=40.0, retry=5.0)


@pytest.mark.parametrize(
    "flags",
    [
        ["--leader-elect-renew-deadline=20"],  # not before the lease runs out for others
        ["--leader-elect-retry-period=10"],  # no second try before it must stop
        ["--leader-elect-retry-period=0"],
    ],
)
def test_timings_that_could_make_two_leaders_or_none_are_refused(flags: list[str]) -> None:
    with pytest.raises(OptionsError, match=r"--leader-elect-retry-period .* must hold"):
        parse(flags)


def test_a_lease_in_fractions_of_a_second_is_refused() -> None:
    with pytest.raises(OptionsError, match="whole seconds"):
        parse(["--leader-elect-lease-duration=15.5"])
