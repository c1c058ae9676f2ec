"""The kmc-apiserver application: one `make_app(options)` wires state, loops and routes.

Shared state lives under `web.AppKey`s; lifecycles are `cleanup_ctx` generators, so the
HTTP session closes after the loops that use it have stopped.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import prometheus_client
from aiohttp import web

from apiserver import admission, metrics, serving
from apiserver.api import documents
from apiserver.api.authn import (
    AUTHENTICATOR,
    FRONT_PROXY,
    Authenticator,
    FrontProxyConfig,
    FrontProxyWatch,
    configure_client_auth,
)
from apiserver.api.authz import AUTHORIZER, Authorizer
from apiserver.api.errors import status_errors
from apiserver.api.guard import guard
from apiserver.feed import crds as feed_crds
from apiserver.feed import handlers as feed
from apiserver.feed import report as feed_report
from apiserver.feed import resources as feed_resources
from apiserver.feed.children import ReportedChildren
from apiserver.feed.report import PULLED_CRDS, REPORTED_CHILDREN, REPORTS
from apiserver.feed.work import FEEDS, Feeds
from apiserver.hubcache import HUB_CACHE, HubCache
from apiserver.kube import config as kubeconfig
from apiserver.kube.client import HUB, Kube, guard_trace
from apiserver.leader import LEADERSHIP, Leadership, identity, user_agent
from apiserver.locations.fleet import FLEET, Fleet
from apiserver.locations.pulledcrds import PulledCRDs
from apiserver.locations.reports import Reports
from apiserver.locations.tunnels import TUNNELS, Tunnels
from apiserver.loops.endpoints import EndpointsLoop
from apiserver.loops.exports import ExportsLoop
from apiserver.loops.handoff import Handoff
from apiserver.loops.imports import ImportLoop
from apiserver.loops.joins import JoinLoop
from apiserver.loops.locations import LOCATIONS, LocationLoop
from apiserver.loops.locations import Settings as LocationSettings
from apiserver.loops.placement.deciding import DECIDER
from apiserver.loops.placement.loop import PlacementLoop
from apiserver.loops.placement.loop import Settings as PlacementSettings
from apiserver.loops.sync.loop import PROGRESS, SyncLoop
from apiserver.loops.sync.loop import Settings as SyncSettings
from apiserver.mc import handlers as mc
from apiserver.mc import previews as mc_previews
from apiserver.mc import resources as mc_resources
from apiserver.mc.rows import VIEW_ROWS, ViewRows
from apiserver.options import OPTIONS, Options
from apiserver.readlimit import READS, WAITS, WAITS_PER_READ, ReadLimiter
from apiserver.remote import handlers as remote
from apiserver.remote import resources as remote_resources
from apiserver.remote import reverse as remote_reverse
from apiserver.remote import streams as remote_streams
from apiserver.remote.cache import CHILD_AUTHZ, REMOTE_CACHES, ChildAuthorizers, RemoteCaches

log = logging.getLogger(__name__)
STOP_WARNING = 5.0  # seconds

# Everything the two aggregated groups serve: discovery and OpenAPI are rendered from it.
RESOURCES = (*mc_resources.RESOURCES, *feed_resources.RESOURCES, *remote_resources.RESOURCES)
LOOPS = web.AppKey("loops", dict[str, "asyncio.Task[None]"])


def make_app(options: Options, serving: ssl.SSLContext | None = None) -> web.Application:
    """The whole server. `serving` is the TLS context the app is served with: the hub's
    front-proxy CA is added to it as the hub publishes it, so its client certificates verify."""
    app = web.Application(middlewares=[status_errors, guard])
    app[OPTIONS] = options
    app[READS] = ReadLimiter(options.read_concurrency, options.max_queued_reads)
    app[WAITS] = ReadLimiter(options.read_concurrency * WAITS_PER_READ, options.max_queued_reads)
    app.cleanup_ctx.append(_clients)
    app.cleanup_ctx.append(_guards(serving))
    app.cleanup_ctx.append(_loops)
    app.router.add_get("/healthz", _ok)
    app.router.add_get("/livez", _livez)
    app.router.add_get("/readyz", _readyz)
    app.router.add_get("/metrics", _metrics)
    documents.add_routes(app, RESOURCES)
    mc_previews.add_routes(app)
    mc.add_routes(app)
    feed.add_routes(app)
    feed_report.add_routes(app)
    feed_crds.add_routes(app)
    remote.add_routes(app)
    remote_streams.add_routes(app)
    remote_reverse.add_routes(app)
    admission.add_routes(app)
    return app


async def _clients(app: web.Application) -> AsyncIterator[None]:
    options = app[OPTIONS]
    if options.kubeconfig:
        creds = await kubeconfig.from_file(options.kubeconfig, options.context)
    else:
        creds = await asyncio.to_thread(kubeconfig.in_cluster)
    # No cap on connections: every watch holds one for minutes (informers, and the children's
    # watches behind each remote.kmc.dev watch), and aiohttp's default of 100 in all would
    # make lists queue behind them.
    connector = aiohttp.TCPConnector(limit=0)
    # The loops' writes ask their guard again once their connection is ready (`guard_trace`).
    async with aiohttp.ClientSession(connector=connector, trace_configs=[guard_trace()]) as session:
        me = identity(options.secure_port)
        app[HUB] = Kube(session, creds, "hub", agent=user_agent(me))
        # Without election this process always leads; with it, the loops' writes (to the hub
        # and to every child) leave only while this replica's lease is renewed.
        leadership = (
            Leadership(app[HUB], me, options.leader_timing)
            if options.leader_elect
            else Leadership.solo(me)
        )
        app[LEADERSHIP] = leadership
        app[FLEET] = Fleet(app[HUB], session, agent=user_agent(me), guard=leadership.check)
        # Pull locations' agents' reverse tunnels, handed to the fleet while connected.
        app[TUNNELS] = Tunnels(app[FLEET], agent=user_agent(me))
        try:
            yield
        finally:
            await app[TUNNELS].close()


def _guards(serving_ctx: ssl.SSLContext | None) -> Any:
    async def guards(app: web.Application) -> AsyncIterator[None]:
        def trust(config: FrontProxyConfig) -> None:
            if serving_ctx is not None:
                configure_client_auth(serving_ctx, config)

        app[AUTHENTICATOR] = Authenticator()
        app[AUTHORIZER] = Authorizer(app[HUB])
        app[FRONT_PROXY] = FrontProxyWatch(app[HUB], app[AUTHENTICATOR], trust)
        fresh = (
            asyncio.create_task(serving.keep_fresh(serving_ctx, app[OPTIONS]))
            if serving_ctx
            else None
        )
        yield
        if fresh is not None:
            fresh.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await fresh

    return guards


async def _loops(app: web.Application) -> AsyncIterator[None]:
    """The loops, and how they are wired to each other: what one asks of another is a
    function given to its constructor; what one tells another is a signal connected here."""
    options = app[OPTIONS]
    leadership = app[LEADERSHIP]
    metrics.LEADER.set_function(lambda: float(leadership.may_act()))
    # The loops write through this client: a write leaves only while we may act. Requests
    # served for users (the views, authorization) use the plain one.
    acting = app[HUB].guarded(leadership.check)
    cache = app[HUB_CACHE] = HubCache(acting)
    # Pull locations' children and probes, as their agents last reported them.
    app[REPORTS] = Reports()
    # Pull locations' CRDs, for API import, asked of their agents when their probes change.
    app[PULLED_CRDS] = PulledCRDs(app[REPORTS])
    # Their reports' children as last validated: an unchanged one is not validated again.
    app[REPORTED_CHILDREN] = ReportedChildren(app[REPORTS])
    locations = app[LOCATIONS] = LocationLoop(
        acting,
        cache.locations,
        app[FLEET],
        leadership,
        LocationSettings(interval=options.probe_interval, timeout=options.probe_timeout),
        app[REPORTS],
        app[PULLED_CRDS].crds,
    )
    # The placement loop's decisions reach the sync loop before the hub has them.
    handoff = Handoff()
    placement = PlacementLoop(
        cache,
        app[FLEET],
        handoff,
        leadership,
        PlacementSettings(
            grace=options.grace_period,
            cooldown=options.cooldown,
            capacity_hold=options.capacity_hold,
            workers=options.workers,
        ),
        pending=locations.unschedulable,
    )
    sync = SyncLoop(
        cache,
        app[FLEET].get,
        leadership,
        handoff,
        SyncSettings(workers=options.workers),
        app[REPORTS],
    )
    imports = ImportLoop(acting, cache, locations.crds, leadership)
    app[PULLED_CRDS].changed.connect(imports.wake)
    endpoints = EndpointsLoop(cache, app[FLEET].get, leadership, grace=options.grace_period)
    # Exported Services (MCS API): each location gets the other locations' endpoints, read
    # from the hub slices the endpoints loop keeps.
    exports = ExportsLoop(cache, app[FLEET].get, leadership)
    # Pull locations' agents' certificate requests (their join, their renewals).
    joins = JoinLoop(acting, cache.locations, leadership)
    handoff.handed.connect(sync.queue.add)
    locations.stuck.connect(placement.on_stuck)
    imports.verdicts.connect(placement.exclude)
    app[DECIDER] = placement.decider
    app[PROGRESS] = sync.progress
    # Pull locations' work, computed from the same cache, with the sync loop's handover steps.
    app[FEEDS] = Feeds(cache, sync.steps)
    app[VIEW_ROWS] = ViewRows(cache, placement.decider, sync.progress)
    app[REMOTE_CACHES] = RemoteCaches(options.remote_cache_idle, options.remote_cache_max_objects)
    app[CHILD_AUTHZ] = ChildAuthorizers(
        options.child_authz_allowed_ttl, options.child_authz_denied_ttl
    )
    app[LOOPS] = {
        "front-proxy": asyncio.create_task(app[FRONT_PROXY].run(), name="front-proxy"),
        "hub-cache": asyncio.create_task(cache.run(), name="hub-cache"),
        "locations": asyncio.create_task(locations.run(), name="locations"),
        "placement": asyncio.create_task(placement.run(), name="placement"),
        "sync": asyncio.create_task(sync.run(), name="sync"),
        "imports": asyncio.create_task(imports.run(), name="imports"),
        "endpoints": asyncio.create_task(endpoints.run(), name="endpoints"),
        "exports": asyncio.create_task(exports.run(), name="exports"),
        "joins": asyncio.create_task(joins.run(), name="joins"),
        "remote-caches": asyncio.create_task(app[REMOTE_CACHES].run(), name="remote-caches"),
    }
    if options.leader_elect:
        app[LOOPS]["leader"] = asyncio.create_task(leadership.run(), name="leader")
    for task in app[LOOPS].values():
        task.add_done_callback(_report_death)
    yield
    await _stop(app[LOOPS])


async def _stop(loops: dict[str, asyncio.Task[None]]) -> None:
    """Cancel the loops and wait for them; one that has not stopped after `STOP_WARNING`
    seconds is named in the log with where every unfinished task waits."""
    log.info("stopping the loops")
    for task in loops.values():
        task.cancel()
    _, pending = await asyncio.wait(loops.values(), timeout=STOP_WARNING)
    if pending:
        names = ", ".join(name for name, task in loops.items() if task in pending)
        log.warning(
            "loops not stopped after %gs: %s; tasks waiting:\n%s", STOP_WARNING, names, _stacks()
        )
        await asyncio.wait(pending)
    log.info("loops stopped")


def _stacks() -> str:
    """Where each unfinished task waits (its innermost frame), for a stop that hangs."""
    lines = []
    for task in asyncio.all_tasks():
        frames = task.get_stack(limit=None)
        where = " <- ".join(f"{f.f_code.co_qualname}:{f.f_lineno}" for f in reversed(frames))
        lines.append(f"  {task.get_name()}: {where or 'not started'}")
    return "\n".join(sorted(lines))


def _report_death(task: asyncio.Task[None]) -> None:
    """A loop must never end while the server runs: say so loudly (and /livez fails)."""
    if not task.cancelled() and task.exception() is not None:
        log.critical("loop %s died", task.get_name(), exc_info=task.exception())


async def _ok(_: web.Request) -> web.Response:
    return web.Response(text="ok")


async def _metrics(request: web.Request) -> web.Response:
    """Prometheus' text format (authorized like any path: `get` on nonResourceURL /metrics)."""
    request.app[HUB_CACHE].count_objects()
    body = prometheus_client.generate_latest(metrics.REGISTRY)
    return web.Response(body=body, headers={"Content-Type": prometheus_client.CONTENT_TYPE_LATEST})


async def _livez(request: web.Request) -> web.Response:
    """Alive while every loop runs; a loop that died is a reason to restart us."""
    dead = [name for name, task in request.app[LOOPS].items() if task.done()]
    if dead:
        return web.Response(status=500, text=f"loops stopped: {', '.join(dead)}")
    return web.Response(text="ok")


async def _readyz(request: web.Request) -> web.Response:
    """Ready once the caches the handlers read from have synced."""
    if not request.app[HUB_CACHE].synced:
        return web.Response(status=503, text="caches not synced yet")
    if not request.app[FRONT_PROXY].loaded.is_set():
        return web.Response(status=503, text="the hub's front-proxy configuration is not loaded")
    return await _livez(request)
