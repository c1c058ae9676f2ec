"""Small local stand-ins for the plugin's credential tests: an HTTPS API server that knows
which bearer tokens it accepts, an exec credential plugin written as a Python script, and a
CONNECT proxy. All of them listen on 127.0.0.1 only and stop with the test."""

from __future__ import annotations

import json
import select
import socket
import ssl
import stat
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from apiserver import certs

LOOPBACK = ("127.0.0.1", "localhost")


@dataclass
class Seen:
    path: str
    authorization: str | None
    client: str | None  # the client certificate's common name


@dataclass
class ApiServer:
    url: str
    port: int
    ca: certs.Pair
    accept: set[str] | None = None  # bearer tokens let in; None: everyone
    seen: list[Seen] = field(default_factory=list)

    def tokens(self) -> list[str | None]:
        return [s.authorization for s in self.seen]


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def log_message(self, *args: object) -> None:
        pass

    def _json(self, code: int, body: object) -> None:
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        api = self.server.api
        auth = self.headers["Authorization"]
        peer = self.connection.getpeercert() if isinstance(self.connection, ssl.SSLSocket) else None
        subject: Any = (peer or {}).get("subject", ())
        names = [v for rdn in subject for k, v in rdn if k == "commonName"]
        api.seen.append(Seen(self.path, auth, names[0] if names else None))
        token = auth.removeprefix("Bearer ") if auth else None
        if api.accept is not None and token not in api.accept:
            status = {"kind": "Status", "code": 401, "reason": "Unauthorized"}
            self._json(401, {**status, "message": "Unauthorized"})
        elif self.path.startswith("/watch"):
            self.send_response(200)
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            line = json.dumps({"type": "ADDED", "object": {"token": token}}) + "\n"
            self.wfile.write(f"{len(line):x}\r\n{line}\r\n0\r\n\r\n".encode())
        else:
            self._json(200, {"kind": "Thing", "token": token, "client": api.seen[-1].client})


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    api: ApiServer


@contextmanager
def api_server(folder: Path) -> Iterator[ApiServer]:
    """HTTPS on 127.0.0.1, its certificate for `localhost` and 127.0.0.1; client
    certificates from the same CA are read, not required."""
    ca = certs.ensure_ca(folder, "ca", "test-ca")
    serving = certs.ensure_cert(
        folder, "serving", ca, "localhost", hosts=("localhost", "127.0.0.1")
    )
    server = _Server(("127.0.0.1", 0), _Handler)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(serving.cert, serving.key)
    context.load_verify_locations(ca.cert)
    context.verify_mode = ssl.CERT_OPTIONAL
    server.socket = context.wrap_socket(server.socket, server_side=True)
    port = server.server_address[1]
    server.api = ApiServer(f"https://127.0.0.1:{port}", port, ca)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.1})
    thread.start()
    try:
        yield server.api
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


PLUGIN = """
import datetime, json, os, sys
from pathlib import Path

state = Path(os.environ["PLUGIN_STATE"])
runs = state.read_text().splitlines() if state.exists() else []
info = json.loads(os.environ["KUBERNETES_EXEC_INFO"])
seen = {"args": sys.argv[1:], "env": os.environ.get("PLUGIN_GREETING"), "info": info}
state.write_text("\\n".join([*runs, json.dumps(seen)]) + "\\n")
if os.environ.get("PLUGIN_EXIT"):
    print("plugin: failing as asked", file=sys.stderr)
    sys.exit(int(os.environ["PLUGIN_EXIT"]))
status = {"token": f"token-{len(runs) + 1}"}
if os.environ.get("PLUGIN_EXPIRES"):
    now = datetime.datetime.now(datetime.timezone.utc)
    when = now + datetime.timedelta(seconds=float(os.environ["PLUGIN_EXPIRES"]))
    status["expirationTimestamp"] = when.strftime("%Y-%m-%dT%H:%M:%SZ")
if os.environ.get("PLUGIN_CERT"):
    status = {
        "clientCertificateData": Path(os.environ["PLUGIN_CERT"]).read_text(),
        "clientKeyData": Path(os.environ["PLUGIN_KEY"]).read_text(),
    }
version = os.environ.get("PLUGIN_ANSWERS") or info["apiVersion"]
print(json.dumps({"apiVersion": version, "kind": "ExecCredential", "status": status}))
"""


