"""The sync loop: make every child match `kmc.dev/placement`, and the hub's status match the
children.

Level-based: a look at one hub object reads the object, its placement (handed over by the
placement loop, or the hub's record), and what each child holds (`children.py`), and then
does whatever is still missing — apply a child, scale one down as the handover allows,
delete one whose handover is done (`apply.py`), fold the children's status up (`fold.py`).
Garbage is `cleanup.py`'s. It keeps no memory that a restart could lose: a half-done move
continues from what the children say.

One slow or dead location never holds up the others: its child is left as it is, its last
known status counts and is marked stale, and its client retries with backoff.

It runs for whatever locations its `clients` give clients for: every Location of the fleet
in kmc-apiserver, or one location alone; the hand-off is optional.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from aiohttp import web

from apiserver.contract import (
    CLEANUP,
    HUB_GENERATION,
    SYNC_MANAGER,
    Placement,
    only_status_changed,
    read_placement,
)
from apiserver.hubcache import HubCache
from apiserver.kinds import NAMESPACE, Key, Kind, Role
from apiserver.kube import events
from apiserver.kube.client import ApiError, Kube
from apiserver.leader import Leadership
from apiserver.locations.reports import SILENT_AFTER, Reports
from apiserver.loops import hubwrites
from apiserver.loops.handoff import Handoff
from apiserver.loops.sync.apply import Applier
from apiserver.loops.sync.bounded import Bounded
from apiserver.loops.sync.children import STAY_WITH_WORKLOADS, Children
from apiserver.loops.sync.cleanup import Cleaner
from apiserver.loops.sync.fold import Folder, Hold
from apiserver.loops.sync.overridestatus import Tally, Writer
from apiserver.loops.sync.records import Records
from apiserver.loops.sync.steps import Step, Steps, kept_where
from apiserver.models.location import PULL
from apiserver.models.override_index import read as read_override
from apiserver.objects import Obj, ReadOnly
from apiserver.placement.engine import Verdict
from apiserver.sync.handover import Child, plan
from apiserver.sync.report import WAITING, LocationState, location_states
from apiserver.workqueue import WorkQueue

# Stable wording (no age in it): a step's `kept` reason is made from it.
SILENT = f"its agent has not reported for over {SILENT_AFTER:.0f} s, showing its last known status"


@dataclass(frozen=True)
class Settings:
    workers: int = 32  # mostly waiting on the hub and the children
    cleanup_retry: float = 5.0  # a child we could not delete yet is tried again this often
    count_interval: float = 2.0  # how often each Location's `status.objects` is brought up to date
    # A count that only moved (objects coming and going) is written at most this often; a
    # new Location generation (a cordon), a count of 0, or any count of a cordoned location
    # (a drain shows its progress) at once.
    count_quiet: float = 30.0
    patience: float = 2.0  # longest a worker waits for one child write
    per_location: int = 8  # child writes at once in one location, at most
    # A fold that only moves counters partway (pods starting, one child ahead of another) is
    # written at most this often per object, or 20 times as long as our status writes take
    # lately, up to `fold_hold_most`; a changed condition, a new observedGeneration or
    # counters that reached spec.replicas are written at once.
    fold_hold: float = 1.0
    fold_hold_most: float = 10.0
    # A new object's first status waits for its children to settle, about as long as new
    # objects have lately taken, at most this long (`fold.Hold.first`).
    fold_first_most: float = 240.0


class SyncLoop:
    def __init__(
        self,
        cache: HubCache,
        clients: Callable[[str], Kube | None],
        leadership: Leadership,
        handoff: Handoff | None = None,
        settings: Settings = Settings(),
        reports: Reports | None = None,
    ) -> None:
        self.hub: Kube = cache.hub
        self.cache = cache
        self.leadership = leadership
        self.handoff = handoff
        self.settings = settings
        self.queue: WorkQueue[Key] = WorkQueue("sync", lane=lambda k: k.lane)
        self.records = Records()
        watched = [k for k in cache.kinds.values() if k.role in (Role.WORKLOAD, Role.DEPENDENCY)]
        self.children = Children(clients, watched, self.queue.add, reports)
        # A pull location's first report (or its last, forgotten): every row placed there
        # stops (or starts) waiting for its agent.
        self.children.reports.subscribe(self._on_report)
        recorder = events.Recorder(cache.hub, SYNC_MANAGER)
        self.bounded = Bounded(leadership, self.queue.add, settings.patience, settings.per_location)
        self.tally = Tally()
        self.applier = Applier(cache, self.children, self.records, recorder, self.tally)
        self.override_status = Writer(cache, self.tally, leadership, settings.count_interval)
        self.folder = Folder(
            self.hub,
            self.records,
            recorder,
            self.queue.add_after,
            Hold(settings.fold_hold, settings.fold_hold_most, first_most=settings.fold_first_most),
            handoff,
            cache.observe,
        )
        self.cleaner = Cleaner(
            cache,
            self.children,
            self.applier,
            self.bounded,
            self.queue.add_after,
            settings.cleanup_retry,
        )
        self.progress = Progress(cache, self.children, self.records)
        # Each object's handover step, for the work feed to serve pull locations.
        self.steps = Steps()
        self._unprimed: set[Key] | None = None  # decided not yet since the start
        self._silent: frozenset[str] = frozenset()  # pull locations whose reports are old
        self._ready_seen: dict[str, Any] = {}  # location -> its Ready condition as last seen
        cache.subscribe(self._on_hub_object)
        cache.namespaces.subscribe(self._on_hub_namespace)
        cache.locations.subscribe(self._on_location)
        cache.policies.subscribe(self._on_policy)
        cache.overrides.subscribe(self._on_override)
        cache.cluster_overrides.subscribe(self._on_override)

    # -- what wakes it --------------------------------------------------------------------

    async def run(self) -> None:
        await self.cache.wait_synced()
        for location in self.cache.locations.items():
            await self._on_location("ADDED", location, None)
        self._unprimed = set(self.cache.list_keys())
        self._primed_if_done()
        self._enqueue_all()
        workers = [
            asyncio.create_task(
                self.queue.work(functools.partial(self.leadership.act, self._look), __name__)
            )
            for _ in range(self.settings.workers)
        ]
        workers.append(asyncio.create_task(self._report_counts()))
        workers.append(asyncio.create_task(self._watch_silence()))
        workers.append(asyncio.create_task(self.override_status.run()))
        try:
            await asyncio.gather(*workers)
        finally:
            for worker in workers:
                worker.cancel()
            self.children.stop()
            self.bounded.cancel()

    async def _on_hub_object(self, kind: str, event: str, obj: Obj, old: Obj | None) -> None:
        if event == "MODIFIED" and old is not None and only_status_changed(obj, old):
            return  # our own fold, the placement loop's condition: nothing to do
        key = Key.of(kind, obj)
        self.queue.add(key)
        info = self.cache.kinds.get(kind)
        if info is not None and info.role is Role.SCALER:
            # Whether its workload's children's size is ours to send may have changed.
            for version in (obj, old):
                target = info.target(version) if version is not None else None
                scaled = target.key(self.cache.kinds.values(), key.namespace) if target else None
                if scaled is not None:
                    self.queue.add(scaled)
        if info is not None and info.allows is not None:
            # What a move of the pods it selects may take down at once may have changed.
            for workload_key in self._selected(info, key.namespace, obj, old):
                self.queue.add(workload_key)

    async def _on_policy(self, _: str, __: Obj, ___: Obj | None) -> None:
        """A PlacementPolicy's constraints on child objects may have changed: apply again
        (an unchanged child is skipped)."""
        self._enqueue_all()

    async def _on_override(self, event: str, obj: Obj, old: Obj | None) -> None:
        """An Override or ClusterOverride changed: look again at the objects it targets, as
        it is and as it was (one it no longer targets goes back to the plain object), and
        at no other."""
        if event == "MODIFIED" and old is not None and only_status_changed(obj, old):
            return
        if event != "DELETED":
            meta = obj["metadata"]
            self.tally.changed((str(meta.get("namespace") or ""), meta["name"]))
        for version in (obj, old):
            source = read_override(version) if version is not None else None
            if source is not None:
                for key in self.cache.override_targets(source):
                    self.queue.add(key)

    async def _on_location(self, event: str, location: Obj, _: Obj | None) -> None:
        """Start or stop a location's watches; re-look at everything only when what a
        reconcile reads of the location changed: its watches, whether it is Ready, or its
        labels (overrides select locations by them and read them into values)."""
        name = location["metadata"]["name"]
        if event == "DELETED" or (location.get("spec") or {}).get("mode") != PULL:
            self.children.reports.drop(name)  # only a pull location's agent reports
        if event == "DELETED":
            changed = self.children.drop(name)
            ready = None
        else:
            changed = self.children.connect(name)
            conditions = (location.get("status") or {}).get("conditions") or []
            ready = next(
                (
                    (c["status"], c.get("lastTransitionTime"))
                    for c in conditions
                    if c["type"] == "Ready"
                ),
                None,
            )
            ready = (ready, tuple(sorted((location["metadata"].get("labels") or {}).items())))
        if changed or self._ready_seen.get(name) != ready:
            self._ready_seen[name] = ready
            self._enqueue_all()

    async def _on_hub_namespace(self, event: str, ns: Obj, old: Obj | None) -> None:
        meta = ns["metadata"]
        if event == "DELETED" or (
            old is not None
            and (meta.get("labels"), meta.get("annotations"))
            != (old["metadata"].get("labels"), old["metadata"].get("annotations"))
        ):
            # Gone: its copies in the children go; relabelled: they follow.
            self.queue.add(Key(NAMESPACE, "", meta["name"]))
        if event == "DELETED":
            return
        if (
            (self.cache.policies.cache or self.cache.cluster_overrides.cache)
            and old is not None
            and ns["metadata"].get("labels") != old["metadata"].get("labels")
        ):
            # Which PlacementPolicies and ClusterOverrides select it, and so what its
            # children carry, may change.
            for key in self.cache.list_keys(namespace=ns["metadata"]["name"]):
                self.queue.add(key)

    def _on_report(self, _: str, __: set[Key], first_or_last: bool) -> None:
        if first_or_last:
            self._enqueue_all()

    async def _watch_silence(self) -> None:
        """A pull location whose agent stops reporting (its lease still renewed) turns stale
        by the clock alone, with no event: look at everything again when one does, so the
        handovers stop counting its last reported numbers (`Progress.stale`)."""
        while True:
            await asyncio.sleep(self.settings.count_interval)
            silent = frozenset(name for name, why in self.progress.stale().items() if why == SILENT)
            if silent != self._silent:
                self._silent = silent
                self._enqueue_all()

    def _enqueue_all(self) -> None:
        for key in self.cache.list_keys():
            self.queue.add(key)
        for watch in list(self.children.watches.values()):
            for name in list(watch.made.cache):
                if self.cache.namespaces.get(name) is None:
                    self.queue.add(Key(NAMESPACE, "", name))

    async def _report_counts(self) -> None:
        """Keep each Location's `status.objects` true, so `kubectl mc unjoin` knows when a
        drained location holds nothing of ours any more. Every write is a hub write: a count
        that merely moved waits `count_quiet`; what a drain waits for goes at once."""
        written: dict[str, float] = {}  # location -> when we last wrote its count
        while True:
            await asyncio.sleep(self.settings.count_interval)
            await self.leadership.leading.wait()
            for name, watch in list(self.children.views().items()):
                count = watch.count()
                location = self.cache.locations.get(name)
                if count is None or location is None:
                    continue
                # The generation says "counted after this spec": a drain waits for a count
                # taken after its cordon, never one from before.
                fresh = {"objects": count, "observedGeneration": location["metadata"]["generation"]}
                now = time.monotonic()
                if not count_due(
                    location, fresh, written.get(name), now, self.settings.count_quiet
                ):
                    continue
                with contextlib.suppress(ApiError):
                    answer = await self.hub.merge_patch(
                        f"/apis/kmc.dev/v1alpha1/locations/{name}/status", {"status": fresh}
                    )
                    written[name] = now
                    await self.cache.locations.observe(answer)

    # -- looking at one object ----------------------------------------------------------

    async def _look(self, key: Key) -> None:
        """`reconcile`, counting towards `steps.primed` (its step is recorded before any
        write, so one that fails counts too)."""
        try:
            await self.reconcile(key)
        finally:
            if self._unprimed:
                self._unprimed.discard(key)
                self._primed_if_done()

    def _primed_if_done(self) -> None:
        if self._unprimed is not None and not self._unprimed:
            self.steps.primed.set()

    async def reconcile(self, key: Key) -> None:
        await self.leadership.leading.wait()
        if key.kind == NAMESPACE:
            await self.cache.namespaces.synced.wait()
            hub_namespace = self.cache.namespaces.get(key.name)
            if hub_namespace is None:
                await self.cleaner.namespace(key.name, self.progress.stale())
            else:
                await self.applier.copy_namespace(hub_namespace, self.progress.stale())
            return
        kind, cached = self.cache.kinds.get(key.kind), self.cache.get(key)
        if kind is None or cached is None:
            self._forget(key)
            await self.cleaner.orphans(key)
            return
        hub = kind.typed(cached)  # cached: read-only
        if CLEANUP in (hub["metadata"].get("finalizers") or []):
            self.children.watch_kind(kind)  # placed once: its children are ours to find
        children = self.children.of(key, hub["metadata"]["uid"])
        self._note_reported(key, children)
        if hub["metadata"].get("deletionTimestamp"):
            self.steps.forget(key)  # the feed leaves it out: its agent removes it
            if self.handoff is not None:
                self.handoff.forget(key)
            await self.cleaner.hub_object_going(key, kind, hub, children)
            return
        placement, handed = self._placement(key, hub)
        if not kind.syncable(hub):
            return
        if not placement and not children:
            self.steps.forget(key)
            if kind.folds:
                await self.folder.placed_alone(key, kind, hub)
            return
        stale = self.progress.stale()
        held = held_by_scalers(self.cache, key, kind, placement)
        # Decided (and recorded for the pull locations' feeds) before any write.
        shares, deletable, waiting = self._decide(key, kind, hub, placement, children, stale, held)
        if not handed:
            # A handed-over placement's own write brings the finalizer.
            added = await hubwrites.add_finalizer(self.hub, kind, hub, CLEANUP)
            if added is not None:
                await self.cache.observe(kind.key, added)
        # Written here: the push locations (a pull location's agent applies what its feed
        # serves; a bounded write per pull location per look would only cost a task).
        pushed = [loc for loc in sorted(shares) if self.children.get(loc) is not None]
        applied = await asyncio.gather(
            *(
                self.bounded.run(
                    key,
                    loc,
                    self.applier.apply(key, kind, hub, loc, shares, stale, loc in held),
                )
                for loc in pushed
            )
        )
        for location in sorted(deletable):
            if self.children.get(location) is None:
                continue  # a pull location: its feed leaves the child out, its agent deletes it
            await self.bounded.run(key, location, self.applier.delete(key, kind, hub, location))
        if kind.folds and handed:
            # Folded when the hub has the placement, a moment later; the move shows now.
            self.folder.show_move(key, hub, None, waiting)
        elif kind.folds:
            # What the applies above made is in the watches already (their answers are taken
            # at once): the fold says so, rather than a child "not created yet".
            children = self.children.of(key, hub["metadata"]["uid"])
            await self.folder.fold(key, kind, hub, children, placement, stale, waiting)
        failed = [loc for loc, ok in zip(pushed, applied, strict=True) if not ok]
        if failed:
            # The others are done; these come back after the queue's backoff.
            raise ApiError.of(503, "ServiceUnavailable", f"applying to {', '.join(failed)} failed")

    def _note_reported(self, key: Key, children: dict[str, Obj]) -> None:
        """What a pull location's child reflects, as the push loop records what it applied:
        the hub generation it was made from (the feed's `HUB_GENERATION`) and the child
        generation that produced, so the fold's observedGeneration and the rows read both
        modes the same way."""
        for location, child in children.items():
            if location in self.children.watches:
                continue
            applied = reported_applied(child)
            if applied is not None:
                self.records.of(key).applied_in(location, *applied)

    def _forget(self, key: Key) -> None:
        """The hub object is gone: whatever we remember of it goes too."""
        self.steps.forget(key)
        if self.handoff is not None:
            self.handoff.forget(key)
        self.records.forget(key)
        self.tally.drop(key)
        self.children.forget(key)
        self.queue.forget(key)

    def _placement(self, key: Key, hub: Obj) -> tuple[Placement, bool]:
        """Where the object goes, and whether that was handed over (not on the hub yet)."""
        if self.handoff is not None:
            return self.handoff.placement_of(key, hub)
        return read_placement(hub), False

    def _selected(self, kind: Kind, namespace: str, *versions: Obj | None) -> set[Key]:
        """The workloads of `namespace` whose pods any of the `versions` of a selector
        follower selects."""
        tests = [t for v in versions if v is not None and (t := kind.selector(v)) is not None]
        found = set()
        for workloads in list(self.cache.kinds.values()):
            if workloads.role is not Role.WORKLOAD or not tests:
                continue
            for workload_key in self.cache.list_keys(workloads.key, namespace):
                workload = self.cache.get(workload_key)
                labels = workloads.pod_labels(workload) if workload is not None else {}
                if workload is not None and any(test(labels) for test in tests):
                    found.add(workload_key)
        return found

    def _disruptions(self, kind: Kind, hub: Obj, total: int, allowed: int) -> int:
        """How many of the workload's `total` replicas a move may take down at once: its own
        rollout's `allowed`, or less where a disruption budget of its namespace (a PDB, not
        being deleted) selects its pods."""
        labels = kind.pod_labels(hub)
        namespace = hub["metadata"]["namespace"]
        for budgets in list(self.cache.kinds.values()):
            if budgets.allows is None:
                continue
            for budget_key in self.cache.list_keys(budgets.key, namespace):
                budget = self.cache.get(budget_key)
                if budget is None or budget["metadata"].get("deletionTimestamp"):
                    continue
                selects = budgets.selector(budget)
                if selects is not None and selects(labels):
                    allowed = min(allowed, budgets.allows(budget, total))
        return allowed

    def _decide(
        self,
        key: Key,
        kind: Kind,
        hub: Obj,
        placement: Placement,
        children: dict[str, Obj],
        stale: dict[str, str],
        held: frozenset[str] = frozenset(),
    ) -> tuple[Placement, set[str], tuple[str, ...]]:
        """The step for one object over all its locations, push and pull: what each
        location's child should hold now, which children may go, and what a move in progress
        waits for. Recorded for the work feed: this loop applies it to the push locations,
        the pull locations' feeds serve it (`steps.py`). Made once, here. A `held` child's
        size is its autoscaler's: the handover takes it as it is."""
        shares: Placement
        waiting: tuple[str, ...] = ()
        if kind.max_unavailable is None:
            shares = dict(placement)
            deletable = {loc for loc in children if loc not in placement and loc not in stale}
            namespace = hub["metadata"].get("namespace")
            if namespace and kind.role in STAY_WITH_WORKLOADS:
                deletable = self._without_workloads(deletable, namespace)
        else:
            observed = {
                loc: Child(
                    replicas=int(child.get("spec", {}).get("replicas", 0)),
                    available=int(child.get("status", {}).get("availableReplicas", 0) or 0),
                    reachable=loc not in stale,
                )
                for loc, child in children.items()
            }
            goal = {loc: value or 0 for loc, value in placement.items()}
            for loc in held & observed.keys():
                goal[loc] = observed[loc].replicas
            total = int(hub.get("spec", {}).get("replicas", 1))
            step = plan(
                goal,
                observed,
                total=total,
                max_unavailable=self._disruptions(kind, hub, total, kind.max_unavailable(hub)),
            )
            shares, deletable, waiting = dict(step.replicas), set(step.delete), step.waiting
        self.steps.record(key, Step(shares, kept_where(children, shares, deletable, stale)))
        return shares, deletable, waiting

    def _without_workloads(self, locations: set[str], namespace: str) -> set[str]:
        """Those of `locations` where nothing of `namespace` runs any more. A ConfigMap stays
        while anything of its namespace still runs there; a Service, or an Ingress, until the
        last pods it may route to have gone. (A PriorityClass, cluster-scoped, goes at once:
        pods that run keep their priority.)"""
        return {
            loc
            for loc in locations
            if (view := self.children.view(loc)) is None
            or not view.namespace_has_workloads(namespace)
        }


