"""The work feed's source: one location's child objects, computed from the hub cache.

Nothing is stored: a list computes the location's work from the hub objects, Locations and
PlacementPolicies kmc-apiserver caches anyway (`sync/work.py` per object, which makes the
child with the push sync loop's own function). Each child's share is the handover step the
sync loop decided for its object over all locations (`loops/sync/steps.py`), not the
placement's goal, so a move onto or off a pull location is make-before-break; a child the
step keeps as it is is served `Kept`. An object the loop has not decided yet (new since it
started) is served its placement. A watcher is told which hub objects changed, or had a new
step, and computes only their entries again; a change to what every entry may read (a
Location's labels, a PlacementPolicy, a hub Namespace, an autoscaler) has it compute them
all.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass, field

from aiohttp import web

from apiserver.contract import only_status_changed, read_placement
from apiserver.hubcache import HubCache
from apiserver.kinds import Key, Kind, Role
from apiserver.loops.sync.loop import held_by_scalers
from apiserver.loops.sync.steps import Steps
from apiserver.models.override_index import read as read_override
from apiserver.objects import Obj
from apiserver.sync.work import Entry, Kept, WorkKey, entry_for, with_namespaces

# How long a feed's first whole state waits for the sync loop's first steps (a replica that
# does not lead never decides: it serves the placements after this).
PRIMED_WAIT = 60.0


@dataclass(eq=False)  # one watch is one watcher: hashed by identity
class Watcher:
    """One open watch of one location's feed: what changed since it last looked."""

    location: str
    keys: set[Key] = field(default_factory=set)
    everything: bool = False
    woken: asyncio.Event = field(default_factory=asyncio.Event)

    def take(self) -> tuple[bool, set[Key]]:
        """(whether every entry must be computed again, the hub objects that changed)."""
        everything, keys = self.everything, self.keys
        self.everything, self.keys = False, set()
        self.woken.clear()
        return everything, keys


