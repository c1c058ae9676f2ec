"""The location loop: keep every Location's status true to its child cluster.

One prober task per Location, started and stopped as Locations come and go (an informer on
the hub). A prober connects through the fleet, probes, and writes status: `Ready` with a
reason that says what to do when it is False. It writes only when something changed, or
every `refresh` seconds to move `lastProbeTime`, so a quiet fleet makes no churn on the hub.
An unreachable child is retried with backoff; it never blocks another location.

A pull location (`spec.mode: Pull`) is never dialled: its prober reads the Lease its agent
renews on the hub instead (`locations/lease.py`), and the fleet holds no client for it.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import functools
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from aiohttp import web

from apiserver.contract import now
from apiserver.kube.client import ApiError, Kube, Unreachable
from apiserver.kube.informer import Backoff, Informer
from apiserver.leader import Leadership
from apiserver.locations import joins, lease
from apiserver.locations.fleet import CredentialsError, Fleet
from apiserver.locations.pending import Owner, Unschedulable
from apiserver.locations.probe import Watched, probe
from apiserver.locations.reports import Reports
from apiserver.models import location as model
from apiserver.objects import Obj
from apiserver.signals import Signal

log = logging.getLogger(__name__)

RETRY_AFTER_TIMEOUT = 1.0  # seconds before a Ready location that timed out is asked again


@dataclass(frozen=True)
class Settings:
    interval: float = 10.0  # between probes of a healthy child
    timeout: float = 5.0  # for one whole probe
    refresh: float = 60.0  # longest a status goes without a write
    # What the children's pods request moves whenever pods start or end: a status in which
    # only that moved is written at most this often (each is a write on the shared hub).
    usage_quiet: float = 10.0


class LocationLoop:
    def __init__(
        self,
        hub: Kube,
        locations: Informer,
        fleet: Fleet,
        leadership: Leadership,
        settings: Settings = Settings(),
        reports: Reports | None = None,
        pulled_crds: Callable[[str], list[Obj] | None] = lambda _: None,
    ) -> None:
        self.hub = hub
        self.reports = reports  # pull locations' agents' reports, with their probes
        self.pulled_crds = pulled_crds  # their CRDs, which their agents send when asked
        self.leadership = leadership
        self.fleet = fleet
        self.settings = settings
        self.informer = locations  # the hub cache's
        locations.subscribe(self._on_event)
        self._probers: dict[str, tuple[str, asyncio.Task[None]]] = {}
        self._watched: dict[str, Watched] = {}
        # Told (location, owner) when a workload's count of unschedulable pods changes there.
        self.stuck: Signal[[str, Owner]] = Signal("stuck pods")

    def unschedulable(self, name: str) -> Unschedulable | None:
        """The unschedulable pods of a location, while its pod watch runs."""
        watched = self._watched.get(name)
        return watched.unschedulable if watched else None

    def crds(self, name: str) -> list[Obj] | None:
        """The CRDs a location serves, once its watch has synced, or for a pull location
        once its agent sent every one its last probe names (read only)."""
        obj = self.informer.get(name)
        if obj is not None and (obj.get("spec") or {}).get("mode") == model.PULL:
            return self.pulled_crds(name)
        watched = self._watched.get(name)
        if watched is None or not watched.crds.synced.is_set():
            return None
        return watched.crds.items()

    def _stuck(self, name: str) -> Callable[[Owner], None]:
        return functools.partial(self.stuck.emit, name)

    async def run(self) -> None:
        """Probers come and go with the Locations the hub cache sees; this waits until the
        server stops, and then stops them."""
        try:
            await asyncio.Event().wait()
        finally:
            for _, task in self._probers.values():
                task.cancel()

    async def _on_event(self, kind: str, obj: Obj, _: Obj | None) -> None:
        name = obj["metadata"]["name"]
        spec = obj.get("spec") or {}
        spec_key = repr((spec.get("mode"), spec.get("secretRef")))
        running = self._probers.get(name)
        if kind == "DELETED":
            if running:
                running[1].cancel()
                del self._probers[name]
            self.fleet.forget(name)
            return
        if running and running[0] == spec_key and not running[1].done():
            return
        if running:
            running[1].cancel()
        task = asyncio.create_task(self._prober(name), name=f"probe {name}")
        self._probers[name] = (spec_key, task)

    async def _prober(self, name: str) -> None:
        # A child that just restarted is back within seconds: retry soon, not minutes later.
        backoff = Backoff(first=self.settings.interval, cap=6 * self.settings.interval)
        last_written: tuple[Any, float] | None = None
        woken = asyncio.Event()
        watched: Watched | None = None
        missed = False  # the last probe of a Ready location timed out
        try:
            while True:
                obj = self.informer.get(name)
                if obj is None:
                    return
                location = model.Location.model_validate(obj)
                if location.pulled:
                    # Its prober restarts when the mode changes: nothing of a pushed past.
                    self.fleet.forget(name)
                    fields, healthy = await self._pulled(location)
                    last_written = await self._write(name, location, fields, last_written)
                    if healthy:
                        backoff.reset()
                    await asyncio.sleep(self.settings.interval if healthy else backoff.next())
                    continue
                kube = self.fleet.get(name)
                if kube is not None and (watched is None or watched.kube is not kube):
                    if watched:
                        watched.stop()
                    watched = Watched(kube, woken.set, self._stuck(name))
                    self._watched[name] = watched
                fields, healthy = await self._probe(location, watched)
                timed_out = fields.pop("_timed_out", False)
                if timed_out and not missed and _ready(location):
                    # One slow answer from a busy child is not an outage: ask once more
                    # before it is left out of lists and its grace period starts.
                    missed = True
                    await asyncio.sleep(RETRY_AFTER_TIMEOUT)
                    continue
                missed = False
                last_written = await self._write(name, location, fields, last_written)
                woken.clear()
                if healthy:
                    backoff.reset()
                delay = self.settings.interval if healthy else backoff.next()
                # Nodes or pods changed: look again soon, but at most once a second.
                await asyncio.sleep(min(1.0, delay))
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(max(0.0, delay - 1.0)):  # never wait_for: leader.py
                        await woken.wait()
        finally:
            if watched:
                watched.stop()
                if self._watched.get(name) is watched:
                    del self._watched[name]

    async def _write(
        self,
        name: str,
        location: model.Location,
        fields: Obj,
        last_written: tuple[Any, float] | None,
    ) -> tuple[Any, float] | None:
        """Write status when it changed, or once `refresh` has passed; returns what was."""
        if not self.leadership.leading.is_set():
            return None  # the leader writes; followers only keep their caches warm
        if "_ready" not in fields:
            return last_written  # nothing learned (a pull location's lease not read)
        status = _with_ready(location, fields)
        _log_transition(name, location.status, status)
        now = asyncio.get_running_loop().time()
        comparable = {k: v for k, v in status.items() if k != "lastProbeTime"}
        if status_due(last_written, comparable, now, self.settings):
            with contextlib.suppress(ApiError):
                await self.hub.merge_patch(f"{model.PATH}/{name}/status", {"status": status})
                return (comparable, now)
        return last_written

    async def _pulled(self, location: model.Location) -> tuple[Obj, bool]:
        """A pull location's status: Ready from its agent's Lease, and the rest from its
        agent's last probe (in its report), the same fields a pushed location's probe writes;
        the last known ones while no report came since we started."""
        fields, healthy = await self._lease(location)
        reported = self.reports.get(location.name) if self.reports is not None else None
        if "_ready" in fields and reported is not None and reported.probe:
            fields = {**reported.probe, **fields}
        return fields, healthy

    async def _lease(self, location: model.Location) -> tuple[Obj, bool]:
        """A pull location's Ready, from its agent's Lease on the hub; (fields, healthy). A
        hub that does not answer says nothing about the agent: the status stays as it was."""
        try:
            found: Obj | None = await self.hub.get(lease.path(location.name))
        except ApiError as err:
            if err.code != 404:
                log.warning("location %s: reading its agent's lease failed: %s", location.name, err)
                return {}, False
            found = None
        now = datetime.datetime.now(datetime.UTC)
        verdict = lease.verdict(location.name, found, now, joins.revoked(location.metadata))
        return {"_ready": tuple(verdict)}, True

    async def _probe(self, location: model.Location, watched: Watched | None) -> tuple[Obj, bool]:
        """(status fields, healthy); failures become a Ready=False reason and message."""
        try:
            kube = await self.fleet.connect(location)
            current = watched if watched is not None and watched.kube is kube else None
            fields = await probe(kube, current, self.settings.timeout)
        except CredentialsError as err:
            return _not_ready("NoCredentials", f"{err}; run `kubectl mc join` again"), False
        except TimeoutError:
            message = f"no answer within {self.settings.timeout:g}s"
            return {**_not_ready("Unreachable", message), "_timed_out": True}, False
        except ApiError as err:
            if err.code in (401, 403):
                message = f"the child refused our credentials ({err.reason}): {err}"
                return _not_ready("Unauthorized", message + "; rejoin with fresh ones"), False
            if isinstance(err, Unreachable):
                return _not_ready("Unreachable", str(err)), False
            if err.reason == "NotReady":
                return _not_ready("NotReady", str(err)), False
            return _not_ready("NotReady", f"{err.reason}: {err}"), False
        if not fields["readyNodes"]:
            fields["_ready"] = ("False", "NoReadyNodes", f"0 of {fields['nodes']} nodes are Ready")
            return fields, True
        message = (
            f"{fields['kubernetesVersion']}, {fields['readyNodes']}/{fields['nodes']} nodes Ready"
        )
        if fields["schedulableNodes"] < fields["readyNodes"]:
            message += f", {fields['schedulableNodes']} of them take new pods"
        fields["_ready"] = ("True", "Probed", message)
        return fields, True


def status_due(
    last_written: tuple[Any, float] | None, status: Obj, now: float, settings: Settings
) -> bool:
    """Is a Location's status (`status`, without its probe time) to be written now, given
    what we last wrote and when? At once when anything but the pods' requests changed (Ready,
    nodes, capacity, the APIs served); a change of requests alone waits `usage_quiet` since
    the last write (the next probe writes it); and every `refresh`, so a reader sees it alive."""
    if last_written is None:
        return True
    written, at = last_written
    if now - at >= settings.refresh:
        return True
    if written == status:
        return False
    usage_only = {k: v for k, v in written.items() if k != "requested"} == {
        k: v for k, v in status.items() if k != "requested"
    }
    return not usage_only or now - at >= settings.usage_quiet


def _log_transition(name: str, previous: model.LocationStatus, status: Obj) -> None:
    old = previous.condition("Ready")
    new = status["conditions"][-1]
    if old is None or (old.status, old.reason) != (new["status"], new["reason"]):
        log.info(
            "location %s: Ready=%s (%s) %s", name, new["status"], new["reason"], new["message"]
        )


def _ready(location: model.Location) -> bool:
    ready = location.status.condition("Ready")
    return ready is not None and ready.status == "True"


def _not_ready(reason: str, message: str) -> Obj:
    return {"_ready": ("False", reason, message)}


def _with_ready(location: model.Location, fields: Obj) -> Obj:
    """The status to write: probe fields plus a Ready condition whose transition time moves
    only when its status does. A failed probe keeps the last known numbers.

    A location Ready at its first probe counts as Ready since it was created: `join` checked
    it answers, and the cooldown is there to damp flapping, not to delay a new location."""
    previous = location.status
    status, reason, message = fields.pop("_ready")
    moment = now()
    old = previous.condition("Ready")
    if old is None and status == "True":
        since = location.metadata.get("creationTimestamp") or moment
    else:
        since = old.last_transition_time if old and old.status == status else moment
    ready = {
        "type": "Ready",
        "status": status,
        "reason": reason,
        "message": message,
        "lastTransitionTime": since,
    }
    others = [c.model_dump(by_alias=True, exclude_none=True) for c in previous.conditions]
    conditions = [c for c in others if c["type"] != "Ready"] + [ready]
    return {**fields, "conditions": conditions, "lastProbeTime": moment}


LOCATIONS = web.AppKey("locations", LocationLoop)
