"""Leader election as client-go does it, on a fake clock against a fake Lease store: expiry
judged on our own clock from when the record last changed, a leader that cannot renew stops
acting at its renew deadline, and stepping down cancels work in flight."""

from __future__ import annotations

import asyncio
from typing import Any, cast

import aiohttp
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from apiserver.kube.client import ApiError, Credentials, Kube, guard_trace
from apiserver.leader import NAME, Attempt, Leadership, NotLeading, Timing
from apiserver.objects import Obj

TIMING = Timing(lease=15.0, renew_deadline=10.0, retry=2.0)


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Hub:
    """One Lease, with resourceVersion preconditions as the apiserver checks them."""

    def __init__(self) -> None:
        self.lease: Obj | None = None
        self.version = 0
        self.hang = False  # requests never answer
        self.fail = False  # requests fail with a 500
        self.writes: list[str] = []  # the holder each successful write named

    def held_by(self, holder: str, renew: str = "2000-01-01T00:00:00.000000Z") -> None:
        """Another replica's lease, renewed (as its clock says) at `renew`."""
        self.version += 1
        self.lease = {
            "metadata": {"name": NAME, "resourceVersion": str(self.version)},
            "spec": {
                "holderIdentity": holder,
                "leaseDurationSeconds": 15,
                "renewTime": renew,
                "leaseTransitions": 0,
            },
        }

    async def _wait(self) -> None:
        if self.hang:
            await asyncio.Event().wait()
        if self.fail:
            raise ApiError.of(500, "InternalError", "etcd is gone")

    async def get(self, _: str) -> Obj:
        await self._wait()
        if self.lease is None:
            raise ApiError.of(404, "NotFound", "no lease")
        return {"metadata": dict(self.lease["metadata"]), "spec": dict(self.lease["spec"])}

    async def create(self, _: str, body: Obj) -> Obj:
        await self._wait()
        if self.lease is not None:
            raise ApiError.of(409, "AlreadyExists", "exists")
        return self._store(body)

    async def request(self, method: str, _: str, body: Obj) -> Obj:
        await self._wait()
        assert method == "PUT" and self.lease is not None
        if body["metadata"].get("resourceVersion") != self.lease["metadata"]["resourceVersion"]:
            raise ApiError.of(409, "Conflict", "the object has been modified")
        return self._store(body)

    def _store(self, body: Obj) -> Obj:
        self.version += 1
        metadata = {**body["metadata"], "resourceVersion": str(self.version)}
        self.lease = {**body, "metadata": metadata}
        self.writes.append(body["spec"]["holderIdentity"])
        return self.lease


def elector(hub: Hub, clock: Clock, me: str = "me", timing: Timing = TIMING) -> Leadership:
    return Leadership(cast(Kube, hub), me, timing, clock=clock)


async def test_a_free_lease_is_taken_and_renewed() -> None:
    hub, clock = Hub(), Clock()
    me = elector(hub, clock)
    assert await me.step() is Attempt.HELD
    assert me.leading.is_set() and me.may_act()
    clock.now += 2
    assert await me.step() is Attempt.HELD
    assert hub.writes == ["me", "me"]


async def test_another_holders_lease_expires_on_our_clock_not_theirs() -> None:
    """Its renewTime is 26 years old by our wall clock (skew): still we wait a full lease
    from when we first saw the record."""
    hub, clock = Hub(), Clock()
    hub.held_by("other", renew="2000-01-01T00:00:00.000000Z")
    me = elector(hub, clock)
    assert await me.step() is Attempt.TAKEN
    clock.now += 14.9
    assert await me.step() is Attempt.TAKEN
    assert not me.leading.is_set() and hub.writes == []
    clock.now += 0.2
    assert await me.step() is Attempt.HELD
    assert me.leading.is_set()


