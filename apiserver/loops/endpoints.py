"""The children's endpoints on the hub: every location's EndpointSlices of a Service we placed,
mirrored as hub EndpointSlices.

Each child's own EndpointSlice controller makes the slices of its copy of a Service, and copies
the Service's labels onto them, our origin label too: a watch per location on the slices that
carry it sees exactly those. For each (Service, location) the hub holds one slice per child
slice, named after it and the location, labelled `kubernetes.io/service-name`,
`endpointslice.kubernetes.io/managed-by: kmc.dev` and `multicluster.kubernetes.io/source-cluster`
(the Multi-Cluster Services API's label), with the child's addresses, ports, conditions and
zones — no node name or target, which name objects the hub does not have — and owned by the
hub Service, so the hub's garbage collector removes them with it.

A look at one (Service, location) writes only what differs: a change in one location rewrites
that location's slices, and an unchanged slice costs nothing. A location that stops answering
keeps its slices as they were until its grace period has passed, then with every endpoint not
ready; back, they are the child's again. A location or Service that goes takes its slices.
"""

from __future__ import annotations

import asyncio
import datetime
import functools
import logging
import time
from collections.abc import Callable
from typing import NamedTuple

from apiserver.contract import MANAGED_BY, ORIGIN, SERVICE_NAME, SLICE_MANAGER, condition
from apiserver.contract import SOURCE_CLUSTER as SOURCE
from apiserver.hubcache import HubCache
from apiserver.kinds import SERVICE, Key
from apiserver.kube.client import ApiError, Kube
from apiserver.kube.informer import Informer
from apiserver.leader import Leadership
from apiserver.objects import Obj
from apiserver.workqueue import WorkQueue

log = logging.getLogger(__name__)

SLICES = "/apis/discovery.k8s.io/v1/endpointslices"
OURS = SLICE_MANAGER
MANAGER = "kmc-endpoints"


class Slot(NamedTuple):
    """One Service's slices from one location."""

    namespace: str
    service: str
    location: str

    @property
    def lane(self) -> str:
        return self.namespace


class EndpointsLoop:
    def __init__(
        self,
        cache: HubCache,
        clients: Callable[[str], Kube | None],
        leadership: Leadership,
        grace: float = 60.0,
        workers: int = 8,
    ) -> None:
        self.cache = cache
        self.hub: Kube = cache.hub
        self.clients = clients
        self.leadership = leadership
        self.grace = grace
        self.workers = workers
        self.queue: WorkQueue[Slot] = WorkQueue("endpoints", lane=lambda s: s.lane)
        # location -> (its client, the watch of the child slices of Services we placed)
        self._watches: dict[str, tuple[Kube, Informer, asyncio.Task[None]]] = {}
        self.mine = cache.slices  # the hub's slices we wrote, in the shared cache
        self.mine.subscribe(self._on_mine)
        cache.locations.subscribe(self._on_location)
        cache.subscribe(self._on_hub_object)

    # -- what wakes it --------------------------------------------------------------------

    async def run(self) -> None:
        try:
            await self.cache.wait_synced()
            for location in self.cache.locations.items():
                await self._on_location("ADDED", location, None)
            await self.mine.synced.wait()
            for obj in self.mine.items():
                self._enqueue_slice(obj, (obj["metadata"].get("labels") or {}).get(SOURCE))
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
            for _, _, task in self._watches.values():
                task.cancel()

    def _enqueue_slice(self, obj: Obj, location: str | None) -> None:
        labels = obj["metadata"].get("labels") or {}
        service = labels.get(SERVICE_NAME)
        if service and location:
            self.queue.add(Slot(obj["metadata"]["namespace"], service, location))

    async def _on_mine(self, _: str, obj: Obj, __: Obj | None) -> None:
        """One of ours changed or went (by hand, too): look at its slot again."""
        self._enqueue_slice(obj, (obj["metadata"].get("labels") or {}).get(SOURCE))

    async def _on_hub_object(self, kind: str, event: str, obj: Obj, old: Obj | None) -> None:
        if kind != SERVICE.key:
            return
        meta = obj["metadata"]
        for location in set(self._watches) | set(self.cache.locations.cache):
            self.queue.add(Slot(meta["namespace"], meta["name"], location))

    async def _on_location(self, event: str, location: Obj, _: Obj | None) -> None:
        """Watch a location's slices once it has a client (anew with a new client); every slot
        of it is looked at again, now and when its grace period ends."""
        name = location["metadata"]["name"]
        watched = self._watches.get(name)
        kube = None if event == "DELETED" else self.clients(name)
        if watched is not None and (kube is None or watched[0] is not kube):
            watched[2].cancel()
            del self._watches[name]
            watched = None
        if kube is not None and watched is None:
            informer = Informer(
                kube,
                SLICES,
                functools.partial(self._on_child, name),
                {"labelSelector": ORIGIN},
                backoff_cap=5.0,
            )
            task = asyncio.create_task(informer.run(), name=f"endpointslices {name}")
            self._watches[name] = (kube, informer, task)
        for slot in self._slots_of(name):
            self.queue.add(slot)
            self.queue.add_after(slot, self.grace + 1.0)

    async def _on_child(self, location: str, _: str, obj: Obj, __: Obj | None) -> None:
        self._enqueue_slice(obj, location)

    def _slots_of(self, location: str) -> set[Slot]:
        slots = set()
        for obj in self.mine.items():
            labels = obj["metadata"].get("labels") or {}
            if labels.get(SOURCE) == location and labels.get(SERVICE_NAME):
                slots.add(Slot(obj["metadata"]["namespace"], labels[SERVICE_NAME], location))
        watched = self._watches.get(location)
        for obj in watched[1].items() if watched else ():
            service = (obj["metadata"].get("labels") or {}).get(SERVICE_NAME)
            if service:
                slots.add(Slot(obj["metadata"]["namespace"], service, location))
        return slots

    # -- one (Service, location) ----------------------------------------------------------

    async def reconcile(self, slot: Slot) -> None:
        await self.leadership.leading.wait()
        have = {
            obj["metadata"]["name"]: obj
            for obj in self.mine.items()
            if obj["metadata"]["namespace"] == slot.namespace
            and (obj["metadata"].get("labels") or {}).get(SERVICE_NAME) == slot.service
            and (obj["metadata"].get("labels") or {}).get(SOURCE) == slot.location
        }
        want = self._wanted(slot, have)
        if want is None:
            return  # the location's watch has not listed yet: nothing to say
        path = f"/apis/discovery.k8s.io/v1/namespaces/{slot.namespace}/endpointslices"
        for name, body in sorted(want.items()):
            current = have.get(name)
            if current is None or _content(current) != _content(body):
                await self.mine.observe(await self.hub.apply(f"{path}/{name}", body, MANAGER))
        for name in sorted(set(have) - set(want)):
            try:
                await self.hub.delete(f"{path}/{name}")
            except ApiError as err:
                if err.code != 404:
                    raise

    def _wanted(self, slot: Slot, have: dict[str, Obj]) -> dict[str, Obj] | None:
        """The hub slices the slot should hold: the child's, or the last ones not ready once
        the location has been unreachable for its grace period; None: not known yet."""
        service = self.cache.get(Key(SERVICE.key, slot.namespace, slot.service))
        location = self.cache.locations.get(slot.location)
        if service is None or location is None:
            return {}
        ready = condition(location, "Ready") or {}
        if ready.get("status") != "True":
            if _since(ready.get("lastTransitionTime")) + self.grace > time.time():
                return None  # within its grace: as it was
            return {name: _not_ready(obj) for name, obj in have.items()}
        watched = self._watches.get(slot.location)
        if watched is None or not watched[1].synced.is_set():
            return None
        uid = service["metadata"]["uid"]
        return {
            f"{child['metadata']['name']}-{slot.location}": _mirrored(child, service, slot)
            for child in watched[1].items()
            if child["metadata"]["namespace"] == slot.namespace
            and (child["metadata"].get("labels") or {}).get(SERVICE_NAME) == slot.service
            and (child["metadata"].get("labels") or {}).get(ORIGIN) == uid
        }


