"""A small synchronous HTTPS client for the test bed's own checks (readiness, nodes).

The test bed is a command-line tool that waits on things; blocking stdlib HTTP is the
simplest thing that does the job and keeps it free of the project's own client code.
"""

from __future__ import annotations

import http.client
import json
import ssl
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class Response:
    status: int
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


@dataclass(frozen=True)
class Client:
    """Talks to one kube-apiserver as its admin (client certificate)."""

    host: str
    port: int
    ca: Path
    cert: Path
    key: Path

    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        timeout: float = 5.0,
        content_type: str = "application/json",
    ) -> Response:
        context = ssl.create_default_context(cafile=str(self.ca))
        context.load_cert_chain(str(self.cert), str(self.key))
        conn = http.client.HTTPSConnection(self.host, self.port, context=context, timeout=timeout)
        try:
            data = None if body is None else json.dumps(body).encode()
            headers = {"Content-Type": content_type} if data else {}
            conn.request(method, path, body=data, headers=headers)
            resp = conn.getresponse()
            return Response(resp.status, resp.read())
        finally:
            conn.close()

    def ok(self, path: str) -> bool:
        """True when GET `path` answers 2xx; any connection error is a plain False."""
        try:
            return 200 <= self.request("GET", path, timeout=2.0).status < 300
        except (OSError, http.client.HTTPException):
            return False
