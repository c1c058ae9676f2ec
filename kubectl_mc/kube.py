"""The one place the plugin talks HTTP to Kubernetes. Standard library only: it starts fast.

Errors are the server's own `Status`, shown the way kubectl shows them:
`Error from server (NotFound): locations.kmc.dev "x" not found`. `Warning` headers are
printed on stderr as kubectl prints them (`Warning: …`, each text once), while the answer
is still used: a list missing one location is better than no list.

Connections are kept open and reused (a few requests per command, some of them from
threads), and a watch is read line by line as the server streams it. HTTP itself is
`http11.py`: http.client's import alone cost as much as the rest of a `get`.

Every request asks the kubeconfig user's credential source (`credentials.py`) what to send,
so an exec plugin's token is fetched when first needed and replaced when it expires; a 401
is retried once with a fresh one. A cluster's `proxy-url` is tunnelled through with CONNECT.
"""

from __future__ import annotations

import json
import ssl
import sys
import threading

from kubectl_mc import __version__
from kubectl_mc.credentials import (
    ClusterTLS,
    Credential,
    CredentialError,
    Static,
    TokenFile,
)
from kubectl_mc.http11 import Connection, Response

TYPE_CHECKING = False  # typing is not imported at run time: it costs a few milliseconds
if TYPE_CHECKING:
    from collections.abc import Callable, Iterator
    from typing import Any, TypeAlias

    # A query: a mapping, or pairs when a name repeats (exec's `command`).
    Params: TypeAlias = dict[str, str] | list[tuple[str, str]]

    from kubectl_mc.credentials import Source
    from kubectl_mc.kubeconfig import Selected
    from kubectl_mc.proxy import Proxy

Obj = dict[str, "Any"]
APPLY_PATCH = "application/apply-patch+yaml"
JSON = "application/json"
# What kubectl asks for when it prints: the server's Table, or plain JSON from a server
# that has no Table for this resource.
TABLE = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"


class KubeError(Exception):
    """A failed request: the server's Status, or a connection problem in kubectl's words."""

    def __init__(self, message: str, status: Obj | None = None) -> None:
        super().__init__(message)
        self.status = status or {}

    @property
    def code(self) -> int:
        return int(self.status.get("code", 0))

    @property
    def reason(self) -> str:
        return str(self.status.get("reason", ""))


