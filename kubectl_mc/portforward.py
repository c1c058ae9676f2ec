"""`kubectl mc port-forward`: local ports to a pod's ports, in whichever location holds it.

The pod is read first (as kubectl does: it must exist, once, and be Running), and its location
taken from the answer, so each connection then goes straight to `NAME@LOCATION`. Every local
connection is a WebSocket of its own to `pods/<name>/portforward?ports=<port>`
(`v4.channel.k8s.io`, which kubelets and kwok serve): data on channel 0, the kubelet's errors
on channel 1, each opened by a message naming the port. This protocol cannot close one
direction only: when the local side closes, so does the connection to the pod (after what
was already on its way back).
"""

from __future__ import annotations

import signal
import socket
import sys
import threading

from kubectl_mc import channels, websocket
from kubectl_mc.execute import REMOTE, connect
from kubectl_mc.kube import KubeError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

    from kubectl_mc.kube import Client, Upgraded

LOCATION = "kmc.dev/location"


class PortForwardError(Exception):
    """Something the person must fix; the message says what."""


def parse_ports(specs: list[str]) -> list[tuple[int, int]]:
    """kubectl's `[LOCAL:]REMOTE` (LOCAL empty or 0: any free port) as (local, remote)."""
    pairs = []
    for spec in specs:
        local, sep, remote = spec.partition(":")
        if not sep:
            local, remote = spec, spec
        try:
            pair = (int(local or 0), int(remote))
        except ValueError:
            raise PortForwardError(f"error: invalid port format {spec!r}") from None
        if not (0 <= pair[0] < 65536 and 0 < pair[1] < 65536):
            raise PortForwardError(f"error: invalid port format {spec!r}")
        pairs.append(pair)
    return pairs


def where(client: Client, namespace: str, pod: str) -> str:
    """`name@location` of the pod, which must be running (kubectl's checks and words)."""
    found = client.get(f"{REMOTE}/namespaces/{namespace}/pods/{pod}")
    meta = found.get("metadata") or {}
    phase = (found.get("status") or {}).get("phase", "")
    if phase != "Running":
        raise PortForwardError(
            f"error: unable to forward port because pod is not running. Current status={phase}"
        )
    location = (meta.get("annotations") or {}).get(LOCATION)
    return f"{meta.get('name', pod.partition('@')[0])}@{location}" if location else pod


def listen(addresses: list[str], port: int) -> list[socket.socket]:
    """Listening sockets on each address ("localhost": 127.0.0.1, and ::1 where there is
    IPv6), all on the same port (the first one's, when `port` is 0)."""
    hosts: list[str] = []
    for address in addresses:
        hosts += ["127.0.0.1", "::1"] if address == "localhost" else [address]
    listening: list[socket.socket] = []
    for host in hosts:
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind((host, port or (listening[0].getsockname()[1] if listening else 0)))
            sock.listen(16)
        except OSError as err:
            sock.close()
            if host == "::1" and "localhost" in addresses:
                continue  # no IPv6 here: 127.0.0.1 alone, as kubectl does
            for other in listening:
                other.close()
            raise PortForwardError(f"error: unable to listen on {host}:{port}: {err}") from None
        listening.append(sock)
    return listening


def run(
    client: Client,
    namespace: str,
    pod: str,
    pairs: list[tuple[int, int]],
    addresses: list[str],
    say: Callable[[str], None],
) -> None:
    """Forward until interrupted (Ctrl-C, exit 0), saying what kubectl says as it goes."""
    target = where(client, namespace, pod)
    path = f"{REMOTE}/namespaces/{namespace}/pods/{target}/portforward"
    listening = []
    for local, remote in pairs:
        for sock in listen(addresses, local):
            host, port = sock.getsockname()[:2]
            shown = f"[{host}]" if ":" in host else host
            say(f"Forwarding from {shown}:{port} -> {remote}")
            listening.append((sock, port, remote))
    threads = [
        threading.Thread(target=_accept, args=(client, path, *each, say), daemon=True)
        for each in listening
    ]
    for thread in threads:
        thread.start()
    # Ctrl-C ends it even when started with SIGINT ignored (a shell's background job), as
    # kubectl's signal.Notify does.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        for thread in threads:
            thread.join()
    except KeyboardInterrupt:
        return  # Ctrl-C ends the forwarding, quietly and successfully, as kubectl's does


def _accept(
    client: Client,
    path: str,
    sock: socket.socket,
    local: int,
    remote: int,
    say: Callable[[str], None],
) -> None:
    while True:
        conn, _ = sock.accept()
        say(f"Handling connection for {local}")
        threading.Thread(target=forward, args=(client, path, remote, conn), daemon=True).start()


def forward(client: Client, path: str, remote: int, conn: socket.socket) -> None:
    """One local connection to the pod's port, until either side ends it."""
    try:
        upgraded = connect(client, path, [("ports", str(remote))], channels.PORT_FORWARD_PROTOCOLS)
    except KubeError as err:
        print(f"{err}", file=sys.stderr, flush=True)
        conn.close()
        return
    try:
        _carry(upgraded, conn, remote)
    finally:
        upgraded.close()
        conn.close()


def _carry(upgraded: Upgraded, conn: socket.socket, remote: int) -> None:
    def pong(payload: bytes) -> None:
        upgraded.send(websocket.frame(websocket.PONG, payload))

    reader = websocket.Reader(upgraded.stream, on_ping=pong)
    opened: set[int] = set()
    threading.Thread(target=_up, args=(upgraded, conn), daemon=True).start()
    try:
        while (received := reader.message()) is not None:
            channel, data = channels.split(received[1])
            if channel not in opened:  # each channel opens with the port it is for
                opened.add(channel)
                data = data[2:]
            if channel == 0 and data:
                conn.sendall(data)
            elif channel == 1 and data:
                text = data.decode(errors="replace")
                print(
                    f"error: an error occurred forwarding {remote}: {text}",
                    file=sys.stderr,
                    flush=True,
                )
    except OSError:
        pass  # either side went away: the connection ends


def _up(upgraded: Upgraded, conn: socket.socket) -> None:
    """The local side's bytes to the pod; at its end, the WebSocket's close."""
    try:
        while data := conn.recv(32 * 1024):
            message = channels.message(0, data)
            upgraded.send(websocket.frame(websocket.BINARY, message))
        upgraded.send(websocket.frame(websocket.CLOSE, websocket.close_payload()))
    except OSError:
        pass
