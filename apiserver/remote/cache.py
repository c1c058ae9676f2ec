"""Watch caches of the children, for `remote.kmc.dev` lists at memory speed.

A (location, resource) pair gets a cache on its first list: the child's own Table of every
object of the resource (all namespaces, whole objects, read with our credentials), kept by
list then watch like an informer. Each object is encoded once when it changes, in the
shapes our answers need: its Table cells with the location first, its metadata as a Table row
carries it, and the object itself, each with the `kmc.dev/location` annotation spliced in.
A list is then a filter over kept bytes and one join; nothing is decoded or encoded per
request. A cache nobody has read for `idle` seconds is stopped, and one whose resource holds
more than `max_objects` objects gives up (the live path serves it).

The cache holds what our credentials can read; who may see what is decided per caller and
per child by `ChildAuthorizers` before any row is served.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import msgspec
from aiohttp import web

from apiserver import metrics
from apiserver.api.authn import UserInfo
from apiserver.api.authz import Attributes, Authorizer, Decision
from apiserver.contract import LOCATION as ANNOTATION
from apiserver.kinds import Kind
from apiserver.kube.client import ApiError, Kube
from apiserver.kube.informer import Backoff
from apiserver.objects import Obj

log = logging.getLogger(__name__)

CHILD_TABLE = "application/json;as=Table;v=v1;g=meta.k8s.io"
_encode = msgspec.json.encode


@dataclass(frozen=True)
class Entry:
    """One child object, encoded for every shape of answer."""

    namespace: str
    name: str
    version: int  # the object's resourceVersion (its deletion's, for a deleted one)
    labels: dict[str, str]
    cells: bytes  # the Table cells, the location first
    conditions: bytes | None  # the Table row's conditions, when the child gave any
    metadata: bytes  # PartialObjectMetadata, as a Table row's object
    item: bytes  # the object without kind and apiVersion, as list items come
    typed: bytes  # the object with them, as a Table row's object

    def row(self, include: str) -> bytes:
        parts = [b'{"cells":', self.cells]
        if self.conditions is not None:
            parts += [b',"conditions":', self.conditions]
        if include == "Metadata":
            parts += [b',"object":', self.metadata]
        elif include == "Object":
            parts += [b',"object":', self.typed]
        parts.append(b"}")
        return b"".join(parts)


def entry(location: str, row: Obj) -> Entry:
    obj: Obj = dict(row.get("object") or {})
    meta = dict(obj.get("metadata") or {})
    meta.pop("managedFields", None)
    meta["annotations"] = {**(meta.get("annotations") or {}), ANNOTATION: location}
    obj["metadata"] = meta
    kind, api_version = obj.pop("kind", None), obj.pop("apiVersion", None)
    partial = {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": meta}
    conditions = row.get("conditions")
    return Entry(
        namespace=str(meta.get("namespace") or ""),
        name=str(meta.get("name") or ""),
        version=_int(meta.get("resourceVersion")),
        labels=dict(meta.get("labels") or {}),
        cells=_encode([location, *(row.get("cells") or [])]),
        conditions=_encode(conditions) if conditions is not None else None,
        metadata=_encode(partial),
        item=_encode(obj),
        typed=_encode({"kind": kind, "apiVersion": api_version, **obj}),
    )


def _int(version: Any) -> int:
    try:
        return int(version)
    except (TypeError, ValueError):
        return 0


@dataclass(frozen=True)
class Change:
    """What a watch of the cache hears: an object added, modified or deleted (with the entry
    it replaces), or a BOOKMARK (no entry) saying the cache has reached `version`."""

    type: str
    entry: Entry | None
    old: Entry | None
    version: int


# Changes kept for watches that resume from a version: about as many as kube-apiserver's
# watch cache keeps per resource by default.
HISTORY = 1000

Follower = Callable[[str, Change], None]


class TooBig(Exception):
    pass


class Gone(Exception):
    """A watch asked to resume from a version the history no longer covers."""


class TableCache:
    """One child's objects of one resource, as Table rows, kept by list and watch."""

    def __init__(self, location: str, kube: Kube, kind: Kind, max_objects: int) -> None:
        self.location = location
        self.kube = kube
        self.kind = kind
        self.max_objects = max_objects
        self.entries: dict[tuple[str, str], Entry] = {}
        self.columns: bytes = b""
        self.version = ""
        self.synced = asyncio.Event()
        self.watching = False
        self.given_up = ""  # why this cache stopped for good (too big)
        self.used = time.monotonic()
        self.bytes = 0
        self.task: asyncio.Task[None] | None = None
        self.history: deque[Change] = deque(maxlen=HISTORY)
        self.since = -1  # the history holds every change after this version
        self._followers: set[Follower] = set()

    @property
    def ready(self) -> bool:
        return self.synced.is_set() and self.watching and not self.given_up

    def start(self) -> None:
        self.task = asyncio.create_task(
            self.run(), name=f"cache {self.location} {self.kind.plural}"
        )

    async def stop(self) -> None:
        if self.task is not None:
            self.task.cancel()
            await asyncio.wait([self.task])  # (our own cancellation is not swallowed)
        self._gauge(0, 0)

    def follow(self, follower: Follower, since: int | None) -> list[Change]:
        """Tell `follower` of every change from now on; returned, what came before: every
        change after version `since`, or (None) every object as ADDED. Gone when the history
        no longer reaches back to `since`."""
        if since is None:
            backlog = [Change("ADDED", e, None, e.version) for e in self.entries.values()]
        elif since < self.since:
            raise Gone(f"too old resource version: {since} ({self.since})")
        else:
            backlog = [c for c in self.history if c.version > since]
        self._followers.add(follower)
        return backlog

    def unfollow(self, follower: Follower) -> None:
        self._followers.discard(follower)

    def _publish(self, change: Change) -> None:
        if change.type != "BOOKMARK":
            if len(self.history) == self.history.maxlen:
                self.since = self.history[0].version
            self.history.append(change)
        for follower in list(self._followers):
            follower(self.location, change)

    def in_namespace(self, namespace: str | None) -> Iterator[Entry]:
        for entry_ in self.entries.values():
            if namespace is None or entry_.namespace == namespace:
                yield entry_

    async def run(self) -> None:
        backoff = Backoff(cap=30.0)
        while True:
            try:
                self.version = await self._list()
                backoff.reset()
                while True:
                    self.version = await self._watch(self.version)
            except TooBig as err:
                self.given_up = str(err)
                log.warning("%s %s: not cached: %s", self.location, self.kind.plural, err)
                self.entries.clear()
                self._gauge(0, 0)
                return
            except ApiError as err:
                self.watching = False
                if err.code == 410:
                    continue
                delay = backoff.next()
                log.info(
                    "%s %s cache: %s; again in %.1fs", self.location, self.kind.plural, err, delay
                )
                await asyncio.sleep(delay)

    async def _list(self) -> str:
        table = await self.kube.request(
            "GET",
            self.kind.path(None),
            params={"includeObject": "Object"},
            headers={"Accept": CHILD_TABLE},
        )
        rows = table.get("rows") or []
        if len(rows) > self.max_objects:
            raise TooBig(f"{len(rows)} objects, more than --remote-cache-max-objects")
        self.columns = _encode(table.get("columnDefinitions") or [])
        version = str((table.get("metadata") or {}).get("resourceVersion", ""))
        fresh: dict[tuple[str, str], Entry] = {}
        for i, row in enumerate(rows):
            if i and i % 200 == 0:
                await asyncio.sleep(0)
            made = entry(self.location, row)
            fresh[(made.namespace, made.name)] = made
        if not self.synced.is_set():
            self.since = _int(version)
        else:  # a relist: what changed meanwhile reaches the watches as changes
            listed = _int(version)
            for key, gone in self.entries.items():
                if key not in fresh:
                    self._publish(Change("DELETED", gone, gone, listed))
            for key, made in fresh.items():
                old = self.entries.get(key)
                if old is None or old.version != made.version:
                    self._publish(Change("ADDED" if old is None else "MODIFIED", made, old, listed))
        self.entries = fresh
        self.bytes = sum(_size(e) for e in fresh.values())
        self._gauge(len(fresh), self.bytes)
        self.synced.set()
        return version

    async def _watch(self, version: str) -> str:
        self.watching = True
        try:
            async for event in self.kube.watch(
                self.kind.path(None),
                version,
                params={"includeObject": "Object"},
                headers={"Accept": CHILD_TABLE},
            ):
                table = event.get("object") or {}
                rows = table.get("rows") or []
                for row in rows:
                    meta = (row.get("object") or {}).get("metadata") or {}
                    version = str(meta.get("resourceVersion") or version)
                    if event["type"] != "BOOKMARK":
                        self._take(event["type"], row)
                if not rows:  # a bookmark may come as the bare object, not as a Table
                    version = str((table.get("metadata") or {}).get("resourceVersion") or version)
                self.version = version
                if event["type"] == "BOOKMARK":
                    self._publish(Change("BOOKMARK", None, None, _int(version)))
            return version
        finally:
            self.watching = False

    def _take(self, kind: str, row: Obj) -> None:
        made = entry(self.location, row)
        key = (made.namespace, made.name)
        old = self.entries.pop(key, None)
        if old is not None:
            self.bytes -= _size(old)
        if kind != "DELETED":
            if len(self.entries) >= self.max_objects:
                raise TooBig(f"more than {self.max_objects} objects (--remote-cache-max-objects)")
            self.entries[key] = made
            self.bytes += _size(made)
        self._gauge(len(self.entries), self.bytes)
        self._publish(Change(kind, made, old, made.version))

    def _gauge(self, count: int, size: int) -> None:
        labels = (self.location, self.kind.plural)
        metrics.REMOTE_CACHE_OBJECTS.labels(*labels).set(count)
        metrics.REMOTE_CACHE_BYTES.labels(*labels).set(size)