class Client:
    def __init__(
        self,
        server: str,
        context: ssl.SSLContext,  # used as it is when there are no credentials
        credentials: Source | None = None,
        timeout: float = 30.0,
        on_warning: Callable[[str], None] | None = None,
        proxy: Proxy | None = None,
        server_name: str | None = None,  # tls-server-name
    ) -> None:
        self.server, self.context, self.credentials = server, context, credentials
        self.timeout, self.proxy, self.server_name = timeout, proxy, server_name
        self.on_warning: Callable[[str], None] = on_warning or print_warning
        self._idle: list[Connection] = []
        self._lock = threading.Lock()

    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        params: Params | None = None,
        content_type: str = JSON,
        accept: str = JSON,
    ) -> Obj:
        data = None if body is None else json.dumps(body).encode()
        conn, resp = self._exchange(method, path, params, accept, data, content_type)
        try:
            text = resp.read().decode(errors="replace")
        except OSError as err:
            conn.close()
            raise KubeError(self._connection_message(err)) from err
        self._release(conn, resp)
        try:
            payload = json.loads(text) if text else {}
        except json.JSONDecodeError:
            payload = {"raw": text}
        if 200 <= resp.status < 300:
            return payload if isinstance(payload, dict) else {"items": payload}
        raise _error(resp.status, payload, text)

    def watch(
        self, path: str, params: dict[str, str] | None = None, accept: str = JSON
    ) -> Iterator[Obj]:
        """The events of a watch (`{"type", "object"}`), as the server sends them, until it
        closes the stream. No read timeout: a quiet watch is not a dead one."""
        query = {**(params or {}), "watch": "true"}
        conn, resp = self._exchange("GET", path, query, accept, None, JSON)
        try:
            if not 200 <= resp.status < 300:
                text = resp.read().decode(errors="replace")
                try:
                    payload = json.loads(text)
                except json.JSONDecodeError:
                    payload = {"raw": text}
                raise _error(resp.status, payload, text)
            if conn.sock is not None:
                conn.sock.settimeout(None)
            while line := resp.readline():
                if line.strip():
                    yield json.loads(line)
        except OSError as err:
            raise KubeError(self._connection_message(err)) from err
        finally:
            conn.close()

    def stream(self, path: str, params: Params | None = None) -> Streamed:
        """A GET whose 2xx answer is read as the server sends it (a followed log), for as
        long as it lasts, with no read timeout; any other answer is a KubeError."""
        conn, resp = self._exchange("GET", path, params, "*/*", None, JSON)
        if not 200 <= resp.status < 300:
            try:
                text = resp.read().decode(errors="replace")
            except OSError as err:
                raise KubeError(self._connection_message(err)) from err
            finally:
                conn.close()
            try:
                payload = json.loads(text)
            except json.JSONDecodeError:
                payload = {"raw": text}
            raise _error(resp.status, payload, text)
        if conn.sock is not None:
            conn.sock.settimeout(None)
        return Streamed(conn, resp, self._connection_message)

    def upgrade(
        self, method: str, path: str, params: Params | None, headers: dict[str, str]
    ) -> Upgraded:
        """A request that asks to switch protocols (`headers`: Connection, Upgrade, …); the
        connection once the server has (101), or a KubeError with its Status."""
        conn, resp = self._exchange(method, path, params, JSON, None, JSON, headers)
        if resp.status != 101:
            try:
                text = resp.read().decode(errors="replace")
            except OSError as err:
                raise KubeError(self._connection_message(err)) from err
            finally:
                conn.close()
            try:
                payload = json.loads(text) if text else {}
            except json.JSONDecodeError:
                payload = {"raw": text}
            raise _error(resp.status, payload, text)
        if conn.sock is not None:
            conn.sock.settimeout(None)
        return Upgraded(conn, resp)

    def _exchange(
        self,
        method: str,
        path: str,
        params: Params | None,
        accept: str,
        data: bytes | None,
        content_type: str,
        extra: dict[str, str] | None = None,
    ) -> tuple[Connection, Response]:
        """One request, sent again once with a fresh credential if the first one is refused
        (401) and the source has a different one to offer (a plugin run again)."""
        credential = self._credential()
        conn, resp = self._send(credential, method, path, params, accept, data, content_type, extra)
        if resp.status != 401 or self.credentials is None:
            return conn, resp
        fresh = self._credential(stale=credential)
        if fresh is None:
            return conn, resp
        self._drain(conn, resp)
        return self._send(fresh, method, path, params, accept, data, content_type, extra)

    def _credential(self, stale: Credential | None = None) -> Credential | None:
        """The credential to use (`stale`: the one just refused; None if no other)."""
        try:
            if self.credentials is None:
                return Credential(None, self.context)
            if stale is None:
                return self.credentials.current()
            return self.credentials.refresh(stale)
        except CredentialError as err:
            raise KubeError(f"error: {err}") from err

    def _send(
        self,
        credential: Credential | None,
        method: str,
        path: str,
        params: Params | None,
        accept: str,
        data: bytes | None,
        content_type: str,
        extra: dict[str, str] | None = None,
    ) -> tuple[Connection, Response]:
        headers = {"Accept": accept, "User-Agent": f"kubectl-mc/v{__version__}", **(extra or {})}
        context = self.context
        if credential is not None:
            context = credential.context
            if credential.token:
                headers["Authorization"] = f"Bearer {credential.token}"
        if data is not None:
            headers["Content-Type"] = content_type
        target = split_server(self.server)[3].rstrip("/") + path
        target += f"?{query_string(params)}" if params else ""
        while True:
            conn, reused = self._connection(context)
            try:
                resp = conn.request(method, target, data, headers)
                break
            except OSError as err:
                conn.close()
                if reused and method != "POST" and isinstance(err, ConnectionError):
                    continue  # the server had closed the idle connection: a new one
                raise KubeError(self._connection_message(err)) from err
        for warning in resp.header_values("warning"):
            self.on_warning(warning_text(warning))
        return conn, resp

    def _connection(self, context: ssl.SSLContext) -> tuple[Connection, bool]:
        """An idle connection made with this TLS context, or a new one. Idle ones made with
        another (a client certificate since replaced) are closed."""
        found, stale = None, []
        with self._lock:
            while self._idle and found is None:
                conn = self._idle.pop()
                if conn.tls_context is context:
                    found = conn
                else:
                    stale.append(conn)
        for conn in stale:
            conn.close()
        if found is not None:
            return found, True
        _, host, port, _ = split_server(self.server)
        name = self.server_name or host
        proxy = self.proxy
        via = None if proxy is None else (proxy.host, proxy.port, proxy.headers)
        return Connection(host, port, context, self.timeout, name, via), False

    def _release(self, conn: Connection, resp: Response) -> None:
        if resp.will_close:
            conn.close()
            return
        with self._lock:
            self._idle.append(conn)

    def _drain(self, conn: Connection, resp: Response) -> None:
        """Read a response nobody needs, so its connection can serve the next request."""
        try:
            resp.read()
        except OSError:
            conn.close()
            return
        self._release(conn, resp)

    def _connection_message(self, err: BaseException) -> str:
        if self.proxy is not None and isinstance(err, ConnectionRefusedError):
            return (
                f"Unable to connect to the server: proxyconnect tcp: dial tcp "
                f"{self.proxy.address}: connect: connection refused"
            )
        return _connection_message(self.server, err)

    def get(self, path: str, **params: str) -> Obj:
        return self.request("GET", path, params=params or None)

    def table(self, path: str, **params: str) -> Obj:
        """The server's Table for a GET (a list or one object)."""
        return self.request("GET", path, params=params or None, accept=TABLE)

    def apply(self, path: str, body: Obj, manager: str = "kubectl-mc") -> Obj:
        params = {"fieldManager": manager, "force": "true"}
        return self.request("PATCH", path, body=body, params=params, content_type=APPLY_PATCH)

    def delete(self, path: str) -> Obj:
        return self.request("DELETE", path)


