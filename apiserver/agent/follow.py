"""The agent's loop: follow the location's work feed on the hub, and write its cluster.

A watch of the feed starts with the whole state (`state.Desired`), and is opened again when
it ends or breaks, after a backoff when it broke (`kube.informer.Backoff`). While the hub
cannot be reached nothing is deleted in the cluster: what it holds stays as it is. A write
that fails is tried again every `retry` seconds until it succeeds or the feed changes it;
writes go one at a time, so an old step never lands after a newer one for the same object.

Given its cluster's client to watch, it also watches our objects there (the push loop's
`ChildWatch`, by origin label, every kind the kinds table places) and puts back what was
edited or deleted by hand, and deletes ours that the feed no longer has once a whole state
arrived (`drift.after_change`): what was unplaced while the agent was away goes too. A kind
the kinds table does not place (an imported CRD's) is watched from the first write of one
of its objects (`Writer.kind_of`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Mapping
from typing import Protocol

from apiserver.agent.apply import Writer
from apiserver.agent.drift import after_change, version_of
from apiserver.agent.report import Reporter, report_of
from apiserver.agent.state import Apply, Desired, Step
from apiserver.contract import MC_GROUP, VERSION
from apiserver.kinds import NAMESPACE, PLACED, Key
from apiserver.kube.client import Kube
from apiserver.kube.informer import Backoff
from apiserver.loops.sync.children import ChildWatch
from apiserver.objects import Obj
from apiserver.sync.work import WorkKey, namespace_key

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


FEED_PATH = f"/apis/{MC_GROUP}/{VERSION}/workfeeds"


def feed_query(location: str) -> dict[str, str]:
    """A watch of `workfeeds` pinned to this location's name: verb `watch` to the hub, which
    keeps it open past its request timeout (a `get` of a sub-resource it would end after
    60 s), and authorizes it against that name (docs/pull.md, "The work feed")."""
    return {"fieldSelector": f"metadata.name={location}"}


class Agent:
    def __init__(
        self,
        hub: Hub,
        writer: Writer,
        location: str,
        retry: float = 5.0,
        watch_seconds: int = 600,
        backoff: Backoff | None = None,
        cluster: Kube | None = None,
        silence: float = 75.0,
        reporter: Reporter | None = None,
    ) -> None:
        self.hub = hub
        self.cluster = cluster  # watched for drift and orphans, when given
        self.reporter = reporter  # what the watches see, up to the hub, when given
        self.writer = writer
        self.location = location
        self.retry = retry
        self.watch_seconds = watch_seconds
        self.silence = silence  # longest quiet on the feed before it counts as dropped
        self.backoff = backoff or Backoff(first=0.5, cap=30.0)
        self.desired = Desired()
        self.failing: dict[WorkKey, Step] = {}  # the latest step per object that failed
        self.written: dict[WorkKey, str] = {}  # its version after our last write
        self.watch: ChildWatch | None = None
        self.changed: set[Key] = set()  # our objects in the cluster that changed
        self._woken = asyncio.Event()
        self._wholes = 0  # whole feed states already looked at for orphans
        self._writes = asyncio.Lock()

    async def run(self) -> None:
        tasks = [asyncio.create_task(self._retry_failed(), name="retries")]
        if self.cluster is not None:
            self.watch = ChildWatch(self.location, self.cluster, self._changed)
            for kind in PLACED.values():
                self.watch.ensure(kind)
            tasks.append(asyncio.create_task(self._put_back(), name="drift"))
            if self.reporter is not None:
                task = asyncio.create_task(self.reporter.run(self.report), name="report")
                tasks.append(task)
        try:
            while True:
                await self.follow_once()
        finally:
            for task in tasks:
                task.cancel()
            if self.watch is not None:
                self.watch.stop()

    async def follow_once(self) -> bool:
        """One watch of the feed, until it ends (True) or breaks (False, after a backoff)."""
        self.desired.connected()
        if self.reporter is not None:
            self.reporter.connected()
        events = aiter(
            self.hub.watch(
                FEED_PATH,
                "",
                timeout_seconds=self.watch_seconds,
                params=feed_query(self.location),
            )
        )
        try:
            while True:
                try:
                    # The feed sends a bookmark every 30 s of quiet: a longer silence is a
                    # connection dropped on the way (a NAT, a proxy), not a quiet hub.
                    async with asyncio.timeout(self.silence):
                        event = await anext(events)
                except StopAsyncIteration:
                    break
                self.backoff.reset()
                for step in self.desired.take(event):
                    await self.do(step)
                if self.desired.wholes != self._wholes:
                    self._wholes = self.desired.wholes
                    self._watch_imported()
                    self._look_at_everything()  # orphans, now that we know what is wanted
                    if self.reporter is not None:
                        self.reporter.changed()
        except Exception as err:  # the hub unreachable, a 403, a cut-off stream: wait, again
            delay = self.backoff.next()
            why = str(err) or type(err).__name__
            log.warning("the work feed of %s broke (%s); again in %.1fs", self.location, why, delay)
            await asyncio.sleep(delay)
            return False
        finally:
            close = getattr(events, "aclose", None)
            if close is not None:
                with contextlib.suppress(Exception):
                    await close()
        return True

    async def do(self, step: Step) -> None:
        key = WorkKey.of(step.object) if isinstance(step, Apply) else step.key
        async with self._writes:
            try:
                answer = await self.writer.run(step)
            except Exception as err:
                log.warning("%s in %s failed: %s (tried again)", key, self.location, err)
                self.failing[key] = step
                return
            self.failing.pop(key, None)  # only the latest step of an object is ever run
            if answer is not None and answer.get("metadata"):
                self.written[key] = version_of(answer)
                self._watch_kind(key)
            else:
                self.written.pop(key, None)

    def _watch_imported(self) -> None:
        """Watch the imported kinds the feed's whole state names (those the hub places),
        which this cluster serves as its probe last saw (all, without a probe), so an
        orphan of one is found even when no object of it is left to write."""
        if self.watch is None:
            return
        prober = self.reporter.prober if self.reporter is not None else None
        served = set((prober.fields or {}).get("resources") or []) if prober else None
        for ref in self.desired.kinds:
            if served and f"{ref['apiVersion']}/{ref['kind']}" not in served:
                continue
            kind = self.writer.learn(
                ref["apiVersion"], ref["kind"], ref["plural"], ref["namespaced"]
            )
            if kind.key not in self.watch.kinds:
                log.info("watching %s in %s: an imported kind", kind.key, self.location)
                self.watch.ensure(kind)

    def _watch_kind(self, key: WorkKey) -> None:
        """Watch the kind of an object just written, if it is one the kinds table does not
        place (an imported CRD's: the writer found it by discovery), so drift and orphans
        of it are seen as of any other kind."""
        if self.watch is None or key.is_namespace:
            return
        kind = self.writer.kind_of(key)
        if kind is not None and kind.role is not None and kind.key not in self.watch.kinds:
            log.info("watching %s in %s for drift: an imported kind", kind.key, self.location)
            self.watch.ensure(kind)

    async def _retry_failed(self) -> None:
        while True:
            await asyncio.sleep(self.retry)
            for key, step in list(self.failing.items()):
                if self.failing.get(key) is step:  # not replaced by a newer step meanwhile
                    await self.do(step)

    # -- its own cluster ------------------------------------------------------------------

    def _changed(self, key: Key) -> None:
        self.changed.add(key)
        self._woken.set()
        if self.reporter is not None:
            self.reporter.changed()

    def report(self) -> Obj | None:
        """The whole report of our objects in the cluster, once a whole feed state came."""
        if self.watch is None or not self.desired.wholes:
            return None
        return report_of(self.watch)

    def _look_at_everything(self) -> None:
        watch = self.watch
        if watch is None:
            return
        for name in list(watch.made.cache):
            self.changed.add(Key(NAMESPACE, "", name))
        for kind_key, informer in list(watch.informers.items()):
            for cache_key in list(informer.cache):
                namespace, _, name = cache_key.rpartition("/")
                self.changed.add(Key(kind_key, namespace, name))
        self._woken.set()

    async def _put_back(self) -> None:
        while True:
            await self._woken.wait()
            self._woken.clear()
            changed, self.changed = self.changed, set()
            for key in sorted(changed):
                step = self.step_for(key)
                if step is not None:
                    await self.do(step)

    def step_for(self, key: Key) -> Step | None:
        """What to do about one of our objects in the cluster that changed."""
        watch = self.watch
        if watch is None:
            return None
        if key.kind == NAMESPACE:
            work_key, current = namespace_key(key.name), watch.made.get(key.name)
        else:
            kind = watch.kinds.get(key.kind)  # the placed kinds, and imported ones written
            if kind is None:
                return None
            work_key = WorkKey(kind.api_version, kind.kind, key.namespace, key.name)
            current = watch.get(key)
        return after_change(
            work_key,
            self.desired.wanted(work_key),
            work_key in self.desired.kept,
            self.desired.settled,
            current,
            self.written.get(work_key),
        )
