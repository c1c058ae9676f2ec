"""The sync loop: make every child match `kmc.dev/placement`, and the hub's status match the
children.

Level-based: a reconcile of one hub object reads the object, its placement, and what each
child holds (from watches on every child, selecting our objects by the origin label), and
then does whatever is still missing — apply a child, scale one down as the handover allows,
delete one whose handover is done, fold the children's status up. It keeps no memory that
a restart could lose: a half-done move continues from what the children say.

One slow or dead location never holds up the others: its child is left as it is, its last
known status counts and is marked stale, and its client retries with backoff.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import functools
import hashlib
import logging
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Any

import msgspec

from apiserver import hubwrites
from apiserver.fairgate import FairGate
from apiserver.hubcache import HubCache
from apiserver.kinds import DEPENDENCIES, NAMESPACE, WORKLOADS, Key, Kind
from apiserver.kube import events
from apiserver.kube.client import ApiError, Kube, Obj
from apiserver.kube.informer import Informer
from apiserver.locations.fleet import Fleet
from apiserver.placement.engine import Verdict
from apiserver.placement.loop import (
    CLEANUP,
    PLACEMENT,
    PlacementLoop,
    only_status_changed,
    read_placement,
    status_body,
)
from apiserver.placement.policy import constraints
from apiserver.sync.desired import (
    ORIGIN_LABEL,
    child_object,
    max_unavailable,
    replica_kinds,
    syncable,
)
from apiserver.sync.handover import Child, plan
from apiserver.sync.report import LocationState, location_states
from apiserver.sync.status import SYNCED, fold
from apiserver.workqueue import WorkQueue

log = logging.getLogger(__name__)

MANAGER = "kmc-sync"


@dataclass(frozen=True)
class Settings:
    workers: int = 32  # mostly waiting on the hub and the children
    cleanup_retry: float = 5.0  # a child we could not delete yet is tried again this often
    count_interval: float = 2.0  # how often each Location's `status.objects` is brought up to date
    patience: float = 2.0  # longest a worker waits for one child write
    per_location: int = 8  # child writes at once in one location, at most
    # A fold that only moves counters partway (pods starting, one child ahead of another) is
    # written at most this often per object; a changed condition, a new observedGeneration
    # or counters that reached spec.replicas are written at once.
    fold_hold: float = 1.0


class ChildWatch:
    """Our objects in one child (origin label set), per kind, as last seen."""

    def __init__(self, location: str, kube: Kube, on_change: Callable[[Key], None]) -> None:
        self.location = location
        self.kube = kube
        self.on_change = on_change
        self.informers: dict[str, Informer] = {}
        self.kinds: dict[str, Kind] = {}
        self.tasks: list[asyncio.Task[None]] = []
        self.namespaces: set[str] = set()  # known to exist in the child
        # The namespaces we made there (origin label): each goes when its hub namespace does.
        self.made = Informer(
            kube,
            "/api/v1/namespaces",
            self._namespace_changed,
            {"labelSelector": ORIGIN_LABEL},
            backoff_cap=5.0,
        )
        self.tasks.append(asyncio.create_task(self.made.run(), name=f"namespaces {location}"))

    async def _namespace_changed(self, _: str, ns: Obj, __: Obj | None) -> None:
        self.on_change(Key(NAMESPACE, "", ns["metadata"]["name"]))

    def ensure(self, kind: Kind) -> None:
        if kind.key in self.informers:
            return
        self.kinds[kind.key] = kind

        async def handler(_: str, obj: Obj, __: Obj | None) -> None:
            # Every change, status too: it is folded up at once. Under load the queue holds a
            # key once however often it changes, which batches a child's churn by itself.
            self.on_change(Key.of(kind.key, obj))

        # A child back from an outage must be seen again within seconds: the hub's status of
        # everything placed there waits for it.
        informer = Informer(
            self.kube,
            kind.collection,
            handler,
            {"labelSelector": ORIGIN_LABEL},
            backoff_cap=5.0,
            slim=_slim_child,
        )
        self.informers[kind.key] = informer
        self.tasks.append(asyncio.create_task(informer.run(), name=f"watch {self.location}"))

    def get(self, key: Key) -> Obj | None:
        """Our child of a hub object, as cached (read-only)."""
        informer = self.informers.get(key.kind)
        return informer.get(key.cache_key) if informer else None

    def namespace_has_workloads(self, namespace: str) -> bool:
        return any(
            key.split("/", 1)[0] == namespace
            for kind in WORKLOADS
            for key in (self.informers[kind].cache if kind in self.informers else ())
        )

    def count(self) -> int | None:
        """How many of our objects the child holds; None until every watch has listed."""
        if not all(i.synced.is_set() for i in self.informers.values()):
            return None
        return sum(len(i.cache) for i in self.informers.values())

    def stop(self) -> None:
        for task in self.tasks:
            task.cancel()


class SyncLoop:
    def __init__(
        self,
        cache: HubCache,
        fleet: Fleet,
        placement: PlacementLoop,
        settings: Settings = Settings(),
    ) -> None:
        self.hub: Kube = cache.hub
        self.cache = cache
        self.leadership = placement.leadership
        self.leading = placement.leading
        self.fleet = fleet
        self.settings = settings
        self.events = events.Recorder(cache.hub, MANAGER)
        self.queue: WorkQueue[Key] = WorkQueue("sync", lane=lambda k: k.lane)
        self.children: dict[str, ChildWatch] = {}
        # hub key -> location -> (hub generation applied, child generation it produced)
        self.applied: dict[Key, dict[str, tuple[int, int]]] = {}
        # hub key -> location -> (digest of what we applied, the child's version it produced).
        # A child status change re-queues the hub object; this spares re-applying unchanged
        # objects. A spec edit by hand bumps the generation, and a label or annotation edit is
        # seen by `_wears`, so drift is still undone.
        self._written: dict[Key, dict[str, tuple[str, str]]] = {}
        self._folded: dict[Key, float] = {}  # hub key -> when we last wrote its status
        # Placements handed over by the placement loop before they are on the hub: hub key ->
        # (the annotation it replaces, the placement). Good only while the cached object still
        # has that annotation; then the hub's annotation says it (or, if the write failed,
        # the placement loop takes it back, and the children converge to what the hub says).
        self._handed: dict[Key, tuple[str, dict[str, int | None]]] = {}
        # Whether a move was announced (Moving) and not yet ended (Moved), while the hub's
        # status does not say so yet: a move can start, or even end, while its placement is
        # still on its way to the hub, when no status is folded.
        self._moving: dict[Key, bool] = {}
        self._ready_seen: dict[str, Any] = {}  # location -> its Ready condition as last seen
        # Child writes still going on in the background, and each location's lane.
        self._inflight: dict[tuple[Key, str], asyncio.Task[bool]] = {}
        self._gates: dict[str, FairGate] = {}
        cache.subscribe(self._on_hub_object)
        cache.namespaces.subscribe(self._on_hub_namespace)
        cache.locations.subscribe(self._on_location)
        cache.policies.subscribe(self._on_policy)
        placement.deciders.append(self.take)

    async def _on_policy(self, _: str, __: Obj, ___: Obj | None) -> None:
        """A PlacementPolicy's constraints on child objects may have changed: apply again
        (an unchanged child is skipped)."""
        self._enqueue_all()

    def take(self, key: Key, replaced: str, placement: dict[str, int | None] | None) -> None:
        """The placement loop decided `placement` in place of the `replaced` annotation: act on
        it now, while the decision is still on its way to the hub. None: its write failed, and
        the hub's record holds again."""
        if placement is None:
            self._handed.pop(key, None)
        else:
            self._handed[key] = (replaced, placement)
        self.queue.add(key)

    async def _on_hub_object(self, kind: str, event: str, obj: Obj, old: Obj | None) -> None:
        if event == "MODIFIED" and old is not None and only_status_changed(obj, old):
            return  # our own fold, the placement loop's condition: nothing to do
        self.queue.add(Key.of(kind, obj))

    async def run(self) -> None:
        await self.cache.wait_synced()
        for location in self.cache.locations.items():
            await self._on_location("ADDED", location, None)
        self._enqueue_all()
        workers = [
            asyncio.create_task(
                self.queue.work(functools.partial(self.leadership.act, self.reconcile), __name__)
            )
            for _ in range(self.settings.workers)
        ]
        workers.append(asyncio.create_task(self._report_counts()))
        try:
            await asyncio.gather(*workers)
        finally:
            for worker in workers:
                worker.cancel()
            for watch in self.children.values():
                watch.stop()
            for task in self._inflight.values():
                task.cancel()

    async def _report_counts(self) -> None:
        """Keep each Location's `status.objects` true, so `kubectl mc unjoin` knows when a
        drained location holds nothing of ours any more."""
        while True:
            await asyncio.sleep(self.settings.count_interval)
            await self.leading.wait()
            for name, watch in list(self.children.items()):
                count = watch.count()
                location = self.cache.locations.get(name)
                if count is None or location is None:
                    continue
                # The generation says "counted after this spec": a drain waits for a count
                # taken after its cordon, never one from before.
                fresh = {"objects": count, "observedGeneration": location["metadata"]["generation"]}
                status = location.get("status") or {}
                if {k: status.get(k) for k in fresh} != fresh:
                    with contextlib.suppress(ApiError):
                        await self.hub.merge_patch(
                            f"/apis/kmc.dev/v1alpha1/locations/{name}/status", {"status": fresh}
                        )

    def _enqueue_all(self) -> None:
        for key in self.cache.list_keys():
            self.queue.add(key)
        for watch in list(self.children.values()):
            for name in list(watch.made.cache):
                if self.cache.namespaces.get(name) is None:
                    self.queue.add(Key(NAMESPACE, "", name))

    async def _on_location(self, event: str, location: Obj, _: Obj | None) -> None:
        """Start or stop a location's watches; re-look at everything only when what a
        reconcile reads of the location changed: its watches, or whether it is Ready."""
        name = location["metadata"]["name"]
        watch = self.children.get(name)
        changed = False
        if event == "DELETED":
            if watch:
                watch.stop()
                del self.children[name]
                changed = True
        else:
            kube = self.fleet.get(name)
            if kube is not None and (watch is None or watch.kube is not kube):
                if watch:
                    watch.stop()
                watch = ChildWatch(name, kube, self.queue.add)
                for kind in (*WORKLOADS.values(), *DEPENDENCIES.values()):
                    watch.ensure(kind)
                self.children[name] = watch
                changed = True
        conditions = (location.get("status") or {}).get("conditions") or []
        ready = (
            None
            if event == "DELETED"
            else next(
                (
                    (c["status"], c.get("lastTransitionTime"))
                    for c in conditions
                    if c["type"] == "Ready"
                ),
                None,
            )
        )
        if changed or self._ready_seen.get(name) != ready:
            self._ready_seen[name] = ready
            self._enqueue_all()

    async def _on_hub_namespace(self, event: str, ns: Obj, old: Obj | None) -> None:
        if event == "DELETED":
            self.queue.add(Key(NAMESPACE, "", ns["metadata"]["name"]))
        elif (
            self.cache.policies.cache
            and old is not None
            and ns["metadata"].get("labels") != old["metadata"].get("labels")
        ):
            # Which PlacementPolicies select it, and so what its children carry, may change.
            for key in self.cache.list_keys(namespace=ns["metadata"]["name"]):
                self.queue.add(key)

    def locations_of(
        self,
        kind_key: str,
        hub: Obj,
        verdicts: tuple[Verdict, ...] = (),
        stale: dict[str, str] | None = None,
    ) -> list[LocationState]:
        """Where a hub object runs, a row per location (see `report.location_states`)."""
        key = Key.of(kind_key, hub)
        children = self._children(key, hub["metadata"]["uid"])
        placement = read_placement(hub)
        done = self.applied.get(key, {})
        applied = {loc: done[loc] for loc in set(placement) | set(children) if loc in done}
        kind = self.cache.kinds[kind_key].kind
        stale = self._stale() if stale is None else stale
        return location_states(hub, kind, placement, children, applied, stale, verdicts)

    def view_inputs(self, key: Key, hub: Obj) -> tuple[tuple[tuple[str, Obj], ...], Any]:
        """What `locations_of` reads of ours for one object besides the locations' state: its
        children (cached objects, compared by identity) and what was applied (by value)."""
        children = self._children(key, hub["metadata"]["uid"])
        return tuple(sorted(children.items())), tuple(sorted(self.applied.get(key, {}).items()))

    def stale_locations(self) -> dict[str, str]:
        return self._stale()

    def _children(self, key: Key, uid: str) -> dict[str, Obj]:
        """The children of one hub object, by location (same name, our origin label)."""
        return {
            loc: child
            for loc, watch in self.children.items()
            if (child := watch.get(key)) is not None
            and (child["metadata"].get("labels") or {}).get(ORIGIN_LABEL) == uid
        }

    # -- reconciling ----------------------------------------------------------------------

    async def reconcile(self, key: Key) -> None:
        await self.leading.wait()
        if key.kind == NAMESPACE:
            await self._remove_namespace(key.name)
            return
        info, cached = self.cache.kinds.get(key.kind), self.cache.get(key)
        if info is None or cached is None:
            self._handed.pop(key, None)
            self._moving.pop(key, None)
            await self._delete_orphans(key)
            return
        hub = {"kind": info.kind, "apiVersion": info.api_version, **cached}  # cached: read-only
        children = self._children(key, hub["metadata"]["uid"])
        if hub["metadata"].get("deletionTimestamp"):
            self._handed.pop(key, None)
            await self._clean_up(key, info, hub, children)
            return
        placement, handed = self._placement(key, hub)
        if (not placement and not children) or not syncable(hub, info.kind):
            return
        if not handed:
            # A handed-over placement's own write brings the finalizer.
            await hubwrites.add_finalizer(self.hub, info, hub, CLEANUP)
        stale = self._stale()
        shares, deletable, waiting = self._handover(info, hub, placement, children, stale)
        applied = await asyncio.gather(
            *(
                self._bounded(key, loc, self._apply(key, info, hub, loc, shares, stale))
                for loc in sorted(shares)
            )
        )
        for location in sorted(deletable):
            await self._bounded(key, location, self._delete_child(key, info, hub, location))
        if info.key in WORKLOADS and handed:
            # Folded when the hub has the placement, a moment later; the move shows now.
            self._show_move(key, hub, None, waiting)
        elif info.key in WORKLOADS:
            await self._fold(key, info, hub, children, placement, stale, waiting)
        failed = [loc for loc, ok in zip(sorted(shares), applied, strict=True) if not ok]
        if failed:
            # The others are done; these come back after the queue's backoff.
            raise ApiError.of(503, "ServiceUnavailable", f"applying to {', '.join(failed)} failed")

    def _placement(self, key: Key, hub: Obj) -> tuple[dict[str, int | None], bool]:
        """Where the object goes: a placement handed over for the version we hold, else the
        hub's record. True when it was handed over."""
        handed = self._handed.get(key)
        if handed is not None:
            replaced, placement = handed
            if replaced == ((hub["metadata"].get("annotations") or {}).get(PLACEMENT) or ""):
                return placement, True
            del self._handed[key]  # the hub has it (or another) now: its annotation says it
        return read_placement(hub), False

    async def _bounded(
        self, key: Key, location: str, work: Coroutine[Any, Any, bool], busy: bool = True
    ) -> bool:
        """Run one child write, but wait for it only `patience` seconds: a slow location must
        not hold a worker, or every other object waits behind it. A write that takes longer
        goes on in the background (at most `per_location` at once per location) and the
        object is looked at again when it ends. Returns the write's result, or `busy` while it
        is still going (or another write of the same object there still is)."""
        if (key, location) in self._inflight:
            work.close()
            return busy
        gate = self._gates.setdefault(location, FairGate(self.settings.per_location))

        async def laned() -> bool:
            async with gate.slot(key.lane):
                return await work

        slow = asyncio.Event()

        def finished(_: asyncio.Task[bool]) -> None:
            self._inflight.pop((key, location), None)
            if slow.is_set():
                self.queue.add(key)

        task = asyncio.create_task(laned(), name=f"{key} in {location}")
        self._inflight[(key, location)] = task
        task.add_done_callback(finished)
        self.leadership.track(task)  # a leader stepping down stops its writes
        done, _ = await asyncio.wait({task}, timeout=self.settings.patience)
        if done:
            return task.result()
        slow.set()
        log.info("%s: %s is slow to answer; carrying on without waiting", key, location)
        return busy

    def _handover(
        self,
        info: Kind,
        hub: Obj,
        placement: dict[str, int | None],
        children: dict[str, Obj],
        stale: dict[str, str],
    ) -> tuple[dict[str, int | None], set[str], tuple[str, ...]]:
        """What each location's child should hold now, which children may go, and what a
        move in progress waits for."""
        if info.kind in replica_kinds:
            observed = {
                loc: Child(
                    replicas=int(child.get("spec", {}).get("replicas", 0)),
                    available=int(child.get("status", {}).get("availableReplicas", 0) or 0),
                    reachable=loc not in stale,
                )
                for loc, child in children.items()
            }
            step = plan(
                {loc: value or 0 for loc, value in placement.items()},
                observed,
                total=int(hub.get("spec", {}).get("replicas", 1)),
                max_unavailable=max_unavailable(hub, info.kind),
            )
            return dict(step.replicas), set(step.delete), step.waiting
        leaving = {loc for loc in children if loc not in placement and loc not in stale}
        if info.key in DEPENDENCIES:
            # A ConfigMap stays while anything of its namespace still runs there.
            namespace = hub["metadata"]["namespace"]
            leaving = {
                loc for loc in leaving if not self.children[loc].namespace_has_workloads(namespace)
            }
        return dict(placement), leaving, ()

    def _stale(self) -> dict[str, str]:
        """Locations whose numbers are last known ones: not Ready, or not connected yet."""
        stale = {}
        for location in self.cache.locations.items():
            name = location["metadata"]["name"]
            conditions = (location.get("status") or {}).get("conditions") or []
            ready = next((c for c in conditions if c["type"] == "Ready"), None)
            if ready is None or ready["status"] != "True" or name not in self.children:
                since = ready.get("lastTransitionTime", "?") if ready else "?"
                stale[name] = f"unreachable since {since}, showing its last known status"
        return stale

    async def _apply(
        self,
        key: Key,
        info: Kind,
        hub: Obj,
        location: str,
        shares: dict[str, int | None],
        stale: dict[str, str],
    ) -> bool:
        """Apply one child; False when it failed (and should be tried again)."""
        watch = self.children.get(location)
        if watch is None or location in stale:
            return True  # retried when the location is back (its Ready change re-queues us)
        watch.ensure(info)
        meta = hub["metadata"]
        labels = (self.cache.locations.get(location) or {}).get("metadata", {}).get("labels")
        added = constraints(self.cache.policies_for(meta["namespace"]))
        desired = child_object(hub, info.api_version, info.kind, location, shares, labels, added)
        digest = hashlib.sha256(msgspec.json.encode(desired, order="sorted")).hexdigest()
        current = watch.get(key)
        written = self._written.setdefault(key, {})
        applied = self.applied.setdefault(key, {})
        if current is not None:
            # As we last applied it and we would apply the same again; or a finished Job whose
            # share cannot change in place (its work there is done, and stays on record as it
            # is; a running one is made anew). The hub's generation may still have moved (a
            # Deployment's does on annotation changes, such as a new placement): the child
            # reflects it all the same.
            # Labels and annotations are in the check too: editing them moves no generation.
            unchanged = written.get(location) == (digest, _version(current)) and _wears(
                current, desired
            )
            immutable = not unchanged and _immutable_change(info.kind, current, desired)
            if immutable and not _finished(current):
                return await self._replace(key, info, hub, location)
            if unchanged or immutable:
                applied[location] = (
                    int(meta.get("generation", 0)),
                    int(current["metadata"].get("generation", 0)),
                )
                return True
        try:
            await self._ensure_namespace(watch, meta["namespace"])
            answer = await watch.kube.apply(
                info.path(meta["namespace"], meta["name"]), desired, MANAGER
            )
        except ApiError as err:
            if err.code == 404:
                watch.namespaces.discard(meta["namespace"])  # deleted behind our back
            log.warning("%s: applying to %s failed: %s", key, location, err)
            return False
        written[location] = (digest, _version(answer))
        applied[location] = (
            int(meta.get("generation", 0)),
            int(answer.get("metadata", {}).get("generation", 0)),
        )
        return True

    async def _ensure_namespace(self, watch: ChildWatch, namespace: str) -> None:
        """Make the child's namespace if it is missing, labelled with the hub namespace's uid
        so that it goes when that does; one that was there before is left as it is."""
        if namespace in watch.namespaces:
            return
        hub = self.cache.namespaces.get(namespace)
        labels = {ORIGIN_LABEL: hub["metadata"]["uid"]} if hub else {}
        body = {
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {"name": namespace, "labels": labels},
        }
        try:
            await watch.kube.create("/api/v1/namespaces", body)
        except ApiError as err:
            if err.code != 409:
                raise
        watch.namespaces.add(namespace)

    async def _replace(self, key: Key, info: Kind, hub: Obj, location: str) -> bool:
        """Delete a child that cannot take its new spec in place; its deletion's watch event
        brings the object back here, and the child is made anew."""
        if not await self._delete_child(key, info, hub, location):
            return False
        self.events.post(
            hub,
            "Normal",
            "Replaced",
            f"replaced the {info.kind} in {location}: its new share cannot be set in place "
            "(completions are immutable); its pods there start again",
        )
        return True

    async def _delete_child(self, key: Key, info: Kind, hub: Obj, location: str) -> bool:
        """True once the child is gone (or was never there)."""
        watch = self.children.get(location)
        if watch is None:
            return False
        meta = hub["metadata"]
        try:
            await watch.kube.delete(info.path(meta["namespace"], meta["name"]))
        except ApiError as err:
            if err.code != 404:
                log.warning("%s: deleting from %s failed: %s", key, location, err)
                return False
        self.applied.get(key, {}).pop(location, None)
        self._written.get(key, {}).pop(location, None)
        log.info("%s: removed from %s", key, location)
        return True

    async def _fold(
        self,
        key: Key,
        info: Kind,
        hub: Obj,
        children: dict[str, Obj],
        placement: dict[str, int | None],
        stale: dict[str, str],
        waiting: tuple[str, ...],
    ) -> None:
        seen: dict[str, Obj | None] = {loc: children.get(loc) for loc in placement}
        seen.update(children)
        applied = self.applied.get(key, {})
        status = fold(
            hub,
            info.kind,
            seen,
            placement,
            {loc: msg for loc, msg in stale.items() if loc in seen},
            applied,
            _now(),
        )
        self._show_move(key, hub, status, waiting)
        current = hub.get("status") or {}
        if not _differs(current, status):
            return
        now, last = time.monotonic(), self._folded.get(key)
        if (
            last is not None
            and now - last < self.settings.fold_hold
            and _partway(current, status, hub)
        ):
            # Each such write is a hub write the user's own writes queue behind (a burst of
            # creates brings a handful per object); the settled status is not held.
            self.queue.add_after(key, last + self.settings.fold_hold - now)
            return
        meta = hub["metadata"]
        path = info.path(meta["namespace"], meta["name"], "status")
        await self.hub.apply(path, status_body(hub, info.kind, status), MANAGER)
        self._folded[key] = time.monotonic()

    def _show_move(
        self, key: Key, hub: Obj, status: dict[str, Any] | None, waiting: tuple[str, ...]
    ) -> None:
        """A handover in progress shows as Synced=False/Moving with what it waits for (in
        `status`, when one is folded), and as Events when it starts and ends. Whether one is
        going on is what the hub's status says (a restart loses none), unless this process
        saw it start or end since."""
        before: dict[str, Any] = next(
            (c for c in (hub.get("status") or {}).get("conditions", []) if c["type"] == SYNCED),
            {},
        )
        said = before.get("reason") == "Moving"
        was_moving = self._moving.get(key, said)
        if waiting:
            for condition in (status or {}).get("conditions", []):
                if condition["type"] == SYNCED:
                    condition.update(
                        status="False", reason="Moving", message="moving: " + "; ".join(waiting)
                    )
                    if not said:
                        condition["lastTransitionTime"] = _now()
            if not was_moving:
                self.events.post(hub, "Normal", "Moving", "moving: " + "; ".join(waiting))
        elif was_moving:
            message = "handover done: " + _placement_text(read_placement(hub))
            self.events.post(hub, "Normal", "Moved", message)
        moving = bool(waiting)
        if moving == said:
            self._moving.pop(key, None)  # the hub's status says it
        else:
            self._moving[key] = moving

    async def _clean_up(self, key: Key, info: Kind, hub: Obj, children: dict[str, Obj]) -> None:
        """The hub object is going: its children go first, then our finalizer."""
        finalizers = list(hub["metadata"].get("finalizers") or [])
        if CLEANUP not in finalizers:
            return
        places = set(children) | set(read_placement(hub))
        done = [
            await self._bounded(key, loc, self._delete_child(key, info, hub, loc), busy=False)
            for loc in sorted(places)
        ]
        if not all(done):
            self.queue.add_after(key, self.settings.cleanup_retry)
            return
        await hubwrites.remove_finalizer(self.hub, info, hub, CLEANUP)

    async def _remove_namespace(self, name: str) -> None:
        """A namespace we made in children goes once the hub has no namespace of that name
        (everything in it has gone first: the hub waits for our finalizers). One the hub has
        again, under a new uid, stays and is used."""
        await self.cache.namespaces.synced.wait()
        if self.cache.namespaces.get(name) is not None:
            return
        stale = self._stale()
        failed = []
        for location, watch in list(self.children.items()):
            made = watch.made.get(name)
            if made is None or made["metadata"].get("deletionTimestamp"):
                continue
            if location in stale:
                continue  # looked at again when it is Ready (`_enqueue_all`)
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

    async def _delete_orphans(self, key: Key) -> None:
        """Children whose hub object is gone (deleted while we were not looking)."""
        self.applied.pop(key, None)
        self._written.pop(key, None)
        self._folded.pop(key, None)
        self.queue.forget(key)
        failed = []
        for location, watch in list(self.children.items()):
            child = watch.get(key)
            info = self.cache.kinds.get(key.kind) or watch.kinds.get(key.kind)
            if child is None or info is None:
                continue
            try:
                await watch.kube.delete(info.path(key.namespace, key.name))
                log.info("%s: orphan removed from %s", key, location)
            except ApiError as err:
                if err.code != 404:
                    log.warning("%s: orphan in %s: %s", key, location, err)
                    failed.append(location)
        if failed:  # tried again after the queue's backoff: an orphan must not stay
            raise ApiError.of(
                503, "ServiceUnavailable", f"orphan {key} is still in {', '.join(failed)}"
            )


