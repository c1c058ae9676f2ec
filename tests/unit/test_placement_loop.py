"""How the placement loop reads a Location's condition times."""

from __future__ import annotations

import datetime

from apiserver.loops.placement.deciding import _changed_at


def test_a_whole_second_counts_from_its_end_so_a_grace_period_is_never_short() -> None:
    second = datetime.datetime(2026, 12, 3, 8, 0, 5, tzinfo=datetime.UTC).timestamp()
    # Written at 08:00:05.9 as "08:00:05Z": the grace period must not start 0.9 s early.
    assert _changed_at("2026-12-03T08:00:05Z") == second + 1
    assert _changed_at("2026-12-03T08:00:05.250000Z") == second + 0.25
    assert _changed_at(None) == 0.0
