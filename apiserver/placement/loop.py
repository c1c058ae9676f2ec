"""The placement loop: keep `kmc.dev/placement` on every hub object equal to what `decide` says.

It watches hub workloads, the objects their pod templates refer to, Namespaces (inherited
strategies, exclusion) and Locations, and re-decides a workload whenever any input changes:
its own spec or strategy, its namespace, or any Location. Decisions that depend on time
(a grace period running out, a cooldown ending) are looked at again when they are due.

Its only outputs are the placement annotation, the `kmc.dev/Placed` condition and Events.
A strategy that does not parse changes nothing: the previous placement stays, and the
condition and a Warning Event say what is wrong.
"""

from __future__ import annotations

import asyncio
import datetime
import functools
import json
import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from apiserver import hubwrites
from apiserver.hubcache import HubCache
from apiserver.kinds import DEPENDENCIES, NAMESPACE_FOLLOWERS, QUOTA, WORKLOADS, Key, Kind
from apiserver.kube import events
from apiserver.kube.client import Kube, Obj
from apiserver.leader import Leadership
from apiserver.locations.fleet import Fleet
from apiserver.locations.model import Location
from apiserver.locations.pending import Owner, Unschedulable
from apiserver.placement import engine
from apiserver.placement.dependencies import follow, pod_spec_of, references
from apiserver.placement.gates import GatesError, gated_message, placement_gates
from apiserver.placement.load import Load
from apiserver.placement.policy import denied
from apiserver.placement.quantity import parse_quantity
from apiserver.placement.schemas import SchemaCache
from apiserver.placement.strategy import Strategy, StrategyError, effective_strategy
from apiserver.workqueue import WorkQueue

log = logging.getLogger(__name__)

PLACEMENT = "kmc.dev/placement"
STRATEGY = "kmc.dev/strategy"
EXCLUDE = "kmc.dev/exclude"
PLACED = "kmc.dev/Placed"
# Kinds whose `status.conditions` is an atomic list: an apply replaces it whole. Whoever writes
# one of its conditions (us here, the sync loop's status fold) sends the others as read, with
# the resourceVersion they were read at, or it would drop them (and a Job's API refuses to
# lose Complete).
WHOLE_CONDITIONS = frozenset({"Job"})
CLEANUP = "kmc.dev/cleanup"  # the sync loop's finalizer: children are deleted first
COMPONENT = "kmc-placement"
NEVER_PLACED = frozenset({"kube-system", "kube-public", "kube-node-lease", "kmc-system"})
# Location status fields no placement decision reads.
LOCATION_NOISE = frozenset({"lastProbeTime", "objects", "observedGeneration"})
# Location status fields only capacity-weighed decisions read: they move whenever pods start.
LOCATION_ROOM = frozenset(
    {"capacity", "allocatable", "requested", "nodes", "readyNodes", "schedulableNodes"}
)
# A placement decided: (the object's key, the placement annotation it replaces, where), and
# None for where when its write to the hub failed after all.
Decided = Callable[[Key, str, dict[str, int | None] | None], None]


@dataclass(frozen=True)
class Settings:
    grace: float = 60.0
    cooldown: float = 60.0
    workers: int = 32  # mostly waiting on the hub: many more than the cores
    resync: float = 600.0  # safety net: every object is looked at again this often
    # How long a location found short of room keeps its lowered share before it is tried again.
    capacity_hold: float = 300.0


@dataclass(frozen=True)
class Explanation:
    """Why an object is placed where it is: see `PlacementLoop.explain`."""

    strategy: Strategy | None
    source: str  # "object", "namespace" or "default"
    verdicts: tuple[engine.Verdict, ...]
    error: str | None
    unknown: tuple[str, ...]  # locations the strategy names that do not exist


def read_placement(obj: Obj) -> dict[str, int | None]:
    text = (obj["metadata"].get("annotations") or {}).get(PLACEMENT)
    if not text:
        return {}
    try:
        value = json.loads(text)
    except json.JSONDecodeError:
        return {}
    if not isinstance(value, dict):
        return {}
    return {str(k): v if isinstance(v, int) else None for k, v in value.items()}


