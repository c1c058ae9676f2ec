"""The work queue's promises: a key waits once, one worker per key, no change lost."""

from __future__ import annotations

import asyncio

from apiserver.workqueue import WorkQueue


async def test_a_key_added_many_times_is_worked_once() -> None:
    queue = WorkQueue()
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
    queue = WorkQueue()
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
    queue = WorkQueue()
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


async def test_the_rate_limit_holds_across_workers() -> None:
    queue = WorkQueue(rate=100, burst=5)
    done: list[float] = []
    all_done = asyncio.Event()

    async def reconcile(key: str) -> None:
        done.append(asyncio.get_running_loop().time())
        if len(done) == 25:
            all_done.set()

    for i in range(25):
        queue.add(f"k{i}")
    started = asyncio.get_running_loop().time()
    workers = [asyncio.create_task(queue.work(reconcile, "test")) for _ in range(4)]
    await asyncio.wait_for(all_done.wait(), 5)
    for worker in workers:
        worker.cancel()
    # 5 at once, then 20 more at 100/s: at least 0.2 s, however many workers.
    assert max(done) - started >= 0.19
