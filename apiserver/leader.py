"""Leader election: several kmc-apiservers serve reads, one runs the loops' writes.

A `coordination.k8s.io` Lease in kmc-system says who leads. Every replica keeps its caches
warm (informers run everywhere, so any replica answers `mc.kmc.dev` and `remote.kmc.dev`);
only the holder's reconcilers act. This is client-go's leader election, for the reasons it
gives:

- A lease is judged on this replica's own clock only: another holder's lease expires
  `leaseDurationSeconds` after this replica last *saw the record change*, never by comparing
  the holder's `renewTime` with our clock (two machines' clocks disagree; two leaders follow).
- A leader acts only within `renew_deadline` of the start of its last successful renewal,
  and the deadline is shorter than the lease. Past it — a renew that hangs, a process paused
  by SIGSTOP or a long GC — the leader stops at once: every write the loops send is refused
  (`check`, called by the loops' `Kube` clients before any write leaves), the reconciles in
  flight are cancelled, and the loops wait to lead again. Others cannot take the lease before
  it has gone unrenewed for a full lease duration as *they* see it, which is later.
- Every request carries this replica's identity in its User-Agent, so the hub's audit log
  tells who wrote.

The identity is stable across restarts of the same replica (host and port), so a restarted
leader takes its lease back at once instead of waiting it out. `Leadership.solo()` is the
leadership of a process run without election (one replica, tests, benchmarks): it always
leads.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import enum
import logging
import socket
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from aiohttp import web

from apiserver.kube.client import ApiError, Kube
from apiserver.objects import Obj

log = logging.getLogger(__name__)

NAMESPACE = "kmc-system"
NAME = "kmc-apiserver"
PATH = f"/apis/coordination.k8s.io/v1/namespaces/{NAMESPACE}/leases"

K = TypeVar("K")


@dataclass(frozen=True)
class Timing:
    lease: float = 15.0  # how long a lease holds without renewal, as each replica sees it
    renew_deadline: float = 10.0  # a leader acts only this long after its last renewal began
    retry: float = 2.0  # how often to try to acquire or renew


class Attempt(enum.Enum):
    HELD = "held"  # we hold the lease now
    TAKEN = "taken"  # another replica holds a lease that has not expired for us
    FAILED = "failed"  # could not tell: an error, a timeout, a conflicting write


class NotLeading(ApiError):
    """A write refused, or a reconcile stopped, because this replica is not the leader."""

    @classmethod
    def now(cls, me: str, why: str) -> NotLeading:
        return cls(ApiError.of(503, "ServiceUnavailable", f"{me} is not leading: {why}").status)


def identity(port: int) -> str:
    return f"{socket.gethostname()}_{port}"


def user_agent(me: str) -> str:
    """What every request of this replica says it is: the hub's audit log names the writer."""
    return f"kmc-apiserver/{me}"


