"""One cache of the hub, shared by every loop and view (client-go's SharedInformerFactory).

One informer per hub resource: every kind of `kinds.PLACED`, the kind of every established
namespaced CRD (its objects are placed when they carry a strategy), Namespaces, Locations,
PlacementPolicies, Overrides and ClusterOverrides (filed by what they target, `overrides_of`)
and CRDs. Objects are handed out as cached and are read-only; whoever must
change one copies it. Loops subscribe to changes; nobody reaches into another loop for hub objects.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Iterator

from aiohttp import web

from apiserver import metrics
from apiserver.contract import MANAGED_BY, SLICE_MANAGER
from apiserver.kinds import CUSTOMRESOURCEDEFINITION, PLACED, Key, Kind, of_crd
from apiserver.kube.client import Kube
from apiserver.kube.informer import Informer
from apiserver.models import location as model
from apiserver.models import override
from apiserver.models.child_inputs import ChildInputs
from apiserver.models.override_index import Index, Source
from apiserver.objects import Obj, ReadOnly
from apiserver.placement import policy

log = logging.getLogger(__name__)

CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
SLICES = "/apis/discovery.k8s.io/v1/endpointslices"

# (kind key, event, object, the object before): a change to any placed kind.
ObjectHandler = Callable[[str, str, Obj, Obj | None], Awaitable[None]]


class _Probe:
    """One ask of the hub's current resourceVersion, shared by the reads it can serve."""

    def __init__(self) -> None:
        self.sent: float | None = None
        self.task: asyncio.Task[int] | None = None

    def sent_after(self, when: float) -> bool:
        return self.sent is None or self.sent >= when