def _size(made: Entry) -> int:
    return len(made.cells) + len(made.metadata) + len(made.item) + len(made.typed)


class RemoteCaches:
    """Every child watch cache: started on first use, stopped when idle."""

    def __init__(self, idle: float, max_objects: int) -> None:
        self.idle = idle
        self.max_objects = max_objects
        self._caches: dict[tuple[str, str], TableCache] = {}

    def get(self, location: str, kube: Kube, kind: Kind) -> TableCache:
        """The cache of `kind` in `location`, started now if it was not; one made with
        another client (the location was joined again) is replaced."""
        key = (location, kind.plural)
        cache = self._caches.get(key)
        if cache is not None and cache.kube is not kube:
            if cache.task is not None:
                cache.task.cancel()
            cache = None
        if cache is None:
            cache = self._caches[key] = TableCache(location, kube, kind, self.max_objects)
            cache.start()
        cache.used = time.monotonic()
        return cache

    async def run(self) -> None:
        """Stop the caches nobody reads."""
        try:
            while True:
                await asyncio.sleep(max(1.0, self.idle / 4))
                now = time.monotonic()
                for key, cache in list(self._caches.items()):
                    if now - cache.used > self.idle:
                        del self._caches[key]
                        await cache.stop()
        finally:
            for cache in self._caches.values():
                await cache.stop()

    def __len__(self) -> int:
        return len(self._caches)