class Leadership:
    def __init__(
        self,
        hub: Kube | None,
        me: str,
        timing: Timing = Timing(),
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.hub = hub  # None: no election, always leading (`solo`)
        self.me = me
        self.timing = timing
        self.clock = clock
        self.leading = asyncio.Event()
        self._observed: tuple[Any, ...] | None = None  # the lease record as last seen
        self._observed_at = 0.0  # our clock when it last changed
        self._observed_duration = timing.lease
        self._renewed_at: float | None = None  # our clock when our last good renewal began
        self._acting: set[asyncio.Task[Any]] = set()

    @classmethod
    def solo(cls, me: str = "kmc-apiserver") -> Leadership:
        """Leadership without election: this process is the only one, and always leads."""
        leadership = cls(None, me)
        leadership.leading.set()
        return leadership

    # -- what the loops ask ---------------------------------------------------------------

    def may_act(self) -> bool:
        """True while we lead and our last renewal began less than `renew_deadline` ago (on
        our clock: it keeps running while the process is paused)."""
        if self.hub is None:
            return True
        return (
            self.leading.is_set()
            and self._renewed_at is not None
            and self.clock() - self._renewed_at < self.timing.renew_deadline
        )

    def check(self) -> None:
        """Raise `NotLeading` unless a write may leave now (the loops' clients call this
        before every write, so a write decided before a pause is not sent after it)."""
        if not self.may_act():
            raise NotLeading.now(self.me, "its lease is not renewed; writing nothing")

    async def act(self, reconcile: Callable[[K], Awaitable[None]], key: K) -> None:
        """Run one reconcile as the leader: wait until we lead; if leadership ends meanwhile
        the reconcile is cancelled and `NotLeading` raised (its work queue retries the key,
        and the retry waits to lead again). Cancelling the caller still cancels both."""
        await self.leading.wait()
        if self.hub is None:
            await reconcile(key)  # no election: nothing to step down from
            return
        task = asyncio.ensure_future(reconcile(key))
        self.track(task)
        try:
            await task
        except asyncio.CancelledError:
            caller = asyncio.current_task()
            if caller is not None and caller.cancelling():
                raise
            raise NotLeading.now(self.me, "stepped down while reconciling") from None

    def track(self, task: asyncio.Task[Any]) -> None:
        """Cancel `task` if leadership ends before it does (work the loops started)."""
        if self.hub is None:
            return
        if not self.may_act():
            task.cancel()
            return
        self._acting.add(task)
        task.add_done_callback(self._acting.discard)

    # -- electing -------------------------------------------------------------------------

    async def run(self) -> None:
        try:
            while True:
                await self.step()
                await asyncio.sleep(self._pause())
        finally:
            was_leading = self.leading.is_set()
            self._step_down("shutting down")
            if was_leading:
                # Bounded: a hub too slow to answer must not hold up the stop; the lease then
                # expires on its own.
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(self.timing.renew_deadline):
                        await self._release()

    async def step(self) -> Attempt:
        """One attempt to acquire or renew, bounded by what is left of the renew deadline."""
        started = self.clock()
        if self.leading.is_set() and self._renewed_at is not None:
            budget = self._renewed_at + self.timing.renew_deadline - started
        else:
            budget = self.timing.renew_deadline
        try:
            if budget <= 0:
                raise TimeoutError
            # Never `asyncio.wait_for` here or in any loop: on Python 3.11 a cancel that
            # arrives as the awaited thing finishes is lost there, and a loop that lost its
            # cancel runs on after shutdown (the process then never stops).
            # `asyncio.timeout` keeps it.
            async with asyncio.timeout(budget):
                attempt = await self._try(started)
        except TimeoutError:
            log.warning("leader election: no answer from the hub within %.1fs", max(budget, 0))
            attempt = Attempt.FAILED
        except ApiError as err:
            log.warning("leader election: %s", err)
            attempt = Attempt.FAILED
        if attempt is Attempt.HELD:
            self._renewed_at = started
            if not self.leading.is_set():
                log.info("leading as %s", self.me)
                self.leading.set()
        elif attempt is Attempt.TAKEN and self.leading.is_set():
            self._step_down("another replica holds the lease")
        if self.leading.is_set() and not self.may_act():
            self._step_down(f"could not renew within {self.timing.renew_deadline:g}s")
        return attempt

    def _pause(self) -> float:
        """Until the next attempt: `retry`, but a leader wakes at its deadline at the latest."""
        if self.leading.is_set() and self._renewed_at is not None:
            left = self._renewed_at + self.timing.renew_deadline - self.clock()
            return max(0.0, min(self.timing.retry, left))
        return self.timing.retry

    def _step_down(self, why: str) -> None:
        if self.leading.is_set():
            log.warning("no longer leading: %s", why)
        self.leading.clear()
        self._renewed_at = None
        acting, self._acting = self._acting, set()
        for task in acting:
            task.cancel()

    def _observe(self, spec: Obj) -> None:
        """Remember the record; its expiry runs from when it last changed, on our clock."""
        record = tuple(
            spec.get(field)
            for field in (
                "holderIdentity",
                "leaseDurationSeconds",
                "acquireTime",
                "renewTime",
                "leaseTransitions",
            )
        )
        if record != self._observed:
            self._observed = record
            self._observed_at = self.clock()
            self._observed_duration = float(spec.get("leaseDurationSeconds") or self.timing.lease)

    async def _try(self, started: float) -> Attempt:
        assert self.hub is not None
        now = _now()
        try:
            lease = await self.hub.get(f"{PATH}/{NAME}")
        except ApiError as err:
            if err.code != 404:
                raise
            body = self._lease(None, now, transitions=0)
            try:
                await self.hub.create(PATH, body)
            except ApiError as conflict:
                if conflict.code == 409:
                    return Attempt.FAILED  # another replica made it first
                raise
            self._observe(body["spec"])
            return Attempt.HELD
        spec = lease.get("spec") or {}
        self._observe(spec)
        holder = spec.get("holderIdentity") or ""
        expires = self._observed_at + self._observed_duration
        if holder and holder != self.me and self.clock() < expires:
            return Attempt.TAKEN
        if self.clock() - started >= self.timing.renew_deadline:
            return Attempt.FAILED  # the answer came too late to act on
        transitions = int(spec.get("leaseTransitions") or 0) + (holder != self.me)
        body = self._lease(lease, now, transitions)
        if holder == self.me:
            body["spec"]["acquireTime"] = spec.get("acquireTime", body["spec"]["acquireTime"])
        try:
            await self.hub.request("PUT", f"{PATH}/{NAME}", body=body)
        except ApiError as err:
            if err.code == 409:
                return Attempt.FAILED  # someone else wrote it first
            raise
        self._observe(body["spec"])
        return Attempt.HELD

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
        if self.hub is None:
            return
        try:
            lease = await self.hub.get(f"{PATH}/{NAME}")
            if (lease.get("spec") or {}).get("holderIdentity") == self.me:
                lease["spec"]["holderIdentity"] = ""
                await self.hub.request("PUT", f"{PATH}/{NAME}", body=lease)
        except ApiError as err:
            log.info("could not release the lease: %s", err)


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


def _micro(at: datetime.datetime) -> str:
    return at.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


LEADERSHIP = web.AppKey("leadership", Leadership)