async def test_a_renewal_seen_restarts_the_wait_even_with_a_renew_time_in_the_future() -> None:
    hub, clock = Hub(), Clock()
    hub.held_by("other", renew="2999-01-01T00:00:00.000000Z")
    me = elector(hub, clock)
    await me.step()
    clock.now += 10
    hub.held_by("other", renew="2999-01-01T00:00:02.000000Z")  # it renewed
    assert await me.step() is Attempt.TAKEN
    clock.now += 14
    assert await me.step() is Attempt.TAKEN  # 24 s since we first saw it, 14 since it changed
    clock.now += 1.5
    assert await me.step() is Attempt.HELD


async def test_a_released_lease_is_taken_at_once() -> None:
    hub, clock = Hub(), Clock()
    hub.held_by("")
    me = elector(hub, clock)
    assert await me.step() is Attempt.HELD


async def test_a_leader_that_cannot_renew_stops_acting_at_its_deadline() -> None:
    hub, clock = Hub(), Clock()
    me = elector(hub, clock)
    await me.step()
    hub.fail = True
    clock.now += 5
    assert await me.step() is Attempt.FAILED
    assert me.may_act()  # a failed renewal is tried again until the deadline
    me.check()
    clock.now += 4.9
    assert me.may_act()
    clock.now += 0.2  # 10.1 s since the renewal that worked began
    assert not me.may_act()  # refused at once, before the loop notices
    with pytest.raises(NotLeading) as refused:
        me.check()
    assert refused.value.code == 503 and "me is not leading" in str(refused.value)
    await me.step()
    assert not me.leading.is_set()


async def test_the_deadline_runs_from_when_the_renewal_began() -> None:
    """A renewal whose answer took 4 s counts from when it was sent: the others' lease runs
    from when they saw it change, which is later."""
    hub, clock = Hub(), Clock()
    me = elector(hub, clock)
    started = clock.now
    real_get = hub.get

    async def slow_get(path: str) -> Obj:
        clock.now += 4
        return await real_get(path)

    hub.get = slow_get  # type: ignore[method-assign,assignment]
    assert await me.step() is Attempt.HELD
    clock.now = started + 9.9
    assert me.may_act()
    clock.now = started + 10.0
    assert not me.may_act()


async def test_a_hanging_renewal_ends_at_the_deadline() -> None:
    """Real time, short timings: the request never answers; the step returns at the deadline
    and the replica no longer leads."""
    hub = Hub()
    timing = Timing(lease=0.6, renew_deadline=0.3, retry=0.05)
    me = Leadership(cast(Kube, hub), "me", timing)
    await me.step()
    hub.hang = True
    loop = asyncio.get_running_loop()
    began = loop.time()
    assert await asyncio.wait_for(me.step(), timeout=5) is Attempt.FAILED
    assert loop.time() - began < 0.5
    assert not me.leading.is_set() and not me.may_act()


async def test_a_leader_that_sees_another_holder_steps_down() -> None:
    hub, clock = Hub(), Clock()
    me = elector(hub, clock)
    await me.step()
    hub.held_by("other", renew="2026-01-01T00:00:00.000000Z")
    clock.now += 2
    assert await me.step() is Attempt.TAKEN
    assert not me.leading.is_set()


async def test_a_stale_write_loses_to_the_new_holder() -> None:
    """Paused after reading the lease: the PUT carries the old resourceVersion and fails."""
    hub, clock = Hub(), Clock()
    me = elector(hub, clock)
    await me.step()
    real_get = hub.get

    async def get_then_lose(path: str) -> Obj:
        read = await real_get(path)
        hub.held_by("other")  # another replica took over meanwhile
        return read

    hub.get = get_then_lose  # type: ignore[method-assign,assignment]
    clock.now += 2
    assert await me.step() is Attempt.FAILED
    assert hub.lease is not None and hub.lease["spec"]["holderIdentity"] == "other"


async def test_stepping_down_cancels_reconciles_in_flight() -> None:
    hub, clock = Hub(), Clock()
    me = elector(hub, clock)
    await me.step()
    started, finished = asyncio.Event(), []

    async def reconcile(key: str) -> None:
        started.set()
        await asyncio.sleep(3600)
        finished.append(key)

    acting = asyncio.create_task(me.act(reconcile, "web"))
    await started.wait()
    background = asyncio.create_task(asyncio.sleep(3600))
    me.track(background)
    hub.fail = True
    clock.now += 11
    await me.step()
    with pytest.raises(NotLeading):
        await acting
    await asyncio.sleep(0)
    assert background.cancelled() and finished == []