class Streamed:
    """An answer being read as it comes."""

    def __init__(
        self, conn: Connection, response: Response, words: Callable[[BaseException], str]
    ) -> None:
        self._conn, self._response, self._words = conn, response, words

    def lines(self) -> Iterator[bytes]:
        """Line by line until the answer ends. One cut before its end (the server went
        away) is a KubeError, so a caller can tell it from one that ended."""
        try:
            while line := self._response.readline():
                yield line
        except OSError as err:
            raise KubeError(self._words(err)) from err
        finally:
            self.close()

    def close(self) -> None:
        self._conn.close()


class Upgraded:
    """A connection the server switched to another protocol (its 101 answer): the socket
    to write to, and what the server sends, buffered (its first frames may be in it)."""

    def __init__(self, conn: Connection, response: Response) -> None:
        assert conn.sock is not None and conn.stream is not None
        self.sock, self.stream, self._conn = conn.sock, conn.stream, conn
        self.response = response
        self._lock = threading.Lock()

    def header(self, name: str) -> str:
        return self.response.header(name.lower())

    def send(self, data: bytes) -> None:
        """Write all of `data` (from any thread: one writer at a time)."""
        with self._lock:
            self.sock.sendall(data)

    def close(self) -> None:
        self._conn.close()


def _error(status: int, payload: Any, text: str) -> KubeError:
    if isinstance(payload, dict) and payload.get("kind") == "Status":
        reason = payload.get("reason") or "Unknown"
        if reason == "Unauthorized":  # kubectl's words for a credential the server refused
            message = payload.get("message") or reason
            return KubeError(f"error: You must be logged in to the server ({message})", payload)
        return KubeError(f"Error from server ({reason}): {payload.get('message', '')}", payload)
    return KubeError(
        f"Error from server: the server responded with status {status}: {text[:200]}",
        {"code": status},
    )


_WARNED: set[str] = set()


def print_warning(text: str) -> None:
    """kubectl's warning writer: `Warning: …` on stderr, each text once per command."""
    if text not in _WARNED:
        _WARNED.add(text)
        print(f"Warning: {text}", file=sys.stderr, flush=True)


