"""The reverse tunnel of pull locations (docs/pull.md): its framing (`kube/multiplex.py`),
the agent's read-only filter (`agent/readonly.py`), and a read made through the whole of it
in one process (the hub's `Tunnels`, two `Mux`es, the agent's proxy, a fake cluster)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from types import SimpleNamespace
from typing import Any, cast

import aiohttp
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from apiserver.agent import readonly
from apiserver.api.authn import UserInfo
from apiserver.api.errors import status_errors
from apiserver.hubcache import HUB_CACHE
from apiserver.kube.client import ApiError, Credentials, Kube
from apiserver.kube.multiplex import (
    CLOSE,
    CREDIT,
    DATA,
    OPEN,
    WINDOW,
    Mux,
    ProtocolError,
    Stream,
    bridge,
    frame,
    parse,
)
from apiserver.locations.fleet import Fleet
from apiserver.locations.tunnels import TUNNELS, Tunnels
from apiserver.remote import reverse


def test_a_frame_reads_back_as_it_was_made() -> None:
    assert parse(frame(DATA, 7, b"abc")) == (DATA, 7, b"abc")
    assert parse(frame(OPEN, 1)) == (OPEN, 1, b"")
    assert parse(frame(CREDIT, 2**32 - 1, b"\x00\x00\x10\x00")) == (
        CREDIT,
        2**32 - 1,
        b"\0\0\x10\0",
    )


@pytest.mark.parametrize(
    "message",
    [
        b"",
        b"\x02\x00\x00",
        b"\x09\x00\x00\x00\x01",
        frame(CREDIT, 1, b"\x01"),
        frame(CLOSE, 1, b"x"),
    ],
)
def test_a_malformed_frame_is_a_protocol_error(message: bytes) -> None:
    with pytest.raises(ProtocolError):
        parse(message)


def pair(
    on_open: Callable[[Stream], Awaitable[None]], window: int = WINDOW
) -> tuple[Mux, Mux, list[bytes]]:
    """Two muxes joined back to back, as kmc-apiserver's and the agent's; every frame the
    opener sends is also recorded."""
    sent: list[bytes] = []
    holder: dict[str, Mux] = {}

    async def to_agent(message: bytes) -> None:
        sent.append(message)
        holder["agent"].feed(message)

    async def to_hub(message: bytes) -> None:
        holder["hub"].feed(message)

    holder["hub"] = Mux(to_agent, opens=True, window=window)
    holder["agent"] = Mux(to_hub, opens=False, on_open=on_open, window=window)
    return holder["hub"], holder["agent"], sent


async def echo(stream: Stream) -> None:
    while data := await stream.read():
        await stream.write(data)


async def read_exactly(stream: Stream, size: int) -> bytes:
    got = b""
    while len(got) < size:
        piece = await stream.read()
        assert piece, f"the stream ended after {len(got)} of {size} bytes"
        got += piece
    return got


async def test_streams_carry_bytes_both_ways_each_on_its_own() -> None:
    hub, _, _ = pair(echo)
    first, second = await hub.open(), await hub.open()
    big = bytes(range(256)) * 4096  # 1 MiB: many frames, and more than one window
    writing = asyncio.create_task(first.write(big))
    await second.write(b"hello")
    assert await read_exactly(second, 5) == b"hello"
    assert await asyncio.wait_for(read_exactly(first, len(big)), 60) == big
    await writing
    await second.close()
    await first.close()
    assert len(hub) == 0


async def test_a_stream_closed_by_the_other_side_reads_to_its_end_then_empty() -> None:
    async def say_and_go(stream: Stream) -> None:
        await stream.write(b"last words")

    hub, _, _ = pair(say_and_go)
    stream = await hub.open()
    assert await read_exactly(stream, 10) == b"last words"
    assert await asyncio.wait_for(stream.read(), 60) == b""
    with pytest.raises(ConnectionResetError):
        await stream.write(b"more")


async def test_a_reader_that_does_not_read_holds_at_most_a_window() -> None:
    """Flow control: the agent's side never reads; the hub's writer stops at the window."""
    never = asyncio.Event()

    async def stuck(stream: Stream) -> None:
        await never.wait()

    window = 64 * 1024
    hub, agent, sent = pair(stuck, window=window)
    stream = await hub.open()
    writing = asyncio.create_task(stream.write(b"x" * (4 * window)))
    for _ in range(1000):  # yields only: the frames are handed over synchronously
        if sum(len(parse(m)[2]) for m in sent if parse(m)[0] == DATA) >= window:
            break
        await asyncio.sleep(0)
    for _ in range(50):
        await asyncio.sleep(0)
    carried = sum(len(parse(m)[2]) for m in sent if parse(m)[0] == DATA)
    assert carried == window, carried
    assert not writing.done()
    writing.cancel()
    await agent.end()
    never.set()


async def test_data_past_its_credit_ends_the_connection() -> None:
    hub, agent, _ = pair(echo, window=16)
    await hub.open()
    with pytest.raises(ProtocolError):
        agent.feed(frame(DATA, 1, b"y" * 17))


async def test_only_the_opening_side_opens() -> None:
    hub, agent, _ = pair(echo)
    with pytest.raises(ProtocolError):
        hub.feed(frame(OPEN, 5))
    with pytest.raises(ProtocolError):
        await agent.open()


async def test_a_connection_gone_ends_every_stream() -> None:
    hub, _, _ = pair(echo)
    stream = await hub.open()
    await hub.end()
    assert await stream.read() == b""
    with pytest.raises(ConnectionResetError):
        await stream.write(b"z")
    with pytest.raises(ConnectionResetError):
        await hub.open()


IMPERSONATED = {"Impersonate-User": "alice"}


@pytest.mark.parametrize(
    ("method", "path", "headers", "why"),
    [
        ("GET", "/api/v1/namespaces/a/pods", IMPERSONATED, None),
        ("GET", "/apis/apps/v1/deployments", {**IMPERSONATED, "Accept": "x"}, None),
        ("GET", "/api/v1/namespaces/a/pods/p/log", IMPERSONATED, None),
        ("POST", "/api/v1/namespaces/a/pods", IMPERSONATED, "reads only (GET), not POST"),
        ("DELETE", "/api/v1/namespaces/a/pods/p", IMPERSONATED, "not DELETE"),
        ("PATCH", "/apis/apps/v1/namespaces/a/deployments/d", IMPERSONATED, "not PATCH"),
        ("GET", "/api/v1/namespaces/a/pods", {}, "made as a hub caller"),
        ("GET", "/api/v1/namespaces/a/pods/p/exec", IMPERSONATED, "not a read"),
        ("GET", "/api/v1/namespaces/a/pods/p/portforward", IMPERSONATED, "not a read"),
        ("GET", "/api/v1/namespaces/a/services/s/proxy/x", IMPERSONATED, "not a read"),
        (
            "GET",
            "/api/v1/namespaces/a/pods/p/attach",
            {**IMPERSONATED, "Connection": "Upgrade", "Upgrade": "websocket"},
            "switched",
        ),
        ("GET", "/metrics", IMPERSONATED, "not under /api or /apis"),
        # By position, as kube-apiserver reads a path: names that look like sub-resources.
        ("GET", "/api/v1/namespaces/proxy/pods", IMPERSONATED, None),
        ("GET", "/api/v1/namespaces/a/pods/exec", IMPERSONATED, None),
        ("GET", "/apis/exec/v1/namespaces/attach/things/portforward", IMPERSONATED, None),
        ("GET", "/api/v1/watch/namespaces/a/pods/p", IMPERSONATED, None),
        ("GET", "/api/v1/namespaces/a/status", IMPERSONATED, None),
        ("GET", "/api/v1/proxy/namespaces/a/pods/p", IMPERSONATED, "not a read"),
        ("GET", "/api/v1/nodes/n/proxy/metrics", IMPERSONATED, "not a read"),
        ("GET", "/apis/x.io/v1/namespaces/a/things/t/exec", IMPERSONATED, "not a read"),
        ("GET", "/api/v1/namespaces/a/pods/../secrets", IMPERSONATED, "not a read"),
    ],
)
def test_the_agent_forwards_only_reads_made_as_a_hub_caller(
    method: str, path: str, headers: dict[str, str], why: str | None
) -> None:
    said = readonly.refusal(method, path, headers)
    if why is None:
        assert said is None
    else:
        assert said is not None and why in said, said
        assert said.startswith(readonly.READS_ONLY)


async def test_a_read_goes_through_the_tunnel_as_the_caller_and_a_write_is_refused() -> None:
    """The hub's client for a pull location, through `Tunnels`, two muxes and the agent's
    proxy, reaches a fake cluster as the agent with the caller impersonated; a log streams;
    a write comes back a 403 from the agent; once the tunnel is gone the client is too."""
    seen: list[tuple[str, str, str, list[str]]] = []

    async def cluster(request: web.Request) -> web.StreamResponse:
        seen.append(
            (
                request.method,
                request.path_qs,
                request.headers.get("Authorization", ""),
                request.headers.getall("Impersonate-Group", []),
            )
        )
        if request.path.endswith("/log"):
            response = web.StreamResponse(headers={"Content-Type": "text/plain"})
            await response.prepare(request)
            for n in range(3):
                await response.write(f"line {n}\n".encode())
            return response
        return web.json_response(
            {"kind": "PodList", "items": [], "who": request.headers.get("Impersonate-User")}
        )

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", cluster)
    async with TestServer(app) as server, aiohttp.ClientSession() as session:
        own = Kube(
            session,
            Credentials(str(server.make_url("")).rstrip("/"), False, token="agent-token"),
            "edge",
        )
        proxy = web.AppRunner(readonly.make_app(own))
        await proxy.setup()
        site = web.TCPSite(proxy, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]

        async def carry(stream: Stream) -> None:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            await bridge(stream, reader, writer)

        fleet = Fleet(own, session)
        tunnels = Tunnels(fleet)
        hub, _, _ = pair(carry)
        tunnel = await tunnels.connected("edge", hub)
        try:
            kube = fleet.tunnel("edge")
            assert kube is tunnel.kube
            headers: Any = {"Impersonate-User": "alice"}
            answer = await kube.request(
                "GET", "/api/v1/namespaces/a/pods", params={"limit": "5"}, headers=headers
            )
            assert answer["who"] == "alice"
            assert seen[-1][:3] == (
                "GET",
                "/api/v1/namespaces/a/pods?limit=5",
                "Bearer agent-token",
            )
            # Many at once, each its own stream.
            many = await asyncio.gather(
                *(
                    kube.request("GET", f"/api/v1/namespaces/n{i}/pods", headers=headers)
                    for i in range(8)
                )
            )
            assert all(a["who"] == "alice" for a in many)
            from apiserver.kube import streams

            async with streams.opened(
                kube, "GET", "/api/v1/namespaces/a/pods/p/log", [], headers
            ) as opened:
                text = b"".join([chunk async for chunk in opened.chunks])
            assert text == b"line 0\nline 1\nline 2\n"
            before = len(seen)
            with pytest.raises(ApiError) as refused:
                await kube.request("DELETE", "/api/v1/namespaces/a/pods/p", headers=headers)
            assert refused.value.code == 403
            assert readonly.READS_ONLY in str(refused.value)
            with pytest.raises(ApiError) as unimpersonated:
                await kube.get("/api/v1/pods")
            assert unimpersonated.value.code == 403
            assert len(seen) == before  # neither reached the cluster
        finally:
            await tunnels.gone(tunnel)
            await proxy.cleanup()
        assert fleet.tunnel("edge") is None
        await tunnels.close()


class _HubCache:
    def __init__(self, locations: dict[str, Any]) -> None:
        self.locations = SimpleNamespace(cache=locations)

    async def wait_synced(self) -> None:
        return None


@pytest.mark.filterwarnings("ignore:It is recommended to use web.RequestKey")
async def test_only_the_locations_own_agent_opens_its_tunnel() -> None:
    """`locations/<name>/proxy`: another user is 403 (whatever RBAC let through), a push
    location 400; the agent's WebSocket is handed to the fleet while it is open."""
    caller = {"name": "alice"}

    @web.middleware
    async def as_caller(
        request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
    ) -> web.StreamResponse:
        request["kmc.user"] = UserInfo(name=caller["name"])  # what the guard leaves
        return await handler(request)

    async with aiohttp.ClientSession() as session:
        fleet = Fleet(cast(Kube, None), session)
        app = web.Application(middlewares=[status_errors, as_caller])
        app[HUB_CACHE] = cast(
            Any,
            _HubCache(
                {
                    "edge": {"metadata": {"name": "edge"}, "spec": {"mode": "Pull"}},
                    "a": {"metadata": {"name": "a"}, "spec": {"mode": "Push"}},
                }
            ),
        )
        tunnels = app[TUNNELS] = Tunnels(fleet)
        reverse.add_routes(app)
        async with TestServer(app) as server:
            url = str(server.make_url("/apis/mc.kmc.dev/v1alpha1/locations/edge/proxy"))
            with pytest.raises(aiohttp.WSServerHandshakeError) as refused:
                await session.ws_connect(url)
            assert refused.value.status == 403
            async with session.get(url) as answer:
                assert answer.status == 403
                assert "only location edge's agent" in (await answer.json())["message"]
            caller["name"] = "kmc:location:a"
            with pytest.raises(aiohttp.WSServerHandshakeError) as pushed:
                await session.ws_connect(url.replace("/edge/", "/a/"))
            assert pushed.value.status == 400
            caller["name"] = "kmc:location:edge"
            async with session.ws_connect(url) as ws:
                for _ in range(200):
                    if fleet.tunnel("edge") is not None:
                        break
                    await asyncio.sleep(0.05)
                assert fleet.tunnel("edge") is not None
                await ws.close()
            for _ in range(200):
                if fleet.tunnel("edge") is None:
                    break
                await asyncio.sleep(0.05)
            assert fleet.tunnel("edge") is None
        await tunnels.close()
