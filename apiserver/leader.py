"""Leader election: several kmc-apiservers serve reads, one runs the loops' writes.

A `coordination.k8s.io` Lease in kmc-system says who leads. Every replica keeps its caches
warm (informers run everywhere, so any replica answers `mc.kmc.dev` and `remote.kmc.dev`);
only the holder's reconcilers act: the loops wait on `Leadership.leading` before each
reconcile. A leader that cannot renew within `renew_deadline` steps down before its lease
can expire, so two replicas never act at once; a new one takes over once the lease has
expired. The identity is stable across restarts of the same replica (host and port), so a
restarted leader takes its lease back at once instead of waiting it out.
"""

from __future__ import annotations

import asyncio
import datetime
import logging
import socket
from dataclasses import dataclass

from apiserver.kube.client import ApiError, Kube, Obj

log = logging.getLogger(__name__)

NAMESPACE = "kmc-system"
NAME = "kmc-apiserver"
PATH = f"/apis/coordination.k8s.io/v1/namespaces/{NAMESPACE}/leases"


@dataclass(frozen=True)
class Timing:
    lease: float = 15.0  # how long a lease holds without renewal
    renew_deadline: float = 10.0  # a leader that has not renewed for this long steps down
    retry: float = 2.0  # how often to try to acquire or renew


def identity(port: int) -> str:
    return f"{socket.gethostname()}_{port}"


class Leadership:
    def __init__(self, hub: Kube, me: str, timing: Timing = Timing()) -> None:
        self.hub = hub
        self.me = me
        self.timing = timing
        self.leading = asyncio.Event()

    async def run(self) -> None:
        loop = asyncio.get_running_loop()
        renewed = 0.0
        try:
            while True:
                try:
                    if await self._try():
                        renewed = loop.time()
                        if not self.leading.is_set():
                            log.info("leading as %s", self.me)
                            self.leading.set()
                    elif self.leading.is_set():
                        self._step_down("another replica holds the lease")
                except ApiError as err:
                    log.warning("leader election: %s", err)
                if self.leading.is_set() and loop.time() - renewed > self.timing.renew_deadline:
                    self._step_down(f"could not renew for {self.timing.renew_deadline:g}s")
                await asyncio.sleep(self.timing.retry)
        finally:
            if self.leading.is_set():
                await self._release()

    def _step_down(self, why: str) -> None:
        log.warning("no longer leading: %s", why)
        self.leading.clear()

    async def _try(self) -> bool:
        """Acquire or renew; True when we hold the lease now."""
        now = _now()
        try:
            lease = await self.hub.get(f"{PATH}/{NAME}")
        except ApiError as err:
            if err.code != 404:
                raise
            await self.hub.create(PATH, self._lease(None, now, transitions=0))
            return True
        spec = lease.get("spec") or {}
        holder = spec.get("holderIdentity") or ""
        if holder and holder != self.me and not _expired(spec, now):
            return False
        transitions = int(spec.get("leaseTransitions") or 0) + (holder != self.me)
        body = self._lease(lease, now, transitions)
        if holder == self.me:
            body["spec"]["acquireTime"] = spec.get("acquireTime", body["spec"]["acquireTime"])
        try:
            await self.hub.request("PUT", f"{PATH}/{NAME}", body=body)
        except ApiError as err:
            if err.code == 409:
                return False  # someone else wrote it first
            raise
        return True

    def _lease(self, current: Obj | None, now: datetime.datetime, transitions: int) -> Obj:
        metadata: Obj = {"name": NAME, "namespace": NAMESPACE}
        if current is not None:
            metadata["resourceVersion"] = current["metadata"]["resourceVersion"]
        return {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": metadata,
            "spec": {
                "holderIdentity": self.me,
                "leaseDurationSeconds": int(self.timing.lease),
                "acquireTime": _micro(now),
                "renewTime": _micro(now),
                "leaseTransitions": transitions,
            },
        }

    async def _release(self) -> None:
        """Going away: let another replica take over now rather than after the lease."""
        self.leading.clear()
        try:
            lease = await self.hub.get(f"{PATH}/{NAME}")
            if (lease.get("spec") or {}).get("holderIdentity") == self.me:
                lease["spec"]["holderIdentity"] = ""
                await self.hub.request("PUT", f"{PATH}/{NAME}", body=lease)
        except ApiError as err:
            log.info("could not release the lease: %s", err)


def _expired(spec: Obj, now: datetime.datetime) -> bool:
    renewed = spec.get("renewTime")
    if not renewed:
        return True
    at = datetime.datetime.fromisoformat(str(renewed).replace("Z", "+00:00"))
    return now > at + datetime.timedelta(seconds=float(spec.get("leaseDurationSeconds") or 15))


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


def _micro(at: datetime.datetime) -> str:
    return at.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
