"""List, then watch: a level-based cache of one resource, with handlers for changes.

The discipline (after kopf and client-go): list to get a resourceVersion, watch from it with
bookmarks, relist on 410 Gone, back off on transient errors (honouring the server's
Retry-After). Objects are handed out as they are cached, never copied: they are read-only
to everyone, and whoever must change one copies it first. Handlers get (event type, object,
the object as cached before or None) and must be idempotent: after a relist every object is
delivered again.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import dataclasses
import logging
import random
import time
from collections.abc import Awaitable, Callable
from typing import Any

from apiserver import metrics
from apiserver.kube.client import ApiError, Kube
from apiserver.objects import Obj

log = logging.getLogger(__name__)

Handler = Callable[[str, Obj, Obj | None], Awaitable[None]]
# Deletions remembered for `observe`: it only needs the ones of the last few seconds.
_TOMBSTONES = 4096
# A quiet watch is caught up after `settle`, or after this many times the latest event seen
# trailing in the last TRAIL_WINDOW seconds, never more than SETTLE_CAP (`caught_up`).
TRAIL_FACTOR = 4.0
TRAIL_WINDOW = 300.0
SETTLE_CAP = 0.25
READ_MEMORY = 10.0  # how long a read waits for the events it must see, for trails' sake
PENDING_TURNS = 4  # loop turns a quiet read gives data already received before it answers


def key_of(obj: Obj) -> str:
    meta = obj.get("metadata", {})
    ns = meta.get("namespace")
    return f"{ns}/{meta['name']}" if ns else str(meta["name"])


class Backoff:
    """Exponential backoff with jitter; `reset` after a success."""

    def __init__(self, first: float = 0.5, cap: float = 30.0) -> None:
        self.first, self.cap, self.attempt = first, cap, 0

    def next(self, retry_after: float | None = None) -> float:
        delay = min(self.cap, self.first * 2**self.attempt)
        self.attempt += 1
        delay = delay / 2 + random.uniform(0, delay / 2)
        return float(max(delay, retry_after or 0.0))

    def reset(self) -> None:
        self.attempt = 0


@dataclasses.dataclass
class _Read:
    """A consistent read: the version it must see, when it began to wait for it, and when
    the last event it had to see came (the quiet it waits restarts there)."""

    version: int
    started: float
    answered: bool = False
    last: float = 0.0

    def __post_init__(self) -> None:
        self.last = self.last or self.started


class Informer:
    """Keeps `cache` equal to the server's view of `path`, and tells `handler` what changed."""

    def __init__(
        self,
        kube: Kube,
        path: str,
        handler: Handler | None = None,
        params: dict[str, str] | None = None,
        backoff_cap: float = 30.0,
        slim: Callable[[Obj], Obj] | None = None,
    ) -> None:
        self.kube = kube
        self.path = path
        self.slim = slim
        self.backoff_cap = backoff_cap
        self.handlers = [handler] if handler is not None else []
        self.params = params or {}
        self.cache: dict[str, Obj] = {}
        # Deleted keys and the version that said so, newest last: an answer to our own write
        # that comes back after the deletion's event must not bring the object back.
        self._gone: dict[str, int] = {}
        self.synced = asyncio.Event()
        # The highest resourceVersion the cache has taken (events, bookmarks, lists), whether
        # a watch is open now, and an event set (and replaced) each time the watch moves on.
        self.version = -1
        self.watching = False
        self._moved = asyncio.Event()
        # Reads waiting or answered whose version the watch has not passed yet, (when, how
        # late) for events that trailed one, and how many came after it answered: `caught_up`.
        self._reads: list[_Read] = []
        self._trails: collections.deque[tuple[float, float]] = collections.deque(maxlen=64)
        self.late = 0

    def subscribe(self, handler: Handler) -> None:
        """One more handler for every change (delivered after the earlier ones)."""
        self.handlers.append(handler)

    async def _emit(self, kind: str, obj: Obj, old: Obj | None) -> None:
        """Every handler sees the change; one that fails is logged and does not stop the others
        (the next relist delivers the object again)."""
        for handler in self.handlers:
            try:
                await handler(kind, obj, old)
            except Exception:
                log.exception(
                    "%s %s: handler failed on %s %s", self.kube.name, self.path, kind, key_of(obj)
                )

    async def observe(self, obj: Obj) -> None:
        """Take our own write's answer as if it came from the watch: whoever waits on this
        object acts now, not one watch round trip later. The watch event that follows with
        the same resourceVersion is then not delivered twice."""
        obj = self.kept(obj)
        key = key_of(obj)
        old = self.cache.get(key)
        version = obj.get("metadata", {}).get("resourceVersion")
        if old is not None and old.get("metadata", {}).get("resourceVersion") == version:
            return
        if old is not None and _newer(old, obj):
            return  # the watch already brought something later
        gone = self._gone.get(key)
        if old is None and gone is not None and _version(obj) <= gone:
            return  # deleted since: the watch saw it go
        self.cache[key] = obj
        await self._emit("ADDED" if old is None else "MODIFIED", obj, old)

    def _advance(self, version: str, written: bool = True) -> None:
        """The watch has brought `version`; `written` unless that is no write a read could
        have missed (a BOOKMARK, or the event of a write `observe` already took)."""
        with contextlib.suppress(ValueError):
            taken = int(version)
            self.version = max(self.version, taken)
            if self._reads and written:
                self._trailed(taken)
        moved, self._moved = self._moved, asyncio.Event()
        moved.set()

    def _trailed(self, taken: int) -> None:
        """An event at `taken` was written before every read that learnt a version at or
        above it: how long it came after the read began, or after the read's last such event,
        is a trail (the quiet restarts at each event, see `caught_up`); a read that had
        already answered missed it. Events come in order, so reads below `taken` are done with."""
        now = time.monotonic()
        kept, missed = [], 0
        for read in self._reads:
            if taken > read.version or now - read.started > READ_MEMORY:
                continue
            self._trails.append((now, now - read.last))
            read.last = now
            missed += read.answered
            kept.append(read)
        self._reads = kept
        if missed:
            self.late += missed
            metrics.LATE_EVENTS.labels(self.kube.name).inc(missed)
            log.info(
                "%s %s: an event came %.0f ms after %d consistent read(s) that had to see it",
                self.kube.name,
                self.path,
                self._trails[-1][1] * 1000,
                missed,
            )

    async def caught_up(self, version: int, settle: float, timeout: float) -> bool:
        """Wait until the cache has taken `version` or later. The hub moves its version for
        every write to any resource, so one of ours may have nothing after our last event:
        a watch that stays quiet long enough has nothing more to bring. False when `timeout`
        passes first, or while no watch is open (the cache may be behind).

        Long enough is `settle`, or more once events have been seen trailing: an event at or
        below `version` that comes after this call began was written before the caller learnt
        `version`, and how late it came is the margin this watch needs (`TRAIL_FACTOR` times
        the latest of the last `TRAIL_WINDOW` seconds, at most `SETTLE_CAP`). One that comes
        after we answered is counted in `late` and widens the margin for the reads after."""
        read = _Read(version, time.monotonic())
        deadline = read.started + timeout
        quiet = self._quiet(settle, read.started)
        self._reads = [r for r in self._reads if read.started - r.started <= READ_MEMORY]
        self._reads.append(read)
        try:
            while self.version < version:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                moved = self._moved
                try:
                    async with asyncio.timeout(min(quiet, left)):
                        await moved.wait()
                except TimeoutError:
                    # A loop busy elsewhere runs an expired timer before reading the socket
                    # that may already hold the event: let pending reads in first.
                    for _ in range(PENDING_TURNS):
                        await asyncio.sleep(0)
                    if moved.is_set():
                        continue
                    if self.watching and time.monotonic() < deadline:
                        return True
            return True
        finally:
            read.answered = True

    def _quiet(self, settle: float, now: float) -> float:
        while self._trails and now - self._trails[0][0] > TRAIL_WINDOW:
            self._trails.popleft()
        latest = max((trail for _, trail in self._trails), default=0.0)
        return min(SETTLE_CAP, max(settle, TRAIL_FACTOR * latest))

    def get(self, key: str) -> Obj | None:
        """The cached object itself: read-only."""
        return self.cache.get(key)

    def items(self) -> list[Obj]:
        """Every cached object (read-only), as a list that later changes do not touch."""
        return list(self.cache.values())

    def kept(self, obj: Obj) -> Obj:
        """What the cache keeps of an object: never managedFields (nothing reads them, and they
        are often the largest part), and only what `slim` keeps when the owner says so."""
        obj.get("metadata", {}).pop("managedFields", None)
        return self.slim(obj) if self.slim is not None else obj

    async def run(self) -> None:
        backoff = Backoff(cap=self.backoff_cap)
        said = ""  # the failure last logged as a warning: the same one again is only debug
        while True:
            try:
                version = await self._relist()
                backoff.reset()
                said = ""
                while True:
                    version = await self._watch(version)
            except ApiError as err:
                if err.code == 410:
                    log.info("%s %s: resourceVersion expired, relisting", self.kube.name, self.path)
                    continue
                delay = backoff.next(_retry_after(err))
                level = logging.DEBUG if str(err) == said else logging.WARNING
                said = str(err)
                log.log(
                    level, "%s %s: %s; retrying in %.1fs", self.kube.name, self.path, err, delay
                )
                await asyncio.sleep(delay)
            except Exception:
                # Whatever it was, an informer that stops leaves its cache frozen and everyone
                # who reads it wrong, quietly; one that relists is right again.
                delay = backoff.next()
                log.exception("%s %s: failed; relisting in %.1fs", self.kube.name, self.path, delay)
                await asyncio.sleep(delay)

    def _bury(self, key: str, version: int) -> None:
        self._gone.pop(key, None)
        self._gone[key] = version
        if len(self._gone) > _TOMBSTONES:
            del self._gone[next(iter(self._gone))]

    async def _relist(self) -> str:
        try:
            listing = await self.kube.get(self.path, **self.params)
        except ApiError as err:
            if err.code != 404:
                raise
            # A list answers 404 only when the resource is not served (a CRD deleted, an API
            # turned off): nothing of it can be seen there any more, so the cache is emptied,
            # and fills again if the resource comes back.
            await self._take(
                {"metadata": {"resourceVersion": self._highest_version()}, "items": []}
            )
            raise
        return await self._take(listing)

    def _highest_version(self) -> str:
        versions = [_version(obj) for obj in self.cache.values()]
        return str(max(versions, default=0))

    async def _take(self, listing: Obj) -> str:
        """Make the cache the listing, telling the handlers what changed."""
        fresh = {key_of(o): self.kept(o) for o in listing.get("items", [])}
        for key in [k for k in self.cache if k not in fresh]:
            gone = self.cache.pop(key)
            self._bury(key, _version(listing))
            await self._emit("DELETED", gone, gone)
        for key, obj in fresh.items():
            old = self.cache.get(key)
            self.cache[key] = obj
            if old is None or old["metadata"].get("resourceVersion") != obj["metadata"].get(
                "resourceVersion"
            ):
                await self._emit("ADDED" if old is None else "MODIFIED", obj, old)
        self.synced.set()
        version = str(listing.get("metadata", {}).get("resourceVersion", ""))
        self._advance(version)
        return version

    async def _watch(self, version: str) -> str:
        try:
            return await self._follow(version)
        finally:
            self.watching = False

    async def _follow(self, version: str) -> str:
        self.watching = True
        async for event in self.kube.watch(self.path, version, params=self.params):
            kind, obj = event["type"], event["object"]
            version = obj.get("metadata", {}).get("resourceVersion", version)
            if kind == "BOOKMARK":
                self._advance(version, written=False)
                continue
            obj = self.kept(obj)
            key = key_of(obj)
            old = self.cache.get(key)
            if kind == "DELETED":
                self.cache.pop(key, None)
                self._bury(key, _version(obj))
            else:
                if old is not None and old["metadata"].get("resourceVersion") == version:
                    self._advance(version, written=False)
                    continue  # seen already, through `observe`
                if old is not None and _newer(old, obj):
                    # An earlier write of an object whose later version `observe` took (two
                    # writes of ours crossing): the cache must not go back in time, or whoever
                    # reads it writes again what the hub already has.
                    self._advance(version, written=False)
                    continue
                self.cache[key] = obj
            await self._emit(kind, obj, old)
            self._advance(version)
        return version


def _version(obj: Obj) -> int:
    """An object's (or a list's) resourceVersion as a number; -1 when it is not one."""
    try:
        return int(obj["metadata"]["resourceVersion"])
    except (KeyError, TypeError, ValueError):
        return -1


def _newer(old: Obj, new: Obj) -> bool:
    """Is `old` a later version than `new`? resourceVersions are opaque, but kube-apiserver's
    are integers, and only its own answers reach `observe`."""
    try:
        return int(old["metadata"]["resourceVersion"]) > int(new["metadata"]["resourceVersion"])
    except (KeyError, TypeError, ValueError):
        return False


def _retry_after(err: ApiError) -> float | None:
    details: Any = err.status.get("details") or {}
    seconds = details.get("retryAfterSeconds") if isinstance(details, dict) else None
    return float(seconds) if isinstance(seconds, (int, float)) else None
