"""Child writes that a worker waits for only so long.

A slow location must not hold a worker, or every other object waits behind it: a write that
takes longer than `patience` goes on in the background (at most `per_location` at once per
location, namespaces taking turns) and its object is looked at again when it ends.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine
from typing import Any

from apiserver.fairgate import FairGate
from apiserver.kinds import Key
from apiserver.leader import Leadership

log = logging.getLogger(__name__)


class Bounded:
    def __init__(
        self,
        leadership: Leadership,
        again: Callable[[Key], None],
        patience: float,
        per_location: int,
    ) -> None:
        self.leadership = leadership
        self.again = again  # look at a key again (its slow write ended)
        self.patience = patience
        self.per_location = per_location
        self._inflight: dict[tuple[Key, str], asyncio.Task[bool]] = {}
        self._gates: dict[str, FairGate] = {}

    async def run(
        self, key: Key, location: str, work: Coroutine[Any, Any, bool], busy: bool = True
    ) -> bool:
        """Run one child write, but wait for it only `patience` seconds. Returns the write's
        result, or `busy` while it is still going (or another write of the same object there
        still is)."""
        if (key, location) in self._inflight:
            work.close()
            return busy
        gate = self._gates.setdefault(location, FairGate(self.per_location))

        async def laned() -> bool:
            async with gate.slot(key.lane):
                return await work

        slow = asyncio.Event()

        def finished(_: asyncio.Task[bool]) -> None:
            self._inflight.pop((key, location), None)
            if slow.is_set():
                self.again(key)

        task = asyncio.create_task(laned(), name=f"{key} in {location}")
        self._inflight[(key, location)] = task
        task.add_done_callback(finished)
        self.leadership.track(task)  # a leader stepping down stops its writes
        done, _ = await asyncio.wait({task}, timeout=self.patience)
        if done:
            return task.result()
        slow.set()
        log.info("%s: %s is slow to answer; carrying on without waiting", key, location)
        return busy

    def cancel(self) -> None:
        for task in self._inflight.values():
            task.cancel()