async def test_a_follower_reconcile_waits_to_lead() -> None:
    hub, clock = Hub(), Clock()
    hub.held_by("other")
    me = elector(hub, clock)
    await me.step()
    done: list[str] = []

    async def reconcile(key: str) -> None:
        done.append(key)

    waiting = asyncio.create_task(me.act(reconcile, "web"))
    await asyncio.sleep(0.01)
    assert done == []
    clock.now += 16
    await me.step()
    await asyncio.wait_for(waiting, timeout=5)
    assert done == ["web"]


async def test_cancelling_the_worker_cancels_the_reconcile() -> None:
    me = Leadership.solo()
    inner: list[asyncio.Task[Any]] = []

    async def reconcile(_: str) -> None:
        task = asyncio.current_task()
        assert task is not None
        inner.append(task)
        await asyncio.sleep(3600)

    worker = asyncio.create_task(me.act(reconcile, "web"))
    await asyncio.sleep(0.01)
    worker.cancel()
    with pytest.raises(asyncio.CancelledError):
        await worker
    assert inner[0].cancelled()


def test_solo_always_acts() -> None:
    me = Leadership.solo()
    assert me.may_act()
    me.check()


async def test_a_guarded_client_refuses_writes_before_they_leave() -> None:
    hub, clock = Hub(), Clock()
    me = elector(hub, clock)
    session = cast(Any, None)  # never reached: the guard refuses first
    kube = Kube(session, cast(Any, None), "us-east", agent="kmc-apiserver/me").guarded(me.check)
    for method in ("POST", "PUT", "PATCH", "DELETE"):
        with pytest.raises(NotLeading):
            await kube.request(method, "/api/v1/namespaces")
    assert kube.agent == "kmc-apiserver/me"


@pytest.mark.parametrize("refused_at", [2, 3])
async def test_a_write_is_asked_again_just_before_its_bytes_go_out(refused_at: int) -> None:
    """Allowed when the write began, refused by the time its connection was made (2: a pause
    in the TLS handshake) or its bytes were about to be written (3: a pause while its write
    waited for the loop): nothing of it reaches the server, and the refusal is the guard's."""
    seen: list[str] = []

    async def handler(request: web.Request) -> web.Response:
        seen.append(request.method)
        return web.json_response({})

    app = web.Application()
    app.router.add_route("*", "/x", handler)
    asked = [0]

    def guard() -> None:
        asked[0] += 1
        if asked[0] >= refused_at:
            raise NotLeading.now("me", "deadline passed")

    async with (
        TestServer(app) as server,
        aiohttp.ClientSession(trace_configs=[guard_trace()]) as session,
    ):
        creds = Credentials(server=str(server.make_url("")).rstrip("/"), ssl=False)
        kube = Kube(session, creds, "hub").guarded(guard)
        await kube.request("GET", "/x")  # reads are never asked
        for write in (kube.create("/x", {}), kube.delete("/x")):
            asked[0] = 0
            with pytest.raises(NotLeading):
                await write
    assert seen == ["GET"]


async def test_a_guarded_write_that_passes_goes_out_whole() -> None:
    seen: list[tuple[str, bytes]] = []

    async def handler(request: web.Request) -> web.Response:
        seen.append((request.method, await request.read()))
        return web.json_response({})

    app = web.Application()
    app.router.add_route("*", "/x", handler)
    async with (
        TestServer(app) as server,
        aiohttp.ClientSession(trace_configs=[guard_trace()]) as session,
    ):
        creds = Credentials(server=str(server.make_url("")).rstrip("/"), ssl=False)
        kube = Kube(session, creds, "hub").guarded(lambda: None)
        await kube.create("/x", {"a": 1})
        await kube.delete("/x")
    assert seen[0] == ("POST", b'{"a":1}')
    assert seen[1][0] == "DELETE" and b'"propagationPolicy":"Background"' in seen[1][1]
