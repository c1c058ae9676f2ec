"""Streams through kmc-apiserver, on real sockets: a switched connection carries bytes both
ways whatever the protocol (SPDY here, which aiohttp cannot parse), with the child's 101
passed on; a refusal comes back as the child's Status naming the location; a log is relayed
as it comes, and a child that goes away in the middle cuts it rather than ending it."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator

import aiohttp
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer
from multidict import CIMultiDict

from apiserver.api.errors import status_errors
from apiserver.kube.client import Credentials, Kube
from apiserver.remote import streams

FORBIDDEN = {
    "kind": "Status",
    "apiVersion": "v1",
    "metadata": {},
    "status": "Failure",
    "message": 'pods "web-1" is forbidden: User "bob" cannot get resource "pods/exec"',
    "reason": "Forbidden",
    "code": 403,
}


class Child:
    """A cluster's apiserver as our upgrades see it: 101 and an echo, or a 403."""

    def __init__(self) -> None:
        self.heads: list[bytes] = []
        self.closed = asyncio.Event()

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        self.heads.append(head)
        if b"/forbidden/" in head:
            body = json.dumps(FORBIDDEN).encode()
            writer.write(
                b"HTTP/1.1 403 Forbidden\r\nContent-Type: application/json\r\n"
                + f"Content-Length: {len(body)}\r\n\r\n".encode()
                + body
            )
            writer.close()
            return
        writer.write(
            b"HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: SPDY/3.1\r\n"
            b"X-Stream-Protocol-Version: v4.channel.k8s.io\r\nX-Internal: not for you\r\n\r\n"
            b"hello from the child"
        )
        while data := await reader.read(1024):
            writer.write(b"echo:" + data)
            await writer.drain()
        self.closed.set()
        writer.close()


@contextlib.asynccontextmanager
async def kmc(child: Child) -> AsyncIterator[tuple[int, Child]]:
    """Our side: a server whose handler switches to the child as `pods/exec` does."""
    upstream = await asyncio.start_server(child.serve, "127.0.0.1", 0)
    port = upstream.sockets[0].getsockname()[1]
    async with aiohttp.ClientSession() as session:
        kube = Kube(session, Credentials(f"http://127.0.0.1:{port}", False, "t0ken"), "us-west")

        async def handle(request: web.Request) -> web.StreamResponse:
            headers = CIMultiDict({"Impersonate-User": "bob"})
            headers.add("Impersonate-Group", "devs")
            headers.add("Impersonate-Group", "system:authenticated")
            return await streams._switched(request, "us-west", kube, request.path, headers)

        app = web.Application(middlewares=[status_errors])
        app.router.add_route("*", "/{tail:.*}", handle)
        server = TestServer(app, host="127.0.0.1")
        await server.start_server()
        try:
            yield server.port or 0, child
        finally:
            await server.close()
            upstream.close()


async def ask(port: int, path: str) -> tuple[asyncio.StreamReader, asyncio.StreamWriter, bytes]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(
        f"POST {path}?command=ls&command=-l HTTP/1.1\r\nHost: kmc\r\nConnection: Upgrade\r\n"
        "Upgrade: SPDY/3.1\r\nX-Stream-Protocol-Version: v4.channel.k8s.io\r\n"
        "X-Stream-Protocol-Version: channel.k8s.io\r\nX-Remote-User: bob\r\n"
        "Content-Length: 0\r\n\r\n".encode()
    )
    head = await reader.readuntil(b"\r\n\r\n")
    return reader, writer, head


async def read_exactly(reader: asyncio.StreamReader, count: int) -> bytes:
    async with asyncio.timeout(30):
        return await reader.readexactly(count)


async def test_a_switched_connection_carries_bytes_both_ways() -> None:
    async with kmc(Child()) as (port, child):
        reader, writer, head = await ask(port, "/api/v1/namespaces/ns/pods/web-1/exec")
        assert head.startswith(b"HTTP/1.1 101 Switching Protocols\r\n")
        assert b"Upgrade: SPDY/3.1" in head
        assert b"X-Stream-Protocol-Version: v4.channel.k8s.io" in head
        assert b"X-Internal" not in head  # only what the switch needs
        # What the child sent right after its 101 is the caller's first bytes.
        assert await read_exactly(reader, 20) == b"hello from the child"
        writer.write(b"stdin bytes")
        assert await read_exactly(reader, 16) == b"echo:stdin bytes"
        # The child saw the caller's upgrade, our credentials and the caller's identity.
        sent = child.heads[0].decode()
        assert sent.startswith("POST /api/v1/namespaces/ns/pods/web-1/exec?command=ls")
        assert "command=-l" in sent.split("\r\n")[0]
        for line in (
            "Authorization: Bearer t0ken",
            "Impersonate-User: bob",
            "Impersonate-Group: devs",
            "Impersonate-Group: system:authenticated",
            "Upgrade: SPDY/3.1",
            "X-Stream-Protocol-Version: v4.channel.k8s.io",
            "X-Stream-Protocol-Version: channel.k8s.io",
        ):
            assert line in sent.split("\r\n"), line
        assert "X-Remote-User" not in sent
        # The caller hangs up: the child's end closes too.
        writer.close()
        async with asyncio.timeout(30):
            await child.closed.wait()


