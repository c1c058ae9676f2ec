"""Events on hub objects: how a person learns, with `kubectl describe` or `kubectl events`,
why kubectl-mc did something (spilled over, evacuated, refused a strategy).

The hub's etcd is everyone's, so Events are recorded the way client-go's recorder does
(`tools/record/events_cache.go`, the `EventCorrelator`), not one new object per occurrence:

- **Counted as a series.** The same Event again (same source, involved object, type, reason
  and message) is one object on the hub whose `count` goes up and whose `lastTimestamp` moves:
  a strategic merge patch of `count`, `lastTimestamp` and `message`, as client-go sends.
- **Aggregated.** More than ten different messages for the same object, type and reason
  within ten minutes become one Event "(combined from similar events): <latest message>",
  counted from then on like any series.
- **Spam filter.** Each (source, involved object, type) has a token bucket: 25 writes at
  once, then one more every five minutes; an occurrence without a token is left out (its
  count still goes up, and reaches the hub with the next write of its series).

One thing goes further than client-go, whose recorder writes each occurrence in turn from one
goroutine: ours are written in the background, a few at once, and an occurrence whose series
already has a write waiting is folded into that write (the later count, timestamp and
message), so a burst of the same Event while the hub is slow costs one write, not one a
time. A token is spent per write, not per occurrence: folded ones cost the hub nothing.
"""

from __future__ import annotations

import asyncio
import datetime
import logging
import secrets
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from apiserver import metrics
from apiserver.kube.client import ApiError, Kube
from apiserver.objects import Obj

log = logging.getLogger(__name__)

CACHE_SIZE = 4096  # entries in each of the correlator's caches (client-go's maxLruCacheEntries)
AGGREGATE_MAX_EVENTS = 10  # distinct messages of one reason before they are combined
AGGREGATE_INTERVAL = 600.0  # seconds after which a reason's messages are counted afresh
SPAM_BURST = 25  # writes per source and object at once…
SPAM_QPS = 1.0 / 300.0  # …then one every five minutes
COMBINED = "(combined from similar events): "

Clock = Callable[[], float]

K = TypeVar("K")
V = TypeVar("V")


