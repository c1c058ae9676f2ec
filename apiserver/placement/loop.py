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
import json
import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from apiserver.kube import events
from apiserver.kube.client import Kube, Obj
from apiserver.kube.informer import Informer, key_of
from apiserver.locations.fleet import Fleet
from apiserver.locations.model import Location
from apiserver.locations.pending import Owner, Unschedulable
from apiserver.placement import engine
from apiserver.placement.dependencies import follow, pod_spec_of, references
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


@dataclass(frozen=True)
class Kind:
    """A namespaced kind the loop places; `key` is the Kind, or Kind.group for a CRD."""

    key: str
    kind: str
    api_version: str
    plural: str

    @property
    def collection(self) -> str:
        """The all-namespaces list path."""
        return f"{self._prefix}/{self.plural}"

    @property
    def _prefix(self) -> str:
        return "/api/v1" if self.api_version == "v1" else f"/apis/{self.api_version}"

    def path(self, namespace: str, name: str, subresource: str = "") -> str:
        path = f"{self._prefix}/namespaces/{namespace}/{self.plural}/{name}"
        return f"{path}/{subresource}" if subresource else path


def _builtin(kind: str, api_version: str, plural: str) -> Kind:
    return Kind(kind, kind, api_version, plural)


WORKLOADS = {
    k.key: k
    for k in (
        _builtin("Deployment", "apps/v1", "deployments"),
        _builtin("StatefulSet", "apps/v1", "statefulsets"),
        _builtin("ReplicaSet", "apps/v1", "replicasets"),
        _builtin("DaemonSet", "apps/v1", "daemonsets"),
        _builtin("Job", "batch/v1", "jobs"),
    )
}
DEPENDENCIES = {
    k.key: k
    for k in (
        _builtin("ConfigMap", "v1", "configmaps"),
        _builtin("Secret", "v1", "secrets"),
        _builtin("ServiceAccount", "v1", "serviceaccounts"),
    )
}
# A namespace's quota goes where its workloads are, weighted by the replicas there; the sync
# loop divides `spec.hard` by those weights (quota.divide_quota).
QUOTA = _builtin("ResourceQuota", "v1", "resourcequotas")
# Roles and RoleBindings go, whole, wherever the namespace's workloads run: punch-through reads
# impersonate the caller in the children, and must be allowed there as they are on the hub.
RBAC = "rbac.authorization.k8s.io/v1"
NAMESPACE_FOLLOWERS = {
    k.key: k
    for k in (QUOTA, _builtin("Role", RBAC, "roles"), _builtin("RoleBinding", RBAC, "rolebindings"))
}
CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
# Location status fields no placement decision reads.
LOCATION_NOISE = frozenset({"lastProbeTime", "objects", "observedGeneration"})


@dataclass(frozen=True)
class Settings:
    grace: float = 60.0
    cooldown: float = 60.0
    workers: int = 4  # mostly waiting on the hub: more than the cores
    resync: float = 60.0  # safety net: every object is looked at again this often
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


