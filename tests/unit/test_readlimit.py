"""Turns for reads: a few at once, gets before lists, first come first served among equals,
429 with Retry-After once the queue is full, and no turn lost to a caller who left."""

from __future__ import annotations

import asyncio

import pytest

from apiserver.kube.client import ApiError
from apiserver.readlimit import Priority, ReadLimiter


async def test_turns_go_by_priority_then_arrival_and_a_full_queue_says_429() -> None:
    limiter = ReadLimiter(concurrency=1, max_queued=3)
    order: list[str] = []
    release = asyncio.Event()

    async def read(name: str, priority: Priority) -> None:
        async with limiter.turn(priority):
            order.append(name)
            await release.wait()

    first = asyncio.create_task(read("first", Priority.LIST))
    await asyncio.sleep(0)
    waiting = [
        asyncio.create_task(read("list-1", Priority.LIST)),
        asyncio.create_task(read("list-2", Priority.LIST)),
        asyncio.create_task(read("get", Priority.GET)),
    ]
    await asyncio.sleep(0)
    assert order == ["first"] and limiter.queued == 3
    with pytest.raises(ApiError) as refused:
        async with limiter.turn(Priority.GET):
            pass
    assert refused.value.status["code"] == 429
    assert refused.value.status["details"]["retryAfterSeconds"] == 1
    release.set()
    await asyncio.gather(first, *waiting)
    assert order == ["first", "get", "list-1", "list-2"]
    assert limiter.free == 1 and limiter.queued == 0


async def test_a_caller_who_leaves_the_queue_loses_no_turn() -> None:
    limiter = ReadLimiter(concurrency=1, max_queued=10)
    release = asyncio.Event()

    async def hold() -> None:
        async with limiter.turn(Priority.LIST):
            await release.wait()

    holder = asyncio.create_task(hold())
    await asyncio.sleep(0)
    leaver = asyncio.create_task(hold())
    await asyncio.sleep(0)
    leaver.cancel()
    await asyncio.gather(leaver, return_exceptions=True)
    release.set()
    await holder
    assert limiter.free == 1
    async with asyncio.timeout(1):  # the slot is there to take at once
        async with limiter.turn(Priority.LIST):
            pass