class Feeds:
    """Every location's work feed, as asked: `work` for a list, `watch` for a watcher."""

    def __init__(self, cache: HubCache, steps: Steps) -> None:
        self.cache = cache
        self.steps = steps
        self.watchers: set[Watcher] = set()
        steps.subscribe(self._on_step)
        cache.subscribe(self._on_object)
        cache.namespaces.subscribe(self._on_namespace)
        cache.locations.subscribe(self._on_location)
        cache.policies.subscribe(self._on_context)
        cache.overrides.subscribe(self._on_override)
        cache.cluster_overrides.subscribe(self._on_override)

    # -- computing ------------------------------------------------------------------------

    def work(self, location: str) -> dict[WorkKey, Entry]:
        """Everything `location` holds of ours, by key (namespaces included)."""
        return with_namespaces(self.objects(location), self.cache.namespaces.cache)

    def objects(self, location: str) -> dict[WorkKey, Entry]:
        """The entries of every hub object `location` holds (no namespaces)."""
        entries: dict[WorkKey, Entry] = {}
        for key in list(self.cache.list_keys()):
            found = self.entry(location, key)
            if found is not None:
                entries[found[0]] = found[1]
        return entries

    def again(self, location: str, keys: set[Key]) -> dict[WorkKey, Entry | None]:
        """The entries of the hub objects `keys`, computed again (None: it has none now)."""
        changed: dict[WorkKey, Entry | None] = {}
        for key in keys:
            kind = self.cache.kinds.get(key.kind)
            if kind is None:
                continue
            found = self.entry(location, key)
            changed[work_key(kind, key)] = None if found is None else found[1]
        return changed

    def entry(self, location: str, key: Key) -> tuple[WorkKey, Entry] | None:
        """One hub object's entry in `location`'s feed, if it has one."""
        kind, hub = self.cache.kinds.get(key.kind), self.cache.get(key)
        if kind is None or hub is None or not kind.syncable(hub):
            return None
        if not self.knows(location):
            return None  # no such Location: it holds nothing
        typed = kind.typed(hub)
        step = self.steps.get(key)
        if step is not None and location in step.kept:
            return work_key(kind, key), Kept(step.kept[location])
        placement = read_placement(typed)
        shares = step.shares if step is not None else None
        if location not in (placement if shares is None else shares):
            return None  # checked first: most objects of a fleet are elsewhere
        held = location in held_by_scalers(self.cache, key, kind, placement)
        inputs = self.cache.child_inputs(kind, typed)
        found = entry_for(typed, kind, location, inputs, held, shares)
        return None if found is None else (work_key(kind, key), found)

    async def decided(self) -> None:
        """Wait (at most `PRIMED_WAIT`) for the sync loop to have decided every object it
        found at its start: before that a whole state could serve the goal of an object in
        the middle of a move."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(PRIMED_WAIT):  # never wait_for: leader.py
                await self.steps.primed.wait()

    def knows(self, location: str) -> bool:
        return self.cache.locations.get(location) is not None

    def version(self) -> str:
        """The newest hub resourceVersion the cache has seen: when a list was computed."""
        informers = [*self.cache.objects.values(), self.cache.namespaces, self.cache.locations]
        return str(max([0, *(informer.version for informer in informers)]))

    # -- watching -------------------------------------------------------------------------

    def watch(self, location: str) -> Watcher:
        watcher = Watcher(location)
        self.watchers.add(watcher)
        return watcher

    def close(self, watcher: Watcher) -> None:
        self.watchers.discard(watcher)

    async def _on_object(self, kind: str, event: str, obj: Obj, old: Obj | None) -> None:
        if not self.watchers:
            return
        if event == "MODIFIED" and old is not None and _entry_reads_same(obj, old):
            return  # no child carries the hub's status, nor its finalizers
        info = self.cache.kinds.get(kind)
        if info is not None and info.role is Role.SCALER:
            # Whether its workload's size is sent may have changed, wherever it is.
            self._wake_all()
            return
        key = Key.of(kind, obj)
        for watcher in self.watchers:
            watcher.keys.add(key)
            watcher.woken.set()

    def _on_step(self, key: Key) -> None:
        """The sync loop decided a new step for an object: its entries may have changed."""
        for watcher in self.watchers:
            watcher.keys.add(key)
            watcher.woken.set()

    async def _on_context(self, event: str, obj: Obj, old: Obj | None) -> None:
        """A PlacementPolicy changed: what it adds to child objects may have."""
        if event == "MODIFIED" and old is not None and only_status_changed(obj, old):
            return
        self._wake_all()

    async def _on_override(self, event: str, obj: Obj, old: Obj | None) -> None:
        """An Override or ClusterOverride changed: the objects it targets, as it is and as it
        was, are computed again (as the push loop looks at them again)."""
        if not self.watchers:
            return
        if event == "MODIFIED" and old is not None and only_status_changed(obj, old):
            return
        keys = {
            key
            for version in (obj, old)
            if version is not None and (source := read_override(version)) is not None
            for key in self.cache.override_targets(source)
        }
        for watcher in self.watchers:
            watcher.keys |= keys
            watcher.woken.set()

    async def _on_namespace(self, event: str, obj: Obj, old: Obj | None) -> None:
        """A hub Namespace's labels (which policies select it) and annotations (its child
        namespace's) are all an entry reads of it."""
        if event == "MODIFIED" and old is not None and _own(obj) == _own(old):
            return
        self._wake_all()

    async def _on_location(self, event: str, obj: Obj, old: Obj | None) -> None:
        """A Location's labels are all its own entries read of it (overrides select by them
        and read them into values); its status, probed every few seconds, none: only its own
        watchers compute again, and only when its labels (or the Location itself) changed."""
        if event == "MODIFIED" and old is not None and _labels(obj) == _labels(old):
            return
        self._wake_all(obj["metadata"]["name"])

    def _wake_all(self, location: str | None = None) -> None:
        for watcher in self.watchers:
            if location is None or watcher.location == location:
                watcher.everything = True
                watcher.woken.set()


def work_key(kind: Kind, key: Key) -> WorkKey:
    """The child's key for a hub object's: same kind, namespace and name."""
    return WorkKey(kind.api_version, kind.kind, key.namespace, key.name)


def _entry_reads_same(new: Obj, old: Obj) -> bool:
    """Is what an entry reads of a hub object the same in both versions? Its status and its
    finalizers (the sync loop's own, added once per object) are not read: the child carries
    neither (`sync/desired.child_object`), and a deletion shows in `deletionTimestamp`."""
    if only_status_changed(new, old):
        return True
    meta, before = new.get("metadata") or {}, old.get("metadata") or {}
    if meta.get("finalizers") == before.get("finalizers"):
        return False
    without = {**new, "metadata": {k: v for k, v in meta.items() if k != "finalizers"}}
    was = {**old, "metadata": {k: v for k, v in before.items() if k != "finalizers"}}
    return only_status_changed(without, was)


def _labels(obj: Obj) -> object:
    return obj.get("metadata", {}).get("labels")


def _own(obj: Obj) -> tuple[object, object]:
    meta = obj.get("metadata", {})
    return meta.get("labels"), meta.get("annotations")


FEEDS = web.AppKey("feeds", Feeds)
