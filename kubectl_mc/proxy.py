"""A cluster's `proxy-url`: the HTTP proxy that kubectl tunnels through to reach it.

The API server is always HTTPS, so the connection goes to the proxy and asks it to
`CONNECT host:port`; TLS to the server then runs inside that tunnel (`http11.py`).
Credentials in the URL (`http://user:pass@proxy:3128`) become `Proxy-Authorization: Basic`,
as in Go's transport. Only `http://` proxies: TLS to the proxy
itself (`https://`) and SOCKS are not implemented, and they are refused plainly rather
than bypassed.

Imported only when the kubeconfig's cluster names a proxy.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass, field
from urllib.parse import unquote, urlsplit


class ProxyError(ValueError):
    """A proxy-url this client cannot use."""


@dataclass(frozen=True)
class Proxy:
    host: str
    port: int
    headers: dict[str, str] = field(default_factory=dict)  # sent with CONNECT

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"


def parse(url: str) -> Proxy:
    parts = urlsplit(url if "://" in url else f"http://{url}")
    if parts.scheme != "http":
        raise ProxyError(
            f'proxy-url "{url}": only http:// proxies are supported by kubectl mc, '
            f"not {parts.scheme}://"
        )
    if not parts.hostname:
        raise ProxyError(f'proxy-url "{url}": no host')
    try:
        port = parts.port or 80
    except ValueError as err:
        raise ProxyError(f'proxy-url "{url}": {err}') from err
    headers = {}
    if parts.username is not None:
        secret = f"{unquote(parts.username)}:{unquote(parts.password or '')}"
        headers["Proxy-Authorization"] = "Basic " + base64.b64encode(secret.encode()).decode()
    return Proxy(parts.hostname, port, headers)
