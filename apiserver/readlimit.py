"""Turns for expensive reads: a few at once, the rest queued by priority, and a 429 with
Retry-After when the queue is full, as kube-apiserver's priority and fairness answers.

Discovery, health and the hub's availability checks of our APIServices never come here (they
are cheap and must always answer); a get of one object goes before a list, and among equals
the first to come is the first served. A caller told to retry comes back in a second, when
the queue has moved; latency stays bounded instead of growing with the crowd.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from enum import IntEnum

from aiohttp import web

from apiserver import metrics
from apiserver.api import errors

# Reads waiting on children per read served at once (`keys.WAITS`).
WAITS_PER_READ = 8


class Priority(IntEnum):
    GET = 0  # one object
    LIST = 1  # a collection


class ReadLimiter:
    def __init__(self, concurrency: int, max_queued: int) -> None:
        self.free = concurrency
        self.max_queued = max_queued
        self._waiting: list[tuple[int, int, asyncio.Future[None]]] = []
        self._order = itertools.count()

    @property
    def queued(self) -> int:
        return sum(1 for *_, future in self._waiting if not future.done())

    @asynccontextmanager
    async def turn(self, priority: Priority) -> AsyncIterator[None]:
        await self._acquire(priority)
        try:
            yield
        finally:
            self._release()

    async def _acquire(self, priority: Priority) -> None:
        if self.free > 0 and self.queued == 0:
            self.free -= 1
            self._waiting = []  # only turns given up on were left there
            return
        if self.queued >= self.max_queued:
            metrics.READS_REJECTED.inc()
            raise errors.too_many_requests(
                "too many requests are being served; try again in a second", retry_after=1
            )
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        heapq.heappush(self._waiting, (priority, next(self._order), future))
        try:
            await future
        except asyncio.CancelledError:
            if future.done() and not future.cancelled():
                self._release()  # our turn came as we left: pass it on
            raise

    def _release(self) -> None:
        while self._waiting:
            *_, future = heapq.heappop(self._waiting)
            if not future.done():
                future.set_result(None)
                return
        self.free += 1


# Turns for lists of either group; see --read-concurrency.
READS = web.AppKey("reads", ReadLimiter)
# Turns for reads waiting on children (remote.kmc.dev gets, lists not served from the caches):
# they cost memory for the answers, not the loop's time, so more at once.
WAITS = web.AppKey("waits", ReadLimiter)
