"""The application's shared state, one `web.AppKey` each: loops, clients and the guards.

Kept apart from `app.py` so request handlers can read the state without importing the
module that imports them.
"""

from __future__ import annotations

import asyncio

from aiohttp import web

from apiserver.api.authn import Authenticator, FrontProxyWatch
from apiserver.api.authz import Authorizer
from apiserver.hubcache import HubCache
from apiserver.kube.client import Kube
from apiserver.leader import Leadership
from apiserver.locations.fleet import Fleet
from apiserver.locations.loop import LocationLoop
from apiserver.options import Options
from apiserver.placement.loop import PlacementLoop
from apiserver.readlimit import ReadLimiter
from apiserver.remote.cache import ChildAuthorizers, RemoteCaches
from apiserver.sync.loop import SyncLoop
from apiserver.viewrows import ViewRows

OPTIONS = web.AppKey("options", Options)
HUB = web.AppKey("hub", Kube)
FLEET = web.AppKey("fleet", Fleet)
LEADERSHIP = web.AppKey("leadership", Leadership)
LOOPS = web.AppKey("loops", dict[str, "asyncio.Task[None]"])
HUB_CACHE = web.AppKey("hub_cache", HubCache)
LOCATIONS = web.AppKey("locations", LocationLoop)
PLACEMENT = web.AppKey("placement", PlacementLoop)
SYNC = web.AppKey("sync", SyncLoop)
VIEW_ROWS = web.AppKey("view_rows", ViewRows)
REMOTE_CACHES = web.AppKey("remote_caches", RemoteCaches)
CHILD_AUTHZ = web.AppKey("child_authz", ChildAuthorizers)
AUTHENTICATOR = web.AppKey("authenticator", Authenticator)
AUTHORIZER = web.AppKey("authorizer", Authorizer)
FRONT_PROXY = web.AppKey("front_proxy", FrontProxyWatch)
# Turns for lists of either group; see --read-concurrency.
READS = web.AppKey("reads", ReadLimiter)
# Turns for reads waiting on children (remote.kmc.dev gets, lists not served from the caches):
# they cost memory for the answers, not the loop's time, so more at once.
WAITS = web.AppKey("waits", ReadLimiter)
