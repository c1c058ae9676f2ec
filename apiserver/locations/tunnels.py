"""Pull locations' reverse tunnels, as kmc-apiserver sees them: a local door to each.

A pull location's agent dials in (`remote/reverse.py` takes its WebSocket); nothing on the
hub side can dial the location. So that the rest of the code reads a pull location exactly
as a pushed one, each connected tunnel is served as a unix socket in a private directory,
and `Fleet.tunnel(name)` hands out a `Kube` whose connections go to that socket: each
connection made to it becomes one stream of the tunnel (`kube/multiplex.py`), which the
agent carries to its read-only proxy. `fan_out`, pods/log and GETs of one object then work
unchanged; a request made when the tunnel is gone fails as an unreachable location does.

One tunnel per location: a new one (an agent restarted before its old connection was seen
to drop) replaces the old.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import shutil
import tempfile
from pathlib import Path

import aiohttp
from aiohttp import web

from apiserver.kube.client import Credentials, Kube
from apiserver.kube.multiplex import Mux, bridge
from apiserver.locations.fleet import Fleet

log = logging.getLogger(__name__)

NOT_CONNECTED = "its agent's tunnel is not connected"


class Tunnel:
    """One agent's connection: its `Mux`, the socket that opens its streams, the client."""

    def __init__(self, location: str, mux: Mux, path: Path, agent: str) -> None:
        self.location = location
        self.mux = mux
        self.path = path
        self._server: asyncio.AbstractServer | None = None
        self.session = aiohttp.ClientSession(connector=aiohttp.UnixConnector(str(path), limit=0))
        creds = Credentials(f"http://{location}.tunnel", ssl=False)
        self.kube = Kube(self.session, creds, location, agent=agent)

    async def start(self) -> None:
        self._server = await asyncio.start_unix_server(self._accept, path=str(self.path))

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            stream = await self.mux.open()
        except ConnectionError:
            writer.close()
            return
        await bridge(stream, reader, writer)

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
        await self.mux.end()
        await self.session.close()
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()


class Tunnels:
    """The connected tunnels by location; each handed to the fleet while it lasts."""

    def __init__(self, fleet: Fleet, agent: str = "kmc-apiserver") -> None:
        self.fleet = fleet
        self.agent = agent
        self._dir = Path(tempfile.mkdtemp(prefix="kmc-tunnels-"))  # 0700: ours only
        self._tunnels: dict[str, Tunnel] = {}
        self._made = 0

    async def connected(self, location: str, mux: Mux) -> Tunnel:
        """A tunnel for `mux`, served from now on (replacing the location's last one)."""
        old = self._tunnels.pop(location, None)
        if old is not None:
            log.info("location %s: a new tunnel replaces the one connected before", location)
            await old.close()
        self._made += 1
        tunnel = Tunnel(location, mux, self._dir / f"{self._made}.sock", self.agent)
        await tunnel.start()
        self._tunnels[location] = tunnel
        self.fleet.attach_tunnel(location, tunnel.kube)
        log.info("location %s: its agent's tunnel is connected", location)
        return tunnel

    async def gone(self, tunnel: Tunnel) -> None:
        """The tunnel's connection ended: it is no longer served."""
        if self._tunnels.get(tunnel.location) is tunnel:
            del self._tunnels[tunnel.location]
            self.fleet.detach_tunnel(tunnel.location, tunnel.kube)
            log.info("location %s: its agent's tunnel is gone", tunnel.location)
        await tunnel.close()

    async def close(self) -> None:
        for tunnel in list(self._tunnels.values()):
            await self.gone(tunnel)
        shutil.rmtree(self._dir, ignore_errors=True)


TUNNELS = web.AppKey("tunnels", Tunnels)
