"""The placement loop: keep `kmc.dev/placement` on every hub object equal to what `decide` says.

It watches the hub cache's objects, Namespaces (inherited strategies, exclusion), Locations
and PlacementPolicies, and looks at an object again whenever something it is decided from
changes. Each look goes to the part for the object's role (`kinds.Role`): workloads and
objects with a strategy are placed by it (`place.py`); dependencies, namespace, selector and
reference followers and scalers follow (`follow.py`). What it writes is in `writes.py`; what it
remembers per object, in `records.py`; what a decision reads besides the object, in
`deciding.py`.

Its only outputs are the placement annotation (handed to the sync loop on its way), the
`kmc.dev/Placed` condition and Events. A strategy that does not parse changes nothing: the
previous placement stays, and the condition and a Warning Event say what is wrong.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from apiserver.contract import STRATEGY, never_placed, only_status_changed, read_placement
from apiserver.hubcache import HubCache
from apiserver.kinds import Key, Role
from apiserver.leader import Leadership
from apiserver.locations.fleet import Fleet
from apiserver.locations.pending import Owner, Unschedulable
from apiserver.loops.handoff import Handoff
from apiserver.loops.placement.deciding import Decider
from apiserver.loops.placement.follow import Follower
from apiserver.loops.placement.place import Placer, Timing, dependency
from apiserver.loops.placement.records import Records
from apiserver.loops.placement.writes import Writer
from apiserver.objects import Obj
from apiserver.placement import engine
from apiserver.placement.dependencies import references
from apiserver.workqueue import WorkQueue

# Location status fields no placement decision reads.
LOCATION_NOISE = frozenset({"lastProbeTime", "objects", "observedGeneration"})
# Location status fields only capacity-weighed decisions read: they move whenever pods start.
LOCATION_ROOM = frozenset(
    {"capacity", "allocatable", "requested", "nodes", "readyNodes", "schedulableNodes"}
)


@dataclass(frozen=True)
class Settings:
    grace: float = 60.0
    cooldown: float = 60.0
    workers: int = 32  # mostly waiting on the hub: many more than the cores
    resync: float = 600.0  # safety net: every object is looked at again this often
    # How long a location found short of room keeps its lowered share before it is tried again.
    capacity_hold: float = 300.0


class PlacementLoop:
    def __init__(
        self,
        cache: HubCache,
        fleet: Fleet,
        handoff: Handoff,
        leadership: Leadership,
        settings: Settings = Settings(),
        pending: Callable[[str], Unschedulable | None] = lambda _: None,
    ) -> None:
        self.cache = cache
        self.handoff = handoff
        self.leadership = leadership
        self.settings = settings
        self.queue: WorkQueue[Key] = WorkQueue("placement", lane=lambda k: k.lane)
        self.records = Records(touched=self.queue.add)
        self.decider = Decider(
            cache, fleet, engine.Settings(grace=settings.grace, cooldown=settings.cooldown)
        )
        self.writer = Writer(cache, handoff, self.records)
        self.placer = Placer(
            self.decider,
            self.records,
            self.writer,
            self.queue,
            pending,
            Timing(settings.grace, settings.cooldown, settings.capacity_hold),
        )
        self.follower = Follower(cache, self.records, self.writer, self.decider.unserved)
        self._locations_seen: dict[str, Any] = {}  # name -> what decisions read of it
        cache.subscribe(self._on_object)
        cache.namespaces.subscribe(self._on_namespace)
        cache.locations.subscribe(self._on_location)
        cache.policies.subscribe(self._on_policy)

    # -- what wakes it --------------------------------------------------------------------

    async def run(self) -> None:
        await self.cache.wait_synced()
        for kind in self._kinds(Role.WORKLOAD):
            for key in self.cache.list_keys(kind):
                if (obj := self.cache.get(key)) is not None:
                    self.records.load.note(key, read_placement(obj))
        self._know_users()
        self._enqueue_all()
        tasks = [
            asyncio.create_task(
                self.queue.work(functools.partial(self.leadership.act, self.reconcile), __name__)
            )
            for _ in range(self.settings.workers)
        ]
        tasks.append(asyncio.create_task(self._resync()))
        try:
            await asyncio.gather(*tasks)
        finally:
            for task in tasks:
                task.cancel()

    def _know_users(self) -> None:
        """Which objects use each dependency, from the cache, before anything is looked at: a
        dependency looked at before its users (workers take keys side by side) would find none,
        be placed nowhere, and be placed back a moment later, with a Left Event for nothing
        (and two hub writes) at every start."""
        for kind_key in self._kinds(Role.WORKLOAD, Role.REFERENCE_FOLLOWER):
            kind = self.cache.kinds[kind_key]
            for key in self.cache.list_keys(kind_key):
                obj = self.cache.get(key)
                if obj is None:
                    continue
                if kind.role is Role.REFERENCE_FOLLOWER:
                    self.records.follow(
                        key, frozenset(Key(k, key.namespace, n) for k, n in kind.follows(obj))
                    )
                    self.records.use(
                        key, frozenset(Key(k, key.namespace, n) for k, n in kind.uses(obj))
                    )
                    continue
                spec = kind.pod_spec(obj)
                names = references(spec) if spec else ()
                self.records.use(key, frozenset(dependency(k, key.namespace, n) for k, n in names))

    def _kinds(self, *roles: Role) -> list[str]:
        """The keys of the watched kinds in any of `roles`."""
        return [k.key for k in list(self.cache.kinds.values()) if k.role in roles]

    def _decided(self) -> list[str]:
        """Kinds whose placement a Location or a policy can change (all but dependencies,
        which follow their users)."""
        return self._kinds(Role.WORKLOAD, Role.NAMESPACE_FOLLOWER, Role.ASKED)

    def _served_by_crds(self) -> list[str]:
        """Kinds a location may not serve: whether a follower of one may go there is the
        Location's to say too (its probe's resources)."""
        return [k.key for k in list(self.cache.kinds.values()) if k.crd]

    async def _on_object(self, kind: str, event: str, obj: Obj, old: Obj | None) -> None:
        if event == "MODIFIED" and old is not None and only_status_changed(obj, old):
            return  # our Placed condition, the sync loop's fold: nothing a decision reads
        key = Key.of(kind, obj)
        self.queue.add(key)
        for named_by in list(self.records.followers.get(key, ())):
            self.queue.add(named_by)  # an Ingress, when one of its Services moved
        info = self.cache.kinds.get(kind)
        if info is not None and info.role is Role.WORKLOAD:
            followers = (Role.NAMESPACE_FOLLOWER, Role.SELECTOR_FOLLOWER, Role.SCALER)
            for follower in self._kinds(*followers):
                for dependent in self.cache.list_keys(follower, key.namespace):
                    self.queue.add(dependent)

    def exclude(self, excluded: dict[str, frozenset[str]], kinds: set[str]) -> None:
        """The API import's verdicts: kinds at Incompatible locations count as not served.
        A change re-decides every object of the imported kinds (`kinds`: hub kind keys)."""
        if excluded == self.decider.excluded:
            return
        self.decider.excluded = excluded
        self._enqueue_all([k for k in kinds if k in self.cache.kinds])

    def on_stuck(self, _location: str, owner: Owner) -> None:
        """A workload's count of unschedulable pods changed in a location: look again."""
        kind, namespace, name = owner
        info = self.cache.kinds.get(kind)
        if info is not None and info.role is Role.WORKLOAD:
            self.queue.add(Key(kind, namespace, name))

    async def _on_namespace(self, _: str, ns: Obj, __: Obj | None) -> None:
        for key in self.cache.list_keys(namespace=ns["metadata"]["name"]):
            self.queue.add(key)

    async def _on_location(self, event: str, location: Obj, _: Obj | None) -> None:
        """Re-decide what a Location change can change: everything when its labels, spec,
        readiness or served APIs change; only the decisions that weigh room when just its
        capacity moved (pods starting there), at most once a second. Its probe time and the
        sync loop's object count are no change at all."""
        name = location["metadata"]["name"]
        status = {
            k: v for k, v in (location.get("status") or {}).items() if k not in LOCATION_NOISE
        }
        seen = (
            None
            if event == "DELETED"
            else (location["metadata"].get("labels"), location.get("spec"), status)
        )
        before = self._locations_seen.get(name)
        if before == seen:
            return
        self._locations_seen[name] = seen
        if before is None or seen is None or before[:2] != seen[:2]:
            self._enqueue_all(self._decided() + self._served_by_crds())
            return
        changed = {
            field
            for field in set(before[2]) | set(seen[2])
            if before[2].get(field) != seen[2].get(field)
        }
        if not changed <= LOCATION_ROOM:
            self._enqueue_all(self._decided() + self._served_by_crds())
            return
        for key in list(self.records.room):
            self.queue.add_debounced(key, 1.0)

    async def _on_policy(self, _: str, __: Obj, ___: Obj | None) -> None:
        """A PlacementPolicy came, changed or went: what it allows may have changed anywhere
        (its namespace selector too). Policies change rarely; everything is looked at."""
        self._enqueue_all(self._decided())

    def _enqueue_all(self, kinds: Iterable[str] | None = None) -> None:
        for kind in list(kinds if kinds is not None else self.cache.kinds):
            for key in self.cache.list_keys(kind):
                self.queue.add(key)

    async def _resync(self) -> None:
        """Every object looked at again once per `resync`, a slice a second: ten thousand
        keys at once would cost a burst of CPU and hold new objects up behind them."""
        while True:
            keys = [key for kind in list(self.cache.kinds) for key in self.cache.list_keys(kind)]
            slices = max(1, int(self.settings.resync))
            for i in range(slices):
                await asyncio.sleep(self.settings.resync / slices)
                for key in keys[i::slices]:
                    self.queue.add(key)
            self.cache.count_objects()

    # -- looking at one object ----------------------------------------------------------

    async def reconcile(self, key: Key) -> None:
        await self.leadership.leading.wait()  # followers keep their caches, act once they lead
        cached, kind = self.cache.get(key), self.cache.kinds.get(key.kind)
        if cached is None or kind is None:
            self.records.forget(key)
            self.handoff.forget(key)
            self.queue.forget(key)
            return
        if cached["metadata"].get("deletionTimestamp"):
            return  # going: the sync loop deletes its children, nothing is placed any more
        ns = self.cache.namespace(key.namespace)
        if never_placed(ns):
            return
        obj = kind.typed(cached)  # cached: read-only
        if not kind.syncable(obj):
            return  # the hub's own (a controller's Pod, an account's token Secret)
        asked = STRATEGY in (obj["metadata"].get("annotations") or {})
        if kind.role is Role.NAMESPACE_FOLLOWER:
            await self.follower.namespace(kind, key, obj)
        elif kind.role is Role.SELECTOR_FOLLOWER and not asked:
            await self.follower.selector(kind, key, obj)
        elif kind.role is Role.REFERENCE_FOLLOWER and not asked:
            await self.follower.named(kind, key, obj)
        elif kind.role is Role.SCALER and not asked:
            await self.follower.target(kind, key, obj)
        elif kind.role is Role.DEPENDENCY and not asked:
            await self.follower.users(kind, key, obj)
        elif kind.role is Role.WORKLOAD or asked:
            await self.placer.place(kind, key, obj, ns)
        elif kind.role is Role.ASKED and read_placement(obj):
            # Its strategy was taken away: it is the hub's own again, and leaves the children.
            await self.writer.placement(kind, key, obj, {})
        # other kinds are placed only when asked to
