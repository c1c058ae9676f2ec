"""Who is asking, and may they: the gate every API request passes before any handler.

Only the hub's aggregator may talk to us: its front-proxy client certificate proves the
`X-Remote-*` headers (authn.py). The hub then decides, by SubjectAccessReview, whether that
user may do this (authz.py). Health endpoints are open, as on kube-apiserver. The admission
webhook is called by the hub's apiserver itself, which presents the front-proxy client
certificate (its admission configuration's kubeconfig gives it); no user is named there, and
a caller without that certificate gets a bare 401.
"""

from __future__ import annotations

import dataclasses
import logging

from aiohttp import web
from aiohttp.typedefs import Handler

from apiserver.api import requestinfo
from apiserver.api.authn import (
    AUTHENTICATOR,
    Unauthenticated,
    UserInfo,
    peer_certificate,
    unauthorized_status,
)
from apiserver.api.authz import (
    AUTHORIZER,
    AnyAttributes,
    Attributes,
    NonResourceAttributes,
    denial_status,
)
from apiserver.api.errors import status_response
from apiserver.api.requestinfo import RequestInfo

log = logging.getLogger(__name__)

OPEN_PATHS = frozenset({"/healthz", "/livez", "/readyz"})
ADMISSION_PREFIX = "/admission/"
AUTHENTICATED = "system:authenticated"
_USER = "kmc.user"
_INFO = "kmc.info"


@web.middleware
async def guard(request: web.Request, handler: Handler) -> web.StreamResponse:
    if request.path in OPEN_PATHS:
        return await handler(request)
    if request.path.startswith(ADMISSION_PREFIX):
        # Called by the hub's apiserver itself, with the client certificate its admission
        # configuration gives it for us; anyone else learns nothing, not even our Locations.
        try:
            request.app[AUTHENTICATOR].authenticate_caller(peer_certificate(request))
        except Unauthenticated as err:
            return _unauthenticated(request, err)
        return await handler(request)
    try:
        user = request.app[AUTHENTICATOR].authenticate(peer_certificate(request), request.headers)
    except Unauthenticated as err:
        return _unauthenticated(request, err)
    if AUTHENTICATED not in user.groups and user.name != "system:anonymous":
        # As kube-apiserver's authenticated-group adder: RBAC's discovery rules rely on it.
        user = dataclasses.replace(user, groups=(*user.groups, AUTHENTICATED))
    info = requestinfo.parse(request.method, request.path, request.query)
    attrs = attributes(info)
    decision = await request.app[AUTHORIZER].authorize(user, attrs)
    if not decision.allowed:
        return status_response(denial_status(decision, user, attrs))
    requestinfo.check(info, request.match_info, request.query)
    request[_USER] = user
    request[_INFO] = info
    return await handler(request)


def _unauthenticated(request: web.Request, err: Unauthenticated) -> web.Response:
    """401, and the connection closed: a client certificate is only asked for in the TLS
    handshake, so a connection opened before the hub's front-proxy CA was trusted (at our
    start) would be refused for as long as the aggregator kept it alive."""
    log.info("401 for %s %s from %s: %s", request.method, request.path, request.remote, err)
    response = status_response(unauthorized_status())
    response.force_close()
    return response


def attributes(info: RequestInfo) -> AnyAttributes:
    if not info.is_resource_request:
        return NonResourceAttributes(path=info.path, verb=info.verb)
    return Attributes(
        verb=info.verb,
        group=info.group,
        version=info.version,
        resource=info.resource,
        subresource=info.subresource,
        namespace=info.namespace,
        name=info.name,
    )


def user_of(request: web.Request) -> UserInfo:
    user = request.get(_USER)
    assert isinstance(user, UserInfo), "the guard middleware did not run"
    return user


def info_of(request: web.Request) -> RequestInfo:
    info = request.get(_INFO)
    assert isinstance(info, RequestInfo), "the guard middleware did not run"
    return info