def held_by_scalers(cache: HubCache, key: Key, kind: Kind, placement: Placement) -> frozenset[str]:
    """Where a workload's children are sized by their own autoscalers: wherever it has
    replicas, while a hub scaler (an HPA, not being deleted) targets it. Its scalers go
    exactly there (`follow.py`)."""
    if kind.max_unavailable is None:
        return frozenset()
    for scalers in list(cache.kinds.values()):
        if scalers.role is not Role.SCALER:
            continue
        for scaler_key in cache.list_keys(scalers.key, key.namespace):
            scaler = cache.get(scaler_key)
            if scaler is None or scaler["metadata"].get("deletionTimestamp"):
                continue
            target = scalers.target(scaler)
            if target is not None and target.name == key.name and kind.named_by(target):
                return frozenset(loc for loc, n in placement.items() if n is None or n)
    return frozenset()


def reported_applied(child: Obj) -> tuple[int, int] | None:
    """(hub generation, child generation) of a reported child: which hub generation it was
    made from, by the annotation the work feed puts on it."""
    meta = child.get("metadata") or {}
    made_from = (meta.get("annotations") or {}).get(HUB_GENERATION)
    generation = meta.get("generation")
    if not isinstance(made_from, str) or not made_from.isdigit() or not isinstance(generation, int):
        return None
    return int(made_from), generation


