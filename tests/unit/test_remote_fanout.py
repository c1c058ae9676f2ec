"""Who is left out of a stitched list: a slow location, not a busy machine."""

from __future__ import annotations

import asyncio
import time
from typing import Any, cast

from apiserver.kube.client import Kube
from apiserver.remote.fanout import Asked, fan_out

TIMEOUT = 0.2


def clients(*names: str) -> dict[str, Kube]:
    return {name: cast(Kube, name) for name in names}


def behaving(plan: dict[str, tuple[float, float]]) -> Any:
    """Each location starts answering after plan[0] seconds and finishes plan[1] later."""

    async def call(kube: Kube, asked: Asked) -> Any:
        starts, takes = plan[cast(str, kube)]
        await asyncio.sleep(starts)
        asked.answering.set()
        await asyncio.sleep(takes)
        return {"from": kube}

    return call


async def test_a_silent_location_is_left_out_a_timeout_after_the_first_answer() -> None:
    plan = {"fast": (0.0, 0.0), "silent": (10.0, 0.0)}
    started = time.monotonic()
    answers = await fan_out(clients(*plan), behaving(plan), TIMEOUT)
    assert time.monotonic() - started < TIMEOUT + 0.15
    by = {a.location: a for a in answers}
    assert by["fast"].body == {"from": "fast"}
    assert by["silent"].error is not None and by["silent"].error.code == 504
    assert "after another location had answered" in str(by["silent"].error)


async def test_an_answer_that_has_started_is_read_to_its_end() -> None:
    plan = {"fast": (0.0, 0.0), "big": (0.05, 3 * TIMEOUT)}
    answers = await fan_out(clients(*plan), behaving(plan), TIMEOUT)
    assert [a.error for a in answers] == [None, None]


async def test_when_everyone_is_slow_nobody_is_left_out() -> None:
    plan = {"a": (3 * TIMEOUT, 0.0), "b": (3 * TIMEOUT + 0.05, 0.0), "c": (3.5 * TIMEOUT, 0.0)}
    answers = await fan_out(clients(*plan), behaving(plan), TIMEOUT)
    assert [a.error for a in answers] == [None, None, None]


async def test_no_locations_no_answers() -> None:
    assert await fan_out({}, behaving({}), TIMEOUT) == []


async def test_a_child_slow_to_review_is_left_out_once_another_has_decided() -> None:
    from apiserver.api.authz import Decision
    from apiserver.remote.handlers import _reviewed

    async def decide(after: float, allowed: bool) -> Decision:
        await asyncio.sleep(after)
        return Decision(allowed)

    started = time.monotonic()
    decisions = await _reviewed(
        {"fast": decide(0.0, True), "denies": decide(0.05, False), "slow": decide(60.0, True)},
        TIMEOUT,
    )
    assert time.monotonic() - started < 30  # not the slow child's minute
    assert decisions[:2] == [Decision(True), Decision(False)]
    assert not decisions[2].allowed
    assert "no answer 0.2s after another location's" in decisions[2].error
    # Every child slow alike (a busy machine): nobody is left out for it.
    assert await _reviewed({"a": decide(0.5, True), "b": decide(0.5, True)}, TIMEOUT) == [
        Decision(True),
        Decision(True),
    ]
