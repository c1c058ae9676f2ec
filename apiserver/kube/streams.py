"""Streams to a cluster: an answer read as it comes, and a connection switched to another
protocol. A pod's log (`follow=true` keeps it open for hours) is the first; exec, attach and
port-forward are the second: kube-apiserver answers them `101 Switching Protocols` and from
then on the connection carries WebSocket (kubectl 1.30 and later) or SPDY frames.

aiohttp's client reads a 101 only for WebSocket, and then insists on parsing its frames, so an
upgrade is made on a connection of our own: the request written by hand, the answer's head
read, and then the bytes are the caller's to carry, whatever the protocol (see
`apiserver.api.tunnel`). An answer other than 101 is read whole and raised as `ApiError`
with the server's own `Status`, as every other request of `Kube` is.

These are requests made for a user, as that user (impersonated): never refused for
leadership, whichever replica serves them.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
import time
import weakref
from collections.abc import AsyncIterator, Iterable, Mapping
from dataclasses import dataclass
from urllib.parse import urlencode

import aiohttp
from multidict import CIMultiDict
from yarl import URL

from apiserver import metrics
from apiserver.kube.client import (
    DEFAULT_TIMEOUT,
    ApiError,
    Credentials,
    Kube,
    decode_answer,
    transport_error,
)

Query = Iterable[tuple[str, str]]

_MAX_HEAD = 64 * 1024  # the head of an answer (status line and headers)
_MAX_ERROR_BODY = 1024 * 1024  # a refusal's body: a Status, a few hundred bytes
_READ = 64 * 1024


@dataclass
class Upgraded:
    """A connection the cluster switched to another protocol: its 101's headers (names as
    sent) and the connection, with whatever it sent after the head still to be read."""

    headers: list[tuple[str, str]]
    reader: asyncio.StreamReader
    writer: asyncio.StreamWriter

    def header(self, name: str) -> str:
        return next((v for k, v in self.headers if k.lower() == name.lower()), "")

    async def close(self) -> None:
        self.writer.close()
        with contextlib.suppress(OSError, ssl.SSLError, TimeoutError):
            async with asyncio.timeout(1):
                await self.writer.wait_closed()


async def upgrade(
    kube: Kube,
    method: str,
    path: str,
    query: Query,
    headers: Mapping[str, str],
    timeout: float = DEFAULT_TIMEOUT,
) -> Upgraded:
    """Ask for `path` with the upgrade `headers` carry (Connection, Upgrade, Sec-WebSocket-*,
    X-Stream-Protocol-Version) and our credentials. `timeout` bounds connecting and the
    answer's head; a refused credential is renewed and tried once more, as `Kube.request`
    does."""
    for attempt in (1, 2):
        creds = kube.creds
        started = time.monotonic()
        try:
            return await _upgrade_once(kube, method, path, list(query), headers, timeout)
        except ApiError as err:
            metrics.REQUEST_ERRORS.labels(kube.name, str(err.code)).inc()
            if err.code == 401 and attempt == 1 and await kube.renew(creds):
                continue
            raise
        finally:
            metrics.REQUESTS.labels(kube.name, method).observe(time.monotonic() - started)
    raise AssertionError("unreachable")


async def _upgrade_once(
    kube: Kube,
    method: str,
    path: str,
    query: list[tuple[str, str]],
    headers: Mapping[str, str],
    timeout: float,
) -> Upgraded:
    server = URL(kube.creds.server)
    host, port = server.host or "localhost", server.port or 443
    target = server.path.rstrip("/") + path + (f"?{urlencode(query)}" if query else "")
    where = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    head = _head(method, target, where, kube, headers)
    writer: asyncio.StreamWriter | None = None
    try:
        async with asyncio.timeout(timeout):
            reader, writer, spare = await _connection(kube, timeout)
            try:
                writer.write(head)
                await writer.drain()
                status, answer = await _read_head(reader)
            except (OSError, asyncio.IncompleteReadError):
                if not spare or method != "GET":
                    raise
                # The cluster had closed the spare before it read anything (an idle timeout):
                # what Go's transport does for a GET on a kept-alive connection, once.
                writer.close()
                reader, writer = await _dial(kube)
                writer.write(head)
                await writer.drain()
                status, answer = await _read_head(reader)
            if status == 101:
                upgraded = Upgraded(answer, reader, writer)
                writer = None  # the caller's now
                return upgraded
            body = await _read_body(reader, answer)
    except (OSError, ssl.SSLError, TimeoutError, asyncio.IncompleteReadError) as err:
        raise transport_error(kube, err) from err
    except asyncio.LimitOverrunError as err:
        message = f"{method} {path}: an answer whose head is over {_MAX_HEAD} bytes"
        raise ApiError.of(502, "BadGateway", message) from err
    finally:
        if writer is not None:
            writer.close()
    decode_answer(status, body, method, path)
    message = f"{method} {path}: the server did not switch protocols (status {status})"
    raise ApiError.of(400, "BadRequest", message)


# A switched connection is never given back, so every exec would pay for a TCP and TLS
# handshake with the cluster before its own (about 1.5 ms of a 3 ms exec handshake on the
# bed). One connection per cluster is kept ready instead, made after each use, and used
# within `_SPARE_TTL` (kube-apiserver closes idle connections after 90 s).
_SPARE_TTL = 20.0


@dataclass
class _Spare:
    creds: Credentials
    made: float
    reader: asyncio.StreamReader
    writer: asyncio.StreamWriter

    def usable(self, creds: Credentials) -> bool:
        return (
            self.creds is creds
            and time.monotonic() - self.made < _SPARE_TTL
            and not self.reader.at_eof()
            and not self.writer.is_closing()
        )


_spares: weakref.WeakKeyDictionary[Kube, _Spare] = weakref.WeakKeyDictionary()
_making: dict[int, asyncio.Task[None]] = {}


async def _connection(
    kube: Kube, timeout: float
) -> tuple[asyncio.StreamReader, asyncio.StreamWriter, bool]:
    """A connection for one upgrade: the spare if it is still good (True), else a new one;
    and a new spare on its way either way."""
    spare = _spares.pop(kube, None)
    _make_spare(kube)
    if spare is not None:
        if spare.usable(kube.creds):
            return spare.reader, spare.writer, True
        spare.writer.close()
    reader, writer = await _dial(kube)
    return reader, writer, False


def _make_spare(kube: Kube) -> None:
    if id(kube) in _making:
        return

    async def make() -> None:
        creds = kube.creds
        try:
            async with asyncio.timeout(DEFAULT_TIMEOUT):
                reader, writer = await _dial(kube)
        except (OSError, ssl.SSLError, TimeoutError):
            return  # the next upgrade dials, and says what is wrong
        finally:
            _making.pop(id(kube), None)
        old = _spares.get(kube)
        if old is not None:
            old.writer.close()
        _spares[kube] = _Spare(creds, time.monotonic(), reader, writer)

    _making[id(kube)] = asyncio.get_running_loop().create_task(make())


async def _dial(kube: Kube) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    server = URL(kube.creds.server)
    return await asyncio.open_connection(
        server.host or "localhost",
        server.port or 443,
        ssl=_tls(kube.creds.ssl) if server.scheme == "https" else None,
        limit=_MAX_HEAD,
    )


def _tls(setting: ssl.SSLContext | bool) -> ssl.SSLContext:
    if isinstance(setting, ssl.SSLContext):
        return setting
    context = ssl.create_default_context()
    if not setting:  # the kubeconfig says insecure-skip-tls-verify
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    return context


def _head(method: str, target: str, host: str, kube: Kube, headers: Mapping[str, str]) -> bytes:
    all_headers = CIMultiDict({"Host": host, "User-Agent": kube.agent})
    if kube.creds.token:
        all_headers["Authorization"] = f"Bearer {kube.creds.token}"
    all_headers.extend(headers.items())
    if method not in ("GET", "HEAD"):
        all_headers["Content-Length"] = "0"
    lines = [f"{method} {target} HTTP/1.1", *(f"{k}: {v}" for k, v in all_headers.items())]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


async def _read_head(reader: asyncio.StreamReader) -> tuple[int, list[tuple[str, str]]]:
    raw = await reader.readuntil(b"\r\n\r\n")
    status_line, *lines = raw.decode("latin-1").split("\r\n")
    version, _, rest = status_line.partition(" ")
    if not version.startswith("HTTP/1.") or not rest[:3].isdigit():
        raise ConnectionError(f"not an HTTP answer: {status_line[:40]!r}")
    headers = []
    for line in lines:
        if line:
            name, _, value = line.partition(":")
            headers.append((name.strip(), value.strip()))
    return int(rest[:3]), headers


async def _read_body(reader: asyncio.StreamReader, headers: list[tuple[str, str]]) -> bytes:
    """A refusal's body: by Content-Length, chunked, or up to the close (and no more than
    `_MAX_ERROR_BODY`: a Status is small)."""
    found = {name.lower(): value for name, value in headers}
    if "chunked" in found.get("transfer-encoding", "").lower():
        parts: list[bytes] = []
        size = 0
        while True:
            length = int((await reader.readline()).split(b";")[0].strip() or b"0", 16)
            if length == 0 or size + length > _MAX_ERROR_BODY:
                return b"".join(parts)
            parts.append(await reader.readexactly(length))
            size += length
            await reader.readline()
    length_text = found.get("content-length", "")
    if length_text.isdigit():
        return await reader.readexactly(min(int(length_text), _MAX_ERROR_BODY))
    return await reader.read(_MAX_ERROR_BODY)


@dataclass
class Opened:
    """A streamed answer: its status and content type, and its body as it comes."""

    status: int
    content_type: str
    chunks: AsyncIterator[bytes]


@contextlib.asynccontextmanager
async def opened(
    kube: Kube,
    method: str,
    path: str,
    query: Query,
    headers: Mapping[str, str],
    connect_timeout: float = DEFAULT_TIMEOUT,
) -> AsyncIterator[Opened]:
    """A request whose 2xx answer is read as it arrives, for as long as it lasts (a followed
    log is quiet for minutes). A failure before the answer is `ApiError` (401: renewed and
    tried once more); one while it streams ends `chunks` with `ApiError` too, so the caller
    can tell a cut stream from an ended one."""
    query = list(query)
    resp = await _open(kube, method, path, query, headers, connect_timeout)
    try:
        yield Opened(
            resp.status, resp.headers.get("Content-Type", "text/plain"), _chunks(kube, resp, path)
        )
    finally:
        resp.close()  # not back to the pool: a stream cut short leaves the connection unusable


async def _open(
    kube: Kube,
    method: str,
    path: str,
    query: list[tuple[str, str]],
    headers: Mapping[str, str],
    connect_timeout: float,
) -> aiohttp.ClientResponse:
    for attempt in (1, 2):
        creds = kube.creds
        try:
            resp = await kube.session.request(
                method,
                creds.server + path,
                params=query,
                headers=kube.headers(headers),
                ssl=creds.ssl,
                timeout=aiohttp.ClientTimeout(
                    total=None, sock_connect=connect_timeout, sock_read=None
                ),
            )
            if 200 <= resp.status < 300:
                return resp
            async with resp:
                body = await resp.read()
        except (aiohttp.ClientError, TimeoutError) as err:
            raise transport_error(kube, err) from err
        if resp.status == 401 and attempt == 1 and await kube.renew(creds):
            continue
        decode_answer(resp.status, body, method, path)
        raise ApiError.of(502, "BadGateway", f"{method} {path}: status {resp.status}")
    raise AssertionError("unreachable")


async def _chunks(kube: Kube, resp: aiohttp.ClientResponse, path: str) -> AsyncIterator[bytes]:
    try:
        async for chunk in resp.content.iter_any():
            yield chunk
    except (aiohttp.ClientError, TimeoutError) as err:
        failure = transport_error(kube, err)
        message = f"GET {path}: the stream was cut: {failure}"
        raise ApiError.of(503, "ServiceUnavailable", message) from err
