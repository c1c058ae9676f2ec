"""WebSocket (RFC 6455) as a client needs it: the handshake's headers, frames both ways.

kubectl speaks WebSocket to an apiserver for exec, attach and port-forward (since 1.30 and
1.31), and so does the plugin, on the standard library: the HTTP part is `kube.py`'s
(`Client.upgrade`), this is what comes after the 101. A client masks every frame it sends;
the server's are never masked. Messages may come in fragments, and a ping is answered with a
pong. No extensions are asked for, so none are used.
"""

from __future__ import annotations

import base64
import hashlib
import os
import struct

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import BinaryIO

CONTINUATION, TEXT, BINARY, CLOSE, PING, PONG = 0x0, 0x1, 0x2, 0x8, 0x9, 0xA
_GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
_MAX_MESSAGE = 64 * 1024 * 1024


class WebSocketError(OSError):
    """A broken or closed WebSocket."""


def handshake(protocols: list[str]) -> tuple[dict[str, str], str]:
    """The headers that ask for WebSocket with these sub-protocols (in order of preference),
    and the `Sec-WebSocket-Accept` the server must answer with."""
    key = base64.b64encode(os.urandom(16)).decode()
    headers = {
        "Connection": "Upgrade",
        "Upgrade": "websocket",
        "Sec-WebSocket-Version": "13",
        "Sec-WebSocket-Key": key,
        "Sec-WebSocket-Protocol": ", ".join(protocols),
    }
    return headers, accept_for(key)


def accept_for(key: str) -> str:
    return base64.b64encode(hashlib.sha1(key.encode() + _GUID).digest()).decode()


def frame(opcode: int, payload: bytes, mask: bytes | None = None) -> bytes:
    """One final frame, masked (a client's) with `mask`, or a random mask if None."""
    mask = os.urandom(4) if mask is None else mask
    size = len(payload)
    if size < 126:
        head = struct.pack("!BB", 0x80 | opcode, 0x80 | size)
    elif size < 1 << 16:
        head = struct.pack("!BBH", 0x80 | opcode, 0x80 | 126, size)
    else:
        head = struct.pack("!BBQ", 0x80 | opcode, 0x80 | 127, size)
    return head + mask + _masked(payload, mask)


def _masked(payload: bytes, mask: bytes) -> bytes:
    if not payload:
        return b""
    # XOR with the mask repeated: one big-integer operation instead of a loop over bytes.
    repeated = (mask * (len(payload) // 4 + 1))[: len(payload)]
    number = int.from_bytes(payload, "big") ^ int.from_bytes(repeated, "big")
    return number.to_bytes(len(payload), "big")


def close_payload(code: int = 1000, reason: str = "") -> bytes:
    return struct.pack("!H", code) + reason.encode()[:123]


class Reader:
    """Messages from a stream of server frames. `on_ping` is given each ping's payload (to
    answer it with a pong); a close frame ends the messages."""

    def __init__(self, stream: BinaryIO, on_ping: Callable[[bytes], None] | None = None) -> None:
        self._stream = stream
        self._on_ping = on_ping
        self.close_code: int | None = None
        self.closed = False

    def message(self) -> tuple[int, bytes] | None:
        """The next data message (opcode TEXT or BINARY, payload), or None once closed."""
        opcode, parts = None, []
        size = 0
        while not self.closed:
            fin, kind, payload = self._frame()
            if kind == CLOSE:
                self.closed = True
                if len(payload) >= 2:
                    self.close_code = struct.unpack("!H", payload[:2])[0]
                return None
            if kind == PING:
                if self._on_ping is not None:
                    self._on_ping(payload)
                continue
            if kind == PONG:
                continue
            if kind == CONTINUATION:
                if opcode is None:
                    raise WebSocketError("a continuation frame with no message to continue")
            elif opcode is not None:
                raise WebSocketError("a new message before the last one ended")
            else:
                opcode = kind
            parts.append(payload)
            size += len(payload)
            if size > _MAX_MESSAGE:
                raise WebSocketError(f"a message over {_MAX_MESSAGE} bytes")
            if fin:
                assert opcode is not None
                return opcode, b"".join(parts)
        return None

    def _frame(self) -> tuple[bool, int, bytes]:
        first, second = self._exactly(2)
        fin, opcode = bool(first & 0x80), first & 0x0F
        size = second & 0x7F
        if size == 126:
            size = struct.unpack("!H", self._exactly(2))[0]
        elif size == 127:
            size = struct.unpack("!Q", self._exactly(8))[0]
        if size > _MAX_MESSAGE:
            raise WebSocketError(f"a frame of {size} bytes")
        mask = self._exactly(4) if second & 0x80 else None
        payload = self._exactly(size)
        return fin, opcode, _masked(payload, mask) if mask else payload

    def _exactly(self, count: int) -> bytes:
        data = b""
        while len(data) < count:
            piece = self._stream.read(count - len(data))
            if not piece:
                raise WebSocketError("the connection closed in the middle of a WebSocket")
            data += piece
        return data
