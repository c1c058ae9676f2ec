"""`GET /apis/mc.kmc.dev/v1alpha1/locations/<name>/proxy` (a WebSocket): an agent's tunnel.

A pull location's agent dials this through the hub's aggregator and keeps it open; over it
kmc-apiserver reads the location for punch-through (`locations/tunnels.py`, framing in
`kube/multiplex.py`). The sub-resource is named `proxy` because kube-apiserver counts
`proxy` among the long-running sub-resources (with exec, attach, log, portforward): its
aggregator does not cut it after a minute as it would another `get`.

Who may dial: the guard has checked `get` on `locations/proxy` for that name (the agent's
hub Role names only its own location); and here, the caller must be that location's agent
(`kmc:location:<name>`, its certificate's user), so no one else's credential can stand in
for the location's cluster. The location must be a Pull one.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import aiohttp
from aiohttp import web

from apiserver.api import errors
from apiserver.api.guard import user_of
from apiserver.contract import MC_GROUP, VERSION
from apiserver.hubcache import HUB_CACHE
from apiserver.kube.multiplex import Mux, ProtocolError
from apiserver.locations import joins
from apiserver.locations.tunnels import TUNNELS
from apiserver.models.location import PULL

log = logging.getLogger(__name__)

PATH = f"/apis/{MC_GROUP}/{VERSION}/locations/{{name}}/proxy"
HEARTBEAT = 20.0  # seconds between WebSocket pings: a dead peer is seen within two

# The tunnels being served, ended when the server shuts down.
OPEN = web.AppKey("open_tunnels", set["asyncio.Task[Any]"])


def add_routes(app: web.Application) -> None:
    app.router.add_get(PATH, serve, allow_head=False)
    app[OPEN] = set()
    app.on_shutdown.append(_end_tunnels)


async def _end_tunnels(app: web.Application) -> None:
    for task in app[OPEN].copy():
        task.cancel()


async def serve(request: web.Request) -> web.StreamResponse:
    name = request.match_info["name"]
    user = user_of(request)
    if user.name != joins.user(name):
        raise errors.forbidden(
            user.name,
            "get",
            "locations",
            MC_GROUP,
            "",
            subresource="proxy",
            name=name,
            reason=f"only location {name}'s agent ({joins.user(name)}) may open its tunnel",
        )
    await request.app[HUB_CACHE].wait_synced()
    location = request.app[HUB_CACHE].locations.cache.get(name)
    if location is None:
        raise errors.not_found("locations", MC_GROUP, name)
    if (location.get("spec") or {}).get("mode") != PULL:
        raise errors.bad_request(f"location {name} is not a pull location: it has no tunnel")
    ws = web.WebSocketResponse(heartbeat=HEARTBEAT, max_msg_size=1 << 20)
    if not ws.can_prepare(request).ok:
        raise errors.bad_request("the tunnel is a WebSocket: ask with Upgrade: websocket")
    await ws.prepare(request)
    mux = Mux(ws.send_bytes, opens=True)
    tunnels = request.app[TUNNELS]
    tunnel = await tunnels.connected(name, mux)
    task = asyncio.current_task()
    assert task is not None
    request.app[OPEN].add(task)
    try:
        async for message in ws:
            if message.type != aiohttp.WSMsgType.BINARY:
                continue
            mux.feed(message.data)
    except ProtocolError as err:
        log.warning("location %s: its tunnel sent a bad frame: %s", name, err)
    finally:
        request.app[OPEN].discard(task)
        await tunnels.gone(tunnel)
        await ws.close()
    return ws