class HubCache:
    def __init__(self, hub: Kube) -> None:
        self.hub = hub
        self.kinds: dict[str, Kind] = dict(PLACED)
        self.objects: dict[str, Informer] = {
            key: self._informer(key, kind) for key, kind in self.kinds.items()
        }
        self.namespaces = Informer(hub, "/api/v1/namespaces")
        self.locations = Informer(hub, model.PATH)
        self.policies = Informer(hub, policy.PATH)
        self._policies_read: dict[str, tuple[str, policy.Policy]] = {}  # name -> (version, read)
        # Per-location overrides said once for many objects, read as they change.
        self.override_index = Index()
        self.overrides = Informer(hub, override.PATH, self._on_override)
        self.cluster_overrides = Informer(hub, override.CLUSTER_PATH, self._on_override)
        # The CRDs' informer is the placed kind's: one watch serves both.
        self.crds = self.objects[CUSTOMRESOURCEDEFINITION.key]
        self.crds.subscribe(self._on_crd)
        # The hub EndpointSlices we write (the children's endpoints, mirrored): the endpoints
        # loop keeps them, the exports loop reads them.
        self.slices = Informer(
            hub, SLICES, params={"labelSelector": f"{MANAGED_BY}={SLICE_MANAGER}"}
        )
        self._handlers: list[ObjectHandler] = []
        # collection path -> (when asked, the hub's answer): one probe serves every read that
        # arrived before it was sent.
        self._probes: dict[str, _Probe] = {}
        self._custom: dict[str, asyncio.Task[None]] = {}  # informers of CRD kinds

    def _informer(self, key: str, kind: Kind) -> Informer:
        async def changed(event: str, obj: Obj, old: Obj | None) -> None:
            for handler in self._handlers:
                try:
                    await handler(key, event, obj, old)
                except Exception:  # one loop's failure must not keep the change from the others
                    name = (obj.get("metadata") or {}).get("name")
                    log.exception("%s: %s failed on %s %s", key, handler, event, name)

        return Informer(self.hub, kind.collection, changed)

    def subscribe(self, handler: ObjectHandler) -> None:
        """`handler` hears of every change to every object of every placed kind, CRDs' too."""
        self._handlers.append(handler)

    # -- reading ---------------------------------------------------------------------------

    def get(self, key: Key) -> Obj | None:
        informer = self.objects.get(key.kind)
        return informer.cache.get(key.cache_key) if informer else None

    def list_keys(self, kind: str | None = None, namespace: str | None = None) -> Iterator[Key]:
        """Every cached object's key, of one kind or all, in one namespace or all."""
        for kind_key in [kind] if kind is not None else list(self.objects):
            informer = self.objects.get(kind_key)
            for cache_key in list(informer.cache if informer else ()):
                ns, _, name = cache_key.rpartition("/")  # no namespace: cluster-scoped
                if namespace is None or ns == namespace:
                    yield Key(kind_key, ns, name)

    def listed(self, kind: str) -> bool:
        """Whether the cache holds every object of the kind (its informer has listed)."""
        informer = self.objects.get(kind)
        return informer is not None and informer.synced.is_set()

    def items(self, kind: str) -> list[Obj]:
        informer = self.objects.get(kind)
        return informer.items() if informer else []

    def namespace(self, name: str) -> Obj:
        """The hub Namespace, or a bare one while it is not cached."""
        return self.namespaces.cache.get(name) or {"metadata": {"name": name}}

    def policies_for(self, namespace: str) -> list[policy.Policy]:
        """The PlacementPolicies that select a namespace, by name (each read once per
        version); for "" (a cluster-scoped object), those that select every namespace."""
        read = []
        for raw in self.policies.items():
            meta = raw["metadata"]
            version = str(meta.get("resourceVersion", ""))
            known = self._policies_read.get(meta["name"])
            if known is None or known[0] != version:
                known = self._policies_read[meta["name"]] = (version, policy.read_policy(raw))
            read.append(known[1])
        if not namespace:
            return policy.applying_everywhere(read)
        labels = self.namespace(namespace)["metadata"].get("labels") or {}
        return policy.applying(read, labels)

    def overrides_of(self, kind: Kind, obj: ReadOnly) -> list[Source]:
        """The Overrides and ClusterOverrides that target a hub object, in the order they
        apply."""
        meta = obj.get("metadata") or {}
        namespace = str(meta.get("namespace") or "")
        return self.override_index.applying(
            (kind.group, kind.kind),
            namespace,
            meta["name"],
            meta.get("labels") or {},
            self.namespace_labels(namespace),
        )

    def child_inputs(self, kind: Kind, obj: ReadOnly) -> ChildInputs:
        """What the object's child in any location is made from besides the object, as the
        hub has it now (`models/child_inputs.py`): the sync loop, the views and the work feed
        all read it here."""
        namespace = (obj.get("metadata") or {}).get("namespace") or ""
        added = policy.constraints(self.policies_for(namespace)) if namespace else None
        return ChildInputs(self.location_labels, added, self.overrides_of(kind, obj))

    def location_labels(self, name: str) -> dict[str, str]:
        """A Location's labels ({} for one the hub does not have)."""
        location = self.locations.get(name) or {}
        labels: dict[str, str] = (location.get("metadata") or {}).get("labels") or {}
        return labels

    def pulled(self, name: str) -> bool:
        """Is the location a pull one (`spec.mode: Pull`): its agent writes its cluster, the
        hub side never does (docs/pull.md)."""
        location = self.locations.get(name) or {}
        return bool((location.get("spec") or {}).get("mode") == model.PULL)

    def override_targets(self, source: Source) -> Iterator[Key]:
        """The hub objects an override (as it is, or as it was) targets, as cached now."""
        wanted = source.kinds()
        for kind in list(self.kinds.values()):
            if (kind.group, kind.kind) not in wanted:
                continue
            for key in self.list_keys(kind.key, source.namespace or None):
                meta = (self.get(key) or {}).get("metadata") or {}
                labels = meta.get("labels") or {}
                ns_labels = self.namespace_labels(key.namespace)
                if source.targets(
                    (kind.group, kind.kind), key.namespace, key.name, labels, ns_labels
                ):
                    yield key

    def namespace_labels(self, namespace: str) -> dict[str, str]:
        if not namespace:
            return {}
        labels: dict[str, str] = self.namespace(namespace)["metadata"].get("labels") or {}
        return labels

    async def _on_override(self, event: str, obj: Obj, _: Obj | None) -> None:
        if event == "DELETED":
            self.override_index.drop(obj)
        else:
            self.override_index.put(obj)

    async def observe(self, kind: str, obj: Obj) -> None:
        """Our own write's answer, taken as if the watch brought it (see Informer.observe)."""
        informer = self.objects.get(kind)
        if informer is not None and obj.get("metadata"):
            await informer.observe(obj)

    async def fresh(self, kind: str, settle: float, timeout: float) -> bool:
        """Has the cache of `kind` caught up with the hub as it is now? kube-apiserver's
        consistent read from its watch cache: ask the hub its current resourceVersion (a list
        of one item), then wait for our watch to bring everything up to it (`Informer.caught_up`).
        False when it does not within `timeout`: the caller reads the hub instead."""
        informer = self.objects.get(kind)
        if informer is None or not informer.synced.is_set():
            return False
        version = await self._current(informer.path)
        return await informer.caught_up(version, settle, timeout)

    async def _current(self, path: str) -> int:
        """The hub's resourceVersion now: a probe sent after this call began (one in flight
        that was not sent yet is as good)."""
        arrived = time.monotonic()
        probe = self._probes.get(path)
        if probe is None or not probe.sent_after(arrived):
            probe = self._probes[path] = _Probe()
            probe.task = asyncio.create_task(self._probe(path, probe))
        assert probe.task is not None
        return await asyncio.shield(probe.task)

    async def _probe(self, path: str, probe: _Probe) -> int:
        probe.sent = time.monotonic()
        try:
            listing = await self.hub.get(path, limit="1")
            return int(listing["metadata"]["resourceVersion"])
        finally:
            if self._probes.get(path) is probe:
                del self._probes[path]

    def _informers(self) -> list[Informer]:
        """Every watch of the hub this cache keeps (imported kinds' too, once watched)."""
        return [
            *self.objects.values(),
            self.namespaces,
            self.locations,
            self.policies,
            self.overrides,
            self.cluster_overrides,
            self.slices,
        ]

    @property
    def synced(self) -> bool:
        return all(i.synced.is_set() for i in self._informers())

    async def wait_synced(self) -> None:
        for informer in self._informers():
            await informer.synced.wait()

    def count_objects(self) -> None:
        for key, informer in list(self.objects.items()):
            metrics.CACHE_OBJECTS.labels(key).set(len(informer.cache))
        metrics.CACHE_OBJECTS.labels("Namespace").set(len(self.namespaces.cache))
        metrics.CACHE_OBJECTS.labels("Location").set(len(self.locations.cache))

    # -- running ---------------------------------------------------------------------------

    async def run(self) -> None:
        tasks = [asyncio.create_task(i.run(), name=f"hub {i.path}") for i in self._informers()]
        try:
            await asyncio.gather(*tasks)
        finally:
            for task in [*tasks, *self._custom.values()]:
                task.cancel()

    async def _on_crd(self, event: str, crd: Obj, _: Obj | None) -> None:
        """Objects of a CRD's kind are placed when they carry a strategy: watch them."""
        kind = of_crd(crd)
        if kind is None:
            return
        established = any(
            c.get("type") == "Established" and c.get("status") == "True"
            for c in (crd.get("status") or {}).get("conditions") or []
        )
        if event == "DELETED" or not established:
            task = self._custom.pop(kind.key, None)
            if task:
                task.cancel()
            self.objects.pop(kind.key, None)
            self.kinds.pop(kind.key, None)
            return
        if self.kinds.get(kind.key) == kind:
            return
        old = self._custom.pop(kind.key, None)
        if old:
            old.cancel()
        self.kinds[kind.key] = kind
        self.objects[kind.key] = self._informer(kind.key, kind)
        self._custom[kind.key] = asyncio.create_task(
            self.objects[kind.key].run(), name=f"hub {kind.collection}"
        )


HUB_CACHE = web.AppKey("hub_cache", HubCache)
