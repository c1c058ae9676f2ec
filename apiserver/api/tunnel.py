"""A request's connection switched to another protocol, then bytes carried both ways.

kube-apiserver serves `exec`, `attach` and `portforward` by answering `101 Switching
Protocols` and proxying the connection to the kubelet as bytes (its UpgradeAwareHandler); the
hub's aggregator does the same for aggregated servers. We do it too, so whatever kubectl speaks
(WebSocket channels, SPDY, SPDY tunnelled in WebSocket) passes unchanged between the hub's
caller and the cluster that answers, and the upstream's own 101 (its `Sec-WebSocket-Accept`,
the protocol it chose) is what the caller gets.

aiohttp switches a connection itself only for WebSocket, which it then parses; so after our
101 the connection's parser is replaced (`RequestHandler.set_parser`, the hook aiohttp's own
WebSocketResponse uses) by one that hands the bytes over as they come, through an
`aiohttp.StreamReader` that pauses reading when they pile up. A 101's body is not framed, so
`StreamResponse.write` sends bytes as they are, waiting when the socket is full.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl
from collections.abc import Iterable
from dataclasses import dataclass

import aiohttp
from aiohttp import web

from apiserver.kube.streams import Upgraded

log = logging.getLogger(__name__)

_CHUNK = 64 * 1024
# Headers a client sends to ask for a switch, which the upstream must see to make it.
UPGRADE_HEADERS = (
    "Connection",
    "Upgrade",
    "Sec-WebSocket-Key",
    "Sec-WebSocket-Version",
    "Sec-WebSocket-Protocol",
    "Sec-WebSocket-Extensions",
    "X-Stream-Protocol-Version",
)
# What the upstream's 101 says that the client needs (hop-by-hop Connection and Upgrade
# included: they are the switch itself).
SWITCHED_HEADERS = frozenset(
    {
        "connection",
        "upgrade",
        "sec-websocket-accept",
        "sec-websocket-protocol",
        "sec-websocket-extensions",
        "x-stream-protocol-version",
    }
)


def wants_upgrade(request: web.Request) -> bool:
    """A request asking to switch protocols (`Connection: Upgrade` and an `Upgrade`)."""
    tokens = {t.strip().lower() for t in request.headers.get("Connection", "").split(",")}
    return "upgrade" in tokens and bool(request.headers.get("Upgrade"))


class _Bytes:
    """The connection's parser once it is switched: every byte goes to `reader` as it is."""

    def __init__(self, reader: aiohttp.StreamReader) -> None:
        self.reader = reader

    def feed_data(self, data: bytes) -> tuple[bool, bytes]:
        self.reader.feed_data(data)
        return False, b""

    def feed_eof(self) -> None:
        self.reader.feed_eof()


@dataclass
class Switched:
    """Our 101, sent: what the client sends from now on, and where to write to it."""

    response: web.StreamResponse
    reader: aiohttp.StreamReader


async def switch(request: web.Request, headers: Iterable[tuple[str, str]]) -> Switched:
    """Answer 101 with `headers` (those of `SWITCHED_HEADERS`) and take over the connection.
    The connection is closed when the handler returns."""
    response = web.StreamResponse(status=101)
    for name, value in headers:
        if name.lower() in SWITCHED_HEADERS:
            response.headers.add(name, value)
    reader = aiohttp.StreamReader(request.protocol, _CHUNK, loop=asyncio.get_running_loop())
    # Before the 101 leaves: a client may send its first frames the moment it has it.
    request.protocol.set_parser(_Bytes(reader))  # type: ignore[arg-type]
    response.force_close()
    await response.prepare(request)
    return Switched(response, reader)


async def splice(switched: Switched, upstream: Upgraded) -> tuple[int, int]:
    """Bytes both ways until either side closes (or fails): then both are closed, as
    kube-apiserver's proxy does (these protocols end with their own frames, not half a
    connection). Returns the bytes carried (up, down)."""
    carried = [0, 0]

    async def up() -> None:
        while data := await switched.reader.readany():
            upstream.writer.write(data)
            carried[0] += len(data)
            await upstream.writer.drain()

    async def down() -> None:
        while data := await upstream.reader.read(_CHUNK):
            await switched.response.write(data)
            carried[1] += len(data)

    tasks = [asyncio.create_task(up()), asyncio.create_task(down())]
    try:
        done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        for task in done:
            if not task.cancelled() and (err := task.exception()) is not None:
                if not isinstance(err, OSError | ssl.SSLError | aiohttp.ClientError):
                    raise err
                log.debug("a switched connection ended: %s", err)
    finally:
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        await upstream.close()
    return carried[0], carried[1]
