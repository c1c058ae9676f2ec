"""Push against pull's figures (bench/pull.py): ratios are pull over push, CPU split by where
it was spent, and the summary reads back what the rows say."""

from __future__ import annotations

import pytest

from bench.pull import TOKEN, Measured, rows, summary


def test_figures_are_pull_over_push_per_location_and_per_object() -> None:
    push = Measured(converge_s=50.0, kmc_cpu_s=60.0, agents_cpu_s=0.0, propagation_s=[])
    push.propagation_s = [0.010] * 98 + [0.050, 0.100]
    pull = Measured(converge_s=75.0, kmc_cpu_s=30.0, agents_cpu_s=45.0, propagation_s=[])
    pull.propagation_s = [0.020] * 98 + [0.200, 0.300]
    got = {(r["benchmark"], r["figure"]): r for r in rows(100, push, pull)}

    converge = got["pull.converge", "converge_100_s"]
    assert (converge["value"], converge["baseline"], converge["ratio"]) == (75.0, 50.0, 1.5)
    per_location = got["pull.cpu", "kmc_cpu_s_per_location"]
    assert (per_location["value"], per_location["baseline"]) == (10.0, 20.0)
    assert per_location["ratio"] == 0.5
    per_object = got["pull.cpu", "kmc_cpu_ms_per_object"]
    assert (per_object["value"], per_object["baseline"]) == (300.0, 600.0)
    assert got["pull.cpu", "agent_cpu_s_per_location"]["value"] == 15.0
    assert got["pull.cpu", "agents_cpu_ms_per_object"]["value"] == 450.0
    both = got["pull.cpu", "kmc_and_agents_cpu_ms_per_object"]
    assert (both["value"], both["baseline"], both["ratio"]) == (750.0, 600.0, 1.25)
    p50 = got["pull.propagation", "p50_ms"]
    assert (p50["value"], p50["baseline"], p50["ratio"]) == (20.0, 10.0, 2.0)
    p99 = got["pull.propagation", "p99_ms"]
    assert (p99["value"], p99["baseline"], p99["ratio"]) == (300.0, 100.0, 3.0)

    said = summary(rows(100, push, pull), 100)
    assert said["pull_converge_100_s"] == 75.0
    assert said["push_converge_100_s_same_children"] == 50.0
    assert said["pull_converge_ratio"] == 1.5
    assert said["pull_kmc_cpu_ratio"] == 0.5
    assert said["push_kmc_cpu_ms_per_object"] == 600.0
    assert said["pull_propagation_p99_ratio"] == 3.0
    assert None not in said.values(), said


@pytest.mark.parametrize(
    ("printed", "token"),
    [
        (
            "bootstrap token (one use, expires 2026-12-07T03:00:00Z): abcdef.0123456789abcdef\n",
            "abcdef.0123456789abcdef",
        ),
        ("location.kmc.dev/x joined (pull)\n", None),
    ],
)
def test_the_token_is_read_from_what_join_prints(printed: str, token: str | None) -> None:
    found = TOKEN.search(printed)
    assert (found.group(1) if found else None) == token