def placement_text(placement: dict[str, int | None]) -> str:
    return json.dumps(dict(sorted(placement.items())), separators=(",", ":"))


class PlacementLoop:
    def __init__(
        self,
        cache: HubCache,
        fleet: Fleet,
        settings: Settings = Settings(),
        pending: Callable[[str], Unschedulable | None] = lambda _: None,
        leadership: Leadership | None = None,
    ) -> None:
        self.hub: Kube = cache.hub
        self.cache = cache
        # A loop run alone (tests, benchmarks) always leads.
        self.leadership = leadership or Leadership.solo()
        self.leading = self.leadership.leading
        self.settings = settings
        self.pending = pending
        self.events = events.Recorder(cache.hub, COMPONENT)
        # workload key -> location -> (share it is held to, until when): found short of room.
        self._held: dict[Key, dict[str, tuple[int, float]]] = {}
        self._models: dict[str, tuple[str, Location]] = {}  # name -> (version, validated)
        # (location, apiVersion/kind) -> (Location version, schema, Candidate)
        self._candidates: dict[tuple[str, str], tuple[Any, Any, engine.Candidate]] = {}
        self._strategies: dict[tuple[str | None, str | None, str], tuple[Strategy, str]] = {}
        self.schemas = SchemaCache(fleet)
        # location -> group/version/Kind an API import found Incompatible there: not served.
        self.excluded: dict[str, frozenset[str]] = {}
        self.queue: WorkQueue[Key] = WorkQueue("placement", lane=lambda k: k.lane)
        # Told of every new placement before it is written to the hub (the sync loop acts on
        # it at once; the annotation stays the durable record).
        self.deciders: list[Decided] = []
        self._unwritten: set[Key] = set()  # whose last placement write failed
        self.users: dict[Key, set[Key]] = {}  # dependency -> workloads using it
        self._warned: dict[Key, str] = {}  # the last Warning message recorded for an object
        self._locations_seen: dict[str, Any] = {}  # name -> what decisions read of it
        self.uses: dict[Key, set[Key]] = {}  # workload -> dependencies it uses
        self.load = Load()  # replicas per location over every workload: ties go to the least
        # Objects whose last decision can change with room in a location: not placed (a
        # Single picks the roomiest), replicas stuck for want of room or not placed as asked
        # (a move held back for want of room: they wait for room rather than move to a
        # location just as full), or weighed by capacity. Kept as each is decided, so a
        # Location's room changing looks at these, not at every object.
        self._room_keys: set[Key] = set()
        cache.subscribe(self._on_object)
        cache.namespaces.subscribe(self._on_namespace)
        cache.locations.subscribe(self._on_location)
        cache.policies.subscribe(self._on_policy)

    # -- wiring -------------------------------------------------------------------------

    async def run(self) -> None:
        await self.cache.wait_synced()
        for kind in WORKLOADS:
            for key in self.cache.list_keys(kind):
                if (obj := self.cache.get(key)) is not None:
                    self.load.note(key, read_placement(obj))
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

    async def _on_object(self, kind: str, event: str, obj: Obj, old: Obj | None) -> None:
        if event == "MODIFIED" and old is not None and only_status_changed(obj, old):
            return  # our Placed condition, the sync loop's fold: nothing a decision reads
        key = Key.of(kind, obj)
        self.queue.add(key)
        if kind in WORKLOADS:
            for follower in NAMESPACE_FOLLOWERS:
                for dependent in self.cache.list_keys(follower, key.namespace):
                    self.queue.add(dependent)

    def exclude(self, excluded: dict[str, frozenset[str]], kinds: set[str]) -> None:
        """The API import's verdicts: kinds at Incompatible locations count as not served.
        A change re-decides every object of the imported kinds (`kinds`: hub kind keys)."""
        if excluded == self.excluded:
            return
        self.excluded = excluded
        self._enqueue_all([k for k in kinds if k in self.cache.kinds])

    def on_stuck(self, _location: str, owner: Owner) -> None:
        """A workload's count of unschedulable pods changed in a location: look again."""
        kind, namespace, name = owner
        if kind in WORKLOADS:
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
        kinds = [k for k in self.cache.kinds if k not in DEPENDENCIES]
        if before is None or seen is None or before[:2] != seen[:2]:
            self._enqueue_all(kinds)
            return
        changed = {
            field
            for field in set(before[2]) | set(seen[2])
            if before[2].get(field) != seen[2].get(field)
        }
        if not changed <= LOCATION_ROOM:
            self._enqueue_all(kinds)
            return
        for key in list(self._room_keys):
            self.queue.add_debounced(key, 1.0)

    async def _on_policy(self, _: str, __: Obj, ___: Obj | None) -> None:
        """A PlacementPolicy came, changed or went: what it allows may have changed anywhere
        (its namespace selector too). Policies change rarely; everything is looked at."""
        self._enqueue_all([k for k in self.cache.kinds if k not in DEPENDENCIES])

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

    # -- reconciling ----------------------------------------------------------------------

    async def reconcile(self, key: Key) -> None:
        await self.leading.wait()  # followers keep their caches, and act once they lead
        cached, info = self.cache.get(key), self.cache.kinds.get(key.kind)
        if cached is None or info is None:
            self._forget_uses(key)
            self.load.note(key, {})
            self._room_keys.discard(key)
            self._warned.pop(key, None)
            self._held.pop(key, None)
            self._unwritten.discard(key)
            self.queue.forget(key)
            return
        if cached["metadata"].get("deletionTimestamp"):
            return  # going: the sync loop deletes its children, nothing is placed any more
        obj = {"kind": info.kind, "apiVersion": info.api_version, **cached}  # cached: read-only
        annotations = obj["metadata"].get("annotations") or {}
        ns = self.cache.namespace(key.namespace)
        if (
            key.namespace in NEVER_PLACED
            or (ns["metadata"].get("labels") or {}).get(EXCLUDE) == "true"
        ):
            return
        if key.kind in DEPENDENCIES and STRATEGY not in annotations:
            await self._follow_users(info, key, obj)
            return
        if key.kind in NAMESPACE_FOLLOWERS:
            await self._follow_namespace(info, key, obj)
            return
        if (
            key.kind not in WORKLOADS
            and key.kind not in DEPENDENCIES
            and STRATEGY not in annotations
        ):
            return  # other kinds are placed only when asked to
        current = read_placement(obj)
        if not current:
            try:
                gates = placement_gates(annotations, f"{info.plural} {key.namespace}/{key.name}")
            except GatesError as err:
                await self._condition(
                    info, key, obj, "False", "InvalidPlacementGates", str(err), warn=True
                )
                return
            if gates:  # held before its first placement; removing the last gate re-queues it
                await self._condition(info, key, obj, "False", "Gated", gated_message(gates))
                return
        try:
            strategy, _ = self._strategy(info, obj, ns)
        except StrategyError as err:
            await self._condition(info, key, obj, "False", "InvalidStrategy", str(err), warn=True)
            return
        now = time.time()
        candidates = [await self._candidate(loc, obj) for loc in self.cache.locations.items()]
        held = {n: share for n, (share, until) in self._held.get(key, {}).items() if until > now}
        missing = self._missing(key, obj, candidates, now) if key.kind in WORKLOADS else {}
        # A held location already lost its stuck replicas; they linger until the child
        # scales down, and must not be taken away a second time.
        missing = {name: count for name, count in missing.items() if name not in held}
        decision = engine.decide(
            obj,
            strategy,
            candidates,
            current,
            now,
            engine.Settings(grace=self.settings.grace, cooldown=self.settings.cooldown),
            missing_capacity=missing,
            limits=held,
            denied=self._denied(key.namespace, candidates),
            load=self.load.besides(key) if key.kind in WORKLOADS else None,
        )
        if (
            missing
            or decision.unplaceable
            or not decision.placement
            or strategy.weights == "capacity"
        ):
            self._room_keys.add(key)  # room changing anywhere may change this: look again then
        else:
            self._room_keys.discard(key)
        if key.kind in WORKLOADS:
            self.load.note(key, decision.placement)
        self._hold(key, missing, current, decision.placement, now)
        if decision.unplaceable:
            condition = ("False", "Unplaceable", decision.unplaceable, True)
        else:
            condition = ("True", "Placed", _describe(decision.placement), False)
        if decision.placement != current:
            self._announce(obj, current, decision)
            write = self._write_placement(info, key, obj, decision.placement)
            if info.kind in WHOLE_CONDITIONS:
                # Its status write carries the resourceVersion it read: the placement's.
                updated = await write
                obj = {"kind": info.kind, "apiVersion": info.api_version, **updated}
                await self._condition(info, key, obj, *condition)
            else:
                await asyncio.gather(write, self._condition(info, key, obj, *condition))
        else:
            await self._condition(info, key, obj, *condition)
        if key.kind in WORKLOADS:
            self._track_uses(key, obj)
        self._look_again_when_due(key, candidates, current, now)

    def _strategy(self, info: Kind, obj: Obj, ns: Obj) -> tuple[Strategy, str]:
        """The strategy in force and its source; StrategyError when it does not parse. The
        same texts give the same Strategy object, parsed once: the engine remembers its
        verdicts per strategy object."""
        meta = obj["metadata"]
        texts = (
            (meta.get("annotations") or {}).get(STRATEGY),
            (ns["metadata"].get("annotations") or {}).get(STRATEGY),
            info.key,
        )
        known = self._strategies.get(texts)
        if known is None:
            where = f"{info.plural} {meta['namespace']}/{meta['name']}"
            known = effective_strategy(*texts, where)  # an error names the object: not kept
            if len(self._strategies) >= 4096:
                self._strategies.clear()
            self._strategies[texts] = known
        return known

    def strategy_of(self, kind: str, obj: Obj) -> tuple[Strategy | None, str, str | None]:
        """The strategy in force for a hub object, its source, and the error if it does not
        parse; cheap (no decision), for listings."""
        ns = self.cache.namespace(obj["metadata"]["namespace"])
        try:
            strategy, source = self._strategy(self.cache.kinds[kind], obj, ns)
        except StrategyError as err:
            return None, "", str(err)
        return strategy, source, None

    async def explain(self, kind: str, obj: Obj, annotation: str | None = None) -> Explanation:
        """What deciding would say of a hub object now, writing nothing: the effective
        strategy (with `annotation` in place of the object's own, when given), its source, and
        every location's verdict. A strategy that does not parse is in `error`."""
        info = self.cache.kinds[kind]
        obj = {"kind": info.kind, "apiVersion": info.api_version, **obj}
        if annotation is not None:
            meta = obj["metadata"] = dict(obj["metadata"])
            meta["annotations"] = {**(meta.get("annotations") or {}), STRATEGY: annotation}
        ns = self.cache.namespace(obj["metadata"]["namespace"])
        try:
            strategy, source = self._strategy(info, obj, ns)
        except StrategyError as err:
            return Explanation(None, "", (), str(err), ())
        candidates = [await self._candidate(loc, obj) for loc in self.cache.locations.items()]
        decision = engine.decide(
            obj,
            strategy,
            candidates,
            read_placement(obj),
            time.time(),
            engine.Settings(grace=self.settings.grace, cooldown=self.settings.cooldown),
            denied=self._denied(obj["metadata"]["namespace"], candidates),
        )
        weighted = strategy.weights if isinstance(strategy.weights, dict) else {}
        named = {*strategy.pin, *strategy.avoid, *weighted}
        unknown = tuple(sorted(named - {c.name for c in candidates}))
        return Explanation(strategy, source, decision.verdicts, None, unknown)

    def _denied(self, namespace: str, candidates: list[engine.Candidate]) -> dict[str, str]:
        """Locations the namespace's PlacementPolicies rule out, with `policy NAME`."""
        policies = self.cache.policies_for(namespace)
        return denied(policies, {c.name: c.labels for c in candidates}) if policies else {}

    def _model(self, raw: Obj) -> Location:
        """The Location as our model, validated once per resourceVersion (every decision
        reads every Location)."""
        meta = raw["metadata"]
        version = str(meta.get("resourceVersion", ""))
        known = self._models.get(meta["name"])
        if known is None or known[0] != version:
            known = self._models[meta["name"]] = (version, Location.model_validate(raw))
        return known[1]

    async def _candidate(self, raw: Obj, obj: Obj) -> engine.Candidate:
        location = self._model(raw)
        status = location.status
        ready = status.condition("Ready")
        schemas: dict[str, engine.FieldChecker] = {}
        api_key = f"{obj['apiVersion']}/{obj['kind']}"
        checker = None
        if ready and ready.status == "True" and status.kubernetes_version:
            checker = await self.schemas.checker(
                location.name, status.kubernetes_version, obj["apiVersion"], obj["kind"]
            )
            if checker is not None:
                schemas[api_key] = checker
        # The same Location version and schema give the same Candidate object: the engine
        # remembers its verdicts per candidate object.
        excluded = self.excluded.get(location.name, frozenset())
        version = (raw["metadata"].get("resourceVersion"), excluded)
        known = self._candidates.get((location.name, api_key))
        if known is not None and known[0] == version and known[1] is checker:
            return known[2]
        candidate = engine.Candidate(
            name=location.name,
            labels=location.labels,
            taints=tuple(engine.Taint(t.key, t.value, t.effect) for t in location.spec.taints),
            unschedulable=location.spec.unschedulable,
            ready=bool(ready and ready.status == "True"),
            ready_changed_at=_changed_at(ready.last_transition_time if ready else None),
            served=frozenset(status.resources) - excluded,
            schemas=schemas,
            free=_free(status.allocatable, status.requested),
        )
        self._candidates[(location.name, api_key)] = (version, checker, candidate)
        return candidate

    async def _follow_users(self, info: Kind, key: Key, obj: Obj) -> None:
        """A dependency goes exactly where the workloads that use it are."""
        placements = []
        for user in sorted(self.users.get(key, ())):
            workload = self.cache.get(user)
            if workload is not None:
                placements.append(read_placement(workload))
        placement: dict[str, int | None] = dict(follow(placements))
        current = read_placement(obj)
        has_annotation = PLACEMENT in (obj["metadata"].get("annotations") or {})
        if placement != current or (placement and not has_annotation):
            await self._write_placement(info, key, obj, placement)

    async def _follow_namespace(self, info: Kind, key: Key, obj: Obj) -> None:
        """Where the namespace's workloads run; a quota is weighted by their replicas there
        (1 for kinds without replicas), other kinds are copied whole."""
        weights: dict[str, int | None] = {}
        for kind in WORKLOADS:
            for workload_key in self.cache.list_keys(kind, key.namespace):
                workload = self.cache.get(workload_key)
                if workload is None:
                    continue
                for location, replicas in read_placement(workload).items():
                    weights[location] = (weights.get(location) or 0) + (
                        1 if replicas is None else replicas
                    )
        if info is not QUOTA:
            weights = dict.fromkeys(weights)
        if weights != read_placement(obj):
            await self._write_placement(info, key, obj, weights)

    def _missing(
        self, key: Key, obj: Obj, candidates: list[engine.Candidate], now: float
    ) -> dict[str, int]:
        """Replicas stuck unschedulable past the grace period, per location; a look is
        scheduled for when the next stuck pod's grace period ends."""
        meta = obj["metadata"]
        owner = (obj["kind"], meta["namespace"], meta["name"])
        missing: dict[str, int] = {}
        due = []
        for candidate in candidates:
            index = self.pending(candidate.name)
            if index is None:
                continue
            count = index.stuck(owner, now - self.settings.grace)
            if count:
                missing[candidate.name] = count
            earliest = index.earliest(owner)
            if earliest is not None and earliest + self.settings.grace > now:
                due.append(earliest + self.settings.grace)
        if due:
            self.queue.add_after(key, min(due) - now + 0.5)
        return missing

    def _hold(
        self,
        key: Key,
        missing: dict[str, int],
        current: dict[str, int | None],
        placement: dict[str, int | None],
        now: float,
    ) -> None:
        """A location that lost replicas for want of room keeps its lower share for a while:
        without this the share would move back as soon as the stuck pods are gone, and flap."""
        held = {
            name: (share, until)
            for name, (share, until) in self._held.get(key, {}).items()
            if until > now
        }
        for name in missing:
            share = placement.get(name) or 0
            if share < (current.get(name) or 0):
                held[name] = (share, now + self.settings.capacity_hold)
        if held:
            self._held[key] = held
            self.queue.add_after(key, min(until for _, until in held.values()) - now + 0.5)
        else:
            self._held.pop(key, None)

    def _track_uses(self, key: Key, obj: Obj) -> None:
        spec = pod_spec_of(obj)
        refs = {Key(kind, key.namespace, name) for kind, name in (references(spec) if spec else ())}
        for dep in self.uses.get(key, set()) | refs:
            if dep in refs:
                self.users.setdefault(dep, set()).add(key)
            else:
                self.users.get(dep, set()).discard(key)
            self.queue.add(dep)
        self.uses[key] = refs

    def _forget_uses(self, key: Key) -> None:
        for dep in self.uses.pop(key, set()):
            self.users.get(dep, set()).discard(key)
            self.queue.add(dep)

    def _look_again_when_due(
        self, key: Key, candidates: list[engine.Candidate], current: dict[str, Any], now: float
    ) -> None:
        """Grace periods and cooldowns end without any event: schedule a look for then."""
        due = []
        for c in candidates:
            if not c.ready and c.name in current:
                due.append(c.ready_changed_at + self.settings.grace)
            elif c.ready and c.name not in current:
                due.append(c.ready_changed_at + self.settings.cooldown)
        future = [d for d in due if d > now]
        if future:
            self.queue.add_after(key, min(future) - now + 0.5)

    # -- writing --------------------------------------------------------------------------

    async def _write_placement(
        self, info: Kind, key: Key, obj: Obj, placement: dict[str, int | None]
    ) -> Obj:
        """Hand the placement to whoever acts on it (the sync loop writes the children now),
        then record it on the hub, where it is the durable record; the hub's answer. If that
        write fails the hand-over is taken back (the children follow the hub's record again),
        and not made again until a write of this object succeeds: a write that keeps failing
        must not make children come and go. A write cancelled on its way (leadership ended)
        counts as failed."""
        meta = obj["metadata"]
        replaced = (meta.get("annotations") or {}).get(PLACEMENT) or ""
        handing = key not in self._unwritten
        for decided in self.deciders if handing else ():
            decided(key, replaced, placement)
        try:
            updated = await hubwrites.annotate(
                self.hub,
                info,
                obj,
                {PLACEMENT: placement_text(placement)},
                # The sync loop's finalizer, set in the same write as the first placement.
                CLEANUP if placement else "",
            )
        except BaseException:
            # Refused, unreachable, or cancelled mid-write (leadership ended): the hub may not
            # have it, so the hand-over must not outlive this attempt. A hand-over left behind
            # would steer the children forever, since the hub keeps the annotation it replaces.
            self._unwritten.add(key)
            for decided in self.deciders if handing else ():
                decided(key, replaced, None)
            raise
        self._unwritten.discard(key)
        await self.cache.observe(info.key, updated)
        log.info("%s placed: %s", key, _describe(placement))
        return updated

    def _announce(self, obj: Obj, current: dict[str, Any], decision: engine.Decision) -> None:
        if not current:
            message = f"placed on {_describe(decision.placement)}"
            self.events.post(obj, "Normal", "Placed", message)
            return
        for change in decision.changes:
            self.events.post(obj, "Normal", change.reason, change.message)

    async def _condition(
        self,
        info: Kind,
        key: Key,
        obj: Obj,
        status: str,
        reason: str,
        message: str,
        warn: bool = False,
    ) -> None:
        """Set `kmc.dev/Placed` (kinds with a status), with a Warning Event when it turns bad."""
        old = next(
            (c for c in (obj.get("status") or {}).get("conditions", []) if c["type"] == PLACED),
            None,
        )
        if old and (old["status"], old.get("reason"), old.get("message")) == (
            status,
            reason,
            message,
        ):
            return
        if warn and self._warned.get(key) != message:
            # Remembered too: a reconcile working from a cache that predates our condition
            # write must not warn twice.
            self._warned[key] = message
            self.events.post(obj, "Warning", reason, message)
        elif not warn:
            self._warned.pop(key, None)
        if info.key not in WORKLOADS:
            return
        since = old["lastTransitionTime"] if old and old["status"] == status else _now()
        condition = {
            "type": PLACED,
            "status": status,
            "reason": reason,
            "message": message,
            "lastTransitionTime": since,
        }
        meta = obj["metadata"]
        path = info.path(meta["namespace"], meta["name"], "status")
        body = status_body(obj, info.kind, {"conditions": [condition]})
        await self.hub.apply(path, body, manager=COMPONENT)


