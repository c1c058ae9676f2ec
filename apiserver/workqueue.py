"""A work queue of keys for level-based reconcilers (after client-go's workqueue).

A key waits in the queue at most once however often it is added; while a worker holds a
key, adding it again marks it dirty and it is queued once more when the worker is done. So
one worker per key at a time, and no change is lost.

Rate limits apply to retries only, as in client-go: a key whose reconcile failed comes back
after the longer of its own exponential backoff and what an overall retry budget allows, so
a hub or child that keeps failing is not hammered. A first attempt is never held back.

Fair: keys wait in lanes (the namespace, for hub objects) and workers take from the lanes in
turn, so a bulk of work in one namespace — a big delete, a big apply — cannot keep a single
new object elsewhere waiting behind it, as kube-apiserver's priority and fairness keeps one
noisy flow from starving the others.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Awaitable, Callable, Hashable
from typing import Generic, TypeVar

from apiserver import metrics
from apiserver.kube.client import ApiError
from apiserver.kube.informer import Backoff
from apiserver.leader import NotLeading

K = TypeVar("K", bound=Hashable)

# A key refused because we stopped leading waits this long before it is taken up again (the
# worker then waits to lead): long enough not to spin while a lapse is being noticed.
NOT_LEADING_RETRY = 0.5


class RetryBudget:
    """A token bucket that says how long a retry must wait, never blocking anyone: at most
    `rate` retries a second on average across all keys, `burst` at once."""

    def __init__(self, rate: float, burst: int) -> None:
        self.rate, self.burst = rate, burst
        self.tokens = float(burst)
        self.stamp: float | None = None

    def delay(self, now: float) -> float:
        if self.stamp is not None:
            self.tokens = min(self.burst, self.tokens + (now - self.stamp) * self.rate)
        self.stamp = now
        self.tokens -= 1  # reserved now, paid for by waiting when in debt
        return 0.0 if self.tokens >= 0 else -self.tokens / self.rate


class WorkQueue(Generic[K]):
    def __init__(
        self,
        name: str = "queue",
        lane: Callable[[K], str] = lambda _: "",
        retry_rate: float = 10.0,
        retry_burst: int = 100,
    ) -> None:
        self.name = name
        self._lane_of = lane
        self._lanes: dict[str, deque[K]] = {}
        self._turns: deque[str] = deque()  # lanes with waiting keys, in the order they are served
        self._waiting = asyncio.Semaphore(0)  # one per waiting key
        self._queued: dict[K, float] = {}  # waiting key -> when it was added
        self._active: dict[K, float] = {}  # key being worked on -> since when
        self._dirty: set[K] = set()
        self._backoff: dict[K, Backoff] = {}
        self._budget = RetryBudget(retry_rate, retry_burst)
        self._later: dict[K, asyncio.TimerHandle] = {}  # one scheduled add per key
        self._settled: dict[K, float] = {}  # debounced key -> when it last went through
        self.metrics = metrics.QueueMetrics(name, self)

    # -- adding ---------------------------------------------------------------------------

    def add(self, key: K) -> None:
        """A first attempt: never throttled."""
        if key in self._active:
            self._dirty.add(key)
            return
        if key in self._queued:
            return
        loop = asyncio.get_running_loop()
        self._queued[key] = loop.time()
        lane = self._lane_of(key)
        waiting = self._lanes.get(lane)
        if waiting is None:
            waiting = self._lanes[lane] = deque()
            self._turns.append(lane)
        waiting.append(key)
        self._waiting.release()
        self.metrics.added()

    def add_after(self, key: K, delay: float) -> None:
        """Look at `key` again in `delay` seconds (a grace period ends, a cooldown, a retry).
        An earlier scheduled look wins; a later one replaces nothing."""
        loop = asyncio.get_running_loop()
        due = loop.time() + max(delay, 0.0)
        handle = self._later.get(key)
        if handle is not None and handle.when() <= due:
            return
        if handle is not None:
            handle.cancel()
        self._later[key] = loop.call_at(due, self._due, key)

    def _due(self, key: K) -> None:
        self._later.pop(key, None)
        self.add(key)

    def add_debounced(self, key: K, window: float) -> None:
        """A change that tends to come in bursts (a child's status while its pods start): the
        first is seen at once, the rest at most once per `window`, together."""
        if key in self._queued:
            return  # the coming reconcile reads the latest anyway
        now = asyncio.get_running_loop().time()
        last = self._settled.get(key)
        due = now if last is None or now - last >= window else last + window
        self._settled[key] = due
        if len(self._settled) > 4096 + 4 * len(self._queued):
            self._settled = {k: t for k, t in self._settled.items() if now - t < window}
        if due <= now:
            self.add(key)
        else:
            self.add_after(key, due - now)

    def forget(self, key: K) -> None:
        """The key's object is gone: drop what the queue remembers of it."""
        self._backoff.pop(key, None)
        self._settled.pop(key, None)

    def __len__(self) -> int:
        return len(self._queued)

    # -- working --------------------------------------------------------------------------

    async def _get(self) -> K:
        await self._waiting.acquire()
        lane = self._turns.popleft()
        waiting = self._lanes[lane]
        key = waiting.popleft()
        if waiting:
            self._turns.append(lane)  # its next key waits for every other lane's turn
        else:
            del self._lanes[lane]
        now = asyncio.get_running_loop().time()
        self.metrics.waited(now - self._queued.pop(key))
        self._active[key] = now
        return key

    def _done(self, key: K, failed: bool) -> None:
        now = asyncio.get_running_loop().time()
        self.metrics.worked(now - self._active.pop(key))
        if failed:
            backoff = self._backoff.setdefault(key, Backoff(first=0.2, cap=60.0))
            self.metrics.retried()
            self.add_after(key, max(backoff.next(), self._budget.delay(now)))
        else:
            self._backoff.pop(key, None)
        if key in self._dirty:
            self._dirty.discard(key)
            self.add(key)

    def oldest_active(self) -> float:
        """Seconds the longest-running reconcile has been going (0 when idle)."""
        if not self._active:
            return 0.0
        return asyncio.get_running_loop().time() - min(self._active.values())

    def unfinished(self) -> float:
        """Seconds of work in progress, summed over the reconciles running now."""
        now = asyncio.get_running_loop().time()
        return sum(now - since for since in self._active.values())

    async def work(self, reconcile: Callable[[K], Awaitable[None]], name: str) -> None:
        """One worker: forever take a key, reconcile it, report failures with backoff."""
        log = logging.getLogger(name)
        while True:
            key = await self._get()
            failed, outcome = False, "success"
            try:
                await reconcile(key)
            except asyncio.CancelledError:
                raise
            except NotLeading as err:
                # Leadership lapsed (a slow lease renewal): no fault of the key's, so no
                # backoff and no retry budget spent; it is taken up again once we lead.
                log.info("%s: %s; again when leading", key, err)
                outcome = "not_leading"
                self.add_after(key, NOT_LEADING_RETRY)
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
                self.metrics.outcome("error" if failed else outcome)
