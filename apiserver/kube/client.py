"""The one place kmc-apiserver talks HTTP to Kubernetes (the hub and every child).

Objects stay raw dicts: we never round-trip another cluster's objects through generated
models that drop fields they do not know. Every non-2xx answer becomes `ApiError` carrying
the server's own `Status`, so errors travel end to end unchanged.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, cast

import aiohttp
import msgspec
from aiohttp import web
from multidict import CIMultiDict

from apiserver import metrics
from apiserver.objects import Obj

log = logging.getLogger(__name__)


APPLY_PATCH = "application/apply-patch+yaml"
MERGE_PATCH = "application/merge-patch+json"
STRATEGIC_PATCH = "application/strategic-merge-patch+json"
JSON_PATCH = "application/json-patch+json"
DEFAULT_TIMEOUT = 30.0
READS = frozenset({"GET", "HEAD"})


class ApiError(Exception):
    """A Kubernetes `Status` failure: the one error type, end to end. A cluster's answer (or
    one we made for a transport problem) here; our own answers to callers are made by the
    constructors in `api/errors.py`, and the server's middleware sends any of them as is."""

    def __init__(self, status: Obj) -> None:
        self.status = status
        self.code = int(status.get("code") or 500)
        self.reason = str(status.get("reason", "Unknown"))
        super().__init__(str(status.get("message", self.reason)))

    @classmethod
    def of(cls, code: int, reason: str, message: str, details: Obj | None = None) -> ApiError:
        return cls(failure(code, reason, message, details))


def failure(code: int, reason: str, message: str, details: Obj | None = None) -> Obj:
    """A failure `Status` body, fields in the order kube-apiserver writes them."""
    body: Obj = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
    }
    if details is not None:
        body["details"] = details
    body["code"] = code
    return body


class Unreachable(ApiError):
    """No answer at all: connection refused, TLS failure, timeout."""


@dataclass(frozen=True)
class Credentials:
    """Where a cluster is and how to prove who we are to it."""

    server: str
    ssl: ssl.SSLContext | bool
    token: str | None = None
    # Credentials made again from where these came from (an exec plugin run again, a token
    # file read again): what a 401 asks for, as client-go does. None: nothing to renew.
    renew: Callable[[], Awaitable[Credentials]] | None = field(default=None, compare=False)


