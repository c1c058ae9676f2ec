"""`pods.remote.kmc.dev` sub-resources that stream: `log`, `exec`, `attach`, `portforward`.

The child that holds the pod answers, as the caller: the request goes to that child's own
`pods/<name>/<sub-resource>` with the caller impersonated, so the child's RBAC decides what
the hub's has already allowed, and a refusal comes back with the child named. A name found in
several locations is a 409 naming them (`name@location` picks one), as a GET of the pod is.

A log is an ordinary answer read as it comes (`follow=true` keeps it open); a child that goes
away in the middle cuts our answer too, so the caller sees a broken stream, not an ended log.
exec, attach and portforward are connections switched to another protocol (WebSocket or
SPDY, whichever the caller asks and the child accepts): the child's 101 is passed on and the
bytes are carried both ways unread (`apiserver.api.tunnel`). Nothing here needs the lease:
whichever replica the aggregator picks serves the stream.

Like kube-apiserver from 1.35 on, an exec, attach or portforward asked with GET (a WebSocket)
must also be allowed `create` on the hub: that is the verb RBAC rules give for them, and the
verb they have over SPDY (POST).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from typing import Any

from aiohttp import web
from multidict import CIMultiDict

from apiserver import metrics
from apiserver.api import errors, tunnel
from apiserver.api.authz import AUTHORIZER, Attributes, denial_status
from apiserver.api.guard import user_of
from apiserver.contract import REMOTE_GROUP as GROUP
from apiserver.contract import VERSION
from apiserver.kube import streams
from apiserver.kube.client import ApiError, Kube, Unreachable
from apiserver.locations.fleet import FLEET
from apiserver.options import OPTIONS
from apiserver.readlimit import WAITS, Priority
from apiserver.remote.fanout import (
    NOT_FOR_PULL,
    Asked,
    failed,
    fan_out,
    impersonating,
    warning_headers,
)
from apiserver.remote.handlers import PREFIX, where

log = logging.getLogger(__name__)

LOG = "log"
CONNECT = ("exec", "attach", "portforward")  # switched connections, `create` in RBAC
SUBRESOURCES = (LOG, *CONNECT)
_METADATA = "application/json;as=PartialObjectMetadata;v=v1;g=meta.k8s.io,application/json"
CALLER_CHECK = 5.0  # seconds between looks at whether a quiet stream's caller is still there


# The streams being served, ended when the server shuts down (see `_end_streams`).
OPEN = web.AppKey("open_streams", set["asyncio.Task[Any]"])


def add_routes(app: web.Application) -> None:
    path = PREFIX + "/namespaces/{namespace}/pods/{name}/{subresource}"
    app.router.add_get(path, serve, allow_head=False)
    app.router.add_post(path, serve)
    app[OPEN] = set()
    app.on_shutdown.append(_end_streams)


async def _end_streams(app: web.Application) -> None:
    """At shutdown, end every stream, as kube-apiserver ends its long-running requests:
    aiohttp would otherwise wait for them (a followed log, an interactive shell) before the
    app's clean-up, which is where this replica hands its lease back. Callers see their
    stream cut; the plugin asks again, and the hub sends it to a replica that serves."""
    for task in app[OPEN].copy():
        task.cancel()


async def serve(request: web.Request) -> web.StreamResponse:
    sub = request.match_info["subresource"]
    if sub not in SUBRESOURCES:
        raise errors.route_not_found()
    if sub == LOG and request.method != "GET":
        raise errors.method_not_supported("create", "pods/log", GROUP)
    namespace, asked = request.match_info["namespace"], request.match_info["name"]
    if sub in CONNECT and request.method == "GET":
        await _may_create(request, namespace, asked, sub)
    held = await _holder(request, namespace, asked)
    if isinstance(held, web.StreamResponse):
        return held
    location, name, kube = held
    if sub in CONNECT and request.app[FLEET].tunnel(location) is kube:
        # Its agent's tunnel carries reads only (docs/pull.md).
        raise errors.unavailable(f"location {location}: {sub} is {NOT_FOR_PULL}")
    path = f"/api/v1/namespaces/{namespace}/pods/{name}/{sub}"
    headers = impersonating(user_of(request))
    metrics.STREAMS.labels(sub).inc()
    task = asyncio.current_task()
    assert task is not None
    request.app[OPEN].add(task)
    try:
        with metrics.STREAMS_OPEN.labels(sub).track_inprogress():
            if tunnel.wants_upgrade(request):
                return await _switched(request, location, kube, path, headers)
            return await _streamed(request, location, kube, path, headers)
    finally:
        request.app[OPEN].discard(task)


async def _may_create(request: web.Request, namespace: str, name: str, sub: str) -> None:
    attrs = Attributes(
        verb="create",
        group=GROUP,
        version=VERSION,
        resource="pods",
        subresource=sub,
        namespace=namespace,
        name=name,
    )
    user = user_of(request)
    decision = await request.app[AUTHORIZER].authorize(user, attrs)
    if not decision.allowed:
        raise ApiError(denial_status(decision, user, attrs))


async def _holder(
    request: web.Request, namespace: str, asked: str
) -> tuple[str, str, Kube] | web.StreamResponse:
    """The location that holds the pod, the pod's name there, and its client; or the answer
    when none does (404, with the locations left out named) or several do (409)."""
    name, only, clients, warnings = where(request, "pods", asked)
    if only:
        return only, name, clients[only]  # the child says itself if there is no such pod
    user = user_of(request)
    path = f"/api/v1/namespaces/{namespace}/pods/{name}"

    async def ask(kube: Kube, how: Asked) -> Any:
        return await kube.request(
            "GET",
            path,
            headers=impersonating(user, _METADATA),
            idle_timeout=how.idle_timeout,
            answering=how.answering,
        )

    async with request.app[WAITS].turn(Priority.GET):
        answers = await fan_out(clients, ask, request.app[OPTIONS].remote_timeout)
    found = [a.location for a in answers if a.error is None]
    warnings += [failed(a) for a in answers if a.error is not None and a.error.code != 404]
    if not found:
        response = errors.status_response(errors.not_found("pods", GROUP, asked).status)
        response.headers.extend(warning_headers(warnings))
        return response
    if len(found) > 1:
        raise errors.conflict(
            f'pods.{GROUP} "{name}" exists in several locations: {", ".join(found)}; '
            f"name one as {name}@{found[0]}"
        )
    return found[0], name, clients[found[0]]


async def _switched(
    request: web.Request,
    location: str,
    kube: Kube,
    path: str,
    headers: CIMultiDict[str],
) -> web.StreamResponse:
    for header in tunnel.UPGRADE_HEADERS:
        for value in request.headers.getall(header, ()):
            headers.add(header, value)
    query = list(request.rel_url.query.items())
    try:
        upstream = await streams.upgrade(kube, request.method, path, query, headers)
    except ApiError as err:
        raise _named(location, err) from err
    switched = await tunnel.switch(request, upstream.headers)
    up, down = await tunnel.splice(switched, upstream)
    log.debug("%s %s in %s: %d bytes up, %d down", request.method, path, location, up, down)
    return switched.response


async def _streamed(
    request: web.Request,
    location: str,
    kube: Kube,
    path: str,
    headers: CIMultiDict[str],
) -> web.StreamResponse:
    """The child's answer as it comes. Before it starts, a failure is a Status naming the
    location; after, the connection is closed without ending the answer, so the caller
    sees the stream cut (a followed log must not look finished)."""
    query = list(request.rel_url.query.items())
    try:
        async with streams.opened(kube, request.method, path, query, headers) as opened:
            response = web.StreamResponse(status=opened.status)
            response.content_type = opened.content_type.split(";")[0]
            await response.prepare(request)
            try:
                await _relay(request, response, opened.chunks)
            except ApiError as err:
                log.info("%s in %s: %s", path, location, err)
                if request.transport is not None:
                    request.transport.close()
            except ConnectionError:
                pass  # the caller went away: so does our request to the child
            return response
    except ApiError as err:
        raise _named(location, err) from err


async def _relay(
    request: web.Request, response: web.StreamResponse, chunks: AsyncIterator[bytes]
) -> None:
    """Each piece as it comes. aiohttp does not stop a handler whose caller went away, and
    a followed log can stay quiet for hours: between pieces, whether the caller is still
    there is looked at every `CALLER_CHECK` seconds, so an abandoned stream ends (and with
    it our request to the child) instead of holding both connections."""
    pieces = aiter(chunks)
    waiting: asyncio.Future[bytes] = asyncio.ensure_future(anext(pieces))
    try:
        while True:
            done, _ = await asyncio.wait({waiting}, timeout=CALLER_CHECK)
            if not done:
                if request.transport is None or request.transport.is_closing():
                    return
                continue
            try:
                chunk = waiting.result()
            except StopAsyncIteration:
                return
            await response.write(chunk)
            waiting = asyncio.ensure_future(anext(pieces))
    finally:
        waiting.cancel()


def _named(location: str, err: ApiError) -> ApiError:
    """The child's failure with the child named, unless its words already name it."""
    status = dict(err.status)
    message = str(status.get("message") or err.reason)
    if not (isinstance(err, Unreachable) and message.startswith(f"{location} ")):
        status["message"] = f"location {location}: {message}"
    return ApiError(status)
