"""Garbage: what the children hold of ours that the hub no longer wants.

A hub object being deleted waits on our finalizer until its children are gone. A child whose
hub object went while we were not looking (an orphan) is deleted when we see it. A namespace
we made in a child goes once the hub has no namespace of that name.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection

from apiserver.contract import CLEANUP, read_placement
from apiserver.hubcache import HubCache
from apiserver.kinds import Key, Kind
from apiserver.kube.client import ApiError, Kube
from apiserver.loops import hubwrites
from apiserver.loops.sync.apply import Applier
from apiserver.loops.sync.bounded import Bounded
from apiserver.loops.sync.children import Children
from apiserver.objects import Obj

log = logging.getLogger(__name__)


class Cleaner:
    def __init__(
        self,
        cache: HubCache,
        children: Children,
        applier: Applier,
        bounded: Bounded,
        again: Callable[[Key, float], None],
        retry: float,
    ) -> None:
        self.hub: Kube = cache.hub
        self.cache = cache
        self.children = children
        self.applier = applier
        self.bounded = bounded
        self.again = again  # look at a key again after so many seconds
        self.retry = retry

    async def hub_object_going(
        self, key: Key, kind: Kind, hub: Obj, children: Collection[str]
    ) -> None:
        """The hub object is going: its children go first, then our finalizer. A pull
        location's child is its agent's to delete (the feed leaves out an object being
        deleted): nothing here waits for it, as nothing here can reach it."""
        if CLEANUP not in (hub["metadata"].get("finalizers") or []):
            return
        places = {
            loc for loc in set(children) | set(read_placement(hub)) if not self.cache.pulled(loc)
        }
        done = [
            await self.bounded.run(key, loc, self.applier.delete(key, kind, hub, loc), busy=False)
            for loc in sorted(places)
        ]
        if not all(done):
            self.again(key, self.retry)
            return
        await hubwrites.remove_finalizer(self.hub, kind, hub, CLEANUP)

    async def namespace(self, name: str, stale: Collection[str]) -> None:
        """A namespace we made in children goes once the hub has no namespace of that name
        (everything in it has gone first: the hub waits for our finalizers). One the hub has
        again, under a new uid, stays and is used. Stale locations are looked at again when
        they are Ready."""
        await self.cache.namespaces.synced.wait()
        if self.cache.namespaces.get(name) is not None:
            return
        failed = []
        for location, watch in list(self.children.watches.items()):
            made = watch.made.get(name)
            if made is None or made["metadata"].get("deletionTimestamp"):
                continue
            if location in stale:
                continue
            watch.namespaces.discard(name)
            try:
                await watch.kube.delete(f"/api/v1/namespaces/{name}")
            except ApiError as err:
                if err.code != 404:
                    log.warning("namespace %s: deleting from %s failed: %s", name, location, err)
                    failed.append(location)
                continue
            log.info("namespace %s: removed from %s", name, location)
        if failed:
            raise ApiError.of(503, "ServiceUnavailable", f"namespace {name} is still in {failed}")

    async def orphans(self, key: Key) -> None:
        """Children whose hub object is gone (deleted while we were not looking)."""
        failed = []
        for location, watch in list(self.children.watches.items()):
            child = watch.get(key)
            kind = self.cache.kinds.get(key.kind) or watch.kinds.get(key.kind)
            if child is None or kind is None:
                continue
            try:
                await watch.kube.delete(kind.path(key.namespace, key.name))
                log.info("%s: orphan removed from %s", key, location)
            except ApiError as err:
                if err.code != 404:
                    log.warning("%s: orphan in %s: %s", key, location, err)
                    failed.append(location)
        if failed:  # tried again after the queue's backoff: an orphan must not stay
            raise ApiError.of(
                503, "ServiceUnavailable", f"orphan {key} is still in {', '.join(failed)}"
            )