def count_due(location: Obj, fresh: Obj, written: float | None, now: float, quiet: float) -> bool:
    """Is the Location's count (`fresh`: objects, observedGeneration) to be written now? Not
    when the hub has it; at once for what a drain waits for (a count after a new generation,
    a count of 0) and while it is cordoned (a drain shows its progress); otherwise at most
    once per `quiet` seconds since we last wrote it (`written`, None: not since we started)."""
    status = location.get("status") or {}
    if {k: status.get(k) for k in fresh} == fresh:
        return False
    return (
        written is None
        or now - written >= quiet
        or status.get("observedGeneration") != fresh["observedGeneration"]
        or fresh["objects"] == 0
        or bool((location.get("spec") or {}).get("unschedulable"))
    )


class Progress:
    """What the sync loop knows of where each object is, for the views: a row per location
    (`report.location_states`), and whether anything a row is built from changed."""

    def __init__(self, cache: HubCache, children: Children, records: Records) -> None:
        self.cache = cache
        self.children = children
        self.records = records

    def stale(self) -> dict[str, str]:
        """Locations whose numbers are last known ones: not Ready, or not connected yet; a
        Ready pull location whose agent has not reported since we started is waiting, and
        one whose agent's last report is older than `SILENT_AFTER` (it sends one at least
        every 30 s) is stale too: its children's numbers are not counted on."""
        stale = {}
        for location in self.cache.locations.items():
            name = location["metadata"]["name"]
            conditions = (location.get("status") or {}).get("conditions") or []
            ready = next((c for c in conditions if c["type"] == "Ready"), None)
            up = ready is not None and ready["status"] == "True"
            if up and name not in self.children.watches and self.cache.pulled(name):
                reported = self.children.reports.get(name)
                if reported is None:
                    stale[name] = WAITING
                elif self.children.reports.clock() - reported.received > SILENT_AFTER:
                    stale[name] = SILENT
            elif not up or name not in self.children.watches:
                since = ready.get("lastTransitionTime", "?") if ready else "?"
                stale[name] = f"unreachable since {since}, showing its last known status"
        return stale

    def rows(
        self,
        kind: Kind,
        hub: Obj,
        verdicts: tuple[Verdict, ...] = (),
        stale: dict[str, str] | None = None,
    ) -> list[LocationState]:
        """Where a hub object runs, a row per location (see `report.location_states`)."""
        key = Key.of(kind.key, hub)
        children = self.children.of(key, hub["metadata"]["uid"])
        placement = read_placement(hub)
        done = self.records.applied(key)
        applied = {loc: done[loc] for loc in set(placement) | set(children) if loc in done}
        stale = self.stale() if stale is None else stale
        held = held_by_scalers(self.cache, key, kind, placement)
        return location_states(
            hub, kind.counts, placement, children, applied, stale, verdicts, held
        )

    def held_in(self, kind: Kind, obj: ReadOnly) -> set[str]:
        """The locations whose child holds our copy of a hub object, as last watched."""
        meta = obj.get("metadata") or {}
        key = Key(kind.key, meta.get("namespace") or "", meta.get("name") or "")
        return set(self.children.of(key, meta.get("uid") or ""))

    def inputs(self, key: Key) -> tuple[tuple[int, int], dict[str, tuple[int, int]]]:
        """What `rows` reads of ours for one object besides the locations' state, in O(1):
        how often its children changed, and what was applied (a dict replaced on change)."""
        return self.children.changes(key), self.records.applied(key)


PROGRESS = web.AppKey("progress", Progress)