def only_status_changed(new: Obj, old: Obj) -> bool:
    """Is the status all that differs between two versions of an object (its version aside)?
    Status is what the loops themselves write; no decision reads it."""
    if new.keys() != old.keys():
        return False
    for field, value in new.items():
        if field == "metadata":
            skip = ("resourceVersion", "managedFields")
            if {k: v for k, v in value.items() if k not in skip} != {
                k: v for k, v in old[field].items() if k not in skip
            }:
                return False
        elif field != "status" and value != old[field]:
            return False
    return True


def status_body(obj: Obj, kind: str, status: dict[str, Any]) -> Obj:
    """The body that server-side applies `status` to a hub object. Where the conditions list
    is atomic (WHOLE_CONDITIONS) the conditions we do not write go back as read, in their
    places, under the resourceVersion they were read at."""
    meta = obj["metadata"]
    head = {"name": meta["name"], "namespace": meta["namespace"]}
    if kind in WHOLE_CONDITIONS and "conditions" in status:
        ours = {c["type"]: c for c in status["conditions"]}
        read = (obj.get("status") or {}).get("conditions") or []
        merged = [ours.pop(c["type"], c) for c in read] + list(ours.values())
        status = {**status, "conditions": merged}
        head["resourceVersion"] = meta["resourceVersion"]
    return {
        "apiVersion": obj["apiVersion"],
        "kind": obj["kind"],
        "metadata": head,
        "status": status,
    }


def _describe(placement: dict[str, int | None]) -> str:
    if not placement:
        return "nowhere"
    return ", ".join(k if v is None else f"{k}={v}" for k, v in sorted(placement.items()))


def _free(allocatable: dict[str, str], requested: dict[str, str]) -> engine.Resources | None:
    if not allocatable:
        return None

    def room(name: str, unit: Fraction) -> int:
        total = parse_quantity(allocatable.get(name, "0")) - parse_quantity(
            requested.get(name, "0")
        )
        return max(0, int(total / unit))

    return engine.Resources(
        cpu_milli=room("cpu", Fraction(1, 1000)),
        memory=room("memory", Fraction(1)),
        pods=room("pods", Fraction(1)),
    )


def _changed_at(timestamp: str | None) -> float:
    """When a condition last changed (epoch seconds). Condition times have whole seconds, so
    the change came at some moment within that second: we count from its end, and a grace
    period or a cooldown is never cut short by up to a second."""
    if not timestamp:
        return 0.0
    moment = datetime.datetime.fromisoformat(timestamp)
    return moment.timestamp() + (1.0 if moment.microsecond == 0 else 0.0)


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