def _mirrored(child: Obj, service: Obj, slot: Slot) -> Obj:
    """A hub slice standing for one child slice."""
    endpoints = []
    for endpoint in child.get("endpoints") or []:
        kept = {k: v for k, v in endpoint.items() if k not in ("nodeName", "targetRef")}
        endpoints.append(kept)
    meta = service["metadata"]
    slice_: Obj = {
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": {
            "name": f"{child['metadata']['name']}-{slot.location}",
            "namespace": slot.namespace,
            "labels": {SERVICE_NAME: slot.service, MANAGED_BY: OURS, SOURCE: slot.location},
            "ownerReferences": [
                {
                    "apiVersion": "v1",
                    "kind": "Service",
                    "name": meta["name"],
                    "uid": meta["uid"],
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "addressType": child.get("addressType", "IPv4"),
        "endpoints": endpoints,
    }
    if child.get("ports") is not None:
        slice_["ports"] = child["ports"]
    return slice_


def _not_ready(obj: Obj) -> Obj:
    """The slice as we last wrote it, every endpoint not ready (its location is unreachable)."""
    endpoints = []
    for endpoint in obj.get("endpoints") or []:
        conditions = {**(endpoint.get("conditions") or {}), "ready": False, "serving": False}
        endpoints.append({**endpoint, "conditions": conditions})
    kept = {k: v for k, v in obj.items() if k in ("apiVersion", "kind", "addressType", "ports")}
    meta = {k: obj["metadata"][k] for k in ("name", "namespace", "labels", "ownerReferences")}
    return {**kept, "metadata": meta, "endpoints": endpoints}


def _content(obj: Obj) -> tuple[object, ...]:
    """What a hub slice says: a write that would not change it is not made."""
    meta = obj.get("metadata") or {}
    return (
        meta.get("labels"),
        [(o.get("uid"), o.get("controller")) for o in meta.get("ownerReferences") or []],
        obj.get("addressType"),
        obj.get("endpoints") or [],
        obj.get("ports") or [],
    )


def _since(timestamp: object) -> float:
    if not isinstance(timestamp, str) or not timestamp:
        return 0.0
    return datetime.datetime.fromisoformat(timestamp.replace("Z", "+00:00")).timestamp()
