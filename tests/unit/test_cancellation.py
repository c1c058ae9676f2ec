"""A loop must stop when cancelled, whatever it was waiting for at that moment.

On Python 3.11, `asyncio.wait_for` loses a cancel that arrives as the awaited thing finishes:
it returns the result, and the cancelled task runs on. A loop that waits for a wake-up that
way (`while True: ... wait_for(woken.wait(), t)`) then never stops, and neither does the
process: kmc-apiserver hung on SIGTERM in CI this way (the leader's lease attempt, the probe
loop, the import loop and the work feed all waited like this). `asyncio.timeout` keeps the
cancel, so the code uses it and never `wait_for`.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


async def waker_loop(woken: asyncio.Event, passed: asyncio.Event) -> None:
    """The shape of our loops: do a pass, then wait to be woken or for the period to end."""
    while True:
        woken.clear()
        passed.set()
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(10):
                await woken.wait()
        await asyncio.sleep(0)


async def test_a_loop_woken_as_it_is_cancelled_stops() -> None:
    woken, passed = asyncio.Event(), asyncio.Event()
    task = asyncio.create_task(waker_loop(woken, passed))
    await passed.wait()
    await asyncio.sleep(0)  # it waits to be woken now
    woken.set()  # the wake-up and the cancel in the same turn of the event loop
    task.cancel()
    done, _ = await asyncio.wait({task}, timeout=5)
    assert done and task.cancelled()


def test_no_code_of_ours_waits_with_wait_for() -> None:
    used = [
        f"{path.relative_to(ROOT)}:{number}"
        for folder in ("apiserver", "kubectl_mc")
        for path in sorted((ROOT / folder).rglob("*.py"))
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if re.search(r"\basyncio\.wait_for\(|\bwait_for\(", line) and "def wait_for" not in line
    ]
    assert not used, f"asyncio.wait_for loses cancels on Python 3.11; use asyncio.timeout: {used}"