class ChildAuthorizers:
    """May this caller do this in that child: the child's SubjectAccessReview, cached briefly
    (allowed for `allowed_ttl`, denied for `denied_ttl`), one authorizer per child client."""

    def __init__(self, allowed_ttl: float, denied_ttl: float) -> None:
        self.allowed_ttl = allowed_ttl
        self.denied_ttl = denied_ttl
        self._by_location: dict[str, Authorizer] = {}

    async def authorize(
        self, location: str, kube: Kube, user: UserInfo, attrs: Attributes
    ) -> Decision:
        authorizer = self._by_location.get(location)
        if authorizer is None or authorizer.hub is not kube:
            authorizer = self._by_location[location] = Authorizer(
                kube, self.allowed_ttl, self.denied_ttl, who=f"location {location}"
            )
        return await authorizer.authorize(user, attrs)


def attributes(kind: Kind, namespace: str | None, verb: str) -> Attributes:
    return Attributes(
        verb=verb,
        group=kind.group,
        version=kind.version,
        resource=kind.plural,
        namespace=namespace or "",
    )


def table_head(api_version: str, metadata: Obj, columns: bytes) -> bytes:
    return (
        b'{"kind":"Table","apiVersion":'
        + _encode(api_version)
        + b',"metadata":'
        + _encode(metadata)
        + b',"columnDefinitions":'
        + columns
        + b',"rows":'
    )


REMOTE_CACHES = web.AppKey("remote_caches", RemoteCaches)
CHILD_AUTHZ = web.AppKey("child_authz", ChildAuthorizers)