class Kube:
    """An HTTP client for one cluster, sharing the process-wide aiohttp session."""

    def __init__(
        self,
        session: aiohttp.ClientSession,
        creds: Credentials,
        name: str,
        *,
        agent: str = "kmc-apiserver",
        guard: Callable[[], None] | None = None,
    ) -> None:
        self.session = session
        self.creds = creds
        self.name = name
        self.agent = agent  # the User-Agent: names this replica in the cluster's audit log
        # Called before every write leaves; raises to refuse it (a follower's loops write
        # nothing: see `leader.Leadership.check`).
        self.guard = guard
        self._etags: dict[tuple[str, str], tuple[str, Any]] = {}
        self._renewing = asyncio.Lock()

    async def renew(self, stale: Credentials) -> bool:
        """After a 401 with `stale`: take fresh credentials. True when there are other ones
        to try (made now, or by another request meanwhile); the client is kept, so whoever
        holds it (caches, watches) goes on with the new ones."""
        async with self._renewing:
            if self.creds is not stale:
                return True
            if stale.renew is None:
                return False
            try:
                fresh = await stale.renew()
            except Exception as err:  # a plugin that fails, a file that went: keep the 401
                log.warning("%s: renewing credentials failed: %s", self.name, err)
                return False
            if (fresh.token, fresh.ssl) == (stale.token, stale.ssl):
                return False
            self.creds = fresh
            return True

    def guarded(self, guard: Callable[[], None]) -> Kube:
        """The same cluster and session, with every write first passing `guard`."""
        return Kube(self.session, self.creds, self.name, agent=self.agent, guard=guard)

    def headers(self, extra: Mapping[str, str] | None = None) -> CIMultiDict[str]:
        """Ours, then `extra`'s, which replace ours by name; a multi-valued `extra` (several
        `Impersonate-Group`s) keeps every value."""
        headers = CIMultiDict({"Accept": "application/json", "User-Agent": self.agent})
        if self.creds.token:
            headers["Authorization"] = f"Bearer {self.creds.token}"
        if extra:
            for name in set(extra):
                headers.popall(name, None)
            headers.extend(extra.items())
        return headers

    async def request(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, str] | None = None,
        body: Any = None,
        content_type: str = "application/json",
        timeout: float = DEFAULT_TIMEOUT,
        headers: Mapping[str, str] | None = None,
        idle_timeout: float | None = None,
        decode: Callable[[bytes], Any] | None = None,
        answering: asyncio.Event | None = None,
    ) -> Any:
        """One request; the decoded JSON answer (`{}` for a non-JSON 2xx), or ApiError.

        `timeout` bounds the whole exchange; `idle_timeout`, if given, bounds connecting and
        every wait for the next piece of the answer (its headers included), so a server that
        is answering a big list is not cut off while one that says nothing is. `answering` is
        set as soon as the response headers are in. `decode` reads a 2xx body instead of the
        generic JSON decoder (for big answers whose shape we know, see `remote.stitch`); an
        answer it rejects is an ApiError (502)."""
        if self.guard is not None and method not in READS:
            self.guard()
        data = None if body is None else msgspec.json.encode(body)
        extra: CIMultiDict[str] = CIMultiDict(headers or {})
        if data is not None:
            extra["Content-Type"] = content_type
        for attempt in (1, 2):
            creds = self.creds
            all_headers = self.headers(extra)
            started = time.monotonic()
            try:
                return await self._exchange(
                    method,
                    path,
                    params,
                    data,
                    all_headers,
                    timeout,
                    idle_timeout,
                    decode,
                    answering,
                )
            except ApiError as err:
                metrics.REQUEST_ERRORS.labels(self.name, str(err.code)).inc()
                if err.code == 401 and attempt == 1 and await self.renew(creds):
                    continue  # once more, with the fresh credentials
                raise
            finally:
                metrics.REQUESTS.labels(self.name, method).observe(time.monotonic() - started)
        raise AssertionError("unreachable")

    async def _exchange(
        self,
        method: str,
        path: str,
        params: Mapping[str, str] | None,
        data: bytes | None,
        all_headers: CIMultiDict[str],
        timeout: float,
        idle_timeout: float | None,
        decode: Callable[[bytes], Any] | None,
        answering: asyncio.Event | None,
    ) -> Any:
        guarded = self.guard is not None and method not in READS
        late = _Guarded(self.guard) if guarded and self.guard is not None else None
        if late is not None and data is not None:
            # aiohttp holds a request's headers back to send with its first body bytes: asked
            # there, the guard decides microseconds before anything of the write goes out.
            body: Any = _GuardedBody(data, late.guard, all_headers["Content-Type"])
        else:
            body = data
        try:
            async with self.session.request(
                method,
                self.creds.server + path,
                params=params,
                data=body,
                headers=all_headers,
                ssl=self.creds.ssl,
                trace_request_ctx=late,
                timeout=aiohttp.ClientTimeout(
                    total=timeout, sock_connect=idle_timeout, sock_read=idle_timeout
                ),
            ) as resp:
                if answering is not None:
                    answering.set()
                return decode_answer(resp.status, await resp.read(), method, path, decode)
        except (aiohttp.ClientError, TimeoutError) as err:
            refused = _refusal(err)
            if refused is not None:
                raise refused from None  # the guard's own answer, raised inside aiohttp
            raise transport_error(self, err) from err

    async def get_revalidated(
        self, path: str, accept: str, timeout: float = DEFAULT_TIMEOUT
    ) -> Any:
        """GET a document that rarely changes (discovery): with If-None-Match, an unchanged
        one costs a 304 and no parsing."""
        cached = self._etags.get((path, accept))
        headers = {"Accept": accept}
        if cached:
            headers["If-None-Match"] = cached[0]
        try:
            async with self.session.get(
                self.creds.server + path,
                headers=self.headers(headers),
                ssl=self.creds.ssl,
                timeout=aiohttp.ClientTimeout(total=timeout),
            ) as resp:
                if resp.status == 304 and cached:
                    return cached[1]
                body = decode_answer(resp.status, await resp.read(), "GET", path)
                if etag := resp.headers.get("ETag"):
                    self._etags[(path, accept)] = (etag, body)
                return body
        except (aiohttp.ClientError, TimeoutError) as err:
            raise transport_error(self, err) from err

    async def get(self, path: str, **params: str) -> Obj:
        return cast(Obj, await self.request("GET", path, params=params or None))

    async def create(self, path: str, body: Obj) -> Obj:
        return cast(Obj, await self.request("POST", path, body=body))

    async def merge_patch(self, path: str, patch: Obj) -> Obj:
        return cast(Obj, await self.request("PATCH", path, body=patch, content_type=MERGE_PATCH))

    async def strategic_patch(self, path: str, patch: Obj) -> Obj:
        """Built-in kinds only: lists with a merge strategy (finalizers) are merged, not
        replaced, so no resourceVersion precondition is needed to keep others' entries."""
        return cast(
            Obj, await self.request("PATCH", path, body=patch, content_type=STRATEGIC_PATCH)
        )

    async def json_patch(self, path: str, operations: list[Obj]) -> Obj:
        return cast(
            Obj, await self.request("PATCH", path, body=operations, content_type=JSON_PATCH)
        )

    async def apply(
        self, path: str, body: Obj, manager: str, force: bool = True, dry_run: bool = False
    ) -> Obj:
        params = {"fieldManager": manager, "force": "true" if force else "false"}
        if dry_run:
            params["dryRun"] = "All"  # validated and admitted, nothing stored
        return cast(
            Obj,
            await self.request("PATCH", path, params=params, body=body, content_type=APPLY_PATCH),
        )

    async def delete(self, path: str) -> Obj:
        """Delete as kubectl does: the object goes now and what it owns after it. Without a
        policy a Job is deleted with `orphan`: its pods stay, and the Job itself lingers until
        the garbage collector has let go of them. The policy goes in a DeleteOptions body,
        which a guarded client asks its guard for at the last moment (`_GuardedBody`)."""
        options = {"apiVersion": "v1", "kind": "DeleteOptions", "propagationPolicy": "Background"}
        return cast(Obj, await self.request("DELETE", path, body=options))

    async def watch(
        self,
        path: str,
        resource_version: str,
        timeout_seconds: int = 300,
        params: Mapping[str, str] | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> AsyncIterator[Obj]:
        """Events of one watch from `resource_version`, bookmarks included, until it ends.

        An ERROR event (410 Gone after compaction, most often) is raised as ApiError so the
        caller relists.
        """
        query = {
            "watch": "true",
            "resourceVersion": resource_version,
            "allowWatchBookmarks": "true",
            "timeoutSeconds": str(timeout_seconds),
            **(params or {}),
        }
        creds = self.creds
        try:
            async with self.session.get(
                self.creds.server + path,
                params=query,
                headers=self.headers(headers),
                ssl=self.creds.ssl,
                timeout=aiohttp.ClientTimeout(
                    total=None, sock_connect=10, sock_read=timeout_seconds + 30
                ),
            ) as resp:
                if resp.status != 200:
                    if resp.status == 401:
                        await self.renew(creds)  # the caller watches again, with fresh ones
                    decode_answer(resp.status, await resp.read(), "WATCH", path)
                async for line in resp.content:
                    if not line.strip():
                        continue
                    try:
                        event = cast(Obj, msgspec.json.decode(line))
                    except msgspec.DecodeError as err:  # cut off mid-event: the server went
                        message = f"WATCH {path}: unreadable event: {err}"
                        raise ApiError.of(502, "BadGateway", message) from err
                    if event.get("type") == "ERROR":
                        raise ApiError(event.get("object", {}))
                    yield event
        except (aiohttp.ClientError, TimeoutError) as err:
            raise transport_error(self, err) from err


@dataclass(frozen=True)
class _Guarded:
    """A write's guard, asked again by `guard_trace` once its connection is ready."""

    guard: Callable[[], None]


class _GuardedBody(aiohttp.BytesPayload):
    """A write's body that asks its guard once more just before its bytes — and the headers
    aiohttp sends with them — leave: a process paused after an earlier check must not send,
    once continued, a write it was allowed before the pause."""

    def __init__(self, value: bytes, guard: Callable[[], None], content_type: str) -> None:
        super().__init__(value, content_type=content_type)
        self._guard = guard

    async def write(self, writer: Any) -> None:
        self._guard()
        await super().write(writer)

    async def write_with_length(self, writer: Any, content_length: int | None) -> None:
        self._guard()
        await super().write_with_length(writer, content_length)


def _refusal(err: BaseException) -> ApiError | None:
    """An ApiError our guard raised inside aiohttp, which hands it back wrapped."""
    seen: BaseException | None = err
    while seen is not None:
        if isinstance(seen, ApiError):
            return seen
        seen = seen.__cause__ or seen.__context__
    return None


def guard_trace() -> aiohttp.TraceConfig:
    """Ask a write's guard again the moment its connection is ready, just before its bytes
    go out: making a connection (a TLS handshake) takes a while, and a process paused during
    it must not, once continued, send a write it was allowed before the pause. What is left
    is the few instructions from here to the socket. (A connection just made when the guard
    refuses is left to the garbage collector: aiohttp gives the trace no handle on it.)"""

    async def check(_: aiohttp.ClientSession, context: Any, __: Any) -> None:
        late = context.trace_request_ctx
        if isinstance(late, _Guarded):
            late.guard()

    config = aiohttp.TraceConfig()
    config.on_connection_create_end.append(check)
    config.on_connection_reuseconn.append(check)
    return config


def decode_answer(
    status: int,
    raw: bytes,
    method: str,
    path: str,
    decode: Callable[[bytes], Any] | None = None,
) -> Any:
    if decode is not None and 200 <= status < 300:
        try:
            return decode(raw)
        except msgspec.DecodeError as err:
            message = f"{method} {path}: unexpected answer: {err}"
            raise ApiError.of(502, "BadGateway", message) from err
    try:
        payload = msgspec.json.decode(raw) if raw else {}
    except msgspec.DecodeError:
        payload = None
    if 200 <= status < 300:
        return payload if payload is not None else {}
    if isinstance(payload, dict) and payload.get("kind") == "Status":
        raise ApiError(payload)
    # Health endpoints list every check; the failing ones ("[-]…") are what matters.
    text = raw.decode(errors="replace")
    failing = [line[3:] for line in text.splitlines() if line.startswith("[-]")]
    detail = "; ".join(failing) if failing else text.strip()[:300]
    raise ApiError.of(status, _reason_of(status), f"{method} {path}: {detail}")


def _reason_of(code: int) -> str:
    return {
        400: "BadRequest",
        401: "Unauthorized",
        403: "Forbidden",
        404: "NotFound",
        409: "Conflict",
        410: "Expired",
        422: "Invalid",
        429: "TooManyRequests",
        500: "InternalError",
        503: "ServiceUnavailable",
        504: "Timeout",
    }.get(code, "Unknown")


def transport_error(kube: Kube, err: BaseException) -> Unreachable:
    what = _what_failed(err)
    failure = ApiError.of(
        503, "ServiceUnavailable", f"{kube.name} ({kube.creds.server}) is unreachable: {what}"
    )
    return Unreachable(failure.status)


def _what_failed(err: BaseException) -> str:
    """A transport failure in words a person acts on (aiohttp's own text names objects)."""
    if isinstance(err, TimeoutError):
        return "timed out"
    if isinstance(err, ConnectionRefusedError):
        return "connection refused"
    if isinstance(err, ssl.SSLCertVerificationError):
        return f"TLS verification failed: {err.verify_message}"
    if isinstance(err, aiohttp.ClientConnectorCertificateError):
        return f"TLS verification failed: {err.certificate_error}"
    if isinstance(err, aiohttp.ClientConnectorError):
        if isinstance(err.os_error, ConnectionRefusedError):
            return "connection refused"
        return err.os_error.strerror or str(err.os_error)
    return str(err) or type(err).__name__


HUB = web.AppKey("hub", Kube)  # the hub, as kmc-apiserver talks to it