class _LRU(Generic[K, V]):
    """A bounded map that forgets the entry used least recently (client-go's `lru.Cache`)."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._items: OrderedDict[K, V] = OrderedDict()

    def get(self, key: K) -> V | None:
        value = self._items.get(key)
        if value is not None:
            self._items.move_to_end(key)
        return value

    def put(self, key: K, value: V) -> None:
        self._items[key] = value
        self._items.move_to_end(key)
        while len(self._items) > self.size:
            self._items.popitem(last=False)


def _involved(event: Obj) -> tuple[str, ...]:
    ref = event["involvedObject"]
    return tuple(str(ref.get(k) or "") for k in ("kind", "namespace", "name", "uid", "apiVersion"))


def event_key(event: Obj) -> tuple[str, ...]:
    """What makes two Events the same one, counted as a series (client-go's getEventKey)."""
    ref = event["involvedObject"]
    return (
        _source(event),
        *_involved(event),
        str(ref.get("fieldPath") or ""),
        event["type"],
        event["reason"],
        event["message"],
    )


def spam_key(event: Obj) -> tuple[str, ...]:
    """Whose writes share a token bucket: one source about one object, per type."""
    return (_source(event), *_involved(event), event["type"])


def aggregate_key(event: Obj) -> tuple[str, ...]:
    """Events that differ only in their message (client-go's EventAggregatorByReasonFunc)."""
    return (
        _source(event),
        *_involved(event),
        event["type"],
        event["reason"],
        str(event.get("reportingComponent") or ""),
        str(event.get("reportingInstance") or ""),
    )


def _source(event: Obj) -> str:
    source = event.get("source") or {}
    return f"{source.get('component', '')}/{source.get('host', '')}"


@dataclass
class _Bucket:
    tokens: float
    at: float


@dataclass
class _Reason:
    messages: set[str]
    last: float


@dataclass
class _Seen:
    """The hub's Event for a series: its name, first time and count so far."""

    name: str
    first: str
    count: int
    on_hub: bool = False  # a write of it succeeded: the next one patches


@dataclass(frozen=True)
class Correlated:
    """What to write for one occurrence: the Event as it should now stand on the hub, and the
    key of its series."""

    event: Obj
    key: tuple[str, ...]

    def patch(self) -> Obj:
        """client-go's patch of a series: what changes from one occurrence to the next."""
        return {k: self.event[k] for k in ("count", "lastTimestamp", "message")}


class Correlator:
    """client-go's EventCorrelator rules, as plain state and a clock: aggregation by reason,
    counting by series, and the spam filter's token buckets. No I/O."""

    def __init__(
        self,
        clock: Clock = time.time,
        *,
        cache_size: int = CACHE_SIZE,
        max_events: int = AGGREGATE_MAX_EVENTS,
        max_interval: float = AGGREGATE_INTERVAL,
        burst: int = SPAM_BURST,
        qps: float = SPAM_QPS,
    ) -> None:
        self.clock = clock
        self.max_events, self.max_interval = max_events, max_interval
        self.burst, self.qps = burst, qps
        self._reasons: _LRU[tuple[str, ...], _Reason] = _LRU(cache_size)
        self._series: _LRU[tuple[str, ...], _Seen] = _LRU(cache_size)
        self._buckets: _LRU[tuple[str, ...], _Bucket] = _LRU(cache_size)

    def correlate(self, event: Obj) -> Correlated:
        """Aggregate, then count: the Event to write for this occurrence (a new dict)."""
        now = self.clock()
        event, key = self._aggregate(event, now)
        seen = self._series.get(key)
        out = {**event, "lastTimestamp": _timestamp(now)}
        if seen is None:
            seen = _Seen(event["metadata"]["name"], out["lastTimestamp"], 0)
        seen.count += 1
        self._series.put(key, seen)
        out["metadata"] = {**event["metadata"], "name": seen.name}
        out["firstTimestamp"], out["count"] = seen.first, seen.count
        return Correlated(out, key)

    def _aggregate(self, event: Obj, now: float) -> tuple[Obj, tuple[str, ...]]:
        """The Event itself and its own key, until this reason has had `max_events` distinct
        messages within `max_interval`: then one combined Event, keyed by the reason."""
        group = aggregate_key(event)
        record = self._reasons.get(group)
        if record is None or now - record.last > self.max_interval:
            record = _Reason(set(), now)
        record.messages.add(event["message"])
        record.last = now
        self._reasons.put(group, record)
        if len(record.messages) < self.max_events:
            return event, event_key(event)
        record.messages.pop()  # (client-go's PopAny: the set never grows past the limit)
        combined = {
            **event,
            "metadata": {**event["metadata"], "name": _name(event["involvedObject"]["name"])},
            "message": COMBINED + event["message"],
        }
        return combined, group

    def allow(self, event: Obj) -> bool:
        """Take a token from the bucket of the Event's source and object, if there is one."""
        now = self.clock()
        key = spam_key(event)
        bucket = self._buckets.get(key) or _Bucket(float(self.burst), now)
        bucket.tokens = min(float(self.burst), bucket.tokens + (now - bucket.at) * self.qps)
        bucket.at = now
        allowed = bucket.tokens >= 1.0
        if allowed:
            bucket.tokens -= 1.0
        self._buckets.put(key, bucket)
        return allowed

    def on_hub(self, key: tuple[str, ...]) -> bool:
        """Whether the hub has the series' Event (as far as we know: Events expire)."""
        seen = self._series.get(key)
        return seen is not None and seen.on_hub

    def written(self, key: tuple[str, ...], answer: Obj) -> None:
        """The hub's answer to a write of series `key`: the hub has it, under the name it
        answers (client-go's UpdateState). The count stays ours: occurrences counted while
        the write was on its way must not be taken back."""
        seen = self._series.get(key)
        name = (answer.get("metadata") or {}).get("name")
        if seen is not None:
            seen.on_hub = True
            seen.name = name or seen.name


@dataclass
class _Series:
    """One series' writes: at most one on its way and one waiting, the latter always the
    latest state of the Event."""

    waiting: Correlated | None = None
    task: asyncio.Task[None] | None = field(default=None, repr=False)


class Recorder:
    """Events posted in the background, so a reconcile never waits for one: at most `at_once`
    writes in flight, an occurrence folded into its series' waiting write, and beyond
    `backlog` series waiting the newest dropped (and logged) rather than memory growing while
    the hub is away."""

    def __init__(
        self,
        hub: Kube,
        component: str,
        at_once: int = 8,
        backlog: int = 2000,
        correlator: Correlator | None = None,
    ) -> None:
        self.hub, self.component, self.backlog = hub, component, backlog
        self.correlator = correlator or Correlator()
        self._gate = asyncio.Semaphore(at_once)
        self._series: dict[tuple[str, ...], _Series] = {}

    def post(self, obj: Obj, event_type: str, reason: str, message: str) -> None:
        found = self.correlator.correlate(_event(obj, event_type, reason, message, self.component))
        series = self._series.get(found.key)
        if series is not None and series.waiting is not None:
            # Not sent yet: it goes out with this occurrence's count, time and message.
            series.waiting = found
            metrics.EVENTS.labels("folded").inc()
            return
        if series is None and len(self._series) >= self.backlog:
            log.info(
                "event %s on %s dropped: %d waiting", reason, obj["metadata"]["name"], self.backlog
            )
            metrics.EVENTS.labels("dropped").inc()
            return
        if not self.correlator.allow(found.event):
            log.debug("event %s on %s left out: too many", reason, obj["metadata"]["name"])
            metrics.EVENTS.labels("spam").inc()
            return
        if series is None:
            series = self._series[found.key] = _Series()
            series.waiting = found
            series.task = asyncio.create_task(self._run(found.key, series))
        else:  # a write of this series is on its way: this one follows it
            series.waiting = found

    async def _run(self, key: tuple[str, ...], series: _Series) -> None:
        try:
            while series.waiting is not None:
                async with self._gate:
                    found, series.waiting = series.waiting, None
                    await self._write(found)
        finally:
            self._series.pop(key, None)

    async def _write(self, found: Correlated) -> None:
        """Patch the series' Event, or create it (when new, or gone from the hub: Events
        expire)."""
        event = found.event
        existing = self.correlator.on_hub(found.key)
        collection = f"/api/v1/namespaces/{event['metadata']['namespace']}/events"
        try:
            if existing:
                try:
                    answer = await self.hub.strategic_patch(
                        f"{collection}/{event['metadata']['name']}", found.patch()
                    )
                except ApiError as err:
                    if err.code != 404:
                        raise
                    answer = await self.hub.create(collection, event)
            else:
                answer = await self.hub.create(collection, event)
        except ApiError as err:  # best effort: an Event is never worth failing for
            log.debug("event %s not written: %s", event["reason"], err)
            metrics.EVENTS.labels("failed").inc()
            return
        self.correlator.written(found.key, answer)
        metrics.EVENTS.labels("patched" if existing else "created").inc()

    async def flush(self) -> None:
        """Wait for every Event posted so far (tests, and a graceful stop)."""
        while tasks := [s.task for s in self._series.values() if s.task is not None]:
            await asyncio.gather(*tasks, return_exceptions=True)


def _timestamp(at: float) -> str:
    moment = datetime.datetime.fromtimestamp(at, datetime.UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def _name(involved: str) -> str:
    return f"{involved}.{secrets.token_hex(8)}"


def _event(obj: Obj, event_type: str, reason: str, message: str, component: str) -> Obj:
    meta = obj["metadata"]
    namespace = meta.get("namespace") or "default"
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": _name(meta["name"]), "namespace": namespace},
        "involvedObject": {
            "apiVersion": obj.get("apiVersion"),
            "kind": obj.get("kind"),
            "name": meta["name"],
            "namespace": meta.get("namespace"),
            "uid": meta.get("uid"),
            "resourceVersion": meta.get("resourceVersion"),
        },
        "type": event_type,
        "reason": reason,
        "message": message,
        "source": {"component": component},
        "reportingComponent": component,
        "reportingInstance": component,
    }
