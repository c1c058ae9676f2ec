"""The agent's end of the reverse tunnel: one WebSocket to kmc-apiserver, kept open.

The hub cannot dial a pull location, so for punch-through reads the agent dials out: `GET
/apis/mc.kmc.dev/v1alpha1/locations/<name>/proxy` with an Upgrade, through the hub's
aggregator, as its own hub identity. kmc-apiserver then opens streams over it
(`kube/multiplex.py`), one per HTTP connection it makes to the location; each is carried
here to the agent's read-only proxy (`readonly.py`), served on a unix socket in a private
directory, which forwards reads to this cluster.

When the connection drops (or cannot be made) the agent dials again after a backoff. It
runs beside the feed, the report and the heartbeat and shares nothing with them but the
session: a tunnel problem is logged and retried, never raised into the agent's sync work.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import shutil
import tempfile
import time
from pathlib import Path

import aiohttp
from aiohttp import web

from apiserver.agent import readonly
from apiserver.kube.client import Kube
from apiserver.kube.informer import Backoff
from apiserver.kube.multiplex import Mux, ProtocolError, Stream, bridge

log = logging.getLogger(__name__)

HEARTBEAT = 20.0  # seconds between pings: a connection dropped on the way is seen within two
STEADY = 60.0  # a connection that lasted this long resets the backoff


def path(location: str) -> str:
    return f"/apis/mc.kmc.dev/v1alpha1/locations/{location}/proxy"


class Tunnel:
    def __init__(self, hub: Kube, cluster: Kube, location: str) -> None:
        self.hub = hub
        self.cluster = cluster
        self.location = location

    async def run(self) -> None:
        try:
            await self._serve()
        except Exception:  # the tunnel stops; the agent's sync work goes on
            log.exception("tunnel: stopped")

    async def _serve(self) -> None:
        folder = Path(tempfile.mkdtemp(prefix="kmc-agent-tunnel-"))  # 0700: ours only
        socket = folder / "proxy.sock"
        runner = web.AppRunner(readonly.make_app(self.cluster), handle_signals=False)
        await runner.setup()
        site = web.UnixSite(runner, str(socket))
        await site.start()
        try:
            await self._dial_forever(socket)
        finally:
            await runner.cleanup()
            shutil.rmtree(folder, ignore_errors=True)

    async def _dial_forever(self, socket: Path) -> None:
        backoff = Backoff(first=1.0, cap=30.0)
        while True:
            started = time.monotonic()
            try:
                await self._once(socket)
                log.info("tunnel: the hub closed it; dialling again")
            except asyncio.CancelledError:
                raise
            except Exception as err:  # whatever it is, the tunnel alone waits and retries
                log.warning("tunnel: %s", _words(err))
            if time.monotonic() - started > STEADY:
                backoff.reset()
            await asyncio.sleep(backoff.next())

    async def _once(self, socket: Path) -> None:
        creds = self.hub.creds  # taken at each dial: a renewed certificate is used from then
        async with self.hub.session.ws_connect(
            creds.server + path(self.location),
            ssl=creds.ssl,
            headers=self.hub.headers(),
            heartbeat=HEARTBEAT,
            max_msg_size=1 << 20,
            autoping=True,
        ) as ws:
            log.info("tunnel: connected to the hub")

            async def carry(stream: Stream) -> None:
                reader, writer = await asyncio.open_unix_connection(str(socket))
                await bridge(stream, reader, writer)

            mux = Mux(ws.send_bytes, opens=False, on_open=carry)
            try:
                async for message in ws:
                    if message.type == aiohttp.WSMsgType.BINARY:
                        mux.feed(message.data)
                    elif message.type == aiohttp.WSMsgType.ERROR:
                        raise ConnectionError(f"the connection failed: {ws.exception()}")
            finally:
                await mux.end()


def _words(err: BaseException) -> str:
    if isinstance(err, aiohttp.WSServerHandshakeError):
        return f"the hub refused the tunnel: {err.status} {err.message}"
    if isinstance(err, aiohttp.ClientConnectorError):  # aiohttp's own words name objects
        refused = isinstance(err.os_error, ConnectionRefusedError)
        why = "connection refused" if refused else err.os_error.strerror or str(err.os_error)
        return f"the hub is unreachable: {why}"
    if isinstance(err, ProtocolError):
        return f"the hub sent a bad frame: {err}"
    with contextlib.suppress(Exception):
        return f"{type(err).__name__}: {err}" if str(err) else type(err).__name__
    return type(err).__name__