@dataclass
class Plugin:
    """A fake exec credential plugin: token-1, token-2, … one per run; each run's args, env
    and KUBERNETES_EXEC_INFO are kept in `state`, one JSON line per run."""

    command: Path
    state: Path

    def runs(self) -> list[dict[str, Any]]:
        if not self.state.exists():
            return []
        return [json.loads(line) for line in self.state.read_text().splitlines()]

    def exec(self, version: str = "v1", mode: str | None = "Never", **env: str) -> dict[str, Any]:
        """The kubeconfig `exec` section that runs it, `env` passed as PLUGIN_<NAME>."""
        config: dict[str, Any] = {
            "apiVersion": f"client.authentication.k8s.io/{version}",
            "command": str(self.command),
            "args": ["--region", "eu west"],
            "env": [{"name": "PLUGIN_STATE", "value": str(self.state)}]
            + [{"name": f"PLUGIN_{k.upper()}", "value": v} for k, v in env.items()],
        }
        if mode:
            config["interactiveMode"] = mode
        return config


def write_plugin(folder: Path) -> Plugin:
    command = folder / "bin" / "fake-auth"
    command.parent.mkdir(parents=True, exist_ok=True)
    command.write_text(f"#!{sys.executable}\n{PLUGIN}")
    command.chmod(command.stat().st_mode | stat.S_IXUSR)
    return Plugin(command, folder / "plugin-runs.jsonl")


@dataclass
class ConnectProxy:
    """An HTTP proxy that only tunnels (CONNECT), only to loopback addresses. Each tunnel
    ends when either side closes or after 10 s of silence; the proxy stops with the test."""

    port: int
    requests: list[tuple[str, str | None]] = field(default_factory=list)  # line, auth


@contextmanager
def connect_proxy() -> Iterator[ConnectProxy]:
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.1)
    proxy = ConnectProxy(listener.getsockname()[1])
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            threading.Thread(target=_tunnel, args=(proxy, conn, stop), daemon=True).start()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield proxy
    finally:
        stop.set()
        thread.join(5)
        listener.close()


def _tunnel(proxy: ConnectProxy, client: socket.socket, stop: threading.Event) -> None:
    client.settimeout(10)
    with client:
        head = b""
        while b"\r\n\r\n" not in head and len(head) < 65536:
            chunk = client.recv(4096)
            if not chunk:
                return
            head += chunk
        lines = head.split(b"\r\n\r\n")[0].decode().split("\r\n")
        headers = dict(line.split(":", 1) for line in lines[1:] if ":" in line)
        auth = {k.lower(): v.strip() for k, v in headers.items()}.get("proxy-authorization")
        proxy.requests.append((lines[0], auth))
        method, target, _ = lines[0].split(" ")
        host, _, port = target.rpartition(":")
        if method != "CONNECT" or host not in LOOPBACK:
            client.sendall(b"HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\n\r\n")
            return
        with socket.create_connection((host, int(port)), timeout=10) as upstream:
            client.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
            _pipe(client, upstream, stop)


def _pipe(a: socket.socket, b: socket.socket, stop: threading.Event) -> None:
    idle = 0.0
    while not stop.is_set() and idle < 10:
        ready, _, _ = select.select([a, b], [], [], 0.2)
        idle = 0.0 if ready else idle + 0.2
        for sock in ready:
            data = sock.recv(65536)
            if not data:
                return
            (b if sock is a else a).sendall(data)


def pem_pair(folder: Path, ca: certs.Pair, name: str) -> tuple[Path, Path]:
    pair = certs.ensure_cert(folder, name, ca, name)
    return pair.cert, pair.key
