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
import hashlib
import logging
from collections.abc import Coroutine
from dataclasses import dataclass
from typing import Any

import msgspec

from apiserver.kube import events
from apiserver.kube.client import ApiError, Kube, Obj
from apiserver.kube.informer import Informer, key_of
from apiserver.locations.fleet import Fleet
from apiserver.placement.engine import Verdict
from apiserver.placement.loop import (
    CLEANUP,
    DEPENDENCIES,
    WORKLOADS,
    Kind,
    PlacementLoop,
    read_placement,
    status_body,
)
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
NAMESPACE = "Namespace"  # queue keys `Namespace|<name>`: a child namespace we made


@dataclass(frozen=True)
class Settings:
    workers: int = 4
    cleanup_retry: float = 5.0  # a child we could not delete yet is tried again this often
    count_interval: float = 2.0  # how often each Location's `status.objects` is brought up to date
    patience: float = 2.0  # longest a worker waits for one child write
    per_location: int = 8  # child writes at once in one location, at most


class ChildWatch:
    """Our objects in one child (origin label set), per kind, as last seen."""

    def __init__(self, location: str, kube: Kube, on_change: Any) -> None:
        self.location = location
        self.kube = kube
        self.on_change = on_change
        self.informers: dict[str, Informer] = {}
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

    async def _namespace_changed(self, _: str, ns: Obj) -> None:
        self.on_change(f"{NAMESPACE}|{ns['metadata']['name']}")

    def ensure(self, kind: Kind) -> None:
        if kind.key in self.informers:
            return

        async def handler(_: str, obj: Obj) -> None:
            self.on_change(f"{kind.key}|{key_of(obj)}")

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

    def get(self, kind: str, key: str) -> Obj | None:
        informer = self.informers.get(kind)
        return informer.get(key) if informer else None

    def peek(self, kind: str, key: str) -> Obj | None:
        """`get` without the copy: for reading only."""
        informer = self.informers.get(kind)
        return informer.peek(key) if informer else None

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
        hub: Kube,
        fleet: Fleet,
        placement: PlacementLoop,
        locations: Informer,
        settings: Settings = Settings(),
    ) -> None:
        self.hub = hub
        self.leading = placement.leading
        self.fleet = fleet
        self.placement = placement
        self.locations = locations
        self.settings = settings
        self.queue = WorkQueue()
        self.children: dict[str, ChildWatch] = {}
        # (hub key, location) -> (hub generation applied, child generation it produced)
        self.applied: dict[tuple[str, str], tuple[int, int]] = {}
        # (hub key, location) -> (digest of what we applied, the child's version it produced).
        # A child status change re-queues the hub object; this spares re-applying unchanged
        # objects. A spec edit by hand bumps the generation, so drift is still undone.
        self._written: dict[tuple[str, str], tuple[str, str]] = {}
        self._ready_seen: dict[str, Any] = {}  # location -> its Ready condition as last seen
        # Child writes still going on in the background, and each location's lane.
        self._inflight: dict[tuple[str, str], asyncio.Task[bool]] = {}
        self._lanes: dict[str, asyncio.Semaphore] = {}
        placement.listeners.append(self.queue.add)
        placement.namespaces.subscribe(self._on_hub_namespace)
        locations.subscribe(self._on_location)

    async def run(self) -> None:
        await asyncio.gather(*(i.synced.wait() for i in self.placement.informers.values()))
        await self.locations.synced.wait()
        for location in self.locations.items():
            await self._on_location("ADDED", location)
        self._enqueue_all()
        workers = [
            asyncio.create_task(self.queue.work(self.reconcile, __name__))
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
                location = self.locations.get(name)
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
        for kind, informer in list(self.placement.informers.items()):
            for key in list(informer.cache):
                self.queue.add(f"{kind}|{key}")
        for watch in list(self.children.values()):
            for name in list(watch.made.cache):
                if self.placement.namespaces.peek(name) is None:
                    self.queue.add(f"{NAMESPACE}|{name}")

    async def _on_location(self, event: str, location: Obj) -> None:
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

    async def _on_hub_namespace(self, event: str, ns: Obj) -> None:
        if event == "DELETED":
            self.queue.add(f"{NAMESPACE}|{ns['metadata']['name']}")

    def locations_of(
        self, kind_key: str, hub: Obj, verdicts: tuple[Verdict, ...] = ()
    ) -> list[LocationState]:
        """Where a hub object runs, a row per location (see `report.location_states`)."""
        meta = hub["metadata"]
        cache_key = f"{meta['namespace']}/{meta['name']}"
        children = self._children(kind_key, cache_key, meta["uid"])
        placement = read_placement(hub)
        key = f"{kind_key}|{cache_key}"
        applied = {
            loc: done
            for loc in set(placement) | set(children)
            if (done := self.applied.get((key, loc))) is not None
        }
        kind = self.placement.kinds[kind_key].kind
        return location_states(hub, kind, placement, children, applied, self._stale(), verdicts)

    def _children(self, kind_key: str, cache_key: str, uid: str) -> dict[str, Obj]:
        """The children of one hub object, by location (same name, our origin label)."""
        return {
            loc: child
            for loc, watch in self.children.items()
            if (child := watch.peek(kind_key, cache_key)) is not None
            and (child["metadata"].get("labels") or {}).get(ORIGIN_LABEL) == uid
        }

    # -- reconciling ----------------------------------------------------------------------

    async def reconcile(self, key: str) -> None:
        await self.leading.wait()
        kind_key, cache_key = key.split("|", 1)
        if kind_key == NAMESPACE:
            await self._remove_namespace(cache_key)
            return
        info = self.placement.kinds.get(kind_key)
        informer = self.placement.informers.get(kind_key)
        hub = informer.get(cache_key) if informer else None
        if info is None or hub is None:
            await self._delete_orphans(kind_key, cache_key)
            return
        hub.setdefault("kind", info.kind)
        hub.setdefault("apiVersion", info.api_version)
        children = self._children(kind_key, cache_key, hub["metadata"]["uid"])
        if hub["metadata"].get("deletionTimestamp"):
            await self._clean_up(key, info, hub, children)
            return
        placement = read_placement(hub)
        if (not placement and not children) or not syncable(hub, info.kind):
            return
        await self._ensure_finalizer(info, hub)
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
        if info.key in WORKLOADS:
            await self._fold(key, info, hub, children, placement, stale, waiting)
        failed = [loc for loc, ok in zip(sorted(shares), applied, strict=True) if not ok]
        if failed:
            # The others are done; these come back after the queue's backoff.
            raise ApiError.of(503, "ServiceUnavailable", f"applying to {', '.join(failed)} failed")

    async def _bounded(
        self, key: str, location: str, work: Coroutine[Any, Any, bool], busy: bool = True
    ) -> bool:
        """Run one child write, but wait for it only `patience` seconds: a slow location must
        not hold a worker, or every other object waits behind it. A write that takes longer
        goes on in the background (at most `per_location` at once per location) and the
        object is looked at again when it ends. Returns the write's result, or `busy` while it
        is still going (or another write of the same object there still is)."""
        if (key, location) in self._inflight:
            work.close()
            return busy
        lane = self._lanes.setdefault(location, asyncio.Semaphore(self.settings.per_location))

        async def laned() -> bool:
            async with lane:
                return await work

        slow = asyncio.Event()

        def finished(_: asyncio.Task[bool]) -> None:
            self._inflight.pop((key, location), None)
            if slow.is_set():
                self.queue.add(key)

        task = asyncio.create_task(laned(), name=f"{key} in {location}")
        self._inflight[(key, location)] = task
        task.add_done_callback(finished)
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
        for location in self.locations.cache.values():
            name = location["metadata"]["name"]
            conditions = (location.get("status") or {}).get("conditions") or []
            ready = next((c for c in conditions if c["type"] == "Ready"), None)
            if ready is None or ready["status"] != "True" or name not in self.children:
                since = ready.get("lastTransitionTime", "?") if ready else "?"
                stale[name] = f"unreachable since {since}, showing its last known status"
        return stale

    async def _apply(
        self,
        key: str,
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
        desired = child_object(hub, info.api_version, info.kind, location, shares)
        digest = hashlib.sha256(msgspec.json.encode(desired, order="sorted")).hexdigest()
        current = watch.get(info.key, key.split("|", 1)[1])
        if current is not None:
            # As we last applied it and we would apply the same again; or a finished Job whose
            # share cannot change in place (its work there is done, and stays on record as it
            # is; a running one is made anew). The hub's generation may still have moved (a
            # Deployment's does on annotation changes, such as a new placement): the child
            # reflects it all the same.
            unchanged = self._written.get((key, location)) == (digest, _version(current))
            immutable = not unchanged and _immutable_change(info.kind, current, desired)
            if immutable and not _finished(current):
                return await self._replace(key, info, hub, location)
            if unchanged or immutable:
                self.applied[(key, location)] = (
                    int(meta.get("generation", 0)),
                    int(current["metadata"].get("generation", 0)),
                )
                return True
        try:
            await self._ensure_namespace(watch, meta["namespace"])
            applied = await watch.kube.apply(
                info.path(meta["namespace"], meta["name"]), desired, MANAGER
            )
        except ApiError as err:
            if err.code == 404:
                watch.namespaces.discard(meta["namespace"])  # deleted behind our back
            log.warning("%s: applying to %s failed: %s", key, location, err)
            return False
        self._written[(key, location)] = (digest, _version(applied))
        self.applied[(key, location)] = (
            int(meta.get("generation", 0)),
            int(applied.get("metadata", {}).get("generation", 0)),
        )
        return True

    async def _ensure_namespace(self, watch: ChildWatch, namespace: str) -> None:
        """Make the child's namespace if it is missing, labelled with the hub namespace's uid
        so that it goes when that does; one that was there before is left as it is."""
        if namespace in watch.namespaces:
            return
        hub = self.placement.namespaces.peek(namespace)
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

    async def _replace(self, key: str, info: Kind, hub: Obj, location: str) -> bool:
        """Delete a child that cannot take its new spec in place; its deletion's watch event
        brings the object back here, and the child is made anew."""
        if not await self._delete_child(key, info, hub, location):
            return False
        await events.record(
            self.hub,
            hub,
            "Normal",
            "Replaced",
            f"replaced the {info.kind} in {location}: its new share cannot be set in place "
            "(completions are immutable); its pods there start again",
            MANAGER,
        )
        return True

    async def _delete_child(self, key: str, info: Kind, hub: Obj, location: str) -> bool:
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
        self.applied.pop((key, location), None)
        self._written.pop((key, location), None)
        log.info("%s: removed from %s", key, location)
        return True

    async def _fold(
        self,
        key: str,
        info: Kind,
        hub: Obj,
        children: dict[str, Obj],
        placement: dict[str, int | None],
        stale: dict[str, str],
        waiting: tuple[str, ...],
    ) -> None:
        seen: dict[str, Obj | None] = {loc: children.get(loc) for loc in placement}
        seen.update(children)
        applied = {loc: value for (k, loc), value in self.applied.items() if k == key}
        status = fold(
            hub,
            info.kind,
            seen,
            placement,
            {loc: msg for loc, msg in stale.items() if loc in seen},
            applied,
            _now(),
        )
        await self._show_move(hub, status, waiting)
        if not _differs(hub.get("status") or {}, status):
            return
        meta = hub["metadata"]
        path = info.path(meta["namespace"], meta["name"], "status")
        await self.hub.apply(path, status_body(hub, info.kind, status), MANAGER)

    async def _show_move(self, hub: Obj, status: dict[str, Any], waiting: tuple[str, ...]) -> None:
        """A handover in progress shows as Synced=False/Moving with what it waits for, and as
        Events when it starts and ends (derived from the hub's status: a restart loses none)."""
        before: dict[str, Any] = next(
            (c for c in (hub.get("status") or {}).get("conditions", []) if c["type"] == SYNCED),
            {},
        )
        was_moving = before.get("reason") == "Moving"
        if waiting:
            for condition in status.get("conditions", []):
                if condition["type"] == SYNCED:
                    condition.update(
                        status="False", reason="Moving", message="moving: " + "; ".join(waiting)
                    )
                    if not was_moving:
                        condition["lastTransitionTime"] = _now()
            if not was_moving:
                await events.record(
                    self.hub, hub, "Normal", "Moving", "moving: " + "; ".join(waiting), MANAGER
                )
        elif was_moving:
            await events.record(
                self.hub,
                hub,
                "Normal",
                "Moved",
                "handover done: " + _placement_text(read_placement(hub)),
                MANAGER,
            )

    async def _ensure_finalizer(self, info: Kind, hub: Obj) -> None:
        finalizers = list(hub["metadata"].get("finalizers") or [])
        if CLEANUP in finalizers:
            return
        await self._set_finalizers(info, hub, [*finalizers, CLEANUP])

    async def _set_finalizers(self, info: Kind, hub: Obj, finalizers: list[str]) -> None:
        meta = hub["metadata"]
        patch = {"metadata": {"finalizers": finalizers, "resourceVersion": meta["resourceVersion"]}}
        await self.hub.merge_patch(info.path(meta["namespace"], meta["name"]), patch)

    async def _clean_up(self, key: str, info: Kind, hub: Obj, children: dict[str, Obj]) -> None:
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
        await self._set_finalizers(info, hub, [f for f in finalizers if f != CLEANUP])

    async def _remove_namespace(self, name: str) -> None:
        """A namespace we made in children goes once the hub has no namespace of that name
        (everything in it has gone first: the hub waits for our finalizers). One the hub has
        again, under a new uid, stays and is used."""
        await self.placement.namespaces.synced.wait()
        if self.placement.namespaces.peek(name) is not None:
            return
        stale = self._stale()
        failed = []
        for location, watch in list(self.children.items()):
            made = watch.made.peek(name)
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

    async def _delete_orphans(self, kind_key: str, cache_key: str) -> None:
        """Children whose hub object is gone (deleted while we were not looking)."""
        namespace, name = cache_key.split("/", 1)
        failed = []
        for location, watch in list(self.children.items()):
            child = watch.peek(kind_key, cache_key)
            info = self.placement.kinds.get(kind_key)
            if child is None or info is None:
                continue
            try:
                await watch.kube.delete(info.path(namespace, name))
                log.info("%s|%s: orphan removed from %s", kind_key, cache_key, location)
            except ApiError as err:
                if err.code != 404:
                    log.warning("%s|%s: orphan in %s: %s", kind_key, cache_key, location, err)
                    failed.append(location)
        if failed:  # tried again after the queue's backoff: an orphan must not stay
            raise ApiError.of(
                503, "ServiceUnavailable", f"orphan {cache_key} is still in {', '.join(failed)}"
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