def _differs(current: dict[str, Any], new: dict[str, Any]) -> bool:
    """Would applying `new` change anything we own? Timestamps alone do not count."""

    def strip(conditions: list[dict[str, Any]], types: set[str]) -> dict[str, Any]:
        return {
            c["type"]: {k: v for k, v in c.items() if not k.endswith("Time")}
            for c in conditions
            if c["type"] in types
        }

    for field, value in new.items():
        if field == "conditions":
            types = {c["type"] for c in value}
            if strip(current.get("conditions") or [], types) != strip(value, types):
                return True
        elif current.get(field) != value:
            return True
    return False


_COUNTERS = ("replicas", "updatedReplicas", "readyReplicas", "availableReplicas")


def _partway(current: dict[str, Any], new: dict[str, Any], hub: Obj) -> bool:
    """Does `new` differ from `current` only in counters on their way to spec.replicas? Such
    a status may wait; one that a user or `kubectl wait`/`rollout status` acts on may not."""
    if current.get("observedGeneration") != new.get("observedGeneration"):
        return False

    def states(status: dict[str, Any]) -> dict[str, str]:
        return {c["type"]: c.get("status", "") for c in status.get("conditions") or []}

    if states(current) != states(new):
        return False
    wanted = (hub.get("spec") or {}).get("replicas")
    counters = [new.get(field, 0) for field in _COUNTERS if field in new or field in current]
    return not (isinstance(wanted, int) and counters and all(c == wanted for c in counters))


