"""Kubernetes `Status` errors, worded the way kube-apiserver words them: the constructors of our
one error type (`kube.client.ApiError`) for what this server answers.

kubectl prints an aggregated server's failures as `Error from server (Reason): message`, and
scripts, controllers and people match on those reasons and sentences. So every failure this
server answers is a `Status` whose code, reason, message and details read exactly like the
hub's own, and one middleware turns whatever a handler raises into such a body.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import msgspec
from aiohttp import web

from apiserver.kube.client import ApiError, failure
from apiserver.objects import Obj

log = logging.getLogger(__name__)

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def status(code: int, reason: str, message: str, details: Obj | None = None) -> Obj:
    """A failure `Status` (fields in the order kube-apiserver writes them)."""
    return failure(code, reason, message, details)


def _details(**fields: Any) -> Obj:
    """StatusDetails as Go serialises them: empty fields are omitted."""
    return {key: value for key, value in fields.items() if value}


def _qualified(resource: str, group: str) -> str:
    """schema.GroupResource.String() (and GroupKind's): `deployments.apps`, `pods`."""
    return f"{resource}.{group}" if group else resource


def quote(text: str) -> str:
    """Go's %q for the strings we quote (names, users, values)."""
    return json.dumps(text, ensure_ascii=False)


def bad_request(message: str) -> ApiError:
    return ApiError(status(400, "BadRequest", message))


def unauthorized(message: str = "Unauthorized") -> ApiError:
    return ApiError(status(401, "Unauthorized", message or "not authorized"))


def forbidden(
    user: str,
    verb: str,
    resource: str,
    group: str,
    namespace: str,
    subresource: str = "",
    name: str = "",
    reason: str = "",
) -> ApiError:
    """What the authorization filter answers when the authorizer says no."""
    what = f"{resource}/{subresource}" if subresource else resource
    where = f"in the namespace {quote(namespace)}" if namespace else "at the cluster scope"
    why = (
        f"User {quote(user)} cannot {verb} resource {quote(what)} "
        f"in API group {quote(group)} {where}"
    )
    if reason:
        why = f"{why}: {reason}"
    qualified = _qualified(resource, group)
    subject = f"{qualified} {quote(name)}" if name else qualified
    details = _details(name=name, group=group, kind=resource)
    return ApiError(status(403, "Forbidden", f"{subject} is forbidden: {why}", details))


def forbidden_path(user: str, verb: str, path: str, reason: str = "") -> ApiError:
    """The same for a non-resource path (`/openapi/v2`, `/healthz`…)."""
    why = f"User {quote(user)} cannot {verb} path {quote(path)}"
    if reason:
        why = f"{why}: {reason}"
    return ApiError(status(403, "Forbidden", f"forbidden: {why}", {}))


def not_found(resource: str, group: str, name: str) -> ApiError:
    message = f"{_qualified(resource, group)} {quote(name)} not found"
    details = _details(name=name, group=group, kind=resource)
    return ApiError(status(404, "NotFound", message, details))


def route_not_found() -> ApiError:
    """No handler for this path: kube-apiserver's answer for an unknown URL."""
    return ApiError(status(404, "NotFound", "the server could not find the requested resource", {}))


def method_not_supported(verb: str = "", resource: str = "", group: str = "") -> ApiError:
    """405; with a resource the message names it like client-go does: `… (create pods)`."""
    message = "the server does not allow this method on the requested resource"
    if resource:
        message = f"{message} ({verb.lower()} {_qualified(resource, group)})"
    details = _details(group=group, kind=resource)
    return ApiError(status(405, "MethodNotAllowed", message, details))


def not_acceptable(message: str) -> ApiError:
    return ApiError(status(406, "NotAcceptable", message))


def conflict(message: str) -> ApiError:
    return ApiError(status(409, "Conflict", message))


def expired(message: str) -> ApiError:
    return ApiError(status(410, "Expired", message))


def invalid_value(value: Any, detail: str) -> str:
    """The message of a FieldValueInvalid cause: `Invalid value: "x": detail`."""
    if isinstance(value, str):
        shown = quote(value)
    elif value is None:
        shown = "null"
    elif isinstance(value, bool):
        shown = "true" if value else "false"
    elif isinstance(value, int | float):
        shown = str(value)
    else:
        shown = json.dumps(value, separators=(",", ":"), sort_keys=True)
    return f"Invalid value: {shown}: {detail}" if detail else f"Invalid value: {shown}"


def invalid(kind: str, group: str, name: str, causes: Sequence[tuple[str, str]]) -> ApiError:
    """422 for an object that fails validation; each cause is (field path, message)
    where the message is usually `invalid_value(value, detail)`."""
    subject = f"{_qualified(kind, group)} {quote(name)} is invalid"
    # errs.ToAggregate(): duplicates dropped, one error bare, several in brackets.
    lines = list(dict.fromkeys(f"{field}: {message}" for field, message in causes))
    if len(lines) == 1:
        subject = f"{subject}: {lines[0]}"
    elif lines:
        subject = f"{subject}: [{', '.join(lines)}]"
    details = _details(name=name, group=group, kind=kind)
    details["causes"] = [
        {"reason": "FieldValueInvalid", "message": message, "field": field}
        for field, message in causes
    ]
    return ApiError(status(422, "Invalid", subject, details))


def internal(exc: BaseException) -> ApiError:
    text = str(exc) or type(exc).__name__
    details = {"causes": [{"message": text}]}
    return ApiError(status(500, "InternalError", f"Internal error occurred: {text}", details))


def unavailable(message: str) -> ApiError:
    return ApiError(status(503, "ServiceUnavailable", message))


def too_many_requests(message: str, retry_after: int) -> ApiError:
    """429 with Retry-After, as kube-apiserver's priority and fairness answers."""
    details = _details(retryAfterSeconds=retry_after)
    return ApiError(status(429, "TooManyRequests", message, details))


def timeout(message: str, retry_after_seconds: int = 0) -> ApiError:
    """504; kube-apiserver prefixes the message with `Timeout: `."""
    details = _details(retryAfterSeconds=retry_after_seconds)
    return ApiError(status(504, "Timeout", f"Timeout: {message}", details))


def status_response(body: Obj) -> web.Response:
    """A `Status` as the HTTP answer: JSON, with the Status code as HTTP code (500 if none)."""
    code = body.get("code")
    http_code = code if isinstance(code, int) and 200 <= code <= 599 else 500
    headers: dict[str, str] = {}
    retry = (body.get("details") or {}).get("retryAfterSeconds")
    if isinstance(retry, int) and retry > 0:
        headers["Retry-After"] = str(retry)
    return web.Response(
        body=msgspec.json.encode(body),
        status=http_code,
        content_type="application/json",
        headers=headers,
    )


# Reasons for the HTTP errors aiohttp raises by itself (oversized bodies, bad requests…).
_REASONS = {
    400: "BadRequest",
    401: "Unauthorized",
    403: "Forbidden",
    404: "NotFound",
    405: "MethodNotAllowed",
    406: "NotAcceptable",
    409: "Conflict",
    413: "RequestEntityTooLarge",
    415: "UnsupportedMediaType",
    422: "Invalid",
    429: "TooManyRequests",
    503: "ServiceUnavailable",
    504: "Timeout",
}


def _from_http(exc: web.HTTPException) -> Obj:
    if isinstance(exc, web.HTTPNotFound):
        return route_not_found().status
    if isinstance(exc, web.HTTPMethodNotAllowed):
        return method_not_supported().status
    reason = _REASONS.get(exc.status, "InternalError" if exc.status >= 500 else "Unknown")
    text = exc.text or ""
    # aiohttp's default body is only "<code>: <phrase>"; a real explanation is worth keeping.
    message = exc.reason if not text or text.startswith(f"{exc.status}: ") else text
    return status(exc.status, reason, message)


@web.middleware
async def status_errors(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Every failure becomes a `Status` response; successful responses pass untouched."""
    try:
        return await handler(request)
    except ApiError as err:
        return status_response(err.status)
    except web.HTTPException as exc:
        if exc.status < 400:
            raise
        return status_response(_from_http(exc))
    except Exception as exc:
        log.exception("%s %s failed", request.method, request.path)
        return status_response(internal(exc).status)
