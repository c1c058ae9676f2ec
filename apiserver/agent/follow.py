"""The agent's loop: follow the location's work feed on the hub, and write its cluster.

A watch of the feed starts with the whole state (`state.Desired`), and is opened again when
it ends or breaks, after a backoff when it broke (`kube.informer.Backoff`). While the hub
cannot be reached nothing happens in the cluster: what it holds stays as it is. A write that
fails is tried again every `retry` seconds until it succeeds or the feed changes it; writes
go one at a time, so an old step never lands after a newer one for the same object.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Mapping
from typing import Protocol

from apiserver.agent.apply import Writer
from apiserver.agent.state import Apply, Desired, Step
from apiserver.contract import MC_GROUP, VERSION
from apiserver.kube.informer import Backoff
from apiserver.objects import Obj
from apiserver.sync.work import WorkKey

log = logging.getLogger(__name__)


class Hub(Protocol):
    """What the agent asks of the hub (a `kube.client.Kube`): one watch at a time."""

    def watch(
        self,
        path: str,
        resource_version: str,
        timeout_seconds: int = 300,
        params: Mapping[str, str] | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> AsyncIterator[Obj]: ...


def work_path(location: str) -> str:
    return f"/apis/{MC_GROUP}/{VERSION}/locations/{location}/work"


class Agent:
    def __init__(
        self,
        hub: Hub,
        writer: Writer,
        location: str,
        retry: float = 5.0,
        watch_seconds: int = 600,
        backoff: Backoff | None = None,
    ) -> None:
        self.hub = hub
        self.writer = writer
        self.location = location
        self.retry = retry
        self.watch_seconds = watch_seconds
        self.backoff = backoff or Backoff(first=0.5, cap=30.0)
        self.desired = Desired()
        self.failing: dict[WorkKey, Step] = {}  # the latest step per object that failed
        self._writes = asyncio.Lock()

    async def run(self) -> None:
        retries = asyncio.create_task(self._retry_failed(), name="retries")
        try:
            while True:
                await self.follow_once()
        finally:
            retries.cancel()

    async def follow_once(self) -> bool:
        """One watch of the feed, until it ends (True) or breaks (False, after a backoff)."""
        self.desired.connected()
        try:
            async for event in self.hub.watch(
                work_path(self.location), "", timeout_seconds=self.watch_seconds
            ):
                self.backoff.reset()
                for step in self.desired.take(event):
                    await self.do(step)
        except Exception as err:  # the hub unreachable, a 403, a cut-off stream: wait, again
            delay = self.backoff.next()
            log.warning("the work feed of %s broke (%s); again in %.1fs", self.location, err, delay)
            await asyncio.sleep(delay)
            return False
        return True

    async def do(self, step: Step) -> None:
        key = WorkKey.of(step.object) if isinstance(step, Apply) else step.key
        async with self._writes:
            try:
                await self.writer.run(step)
            except Exception as err:
                log.warning("%s in %s failed: %s (tried again)", key, self.location, err)
                self.failing[key] = step
                return
            self.failing.pop(key, None)  # only the latest step of an object is ever run

    async def _retry_failed(self) -> None:
        while True:
            await asyncio.sleep(self.retry)
            for key, step in list(self.failing.items()):
                if self.failing.get(key) is step:  # not replaced by a newer step meanwhile
                    await self.do(step)