def _wears(child: Obj, desired: Obj) -> bool:
    """Does the child still carry every label and annotation we set, as we set them? Others'
    own keys (a controller's revision annotation, a label added by hand) do not matter."""
    for field in ("labels", "annotations"):
        have = child.get("metadata", {}).get(field) or {}
        for key, value in (desired["metadata"].get(field) or {}).items():
            if have.get(key) != value:
                return False
    return True


def _immutable_change(kind: str, current: Obj, desired: Obj) -> bool:
    """Would applying `desired` change a field the child's API will not change in place? A
    Job's completions, set from its share, are the one such field we write."""
    if kind != "Job":
        return False
    return bool(current.get("spec", {}).get("completions") != desired["spec"].get("completions"))


def _finished(job: Obj) -> bool:
    conditions = (job.get("status") or {}).get("conditions") or []
    return any(c["type"] in ("Complete", "Failed") and c["status"] == "True" for c in conditions)


def _slim_child(obj: Obj) -> Obj:
    """What the loop reads of a child: its counts, status and versions, never its pod template
    or its data (the hub holds those; a Secret's data has no business in our memory twice)."""
    spec = obj.get("spec")
    if isinstance(spec, dict):
        spec.pop("template", None)
    for field in ("data", "binaryData", "stringData"):
        obj.pop(field, None)
    return obj


def _version(obj: Obj) -> str:
    """What changes when an object's spec changes: its generation, or (for kinds without one,
    like ConfigMaps) its resourceVersion."""
    meta = obj.get("metadata", {})
    generation = meta.get("generation")
    return f"g{generation}" if generation else f"rv{meta.get('resourceVersion')}"


def _placement_text(placement: dict[str, int | None]) -> str:
    return ", ".join(k if v is None else f"{k}={v}" for k, v in sorted(placement.items()))


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
