"""The per-location write gate: a bound on writes in flight, waiters served by lane in turn."""

from __future__ import annotations

import asyncio

from apiserver.fairgate import FairGate


async def test_a_lane_with_one_waiter_goes_before_the_rest_of_a_busy_lane() -> None:
    gate = FairGate(1)
    order: list[str] = []
    hold = asyncio.Event()

    async def write(lane: str, name: str, wait: asyncio.Event | None = None) -> None:
        async with gate.slot(lane):
            order.append(name)
            if wait is not None:
                await wait.wait()

    first = asyncio.create_task(write("bulk", "bulk-0", hold))
    await asyncio.sleep(0)
    rest = [asyncio.create_task(write("bulk", f"bulk-{i}")) for i in range(1, 6)]
    await asyncio.sleep(0)
    single = asyncio.create_task(write("mine", "mine"))
    await asyncio.sleep(0)
    assert order == ["bulk-0"] and gate.held == 1
    hold.set()
    await asyncio.gather(first, *rest, single)
    assert order[:3] == ["bulk-0", "bulk-1", "mine"]  # one turn of the bulk, then its turn
    assert gate.held == 0


async def test_no_more_than_the_limit_at_once_and_a_cancelled_waiter_loses_nothing() -> None:
    gate = FairGate(2)
    inside = 0
    most = 0
    release = asyncio.Event()

    async def write(lane: str) -> None:
        nonlocal inside, most
        async with gate.slot(lane):
            inside += 1
            most = max(most, inside)
            await release.wait()
            inside -= 1

    tasks = [asyncio.create_task(write(f"ns{i % 3}")) for i in range(9)]
    await asyncio.sleep(0.01)
    tasks[4].cancel()  # a waiter that gives up
    await asyncio.sleep(0.01)
    release.set()
    results = await asyncio.gather(*tasks, return_exceptions=True)
    assert most == 2
    assert sum(isinstance(r, asyncio.CancelledError) for r in results) == 1
    assert gate.held == 0
