"""The agent's status report: what it sees of our objects in its cluster, up to the hub.

`PUT /apis/mc.kmc.dev/v1alpha1/locations/<name>/report` with a whole `LocationReport`
(`models/report.py`: per child the slim copy its `ChildWatch` keeps, and the namespaces it
made, and its probe of the cluster: `locations/probe.probe`, as kmc-apiserver probes a pushed
location), so kmc-apiserver folds a pull location's children as it folds a pushed one's, and
writes its probe into the Location's status (its room, served kinds, CRD digests). Sent
once the agent has had a whole feed state and its watches have listed; then whenever a slim
copy changes, coalesced to one per `least` seconds; at least every `every` seconds (a
kmc-apiserver that restarted has it back within that); and at once after the feed
reconnects. A failed send is tried again after a backoff. See docs/pull.md.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Iterable
from typing import Any, Protocol

from apiserver.contract import MC_GROUP, VERSION
from apiserver.imports.negotiate import digest
from apiserver.kube.client import ApiError, Kube
from apiserver.kube.informer import Backoff
from apiserver.locations.probe import Watched, probe
from apiserver.loops.sync.children import ChildWatch
from apiserver.models.report import body, crds_body, slim_child, slim_crd
from apiserver.objects import Obj

log = logging.getLogger(__name__)


class Sender(Protocol):
    """What the reporter asks of the hub (a `kube.client.Kube`)."""

    async def request(self, method: str, path: str, *, body: Any = None) -> Any: ...


def report_path(location: str) -> str:
    return f"/apis/{MC_GROUP}/{VERSION}/locations/{location}/report"


def crds_path(location: str) -> str:
    return f"/apis/{MC_GROUP}/{VERSION}/locations/{location}/crds"


def report_of(watch: ChildWatch) -> Obj | None:
    """The whole report of what `watch` sees; None until every watch of it has listed."""
    if watch.count() is None or not watch.made.synced.is_set():
        return None
    children = [
        slim_child(watch.kinds[key].api_version, watch.kinds[key].kind, obj)
        for key, informer in list(watch.informers.items())
        for obj in list(informer.cache.values())
    ]
    children.sort(
        key=lambda c: (c["kind"], c["metadata"].get("namespace", ""), c["metadata"]["name"])
    )
    return body(children, list(watch.made.cache))


class Prober:
    """The agent's probe of its own cluster: `locations/probe.probe` over watches of its
    nodes, running pods and CRDs (`Watched`), again when they change (at most once per
    `least` seconds) and at least every `every` seconds. `fields` is the last answer."""

    def __init__(
        self,
        cluster: Kube,
        changed: Callable[[], None],
        every: float = 30.0,
        least: float = 1.0,
        timeout: float = 10.0,
    ) -> None:
        self.cluster = cluster
        self.changed = changed
        self.every, self.least, self.timeout = every, least, timeout
        self.fields: Obj | None = None
        self.watched: Watched | None = None

    def crds(self, digests: Iterable[str]) -> list[Obj]:
        """Its cluster's CRDs of those digests, slimmed (`models/report.slim_crd`), as its
        CRD watch holds them now (one that changed since has another digest: left out)."""
        watched, wanted = self.watched, set(digests)
        if watched is None or not watched.crds.synced.is_set():
            return []
        found = []
        for crd in list(watched.crds.cache.values()):
            meta = crd.get("metadata") or {}
            memo = watched.digests.get((str(meta.get("uid")), str(meta.get("resourceVersion"))))
            if (memo or digest(crd)) in wanted:
                found.append(slim_crd(crd))
        return sorted(found, key=lambda c: str(c["metadata"]["name"]))

    async def run(self) -> None:
        woken = asyncio.Event()
        watched = self.watched = Watched(self.cluster, woken.set)
        try:
            while True:
                woken.clear()
                try:
                    fields = await probe(self.cluster, watched, self.timeout)
                except (ApiError, TimeoutError) as err:  # kept: the last known numbers
                    log.warning("probing the cluster failed: %s", str(err) or type(err).__name__)
                else:
                    if fields != self.fields:
                        self.fields = fields
                        self.changed()
                await asyncio.sleep(self.least)
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(max(0.0, self.every - self.least)):
                        await woken.wait()
        finally:
            watched.stop()


class Reporter:
    def __init__(
        self,
        hub: Sender,
        location: str,
        every: float = 30.0,
        least: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
        cluster: Kube | None = None,
    ) -> None:
        self.hub = hub
        # Its cluster's probe goes with every report, when given the cluster to probe.
        self.prober = Prober(cluster, self.changed, every, least) if cluster else None
        self.location = location
        self.every = every  # longest between two reports
        self.least = least  # shortest between two reports
        self.clock = clock
        self.backoff = Backoff(first=least, cap=every)
        self.sent = 0  # reports the hub took, for tests and the log
        self.crds_sent = 0  # CRDs the hub took (asked for in its answers)
        self._woken = asyncio.Event()
        self._again = True  # send even if nothing changed (the first, or after a reconnect)

    def changed(self) -> None:
        """A child's slim copy changed, or the agent has a new whole state."""
        self._woken.set()

    def connected(self) -> None:
        """The feed (re)connected: the hub may have restarted and forgotten us."""
        self._again = True
        self._woken.set()

    async def run(self, source: Callable[[], Obj | None]) -> None:
        if self.prober is None:
            return await self._send(source)
        probing = asyncio.create_task(self.prober.run(), name="probe")
        try:
            await self._send(source)
        finally:
            probing.cancel()

    def _report(self, source: Callable[[], Obj | None]) -> Obj | None:
        report = source()
        if report is not None and self.prober is not None and self.prober.fields is not None:
            report = {**report, "probe": self.prober.fields}
        return report

    async def _send(self, source: Callable[[], Obj | None]) -> None:
        last_body: Obj | None = None
        last = float("-inf")
        while True:
            due = last + self.every
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(max(0.0, due - self.clock())):
                    await self._woken.wait()
            self._woken.clear()
            pause = last + self.least - self.clock()
            if pause > 0:
                await asyncio.sleep(pause)  # coalesced: what changes meanwhile goes with it
            report = self._report(source)
            if report is None:
                await asyncio.sleep(self.least)  # not listed yet, or no whole feed state yet
                self._woken.set()
                continue
            if report == last_body and not self._again and self.clock() < due:
                continue
            again = self._again
            self._again = False
            try:
                answer = await self.hub.request("PUT", report_path(self.location), body=report)
                await self._send_crds(answer)
            except Exception as err:  # the hub unreachable, a 403: again after a backoff
                self._again = self._again or again
                delay = self.backoff.next()
                why = str(err) or type(err).__name__
                log.warning("reporting %s failed (%s); again in %.1fs", self.location, why, delay)
                await asyncio.sleep(delay)
                self._woken.set()
                continue
            self.backoff.reset()
            self.sent += 1
            last_body, last = report, self.clock()

    async def _send_crds(self, answer: Any) -> None:
        """Send the CRDs the hub's answer says it lacks (it asks after a change of their
        digests in the probe, and after it restarted): never with every report, they are big."""
        missing = answer.get("missingCRDs") if isinstance(answer, dict) else None
        if not missing or self.prober is None:
            return
        crds = self.prober.crds(missing)
        if crds:
            await self.hub.request("PUT", crds_path(self.location), body=crds_body(crds))
            self.crds_sent += len(crds)
            log.info("sent %d CRD(s) of %s to the hub", len(crds), self.location)
