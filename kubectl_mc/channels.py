"""Kubernetes' channels over WebSocket: what exec, attach and port-forward send in frames.

Every binary message starts with a channel byte. For a command (`v5.channel.k8s.io`, and
`v4.channel.k8s.io` before it): 0 stdin, 1 stdout, 2 stderr, 3 the outcome (a `Status`),
4 terminal size; v5 adds 255, whose payload names a channel the client is done writing to
(how a command learns that its standard input ended). For port-forward
(`v4.channel.k8s.io`): two channels per port asked, data (2n) and errors (2n+1), each
opened by the server with the port, two bytes little-endian.

Pure functions: the sessions in `exec.py` and `portforward.py` do the I/O.
"""

from __future__ import annotations

import json

STDIN, STDOUT, STDERR, ERROR, RESIZE = 0, 1, 2, 3, 4
CLOSE = 255
V5 = "v5.channel.k8s.io"
V4 = "v4.channel.k8s.io"
COMMAND_PROTOCOLS = [V5, V4]  # preferred first, as kubectl asks
PORT_FORWARD_PROTOCOLS = [V4]

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


def message(channel: int, data: bytes = b"") -> bytes:
    return bytes([channel]) + data


def split(payload: bytes) -> tuple[int, bytes]:
    """(channel, data) of a received message; an empty one is channel -1."""
    if not payload:
        return -1, b""
    return payload[0], payload[1:]


def resize(width: int, height: int) -> bytes:
    """What the terminal-size channel carries."""
    return json.dumps({"Width": width, "Height": height}).encode()


def outcome(data: bytes) -> tuple[int, str]:
    """The exit code a command's outcome (channel 3) asks of kubectl, and what kubectl
    prints on stderr then ("" for success): client-go's and kubectl's readings, word for
    word, so a script sees what it would see from `kubectl exec`."""
    try:
        status: Any = json.loads(data)
    except ValueError as err:
        return 1, f"error: error stream protocol error: {err} in {data.decode(errors='replace')!r}"
    if not isinstance(status, dict):
        return 1, "error: error stream protocol error: unknown error"
    if status.get("status") == "Success":
        return 0, ""
    if status.get("status") != "Failure":
        return 1, "error: error stream protocol error: unknown error"
    if status.get("reason") == "NonZeroExitCode":
        causes = (status.get("details") or {}).get("causes") or []
        for cause in causes:
            if cause.get("reason") == "ExitCode":
                code = str(cause.get("message", ""))
                if not code.isdigit() or int(code) > 255:
                    return (
                        1,
                        f"error: error stream protocol error: invalid exit code value {code!r}",
                    )
                return int(code), f"command terminated with exit code {int(code)}"
        return 1, "error: error stream protocol error: no ExitCode cause given"
    return 1, f"error: {status.get('message', '')}"


def port_of(data: bytes) -> int:
    """The port a port-forward channel's first message names."""
    if len(data) < 2:
        raise ValueError(f"a port-forward channel opened with {len(data)} bytes, not a port")
    return data[0] | data[1] << 8
