"""Exported Services across locations: the Multi-Cluster Services API's ServiceExport.

For each hub `ServiceExport` (multicluster.x-k8s.io/v1alpha1) whose Service exists, every
location the Service is placed in holds a `ServiceImport` of the same name and the other
locations' ready endpoints as EndpointSlices (`sync/clusterset.py` says what, from the hub's
mirrored slices that the endpoints loop keeps). What the export stops asking for — the export,
the Service, or a location's share gone — is removed. The export's `Valid` and `Ready`
conditions say what happened, and why not when the Service does not exist.

Level-based: one key per exported Service; a look compares what each location holds (one
watch per location on the objects we label as ours) with what it should, and writes only
what differs, so an unchanged look costs no write and a change in one location's endpoints
rewrites only the slices derived from it. The hub's slice changes come in bursts while pods
start: they are debounced (the first at once, the rest together per window).
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Callable
from typing import NamedTuple

from apiserver.contract import (
    MANAGED_BY,
    MCS_SERVICE_NAME,
    SERVICE_NAME,
    SLICE_MANAGER,
    Placement,
    now,
    only_status_changed,
    read_placement,
    status_body,
)
from apiserver.hubcache import HubCache
from apiserver.kinds import SERVICE, Key
from apiserver.kube.client import ApiError, Kube
from apiserver.kube.informer import Informer
from apiserver.leader import Leadership, NotLeading
from apiserver.objects import Obj
from apiserver.sync import clusterset
from apiserver.workqueue import WorkQueue

log = logging.getLogger(__name__)

EXPORT = "ServiceExport.multicluster.x-k8s.io"  # its key in the hub cache (a CRD's kind)
GROUP_PATH = "/apis/multicluster.x-k8s.io/v1alpha1"
SLICES = "/apis/discovery.k8s.io/v1/endpointslices"
MANAGER = "kmc-exports"
NOT_CONNECTED_RETRY = 5.0  # a location whose watches have not listed yet is looked at again


class Exported(NamedTuple):
    """One exported (or formerly exported) Service."""

    namespace: str
    name: str

    @property
    def lane(self) -> str:
        return self.namespace


class _Location(NamedTuple):
    kube: Kube
    imports: Informer
    slices: Informer
    tasks: tuple[asyncio.Task[None], ...]

    @property
    def synced(self) -> bool:
        return self.imports.synced.is_set() and self.slices.synced.is_set()


class _NotYet(ApiError):
    """A location we cannot look at yet (no client, or its watches have not listed)."""


class ExportsLoop:
    def __init__(
        self,
        cache: HubCache,
        clients: Callable[[str], Kube | None],
        leadership: Leadership,
        debounce: float = 1.0,
        workers: int = 4,
    ) -> None:
        self.cache = cache
        self.hub: Kube = cache.hub
        self.clients = clients
        self.leadership = leadership
        self.debounce = debounce
        self.workers = workers
        self.queue: WorkQueue[Exported] = WorkQueue("exports", lane=lambda e: e.lane)
        self._locations: dict[str, _Location] = {}
        cache.subscribe(self._on_hub_object)
        cache.slices.subscribe(self._on_mirror)
        cache.locations.subscribe(self._on_location)

    # -- what wakes it --------------------------------------------------------------------

    async def run(self) -> None:
        try:
            await self.cache.wait_synced()
            for location in self.cache.locations.items():
                await self._on_location("ADDED", location, None)
            for obj in self.cache.items(EXPORT):
                self.queue.add(Exported(obj["metadata"]["namespace"], obj["metadata"]["name"]))
            workers = [
                asyncio.create_task(
                    self.queue.work(
                        functools.partial(self.leadership.act, self.reconcile), __name__
                    )
                )
                for _ in range(self.workers)
            ]
            await asyncio.gather(*workers)
        finally:
            for watched in self._locations.values():
                for task in watched.tasks:
                    task.cancel()

    def _exported(self, namespace: str, name: str) -> bool:
        return self.cache.get(Key(EXPORT, namespace, name)) is not None

    async def _on_hub_object(self, kind: str, event: str, obj: Obj, old: Obj | None) -> None:
        if kind not in (EXPORT, SERVICE.key):
            return  # cluster-scoped kinds too come here: none of ours
        meta = obj["metadata"]
        key = Exported(meta["namespace"], meta["name"])
        if kind == EXPORT:
            if event == "MODIFIED" and old is not None and only_status_changed(obj, old):
                return  # our own conditions
            self.queue.add(key)
        elif kind == SERVICE.key and self._exported(*key):
            self.queue.add(key)

    async def _on_mirror(self, _: str, obj: Obj, __: Obj | None) -> None:
        """A location's endpoints changed on the hub: a burst while pods start, so together."""
        service = (obj["metadata"].get("labels") or {}).get(SERVICE_NAME)
        if service and self._exported(obj["metadata"]["namespace"], service):
            self.queue.add_debounced(Exported(obj["metadata"]["namespace"], service), self.debounce)

    async def _on_child(self, label: str | None, _: str, obj: Obj, __: Obj | None) -> None:
        """One of ours in a location changed or went (our write's echo, or a hand's)."""
        meta = obj["metadata"]
        name = (meta.get("labels") or {}).get(label) if label else meta["name"]
        if name:
            self.queue.add(Exported(meta["namespace"], name))

    async def _on_location(self, event: str, location: Obj, _: Obj | None) -> None:
        """Watch a location's imports and derived slices once it has a client (anew with a
        new client); every export is looked at again."""
        name = location["metadata"]["name"]
        watched = self._locations.get(name)
        kube = None if event == "DELETED" else self.clients(name)
        if watched is not None and (kube is None or watched.kube is not kube):
            for task in watched.tasks:
                task.cancel()
            del self._locations[name]
            watched = None
        if kube is None or watched is not None:
            return
        ours = f"{clusterset.IMPORT_MANAGED_BY}={SLICE_MANAGER}"
        imports = Informer(
            kube,
            f"{GROUP_PATH}/serviceimports",
            functools.partial(self._on_child, None),
            {"labelSelector": ours},
            backoff_cap=10.0,
        )
        slices = Informer(
            kube,
            SLICES,
            functools.partial(self._on_child, MCS_SERVICE_NAME),
            {"labelSelector": f"{MANAGED_BY}={SLICE_MANAGER},{MCS_SERVICE_NAME}"},
            backoff_cap=10.0,
        )
        tasks = (
            asyncio.create_task(imports.run(), name=f"serviceimports {name}"),
            asyncio.create_task(slices.run(), name=f"derived endpointslices {name}"),
        )
        self._locations[name] = _Location(kube, imports, slices, tasks)
        for obj in self.cache.items(EXPORT):
            self.queue.add(Exported(obj["metadata"]["namespace"], obj["metadata"]["name"]))

    # -- one exported Service --------------------------------------------------------------

    async def reconcile(self, key: Exported) -> None:
        await self.leadership.leading.wait()
        export = self.cache.get(Key(EXPORT, key.namespace, key.name))
        service = self.cache.get(Key(SERVICE.key, key.namespace, key.name))
        placement = read_placement(service) if service is not None else {}
        want = (
            clusterset.wanted(service, placement, self.cache.slices.items())
            if export is not None
            else {}
        )
        failed: dict[str, str] = {}
        first: ApiError | None = None
        for location in sorted(set(want) | set(self._locations)):
            try:
                await self._converge(location, key, want.get(location))
            except NotLeading:
                raise
            except ApiError as err:
                failed[location] = err.status.get("message") or str(err)
                first = first or err
        if export is not None:
            await self._report(export, service, placement, failed)
        if first is not None:
            if isinstance(first, _NotYet):
                self.queue.add_after(key, NOT_CONNECTED_RETRY)
            else:
                raise first  # retried with backoff

    async def _converge(self, location: str, key: Exported, want: clusterset.Want | None) -> None:
        """Make one location hold `want` of the Service (None: nothing of it)."""
        watched = self._locations.get(location)
        if watched is None or not watched.synced:
            if want is None:
                return  # nothing asked; what it holds is looked at once it is watched
            why = (
                f"no connection to {location} yet"
                if watched is None
                else f"ServiceImports and EndpointSlices of {location} not listed yet (are the"
                " multicluster.x-k8s.io CRDs installed there?)"
            )
            raise _NotYet.of(503, "ServiceUnavailable", why)
        ns_path = f"namespaces/{key.namespace}"
        imports = f"{GROUP_PATH}/{ns_path}/serviceimports"
        slices = f"/apis/discovery.k8s.io/v1/{ns_path}/endpointslices"
        have_slices = {
            obj["metadata"]["name"]: obj
            for obj in watched.slices.items()
            if obj["metadata"]["namespace"] == key.namespace
            and (obj["metadata"].get("labels") or {}).get(MCS_SERVICE_NAME) == key.name
        }
        have_import = watched.imports.get(f"{key.namespace}/{key.name}")
        if want is None:
            for name in sorted(have_slices):
                await _delete(watched.kube, f"{slices}/{name}")
            if have_import is not None:
                await _delete(watched.kube, f"{imports}/{key.name}")
            return
        if have_import is None or clusterset.import_content(
            have_import
        ) != clusterset.import_content(want.service_import):
            answer = await watched.kube.apply(f"{imports}/{key.name}", want.service_import, MANAGER)
            await watched.imports.observe(answer)
            have_import = answer
        for name, body in sorted(want.slices.items()):
            body = clusterset.owned(body, have_import)
            current = have_slices.get(name)
            if current is None or clusterset.slice_content(current) != clusterset.slice_content(
                body
            ):
                await watched.slices.observe(
                    await watched.kube.apply(f"{slices}/{name}", body, MANAGER)
                )
        for name in sorted(set(have_slices) - set(want.slices)):
            await _delete(watched.kube, f"{slices}/{name}")

    async def _report(
        self,
        export: Obj,
        service: Obj | None,
        placement: Placement,
        failed: dict[str, str],
    ) -> None:
        """The export's Valid and Ready conditions, written only when they change."""
        meta = export["metadata"]
        verdict = clusterset.verdict(meta["namespace"], meta["name"], service, placement, failed)
        current = (export.get("status") or {}).get("conditions") or []
        conditions = clusterset.conditions(verdict, current, now(), meta.get("generation"))
        if conditions is None:
            return
        path = f"{GROUP_PATH}/namespaces/{meta['namespace']}/serviceexports/{meta['name']}/status"
        answer = await self.hub.apply(
            path, status_body(export, {"conditions": conditions}), MANAGER
        )
        await self.cache.observe(EXPORT, answer)


async def _delete(kube: Kube, path: str) -> None:
    try:
        await kube.delete(path)
    except ApiError as err:
        if err.code != 404:
            raise
