"""The agent's heartbeat: it renews its location's Lease on the hub, which is how the hub
knows the location is there (docs/pull.md).

The hub never dials a pull location, so its location loop reads this Lease instead of
probing (`locations/lease.py`): Ready while `renewTime` is within `leaseDurationSeconds`. The
agent renews it every quarter of that duration (as kubelets renew their node leases), so two
renewals may fail in a row before the location turns not Ready. The agent's hub identity may
get, create and update this one Lease and nothing else of its kind.
"""

from __future__ import annotations

import asyncio
import datetime
import logging
import os
import socket
from typing import Protocol

from apiserver.kube.client import ApiError
from apiserver.locations import lease
from apiserver.objects import Obj

log = logging.getLogger(__name__)


class Hub(Protocol):
    """What the heartbeat asks of the hub (a `kube.client.Kube`)."""

    async def get(self, path: str, **params: str) -> Obj: ...

    async def create(self, path: str, body: Obj) -> Obj: ...

    async def request(self, method: str, path: str, *, body: Obj, timeout: float) -> Obj: ...


def holder() -> str:
    """Who renews: the pod (its hostname) and the process, as client-go's leader election
    names a holder."""
    return f"{socket.gethostname()}_{os.getpid()}"


class Heartbeat:
    def __init__(self, hub: Hub, location: str, duration: int, identity: str | None = None):
        self.hub = hub
        self.location = location
        self.duration = duration
        self.every = duration / 4
        self.identity = identity or holder()
        self.renewed = asyncio.Event()  # set by every renewal that went through

    async def run(self) -> None:
        failing = False
        while True:
            try:
                await self.renew()
            except (ApiError, TimeoutError) as err:
                if not failing:
                    log.warning("renewing lease %s on the hub failed: %s", self._named(), err)
                failing = True
            else:
                if failing:
                    log.info("lease %s renewed again", self._named())
                failing = False
            await asyncio.sleep(self.every)

    async def renew(self) -> None:
        """Renew the Lease, or make it. An update that meets a newer version (a conflict) is
        read again at the next beat."""
        path = lease.path(self.location)
        now = datetime.datetime.now(datetime.UTC)
        try:
            current = await self.hub.get(path)
        except ApiError as err:
            if err.code != 404:
                raise
            body = lease.body(self.location, self.identity, self.duration, now)
            await self.hub.create(lease.COLLECTION, body)
            log.info("made lease %s on the hub", self._named())
        else:
            body = lease.renewed(current, self.identity, self.duration, now)
            await self.hub.request("PUT", path, body=body, timeout=self.every)
        self.renewed.set()

    def _named(self) -> str:
        return f"{lease.NAMESPACE}/{lease.name(self.location)}"
