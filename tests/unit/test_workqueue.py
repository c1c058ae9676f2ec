"""The work queue's promises: a key waits once, one worker per key, no change lost."""

from __future__ import annotations

import asyncio
import itertools

from apiserver.leader import NotLeading
from apiserver.workqueue import NOT_LEADING_RETRY, RetryBudget, WorkQueue


async def test_a_key_added_many_times_is_worked_once() -> None:
    queue: WorkQueue[str] = WorkQueue()
    seen: list[str] = []

    async def reconcile(key: str) -> None:
        seen.append(key)

    for _ in range(5):
        queue.add("a")
    queue.add("b")
    worker = asyncio.create_task(queue.work(reconcile, "test"))
    await asyncio.sleep(0.05)
    worker.cancel()
    assert seen == ["a", "b"]


async def test_one_worker_per_key_and_a_change_during_work_is_not_lost() -> None:
    queue: WorkQueue[str] = WorkQueue()
    running: set[str] = set()
    overlaps = 0
    calls = 0
    release = asyncio.Event()

    async def reconcile(key: str) -> None:
        nonlocal overlaps, calls
        calls += 1
        if key in running:
            overlaps += 1
        running.add(key)
        if calls == 1:
            await release.wait()  # hold the key while it is added again
        running.discard(key)

    queue.add("k")
    workers = [asyncio.create_task(queue.work(reconcile, "test")) for _ in range(3)]
    await asyncio.sleep(0.02)
    queue.add("k")  # arrives while the first reconcile holds "k"
    await asyncio.sleep(0.02)
    assert calls == 1  # no second worker took it meanwhile
    release.set()
    await asyncio.sleep(0.05)
    for worker in workers:
        worker.cancel()
    assert calls == 2 and overlaps == 0


async def test_a_failing_key_comes_back_after_a_backoff() -> None:
    queue: WorkQueue[str] = WorkQueue()
    attempts: list[float] = []

    async def reconcile(key: str) -> None:
        attempts.append(asyncio.get_running_loop().time())
        if len(attempts) < 3:
            raise RuntimeError("not yet")

    queue.add("k")
    worker = asyncio.create_task(queue.work(reconcile, "test"))
    await asyncio.sleep(1.5)
    worker.cancel()
    assert len(attempts) == 3
    assert attempts[1] - attempts[0] >= 0.1 and attempts[2] - attempts[1] >= 0.2


async def test_a_lapse_of_leadership_is_no_failure_of_the_key() -> None:
    # A budget of one retry a minute: a lapse that spent it would hold the key for a minute.
    queue: WorkQueue[str] = WorkQueue(retry_rate=1 / 60, retry_burst=1)
    attempts: list[float] = []
    done = asyncio.Event()

    async def reconcile(key: str) -> None:
        attempts.append(asyncio.get_running_loop().time())
        if len(attempts) < 4:
            raise NotLeading.now("me", "its lease is not renewed; writing nothing")
        done.set()

    queue.add("k")
    worker = asyncio.create_task(queue.work(reconcile, "test"))
    await asyncio.wait_for(done.wait(), 20)
    worker.cancel()
    gaps = [b - a for a, b in itertools.pairwise(attempts)]
    assert all(NOT_LEADING_RETRY * 0.9 <= gap < 5 for gap in gaps), gaps  # no growing backoff
    assert "k" not in queue._backoff


async def test_first_attempts_are_never_throttled_by_the_retry_budget() -> None:
    # A budget of one retry a second would hold 50 keys for 49 s if it applied to them.
    queue: WorkQueue[str] = WorkQueue(retry_rate=1, retry_burst=1)
    done = asyncio.Event()
    seen: list[str] = []

    async def reconcile(key: str) -> None:
        seen.append(key)
        if len(seen) == 50:
            done.set()

    for i in range(50):
        queue.add(f"k{i}")
    worker = asyncio.create_task(queue.work(reconcile, "test"))
    await asyncio.wait_for(done.wait(), 20)
    worker.cancel()
    assert len(seen) == 50


def test_the_retry_budget_spaces_retries_across_all_keys() -> None:
    budget = RetryBudget(rate=10, burst=2)
    delays = [budget.delay(100.0) for _ in range(5)]  # five failures at the same moment
    assert delays[:2] == [0.0, 0.0]  # the burst
    assert [round(d, 3) for d in delays[2:]] == [0.1, 0.2, 0.3]  # then 10 a second
    assert budget.delay(101.0) == 0.0  # paid back after a second


async def test_a_failing_key_waits_for_the_longer_of_its_backoff_and_the_budget() -> None:
    queue: WorkQueue[str] = WorkQueue(retry_rate=2, retry_burst=1)
    attempts: dict[str, list[float]] = {"a": [], "b": []}

    async def reconcile(key: str) -> None:
        attempts[key].append(asyncio.get_running_loop().time())
        if len(attempts[key]) < 2:
            raise RuntimeError("not yet")

    queue.add("a")
    queue.add("b")
    worker = asyncio.create_task(queue.work(reconcile, "test"))
    for _ in range(300):
        if all(len(times) == 2 for times in attempts.values()):
            break
        await asyncio.sleep(0.01)
    worker.cancel()
    gaps = sorted(times[1] - times[0] for times in attempts.values())
    # One retry is within its own backoff (0.1-0.2 s); the other waits for the budget (0.5 s).
    assert gaps[0] >= 0.09 and gaps[1] >= 0.45


async def test_a_bulk_in_one_lane_does_not_starve_another() -> None:
    queue: WorkQueue[tuple[str, int]] = WorkQueue(lane=lambda key: key[0])
    order: list[tuple[str, int]] = []

    async def reconcile(key: tuple[str, int]) -> None:
        order.append(key)

    for i in range(200):
        queue.add(("busy", i))
    queue.add(("quiet", 0))
    worker = asyncio.create_task(queue.work(reconcile, "test"))
    for _ in range(500):
        if len(order) == 201:
            break
        await asyncio.sleep(0.01)
    worker.cancel()
    assert order.index(("quiet", 0)) <= 1  # its turn comes after one key of the busy lane
    assert [key for key in order if key[0] == "busy"] == [("busy", i) for i in range(200)]


async def test_the_earliest_scheduled_look_wins() -> None:
    queue: WorkQueue[str] = WorkQueue()
    seen: list[float] = []

    async def reconcile(key: str) -> None:
        seen.append(asyncio.get_running_loop().time())

    started = asyncio.get_running_loop().time()
    queue.add_after("k", 30)
    queue.add_after("k", 0.05)
    queue.add_after("k", 60)
    worker = asyncio.create_task(queue.work(reconcile, "test"))
    for _ in range(200):
        if seen:
            break
        await asyncio.sleep(0.01)
    worker.cancel()
    assert len(seen) == 1 and seen[0] - started < 5


async def test_a_burst_of_debounced_changes_is_seen_at_once_then_once_more() -> None:
    queue: WorkQueue[str] = WorkQueue()
    seen: list[float] = []

    async def reconcile(key: str) -> None:
        seen.append(asyncio.get_running_loop().time())

    worker = asyncio.create_task(queue.work(reconcile, "test"))
    started = asyncio.get_running_loop().time()
    for _ in range(10):
        queue.add_debounced("k", 0.3)
        await asyncio.sleep(0.02)
    for _ in range(200):
        if len(seen) >= 2:
            break
        await asyncio.sleep(0.01)
    await asyncio.sleep(0.4)  # nothing else is due
    worker.cancel()
    assert len(seen) == 2
    assert seen[0] - started < 0.2  # the first change at once
    assert seen[1] - started >= 0.29  # the rest together, a window later