def _always() -> asyncio.Event:
    """Leadership for a loop run alone (tests, benchmarks): always leading."""
    event = asyncio.Event()
    event.set()
    return event


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
        hub: Kube,
        fleet: Fleet,
        locations: Informer,
        settings: Settings = Settings(),
        pending: Callable[[str], Unschedulable | None] = lambda _: None,
        leading: asyncio.Event | None = None,
    ) -> None:
        self.hub = hub
        self.leading = leading or _always()
        self.settings = settings
        self.locations = locations
        self.pending = pending
        # workload key -> location -> (share it is held to, until when): found short of room.
        self._held: dict[str, dict[str, tuple[int, float]]] = {}
        self._models: dict[str, tuple[str, Location]] = {}  # name -> (version, validated)
        self.schemas = SchemaCache(fleet)
        self.queue = WorkQueue()
        self.kinds = {**WORKLOADS, **DEPENDENCIES, **NAMESPACE_FOLLOWERS}
        self.informers = {
            key: Informer(hub, kind.collection, self._on_object(key))
            for key, kind in self.kinds.items()
        }
        self.namespaces = Informer(hub, "/api/v1/namespaces", self._on_namespace)
        self.crds = Informer(hub, CRDS, self._on_crd)
        self._custom: dict[str, asyncio.Task[None]] = {}  # informers of CRD kinds
        # Others working from the same hub objects (the sync loop) hear of every change by key.
        self.listeners: list[Callable[[str], None]] = []
        self.users: dict[str, set[str]] = {}  # dependency key -> workload keys using it
        self._warned: dict[str, str] = {}  # key -> the last Warning message recorded for it
        self._locations_seen: dict[str, Any] = {}  # name -> what decisions read of it
        self.uses: dict[str, set[str]] = {}  # workload key -> dependency keys it uses
        locations.subscribe(self._on_location)

    # -- wiring -------------------------------------------------------------------------

    async def run(self) -> None:
        tasks = [
            asyncio.create_task(i.run())
            for i in (*self.informers.values(), self.namespaces, self.crds)
        ]
        await asyncio.gather(*(i.synced.wait() for i in self.informers.values()))
        await self.namespaces.synced.wait()
        await self.crds.synced.wait()
        await self.locations.synced.wait()
        self._enqueue_all()
        tasks += [
            asyncio.create_task(self.queue.work(self.reconcile, __name__))
            for _ in range(self.settings.workers)
        ]
        tasks.append(asyncio.create_task(self._resync()))
        try:
            await asyncio.gather(*tasks)
        finally:
            for task in [*tasks, *self._custom.values()]:
                task.cancel()

    @property
    def synced(self) -> bool:
        return all(i.synced.is_set() for i in (*self.informers.values(), self.namespaces))

    def _on_object(self, kind: str) -> Any:
        async def handler(_: str, obj: Obj) -> None:
            self.queue.add(f"{kind}|{key_of(obj)}")
            for listener in self.listeners:
                listener(f"{kind}|{key_of(obj)}")
            if kind in WORKLOADS:
                for follower in NAMESPACE_FOLLOWERS:
                    self._enqueue_namespace(follower, obj["metadata"]["namespace"])

        return handler

    def _enqueue_namespace(self, kind: str, namespace: str) -> None:
        informer = self.informers.get(kind)
        for key in list(informer.cache if informer else ()):
            if key.split("/", 1)[0] == namespace:
                self.queue.add(f"{kind}|{key}")

    async def _on_crd(self, event: str, crd: Obj) -> None:
        """Objects of a namespaced CRD are placed when they carry a strategy: watch them."""
        spec = crd.get("spec", {})
        version = next((v["name"] for v in spec.get("versions", []) if v.get("storage")), None)
        if spec.get("scope") != "Namespaced" or version is None:
            return
        group, names = spec["group"], spec["names"]
        kind = Kind(
            f"{names['kind']}.{group}", names["kind"], f"{group}/{version}", names["plural"]
        )
        established = any(
            c.get("type") == "Established" and c.get("status") == "True"
            for c in (crd.get("status") or {}).get("conditions") or []
        )
        if event == "DELETED" or not established:
            task = self._custom.pop(kind.key, None)
            if task:
                task.cancel()
            self.informers.pop(kind.key, None)
            self.kinds.pop(kind.key, None)
            return
        if self.kinds.get(kind.key) == kind:
            return
        old = self._custom.pop(kind.key, None)
        if old:
            old.cancel()
        self.kinds[kind.key] = kind
        self.informers[kind.key] = Informer(self.hub, kind.collection, self._on_object(kind.key))
        self._custom[kind.key] = asyncio.create_task(self.informers[kind.key].run())

    def on_stuck(self, _location: str, owner: Owner) -> None:
        """A workload's count of unschedulable pods changed in a location: look again."""
        kind, namespace, name = owner
        if kind in WORKLOADS:
            self.queue.add(f"{kind}|{namespace}/{name}")

    async def _on_namespace(self, _: str, ns: Obj) -> None:
        for kind in list(self.informers):
            self._enqueue_namespace(kind, ns["metadata"]["name"])

    async def _on_location(self, event: str, location: Obj) -> None:
        """Re-decide everything when a Location changes in a way a decision can see; its probe
        time and the sync loop's object count are not such a change."""
        name = location["metadata"]["name"]
        status = {
            k: v for k, v in (location.get("status") or {}).items() if k not in LOCATION_NOISE
        }
        seen = (
            None
            if event == "DELETED"
            else (location["metadata"].get("labels"), location.get("spec"), status)
        )
        if self._locations_seen.get(name) == seen:
            return
        self._locations_seen[name] = seen
        self._enqueue_all([k for k in self.kinds if k not in DEPENDENCIES])

    def _enqueue_all(self, kinds: Iterable[str] | None = None) -> None:
        for kind in list(kinds if kinds is not None else self.informers):
            informer = self.informers.get(kind)
            for key in list(informer.cache if informer else ()):
                self.queue.add(f"{kind}|{key}")

    async def _resync(self) -> None:
        while True:
            await asyncio.sleep(self.settings.resync)
            self._enqueue_all()

    # -- reconciling ----------------------------------------------------------------------

    async def reconcile(self, key: str) -> None:
        await self.leading.wait()  # followers keep their caches, and act once they lead
        kind, cache_key = key.split("|", 1)
        informer, info = self.informers.get(kind), self.kinds.get(kind)
        obj = informer.get(cache_key) if informer else None
        if obj is None or info is None:
            self._forget_uses(key)
            self._warned.pop(key, None)
            self._held.pop(key, None)
            return
        obj.setdefault("kind", info.kind)
        obj.setdefault("apiVersion", info.api_version)
        annotations = obj["metadata"].get("annotations") or {}
        namespace = obj["metadata"]["namespace"]
        ns = self.namespaces.get(namespace) or {"metadata": {"name": namespace}}
        if namespace in NEVER_PLACED or (ns["metadata"].get("labels") or {}).get(EXCLUDE) == "true":
            return
        if kind in DEPENDENCIES and STRATEGY not in annotations:
            await self._follow_users(info, key, obj)
            return
        if kind in NAMESPACE_FOLLOWERS:
            await self._follow_namespace(info, obj)
            return
        if kind not in WORKLOADS and kind not in DEPENDENCIES and STRATEGY not in annotations:
            return  # other kinds are placed only when asked to
        try:
            strategy, _ = self._strategy(info, obj, ns)
        except StrategyError as err:
            await self._condition(info, obj, "False", "InvalidStrategy", str(err), warn=True)
            return
        now = time.time()
        candidates = [
            await self._candidate(loc, obj) for loc in list(self.locations.cache.values())
        ]
        current = read_placement(obj)
        held = {n: share for n, (share, until) in self._held.get(key, {}).items() if until > now}
        missing = self._missing(obj, candidates, now) if kind in WORKLOADS else {}
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
        )
        self._hold(key, missing, current, decision.placement, now)
        if decision.placement != current:
            await self._write_placement(info, obj, decision.placement)
            await self._announce(obj, current, decision)
        if decision.unplaceable:
            await self._condition(
                info, obj, "False", "Unplaceable", decision.unplaceable, warn=True
            )
        else:
            await self._condition(info, obj, "True", "Placed", _describe(decision.placement))
        if kind in WORKLOADS:
            self._track_uses(key, obj)
        self._look_again_when_due(key, candidates, current, now)

    def _strategy(self, info: Kind, obj: Obj, ns: Obj) -> tuple[Strategy, str]:
        """The strategy in force and its source; StrategyError when it does not parse."""
        meta = obj["metadata"]
        return effective_strategy(
            (meta.get("annotations") or {}).get(STRATEGY),
            (ns["metadata"].get("annotations") or {}).get(STRATEGY),
            info.key,
            f"{info.plural} {meta['namespace']}/{meta['name']}",
        )

    def strategy_of(self, kind: str, obj: Obj) -> tuple[Strategy | None, str, str | None]:
        """The strategy in force for a hub object, its source, and the error if it does not
        parse; cheap (no decision), for listings."""
        namespace = obj["metadata"]["namespace"]
        ns = self.namespaces.get(namespace) or {"metadata": {"name": namespace}}
        try:
            strategy, source = self._strategy(self.kinds[kind], obj, ns)
        except StrategyError as err:
            return None, "", str(err)
        return strategy, source, None

    async def explain(self, kind: str, obj: Obj, annotation: str | None = None) -> Explanation:
        """What deciding would say of a hub object now, writing nothing: the effective
        strategy (with `annotation` in place of the object's own, when given), its source, and
        every location's verdict. A strategy that does not parse is in `error`."""
        info = self.kinds[kind]
        obj = {"kind": info.kind, "apiVersion": info.api_version, **obj}
        if annotation is not None:
            meta = obj["metadata"] = dict(obj["metadata"])
            meta["annotations"] = {**(meta.get("annotations") or {}), STRATEGY: annotation}
        namespace = obj["metadata"]["namespace"]
        ns = self.namespaces.get(namespace) or {"metadata": {"name": namespace}}
        try:
            strategy, source = self._strategy(info, obj, ns)
        except StrategyError as err:
            return Explanation(None, "", (), str(err), ())
        candidates = [
            await self._candidate(loc, obj) for loc in list(self.locations.cache.values())
        ]
        decision = engine.decide(
            obj,
            strategy,
            candidates,
            read_placement(obj),
            time.time(),
            engine.Settings(grace=self.settings.grace, cooldown=self.settings.cooldown),
        )
        weighted = strategy.weights if isinstance(strategy.weights, dict) else {}
        named = {*strategy.pin, *strategy.avoid, *weighted}
        unknown = tuple(sorted(named - {c.name for c in candidates}))
        return Explanation(strategy, source, decision.verdicts, None, unknown)

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
        if ready and ready.status == "True" and status.kubernetes_version:
            checker = await self.schemas.checker(
                location.name, status.kubernetes_version, obj["apiVersion"], obj["kind"]
            )
            if checker is not None:
                schemas[api_key] = checker
        return engine.Candidate(
            name=location.name,
            labels=location.labels,
            taints=tuple(engine.Taint(t.key, t.value, t.effect) for t in location.spec.taints),
            unschedulable=location.spec.unschedulable,
            ready=bool(ready and ready.status == "True"),
            ready_changed_at=_changed_at(ready.last_transition_time if ready else None),
            served=frozenset(status.resources),
            schemas=schemas,
            free=_free(status.allocatable, status.requested),
        )

    async def _follow_users(self, info: Kind, key: str, obj: Obj) -> None:
        """A dependency goes exactly where the workloads that use it are."""
        placements = []
        for user in sorted(self.users.get(key, ())):
            kind, cache_key = user.split("|", 1)
            workload = self.informers[kind].get(cache_key)
            if workload is not None:
                placements.append(read_placement(workload))
        placement: dict[str, int | None] = dict(follow(placements))
        current = read_placement(obj)
        has_annotation = PLACEMENT in (obj["metadata"].get("annotations") or {})
        if placement != current or (placement and not has_annotation):
            await self._write_placement(info, obj, placement)

    async def _follow_namespace(self, info: Kind, obj: Obj) -> None:
        """Where the namespace's workloads run; a quota is weighted by their replicas there
        (1 for kinds without replicas), other kinds are copied whole."""
        namespace = obj["metadata"]["namespace"]
        weights: dict[str, int | None] = {}
        for kind in WORKLOADS:
            for key, workload in list(self.informers[kind].cache.items()):
                if key.split("/", 1)[0] != namespace:
                    continue
                for location, replicas in read_placement(workload).items():
                    weights[location] = (weights.get(location) or 0) + (
                        1 if replicas is None else replicas
                    )
        if info is not QUOTA:
            weights = dict.fromkeys(weights)
        if weights != read_placement(obj):
            await self._write_placement(info, obj, weights)

    def _missing(self, obj: Obj, candidates: list[engine.Candidate], now: float) -> dict[str, int]:
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
            self.queue.add_after(f"{obj['kind']}|{key_of(obj)}", min(due) - now + 0.5)
        return missing

    def _hold(
        self,
        key: str,
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

    def _track_uses(self, key: str, obj: Obj) -> None:
        namespace = obj["metadata"]["namespace"]
        spec = pod_spec_of(obj)
        refs = {f"{kind}|{namespace}/{name}" for kind, name in (references(spec) if spec else ())}
        for dep in self.uses.get(key, set()) | refs:
            if dep in refs:
                self.users.setdefault(dep, set()).add(key)
            else:
                self.users.get(dep, set()).discard(key)
            self.queue.add(dep)
        self.uses[key] = refs

    def _forget_uses(self, key: str) -> None:
        for dep in self.uses.pop(key, set()):
            self.users.get(dep, set()).discard(key)
            self.queue.add(dep)

    def _look_again_when_due(
        self, key: str, candidates: list[engine.Candidate], current: dict[str, Any], now: float
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
        self, info: Kind, obj: Obj, placement: dict[str, int | None]
    ) -> None:
        meta = obj["metadata"]
        patch: dict[str, Any] = {
            "metadata": {
                "resourceVersion": meta["resourceVersion"],  # a stale view fails, and retries
                "annotations": {PLACEMENT: placement_text(placement)},
            }
        }
        finalizers = list(meta.get("finalizers") or [])
        if placement and CLEANUP not in finalizers:
            # The sync loop's finalizer, set in the same write: children never exist before it,
            # and the sync loop needs no extra round trip to the hub first.
            patch["metadata"]["finalizers"] = [*finalizers, CLEANUP]
        updated = await self.hub.merge_patch(info.path(meta["namespace"], meta["name"]), patch)
        informer = self.informers.get(info.key)
        if informer is not None and updated.get("metadata"):
            await informer.observe(updated)  # the sync loop starts at once
        log.info(
            "%s %s/%s placed: %s",
            obj["kind"],
            meta["namespace"],
            meta["name"],
            _describe(placement),
        )

    async def _announce(self, obj: Obj, current: dict[str, Any], decision: engine.Decision) -> None:
        if not current:
            message = f"placed on {_describe(decision.placement)}"
            await events.record(self.hub, obj, "Normal", "Placed", message, COMPONENT)
            return
        for change in decision.changes:
            await events.record(self.hub, obj, "Normal", _reason(change), change, COMPONENT)

    async def _condition(
        self, info: Kind, obj: Obj, status: str, reason: str, message: str, warn: bool = False
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
        key = f"{info.key}|{key_of(obj)}"
        if warn and self._warned.get(key) != message:
            # Remembered too: a reconcile working from a cache that predates our condition
            # write must not warn twice.
            self._warned[key] = message
            await events.record(self.hub, obj, "Warning", reason, message, COMPONENT)
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


def _reason(change: str) -> str:
    for prefix, reason in (
        ("spilled", "SpilledOver"),
        ("evacuated", "Evacuated"),
        ("scaled", "Rebalanced"),
    ):
        if change.startswith(prefix):
            return reason
    return "Placed"


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
