"""The agent's read-only proxy: what the hub asks through the reverse tunnel, done here.

Each stream of the tunnel (`agent/tunnel.py`) is an HTTP connection from kmc-apiserver to
this small server, which forwards a request to the agent's own cluster with the agent's own
credential, the hub's caller impersonated, and streams the answer back (a watch or a followed
log as it comes). It forwards only what punch-through needs, and refuses the rest with a 403
Status saying why (`refusal`, pure):

- reads only: `GET`, and no protocol switch (exec, attach and port-forward are connections
  switched to another protocol; `proxy` sub-resources reach into pods and services);
- made as a hub caller: `Impersonate-User` present, so the cluster's RBAC decides what that
  caller may see, never the agent's own rights. kmc-apiserver reads pull locations live,
  not through its watch caches, so none of its own-identity lists need to pass.

Only the impersonation headers and `Accept` are forwarded; the answer's status and content
type are passed back.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from aiohttp import web
from multidict import CIMultiDict

from apiserver.kube import streams
from apiserver.kube.client import ApiError, Kube, failure

log = logging.getLogger(__name__)

READS_ONLY = "the tunnel to this pull location carries reads only"
_SWITCHED = frozenset({"exec", "attach", "portforward", "proxy"})
_FORWARDED = ("Accept", "Impersonate-User", "Impersonate-Uid", "Impersonate-Group")


def refusal(method: str, path: str, headers: Mapping[str, str]) -> str | None:
    """Why the agent will not forward this request (None: it will)."""
    if method != "GET":
        return f"{READS_ONLY} (GET), not {method}"
    if headers.get("Upgrade") or "upgrade" in headers.get("Connection", "").lower():
        return (
            f"{READS_ONLY}: no connection switched to another protocol (exec, attach, port-forward)"
        )
    parts = [p for p in path.split("/") if p]
    if not parts or parts[0] not in ("api", "apis"):
        return f"{READS_ONLY}: of the API ({path} is not under /api or /apis)"
    if ".." in parts or _subresource(parts) in _SWITCHED:
        return f"{READS_ONLY}: {path} is not a read of objects or logs"
    if not headers.get("Impersonate-User"):
        return f"{READS_ONLY}, made as a hub caller (Impersonate-User)"
    return None


def _subresource(parts: list[str]) -> str:
    """The sub-resource a path under /api or /apis names, or `proxy` for the proxy verb, read
    by position as kube-apiserver does: a namespace or an object named `exec` is no exec."""
    rest = parts[2:] if parts[0] == "api" else parts[3:]  # after the version
    if rest[:1] == ["proxy"]:
        return "proxy"
    if rest[:1] == ["watch"]:
        rest = rest[1:]
    if rest[:1] == ["namespaces"] and len(rest) > 2 and rest[2] not in ("status", "finalize"):
        rest = rest[2:]
    return rest[2] if len(rest) > 2 else ""


def forwarded(headers: CIMultiDict[str]) -> CIMultiDict[str]:
    """The request's headers the cluster sees: the caller to impersonate, and Accept."""
    kept: CIMultiDict[str] = CIMultiDict()
    for name, value in headers.items():
        if name in _FORWARDED or name.lower().startswith("impersonate-extra-"):
            kept.add(name, value)
    return kept


def forbidden(why: str) -> web.Response:
    return web.json_response(failure(403, "Forbidden", why), status=403)


def make_app(cluster: Kube) -> web.Application:
    async def handle(request: web.Request) -> web.StreamResponse:
        why = refusal(request.method, request.path, request.headers)
        if why is not None:
            log.info("tunnel: refused %s %s: %s", request.method, request.path, why)
            return forbidden(why)
        query = list(request.rel_url.query.items())
        try:
            async with streams.opened(
                cluster, "GET", request.path, query, forwarded(CIMultiDict(request.headers))
            ) as opened:
                response = web.StreamResponse(status=opened.status)
                response.headers["Content-Type"] = opened.content_type  # a Table's, whole
                await response.prepare(request)
                try:
                    async for chunk in opened.chunks:
                        await response.write(chunk)
                except ApiError as err:  # cut in the middle: so is our answer
                    log.info("tunnel: %s cut: %s", request.path, err)
                    if request.transport is not None:
                        request.transport.close()
                return response
        except ApiError as err:
            return web.json_response(err.status, status=err.code)

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", handle)
    return app
