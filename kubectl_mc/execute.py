"""`kubectl mc exec`: a command in a pod of whichever location holds it, as `kubectl exec`.

One WebSocket to `pods/<name>/exec` of `pods.remote.kmc.dev` (`v5.channel.k8s.io`, else
`v4.channel.k8s.io`); kmc-apiserver carries it to the child that holds the pod. The command's
output goes to our stdout and stderr as it comes; with `-i` our stdin goes to it (and, in v5,
its end too); with `-t` the terminal is raw and its size follows ours. The outcome decides
the exit code exactly as kubectl decides it (`channels.outcome`).
"""

from __future__ import annotations

import os
import sys
import threading

from kubectl_mc import channels, websocket
from kubectl_mc.kube import KubeError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any, NoReturn, TypeAlias

    from kubectl_mc.get_run import HubFlags
    from kubectl_mc.kube import Client, Upgraded

    Send: TypeAlias = Callable[[int, bytes], None]  # a message on a channel

REMOTE = "/apis/remote.kmc.dev/v1alpha1"


def exec_path(namespace: str, pod: str) -> str:
    return f"{REMOTE}/namespaces/{namespace}/pods/{pod}/exec"


def query(
    command: list[str], container: str | None, stdin: bool, tty: bool
) -> list[tuple[str, str]]:
    """exec's options, as kubectl sends them: stderr comes with stdout on a terminal."""
    pairs = [("command", part) for part in command]
    if container:
        pairs.append(("container", container))
    pairs += [("stdin", "true")] if stdin else []
    pairs += [("stdout", "true")]
    pairs += [("tty", "true")] if tty else [("stderr", "true")]
    return pairs


def connect(
    client: Client, path: str, params: list[tuple[str, str]], protocols: list[str]
) -> Upgraded:
    """The WebSocket, checked: the server's accept key and a sub-protocol we asked for."""
    headers, accept = websocket.handshake(protocols)
    upgraded = client.upgrade("GET", path, params, headers)
    if upgraded.header("sec-websocket-accept") != accept:
        upgraded.close()
        raise KubeError("error: the server's WebSocket handshake does not match ours")
    if upgraded.header("sec-websocket-protocol") not in protocols:
        chosen = upgraded.header("sec-websocket-protocol") or "none"
        upgraded.close()
        raise KubeError(f"error: the server chose the protocol {chosen!r}, not one we speak")
    return upgraded


def run(
    client: Client,
    namespace: str,
    pod: str,
    command: list[str],
    container: str | None = None,
    stdin: bool = False,
    tty: bool = False,
) -> int:
    """Run it; the exit code kubectl would exit with (what it prints is printed)."""
    path = exec_path(namespace, pod)
    params = query(command, container, stdin, tty)
    upgraded = connect(client, path, params, channels.COMMAND_PROTOCOLS)
    v5 = upgraded.header("sec-websocket-protocol") == channels.V5

    def send(channel: int, data: bytes) -> None:
        upgraded.send(websocket.frame(websocket.BINARY, channels.message(channel, data)))

    terminal = _Terminal(send) if tty and sys.stdin.isatty() else None
    try:
        if terminal is not None:
            terminal.start()
        if stdin:
            threading.Thread(target=_pump_stdin, args=(send, v5), daemon=True).start()
        return _read(upgraded)
    finally:
        if terminal is not None:
            terminal.stop()
        upgraded.close()


def command(
    args: tuple[str, ...],
    namespace: str | None,
    container: str | None,
    stdin: bool,
    tty: bool,
    hub: HubFlags,
) -> NoReturn:
    """`kubectl mc exec POD -- COMMAND…` from its parsed flags: both ways in (click's and the
    quick path) end here, so the words and exit codes are the same."""
    from kubectl_mc.hub import fail, hub_context

    pod, command_line = args[0], list(args[1:])
    if not command_line:
        fail("error: you must specify at least one command for the container")
    if tty and not stdin:
        print("Unable to use a TTY - input is not connected (use -i)", file=sys.stderr)
        tty = False
    client, context_namespace = hub_context(
        hub.kubeconfig, hub.context, hub.cluster, hub.user, hub.request_timeout
    )
    try:
        code = run(client, namespace or context_namespace, pod, command_line, container, stdin, tty)
    except KubeError as err:
        fail(str(err))
    sys.exit(code)


def _read(upgraded: Upgraded) -> int:
    def pong(payload: bytes) -> None:
        upgraded.send(websocket.frame(websocket.PONG, payload))

    reader = websocket.Reader(upgraded.stream, on_ping=pong)
    code, said = 0, ""
    outputs = {channels.STDOUT: sys.stdout.buffer, channels.STDERR: sys.stderr.buffer}
    try:
        while (received := reader.message()) is not None:
            channel, data = channels.split(received[1])
            if channel in outputs and data:
                outputs[channel].write(data)
                outputs[channel].flush()
            elif channel == channels.ERROR and data:
                code, said = channels.outcome(data)
    except OSError as err:
        if not said:  # cut before the outcome came
            print(f"error: {err}", file=sys.stderr, flush=True)
            return 1
    if said:
        print(said, file=sys.stderr, flush=True)
    return code


def _pump_stdin(send: Send, v5: bool) -> None:
    """Our stdin to the command, then (v5) its end."""
    fd = sys.stdin.fileno()
    try:
        while data := os.read(fd, 32 * 1024):
            send(channels.STDIN, data)
        if v5:
            send(channels.CLOSE, bytes([channels.STDIN]))
    except OSError:
        pass  # the session ended while we were reading


class _Terminal:
    """Our terminal raw while a `-t` session runs, its size sent now and on every change."""

    def __init__(self, send: Send) -> None:
        self._send = send
        self._saved: list[Any] | None = None

    def start(self) -> None:
        import signal
        import termios
        import tty

        fd = sys.stdin.fileno()
        self._saved = termios.tcgetattr(fd)
        tty.setraw(fd)
        self._resize()
        signal.signal(signal.SIGWINCH, lambda *_: self._resize())

    def _resize(self) -> None:
        import contextlib

        size = os.get_terminal_size(sys.stdout.fileno())
        with contextlib.suppress(OSError):  # the session has just ended
            self._send(channels.RESIZE, channels.resize(size.columns, size.lines))

    def stop(self) -> None:
        import signal
        import termios

        signal.signal(signal.SIGWINCH, signal.SIG_DFL)
        if self._saved is not None:
            termios.tcsetattr(sys.stdin.fileno(), termios.TCSADRAIN, self._saved)
