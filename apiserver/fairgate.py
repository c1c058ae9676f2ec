"""At most so many at once, and those waiting served by lane in turn.

The sync loop writes to each location through such a gate (at most `per_location` writes in
flight there). A plain semaphore serves waiters in arrival order: a thousand writes of one
namespace's bulk would stand between a single new object elsewhere and its child. Here each
lane (a namespace) gets one turn per round, like the work queue's lanes.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from collections.abc import AsyncIterator


class FairGate:
    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.held = 0
        self._waiting: dict[str, deque[asyncio.Future[None]]] = {}
        self._turns: deque[str] = deque()  # lanes with waiters, in the order they are served

    @contextlib.asynccontextmanager
    async def slot(self, lane: str) -> AsyncIterator[None]:
        if self.held < self.limit and not self._turns:
            self.held += 1
        else:
            granted: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            waiting = self._waiting.get(lane)
            if waiting is None:
                waiting = self._waiting[lane] = deque()
                self._turns.append(lane)
            waiting.append(granted)
            try:
                await granted  # the slot is counted as ours when this is set
            except asyncio.CancelledError:
                if granted.done() and not granted.cancelled():
                    self._release()  # granted as we were cancelled: pass it on
                raise
        try:
            yield
        finally:
            self._release()

    def _release(self) -> None:
        self.held -= 1
        while self._turns and self.held < self.limit:
            lane = self._turns.popleft()
            waiting = self._waiting[lane]
            granted = waiting.popleft()
            if waiting:
                self._turns.append(lane)
            else:
                del self._waiting[lane]
            if granted.cancelled():
                continue
            self.held += 1
            granted.set_result(None)
