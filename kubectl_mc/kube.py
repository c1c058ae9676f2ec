"""The one place the plugin talks HTTP to Kubernetes. Standard library only: it starts fast.

Errors are the server's own `Status`, shown the way kubectl shows them:
`Error from server (NotFound): locations.kmc.dev "x" not found`.
"""

from __future__ import annotations

import base64
import http.client
import json
import os
import ssl
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlencode, urlsplit

from kubectl_mc import __version__
from kubectl_mc.kubeconfig import Selected

Obj = dict[str, Any]
APPLY_PATCH = "application/apply-patch+yaml"


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

    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        params: dict[str, str] | None = None,
        content_type: str = "application/json",
    ) -> Obj:
        url = urlsplit(self.server)
        conn = http.client.HTTPSConnection(
            url.hostname or "localhost", url.port or 443, context=self.context, timeout=self.timeout
        )
        headers = {"Accept": "application/json", "User-Agent": f"kubectl-mc/v{__version__}"}
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = content_type
        target = url.path.rstrip("/") + path + (f"?{urlencode(params)}" if params else "")
        try:
            conn.request(method, target, body=data, headers=headers)
            resp = conn.getresponse()
            text = resp.read().decode(errors="replace")
        except (OSError, http.client.HTTPException) as err:
            raise KubeError(_connection_message(self.server, err)) from err
        finally:
            conn.close()
        try:
            payload = json.loads(text) if text else {}
        except json.JSONDecodeError:
            payload = {"raw": text}
        if 200 <= resp.status < 300:
            return payload if isinstance(payload, dict) else {"items": payload}
        if isinstance(payload, dict) and payload.get("kind") == "Status":
            reason = payload.get("reason") or "Unknown"
            raise KubeError(f"Error from server ({reason}): {payload.get('message', '')}", payload)
        raise KubeError(
            f"Error from server: the server responded with status {resp.status}: {text[:200]}",
            {"code": resp.status},
        )

    def get(self, path: str, **params: str) -> Obj:
        return self.request("GET", path, params=params or None)

    def apply(self, path: str, body: Obj, manager: str = "kubectl-mc") -> Obj:
        params = {"fieldManager": manager, "force": "true"}
        return self.request("PATCH", path, body=body, params=params, content_type=APPLY_PATCH)

    def delete(self, path: str) -> Obj:
        return self.request("DELETE", path)


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