def warning_text(header: str) -> str:
    """The text of an RFC 7234 warning (`299 - "text"`), unescaped; the raw value otherwise."""
    code, _, rest = header.partition(" ")
    agent, _, quoted = rest.partition(" ")
    if not (code.isdigit() and agent and len(quoted) >= 2 and quoted[0] == quoted[-1] == '"'):
        return header
    out, escaped = [], False
    for char in quoted[1:-1]:
        if escaped or char != "\\":
            out.append(char)
            escaped = False
        else:
            escaped = True
    return "".join(out)


def connect(selected: Selected, timeout: float = 30.0) -> Client:
    """A client for a resolved kubeconfig context. Nothing is run or read for the user's
    credentials until the first request needs them."""
    cluster = selected.cluster
    server = cluster.get("server")
    if not server:
        raise KubeError(f"cluster of context {selected.context!r} has no server")
    tls = ClusterTLS.of(cluster)
    try:
        credentials = source_for(selected.user_name, selected.user, cluster, tls)
    except CredentialError as err:
        raise KubeError(str(err)) from err
    proxy = None
    if cluster.get("proxy-url"):
        from kubectl_mc.proxy import ProxyError, parse

        try:
            proxy = parse(str(cluster["proxy-url"]))
        except ProxyError as err:
            raise KubeError(str(err)) from err
    return Client(server, tls.plain, credentials, timeout, proxy=proxy, server_name=tls.server_name)


def _connection_message(server: str, err: BaseException) -> str:
    if isinstance(err, ConnectionRefusedError):
        return (
            f"The connection to the server {split_server(server)[0]} was refused - "
            "did you specify the right host or port?"
        )
    return f"Unable to connect to the server: {err}"


# urllib.parse is not imported: with the ipaddress module it loads, it costs more at start
# than the little of it a client needs, which follows.
_UNRESERVED = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-~")


def split_server(server: str) -> tuple[str, str, int, str]:
    """A kubeconfig server URL's host[:port], host (lowercase, IPv6 without brackets), port
    (443 for https when it names none, 80 for http) and path, as urllib.parse.urlsplit reads
    them."""
    scheme, sep, rest = server.partition("://")
    if not sep:
        scheme, rest = "", server
    end = min((i for i in map(rest.find, "/?#") if i >= 0), default=len(rest))
    netloc, path = rest[:end], rest[end:].partition("?")[0].partition("#")[0]
    address = netloc.rpartition("@")[2]
    if address.startswith("["):
        host, _, after = address[1:].partition("]")
        port = after[1:]
    else:
        host, _, port = address.partition(":")
    default = 80 if scheme.lower() == "http" else 443
    return netloc, host.lower() or "localhost", int(port) if port else default, path


def query_string(params: Params) -> str:
    """`params` for a URL, every byte but the unreserved ones percent-encoded."""
    pairs = params.items() if isinstance(params, dict) else params
    return "&".join(f"{_quoted(k)}={_quoted(v)}" for k, v in pairs)


def _quoted(text: str) -> str:
    return "".join(chr(b) if b in _UNRESERVED else f"%{b:02X}" for b in text.encode())


def source_for(
    user_name: str, user: dict[str, Any], cluster: dict[str, Any], tls: ClusterTLS
) -> Source | None:
    """The kubeconfig user's credential source; None for a user with no credentials at all.
    Raises CredentialError for a user entry kubectl would refuse too."""
    static = any(user.get(k) for k in ("token", "client-certificate", "client-certificate-data"))
    if user.get("tokenFile") and not user.get("token"):
        return TokenFile(user_name, user["tokenFile"], Static(user_name, tls, user))
    if static:
        return Static(user_name, tls, user)
    if user.get("exec"):
        from kubectl_mc.exec_plugin import ExecPlugin

        return ExecPlugin.of(user_name, user["exec"], cluster, tls)
    if user.get("auth-provider"):
        name = (user["auth-provider"] or {}).get("name", "")
        raise CredentialError(
            f'user "{user_name}": the {name} auth-provider is not supported by kubectl mc; '
            "use an exec credential plugin (kubectl's own providers were replaced by them)"
        )
    return None
