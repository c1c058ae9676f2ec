"""The one place the plugin talks HTTP to Kubernetes. Standard library only: it starts fast.

Errors are the server's own `Status`, shown the way kubectl shows them:
`Error from server (NotFound): locations.kmc.dev "x" not found`. `Warning` headers are
printed on stderr as kubectl prints them (`Warning: …`, each text once), while the answer
is still used: a list missing one location is better than no list.

Connections are kept open and reused (a few requests per command, some of them from
threads), and a watch is read line by line as the server streams it.
"""

from __future__ import annotations

import atexit
import base64
import http.client
import json
import os
import ssl
import sys
import tempfile
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlencode, urlsplit

from kubectl_mc import __version__
from kubectl_mc.kubeconfig import Selected

Obj = dict[str, Any]
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


@dataclass
class Client:
    server: str
    context: ssl.SSLContext
    token: str | None = None
    timeout: float = 30.0
    on_warning: Callable[[str], None] = field(default_factory=lambda: print_warning)
    _idle: list[http.client.HTTPSConnection] = field(default_factory=list, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        params: dict[str, str] | None = None,
        content_type: str = JSON,
        accept: str = JSON,
    ) -> Obj:
        data = None if body is None else json.dumps(body).encode()
        conn, resp = self._send(method, path, params, accept, data, content_type)
        try:
            text = resp.read().decode(errors="replace")
        except (OSError, http.client.HTTPException) as err:
            conn.close()
            raise KubeError(_connection_message(self.server, err)) from err
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
        conn, resp = self._send("GET", path, query, accept, None, JSON)
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
        except (OSError, http.client.HTTPException) as err:
            raise KubeError(_connection_message(self.server, err)) from err
        finally:
            conn.close()

    def _send(
        self,
        method: str,
        path: str,
        params: dict[str, str] | None,
        accept: str,
        data: bytes | None,
        content_type: str,
    ) -> tuple[http.client.HTTPSConnection, http.client.HTTPResponse]:
        url = urlsplit(self.server)
        headers = {"Accept": accept, "User-Agent": f"kubectl-mc/v{__version__}"}
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        if data is not None:
            headers["Content-Type"] = content_type
        target = url.path.rstrip("/") + path + (f"?{urlencode(params)}" if params else "")
        while True:
            conn, reused = self._connection(url.hostname or "localhost", url.port or 443)
            try:
                conn.request(method, target, body=data, headers=headers)
                resp = conn.getresponse()
                break
            except (OSError, http.client.HTTPException) as err:
                conn.close()
                if reused and method != "POST" and isinstance(err, ConnectionError):
                    continue  # the server had closed the idle connection: a new one
                raise KubeError(_connection_message(self.server, err)) from err
        for warning in resp.headers.get_all("Warning") or []:
            self.on_warning(warning_text(warning))
        return conn, resp

    def _connection(self, host: str, port: int) -> tuple[http.client.HTTPSConnection, bool]:
        with self._lock:
            if self._idle:
                return self._idle.pop(), True
        conn = http.client.HTTPSConnection(host, port, context=self.context, timeout=self.timeout)
        return conn, False

    def _release(self, conn: http.client.HTTPSConnection, resp: http.client.HTTPResponse) -> None:
        if resp.will_close:
            conn.close()
            return
        with self._lock:
            self._idle.append(conn)

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


def _error(status: int, payload: Any, text: str) -> KubeError:
    if isinstance(payload, dict) and payload.get("kind") == "Status":
        reason = payload.get("reason") or "Unknown"
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
    """A client for a resolved kubeconfig context (client certificates, tokens, CA)."""
    cluster, user = selected.cluster, selected.user
    server = cluster.get("server")
    if not server:
        raise KubeError(f"cluster of context {selected.context!r} has no server")
    if cluster.get("insecure-skip-tls-verify"):
        context = ssl._create_unverified_context()
    else:
        context = ssl.create_default_context(
            cafile=cluster.get("certificate-authority"),
            cadata=_decoded(cluster.get("certificate-authority-data")),
        )
    cert = _material(user, "client-certificate")
    key = _material(user, "client-key")
    if cert and key:
        context.load_cert_chain(cert, key)
    token = user.get("token")
    if not token and user.get("tokenFile"):
        token = Path(user["tokenFile"]).read_text().strip()
    return Client(server, context, token, timeout)


def _decoded(data: str | None) -> str | None:
    return base64.b64decode(data).decode() if data else None


def _material(user: dict[str, Any], field: str) -> str | None:
    """A path to the certificate or key: the file named, or inline data in a private file."""
    if user.get(field):
        return str(user[field])
    data = user.get(f"{field}-data")
    if not data:
        return None
    fd, name = tempfile.mkstemp(prefix="kubectl-mc-", suffix=".pem")
    with os.fdopen(fd, "wb") as out:
        out.write(base64.b64decode(data))
    if not _TEMP_FILES:
        atexit.register(cleanup)
    _TEMP_FILES.append(name)
    return name


_TEMP_FILES: list[str] = []


def cleanup() -> None:
    """Remove inline credentials written for ssl (it only loads them from files)."""
    while _TEMP_FILES:
        Path(_TEMP_FILES.pop()).unlink(missing_ok=True)


def _connection_message(server: str, err: BaseException) -> str:
    url = urlsplit(server)
    if isinstance(err, ConnectionRefusedError):
        return (
            f"The connection to the server {url.netloc} was refused - "
            "did you specify the right host or port?"
        )
    return f"Unable to connect to the server: {err}"