async def test_the_child_ending_ends_the_callers_connection() -> None:
    class Brief(Child):
        async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            await reader.readuntil(b"\r\n\r\n")
            writer.write(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: SPDY/3.1\r\n\r\nbye")
            writer.close()

    async with kmc(Brief()) as (port, _):
        reader, _, head = await ask(port, "/api/v1/namespaces/ns/pods/web-1/exec")
        assert head.startswith(b"HTTP/1.1 101")
        async with asyncio.timeout(30):
            assert await reader.read() == b"bye"  # and then the end


async def test_a_refusal_is_the_childs_status_naming_the_location() -> None:
    async with kmc(Child()) as (port, _):
        reader, _, head = await ask(port, "/forbidden/exec")
        assert head.startswith(b"HTTP/1.1 403")
        length = int(head.lower().split(b"content-length: ")[1].split(b"\r\n")[0])
        status = json.loads(await read_exactly(reader, length))
        assert status["reason"] == "Forbidden" and status["code"] == 403
        assert status["message"] == f"location us-west: {FORBIDDEN['message']}"


async def test_a_location_that_does_not_answer_is_named() -> None:
    async with aiohttp.ClientSession() as session:
        kube = Kube(session, Credentials("http://127.0.0.1:9", False), "eu-west")

        async def handle(request: web.Request) -> web.StreamResponse:
            return await streams._switched(request, "eu-west", kube, "/x", CIMultiDict())

        app = web.Application(middlewares=[status_errors])
        app.router.add_route("*", "/{tail:.*}", handle)
        server = TestServer(app, host="127.0.0.1")
        await server.start_server()
        try:
            reader, _, head = await ask(server.port or 0, "/x")
            assert head.startswith(b"HTTP/1.1 503")
            length = int(head.lower().split(b"content-length: ")[1].split(b"\r\n")[0])
            message = json.loads(await read_exactly(reader, length))["message"]
            assert message.startswith("eu-west (http://127.0.0.1:9) is unreachable")
        finally:
            await server.close()


# --- logs --------------------------------------------------------------------------------------


@contextlib.asynccontextmanager
async def relaying(cut: bool) -> AsyncIterator[str]:
    """A child whose log sends two lines, then ends (or goes away); our relay in front."""
    go_on = asyncio.Event()

    async def log(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse()
        response.content_type = "text/plain"
        await response.prepare(request)
        await response.write(b"one\n")
        await go_on.wait()
        await response.write(b"two\n")
        if cut:
            assert request.transport is not None
            request.transport.close()  # the child's apiserver killed
            return response
        await response.write_eof()
        return response

    child_app = web.Application()
    child_app.router.add_get("/{tail:.*}", log)
    child = TestServer(child_app, host="127.0.0.1")
    await child.start_server()
    async with aiohttp.ClientSession() as session:
        kube = Kube(session, Credentials(str(child.make_url("")).rstrip("/"), False), "us-east")

        async def handle(request: web.Request) -> web.StreamResponse:
            go_on.set()
            return await streams._streamed(request, "us-east", kube, request.path, CIMultiDict())

        app = web.Application(middlewares=[status_errors])
        app.router.add_get("/{tail:.*}", handle)
        server = TestServer(app, host="127.0.0.1")
        await server.start_server()
        try:
            yield str(server.make_url("/api/v1/namespaces/ns/pods/web-1/log"))
        finally:
            await server.close()
            await child.close()


async def test_a_log_is_relayed_to_its_end() -> None:
    async with (
        relaying(cut=False) as url,
        aiohttp.ClientSession() as client,
        client.get(url) as resp,
    ):
        assert resp.status == 200 and resp.content_type == "text/plain"
        assert await resp.read() == b"one\ntwo\n"


async def test_a_log_cut_by_the_child_is_cut_for_the_caller_too() -> None:
    async with (
        relaying(cut=True) as url,
        aiohttp.ClientSession() as client,
        client.get(url) as resp,
    ):
        assert resp.status == 200
        received = b""
        try:
            async for chunk in resp.content.iter_any():
                received += chunk
        except aiohttp.ClientPayloadError:
            pass
        else:
            raise AssertionError(f"the cut log looked whole: {received!r}")
        assert received.startswith(b"one\n")


async def test_a_caller_gone_from_a_quiet_log_ends_the_childs_stream_too(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """aiohttp does not stop a handler whose caller went away (kmc-apiserver runs without
    handler cancellation, as `web.run_app` does by default): a followed log that stays quiet
    must still let go of the child."""
    monkeypatch.setattr(streams, "CALLER_CHECK", 0.05)
    gone = asyncio.Event()

    async def quiet(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse()
        await response.prepare(request)
        await response.write(b"one\n")
        try:
            await asyncio.sleep(3600)  # until its caller (us) lets go: the test server cancels
        finally:
            gone.set()
        return response

    child_app = web.Application()
    child_app.router.add_get("/{tail:.*}", quiet)
    child = TestServer(child_app, host="127.0.0.1")
    await child.start_server()
    async with aiohttp.ClientSession() as session:
        kube = Kube(session, Credentials(str(child.make_url("")).rstrip("/"), False), "us-east")

        async def handle(request: web.Request) -> web.StreamResponse:
            return await streams._streamed(request, "us-east", kube, request.path, CIMultiDict())

        app = web.Application(middlewares=[status_errors])
        app.router.add_get("/{tail:.*}", handle)
        runner = web.AppRunner(app, handler_cancellation=False)  # as kmc-apiserver runs
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        port = runner.addresses[0][1]
        try:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(b"GET /log HTTP/1.1\r\nHost: kmc\r\n\r\n")
            async with asyncio.timeout(30):
                assert b"one" in await reader.readuntil(b"one")
            writer.close()  # the caller goes away while the child says nothing
            async with asyncio.timeout(30):
                await gone.wait()
        finally:
            await runner.cleanup()
            await child.close()
