"""The plugin's HTTP client against a local TLS server: errors, warnings, keep-alive, watch."""

from __future__ import annotations

import json
import ssl
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import ClassVar
from urllib.parse import parse_qsl, urlsplit

import pytest
from hypothesis import given
from hypothesis import strategies as st

from apiserver import certs
from kubectl_mc import kube
from kubectl_mc.kube import Client, KubeError


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive
    peers: ClassVar[list[int]] = []

    def log_message(self, *args: object) -> None:
        pass

    def _json(self, code: int, body: object, warnings: tuple[str, ...] = ()) -> None:
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for warning in warnings:
            self.send_header("Warning", f'299 - "{warning}"')
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        Handler.peers.append(self.client_address[1])
        if self.path.startswith("/list"):
            self._json(
                200, {"kind": "List", "accept": self.headers["Accept"]}, ("us-east left out",)
            )
        elif self.path.startswith("/watch"):
            self.send_response(200)
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            for kind in ("ADDED", "MODIFIED"):
                line = json.dumps({"type": kind, "object": {"metadata": {"name": "web"}}}) + "\n"
                self.wfile.write(f"{len(line):x}\r\n{line}\r\n".encode())
            self.wfile.write(b"0\r\n\r\n")
        else:
            status = {
                "kind": "Status",
                "reason": "NotFound",
                "code": 404,
                "message": 'deployments.mc.kmc.dev "nope" not found',
            }
            self._json(404, status)


@pytest.fixture
def client(tmp_path: Path) -> Iterator[Client]:
    ca = certs.ensure_ca(tmp_path, "ca", "test-ca")
    serving = certs.ensure_cert(tmp_path, "serving", ca, "localhost", hosts=("127.0.0.1",))
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(serving.cert, serving.key)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    Handler.peers = []
    trust = ssl.create_default_context(cafile=str(ca.cert))
    yield Client(f"https://127.0.0.1:{server.server_address[1]}", trust)
    server.shutdown()
    server.server_close()


def test_warnings_are_reported_and_connections_kept(client: Client) -> None:
    seen: list[str] = []
    client.on_warning = seen.append
    assert client.table("/list")["accept"] == kube.TABLE
    assert client.get("/list")["accept"] == "application/json"
    assert seen == ["us-east left out", "us-east left out"]
    assert len(set(Handler.peers)) == 1  # one connection for both


def test_status_errors_read_as_kubectl_prints_them(client: Client) -> None:
    with pytest.raises(KubeError) as err:
        client.get("/apis/x/nope")
    assert str(err.value) == 'Error from server (NotFound): deployments.mc.kmc.dev "nope" not found'
    assert err.value.code == 404 and err.value.reason == "NotFound"


def test_a_watch_streams_events(client: Client) -> None:
    events = list(client.watch("/watch", {"resourceVersion": "7"}))
    assert [e["type"] for e in events] == ["ADDED", "MODIFIED"]


def test_each_warning_is_printed_once(capsys: pytest.CaptureFixture[str]) -> None:
    kube.print_warning("only once, please")
    kube.print_warning("only once, please")
    assert capsys.readouterr().err == "Warning: only once, please\n"


@pytest.mark.parametrize(
    "server",
    [
        "https://127.0.0.1:6443",
        "https://Hub.Example.COM",
        "https://hub:8443/prefix/",
        "http://hub/path?x=1#frag",
        "https://[::1]:8443/a",
        "https://[fe80::1]",
        "https://user@hub:99",
        "https://hub?x",
    ],
)
def test_server_urls_read_as_urlsplit_reads_them(server: str) -> None:
    url = urlsplit(server)
    default = 80 if url.scheme == "http" else 443
    assert kube.split_server(server) == (url.netloc, url.hostname, url.port or default, url.path)


@given(st.dictionaries(st.text(), st.text(), max_size=4))
def test_query_strings_decode_to_the_params(params: dict[str, str]) -> None:
    assert dict(parse_qsl(kube.query_string(params), keep_blank_values=True)) == params
