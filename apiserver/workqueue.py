"""A work queue of keys for level-based reconcilers (after client-go's workqueue).

A key waits in the queue at most once however often it is added; while a worker holds a
key, adding it again marks it dirty and it is queued once more when the worker is done. So
one worker per key at a time, and no change is lost. Failed keys come back after a per-key
exponential backoff; `add_after` schedules a look at a deadline (grace periods); a token
bucket shared by all workers caps the rate of reconciles.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from apiserver.kube.client import ApiError
from apiserver.kube.informer import Backoff


class TokenBucket:
    """At most `rate` per second on average, `burst` at once."""

    def __init__(self, rate: float, burst: int) -> None:
        self.rate, self.burst = rate, burst
        self.tokens = float(burst)
        self.stamp: float | None = None

    async def take(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            now = loop.time()
            if self.stamp is not None:
                self.tokens = min(self.burst, self.tokens + (now - self.stamp) * self.rate)
            self.stamp = now
            if self.tokens >= 1:
                self.tokens -= 1
                return
            await asyncio.sleep((1 - self.tokens) / self.rate)


class WorkQueue:
    def __init__(self, rate: float = 100.0, burst: int = 200) -> None:
        # Shared by every worker: a relist of thousands of keys cannot hammer the clusters.
        self.limit = TokenBucket(rate, burst)
        self._queue: asyncio.Queue[str] = asyncio.Queue()
        self._queued: set[str] = set()
        self._active: set[str] = set()
        self._dirty: set[str] = set()
        self._backoff: dict[str, Backoff] = {}

    def add(self, key: str) -> None:
        if key in self._active:
            self._dirty.add(key)
        elif key not in self._queued:
            self._queued.add(key)
            self._queue.put_nowait(key)

    def add_after(self, key: str, delay: float) -> None:
        asyncio.get_running_loop().call_later(max(delay, 0.0), self.add, key)

    def __len__(self) -> int:
        return len(self._queued)

    async def _get(self) -> str:
        key = await self._queue.get()
        self._queued.discard(key)
        self._active.add(key)
        return key

    def _done(self, key: str, failed: bool) -> None:
        self._active.discard(key)
        if failed:
            delay = self._backoff.setdefault(key, Backoff(first=0.2, cap=60.0)).next()
            self.add_after(key, delay)
        else:
            self._backoff.pop(key, None)
        if key in self._dirty:
            self._dirty.discard(key)
            self.add(key)

    async def work(self, reconcile: Callable[[str], Awaitable[None]], name: str) -> None:
        """One worker: forever take a key, reconcile it, report failures with backoff."""
        log = logging.getLogger(name)
        while True:
            key = await self._get()
            failed = False
            await self.limit.take()
            try:
                await reconcile(key)
            except asyncio.CancelledError:
                raise
            except ApiError as err:
                # A stale view (409) or an object gone meanwhile (404) is the normal life of a
                # level-based reconciler: try again, quietly.
                quiet = err.code in (404, 409)
                (log.info if quiet else log.warning)("%s: %s; retrying with backoff", key, err)
                failed = True
            except Exception:
                log.exception("%s: reconcile failed; retrying with backoff", key)
                failed = True
            finally:
                self._done(key, failed)
