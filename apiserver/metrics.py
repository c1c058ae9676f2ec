"""What an operator of a Kubernetes controller expects to scrape from `/metrics`.

Work queues use client-go's names (`workqueue_depth`, `workqueue_adds_total`,
`workqueue_queue_duration_seconds`, `workqueue_work_duration_seconds`,
`workqueue_retries_total`, `workqueue_unfinished_work_seconds`,
`workqueue_longest_running_processor_seconds`, all labelled `name`), so the dashboards people
already have for controllers read ours too. The rest is ours, prefixed `kmc_`: reconcile
outcomes per loop, requests to each cluster (the hub and every location) by verb with their
latency and errors, objects in the hub cache per resource, streams proxied to the children,
and leadership.

One registry for the process; the server renders it at `/metrics` behind the same
authentication and authorization as every other path.
"""

from __future__ import annotations

from typing import Protocol

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

REGISTRY = CollectorRegistry(auto_describe=True)

# Reconciles are milliseconds when all is well and seconds when a child is slow.
_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)

_DEPTH = Gauge("workqueue_depth", "Keys waiting in the queue.", ["name"], registry=REGISTRY)
_ADDS = Counter("workqueue_adds_total", "Keys added.", ["name"], registry=REGISTRY)
_QUEUED = Histogram(
    "workqueue_queue_duration_seconds",
    "How long a key waited before a worker took it.",
    ["name"],
    buckets=_BUCKETS,
    registry=REGISTRY,
)
_WORK = Histogram(
    "workqueue_work_duration_seconds",
    "How long one reconcile took.",
    ["name"],
    buckets=_BUCKETS,
    registry=REGISTRY,
)
_RETRIES = Counter(
    "workqueue_retries_total", "Retries after a failure.", ["name"], registry=REGISTRY
)
_UNFINISHED = Gauge(
    "workqueue_unfinished_work_seconds",
    "Seconds of work in progress, summed over the reconciles running now.",
    ["name"],
    registry=REGISTRY,
)
_LONGEST = Gauge(
    "workqueue_longest_running_processor_seconds",
    "Seconds the longest-running reconcile has been going.",
    ["name"],
    registry=REGISTRY,
)
_OUTCOMES = Counter(
    "kmc_reconcile_total", "Reconciles by loop and outcome.", ["loop", "outcome"], registry=REGISTRY
)
REQUESTS = Histogram(
    "kmc_cluster_request_duration_seconds",
    "Requests to a cluster (the hub or a location), by verb; watches are not counted.",
    ["cluster", "verb"],
    buckets=_BUCKETS,
    registry=REGISTRY,
)
REQUEST_ERRORS = Counter(
    "kmc_cluster_request_errors_total",
    "Failed requests to a cluster, by HTTP code (503 for no answer at all).",
    ["cluster", "code"],
    registry=REGISTRY,
)
CACHE_OBJECTS = Gauge(
    "kmc_cache_objects", "Objects in the hub cache, per resource.", ["resource"], registry=REGISTRY
)
READS = Counter(
    "kmc_reads_total",
    "Lists and gets served, by API group and by where they were answered from: cache (our "
    "watch caches), hub or children (asked live).",
    ["group", "source"],
    registry=REGISTRY,
)
LATE_EVENTS = Counter(
    "kmc_consistent_read_late_events_total",
    "Watch events that came after a consistent read that had to see them had answered "
    "(each widens the quiet the next reads wait for: see Informer.caught_up).",
    ["cluster"],
    registry=REGISTRY,
)
EVENTS = Counter(
    "kmc_events_total",
    "Event occurrences on hub objects by what became of them: created, patched (a series "
    "counted on), folded (into a write of its series still waiting), spam (left out by the "
    "token bucket), dropped (backlog full), failed (the hub refused or did not answer).",
    ["outcome"],
    registry=REGISTRY,
)
STATUS_WRITES = Counter(
    "kmc_status_writes_total",
    "Status writes to hub objects by why they went: first (an object's first status), "
    "settled (counters at spec.replicas, or a kind without them), partway (counters still "
    "on their way, after a hold), flipped (a condition, observedGeneration or where it is "
    "placed changed while counters are on their way), placed (a Placed condition alone).",
    ["why"],
    registry=REGISTRY,
)
READS_REJECTED = Counter(
    "kmc_reads_rejected_total",
    "Reads answered 429 because the queue of reads waiting their turn was full.",
    registry=REGISTRY,
)
REMOTE_CACHE_OBJECTS = Gauge(
    "kmc_remote_cache_objects",
    "Objects in the watch cache of a child's resource (remote.kmc.dev lists).",
    ["location", "resource"],
    registry=REGISTRY,
)
REMOTE_CACHE_BYTES = Gauge(
    "kmc_remote_cache_bytes",
    "Encoded bytes kept by the watch cache of a child's resource.",
    ["location", "resource"],
    registry=REGISTRY,
)
STREAMS = Counter(
    "kmc_streams_total",
    "Streams of pods.remote.kmc.dev proxied to a location, by sub-resource "
    "(log, exec, attach, portforward).",
    ["subresource"],
    registry=REGISTRY,
)
STREAMS_OPEN = Gauge(
    "kmc_streams_open",
    "Streams of pods.remote.kmc.dev open now (followed logs, exec sessions, port-forwards).",
    ["subresource"],
    registry=REGISTRY,
)
FEED_WATCHES = Counter(
    "kmc_feed_watches_total",
    "Watches of a pull location's work feed opened, by location: each starts with the whole "
    "feed, so a count that grows while an agent runs is its reconnects.",
    ["location"],
    registry=REGISTRY,
)
FEED_WATCHES_OPEN = Gauge(
    "kmc_feed_watches_open",
    "Watches of a pull location's work feed open now, by location.",
    ["location"],
    registry=REGISTRY,
)
LEADER = Gauge(
    "kmc_leader", "1 while this replica holds the lease and runs the loops.", registry=REGISTRY
)


class _Queue(Protocol):
    def __len__(self) -> int: ...
    def unfinished(self) -> float: ...
    def oldest_active(self) -> float: ...


class QueueMetrics:
    """One work queue's figures, under its name."""

    def __init__(self, name: str, queue: _Queue) -> None:
        self.name = name
        _DEPTH.labels(name).set_function(lambda: len(queue))
        _UNFINISHED.labels(name).set_function(queue.unfinished)
        _LONGEST.labels(name).set_function(queue.oldest_active)
        self._adds = _ADDS.labels(name)
        self._queued = _QUEUED.labels(name)
        self._work = _WORK.labels(name)
        self._retries = _RETRIES.labels(name)

    def added(self) -> None:
        self._adds.inc()

    def waited(self, seconds: float) -> None:
        self._queued.observe(seconds)

    def worked(self, seconds: float) -> None:
        self._work.observe(seconds)

    def retried(self) -> None:
        self._retries.inc()

    def outcome(self, outcome: str) -> None:
        _OUTCOMES.labels(self.name, outcome).inc()
