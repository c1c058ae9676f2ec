"""Many byte streams over one message connection: the reverse tunnel's framing.

A pull location's agent keeps one WebSocket open to kmc-apiserver (docs/pull.md, "The
reverse tunnel"); over it kmc-apiserver opens a stream per HTTP connection it makes to the
location, and the agent carries each to a small read-only proxy of its own. The WebSocket
already cuts the bytes into messages, so a frame is one message:

    1 byte type | 4 bytes stream id (big-endian) | payload

- `OPEN`: a new stream (no payload). Only the side that made the `Mux` with `opens=True`
  opens them (kmc-apiserver); the other accepts them (`on_open`).
- `DATA`: bytes of the stream, at most `MAX_DATA` per frame.
- `CLOSE`: the stream is over, both ways (an HTTP connection is never half-closed here).
- `CREDIT`: the receiver read this many more bytes (4-byte payload): the sender may send as
  many more. Each stream starts with `WINDOW` bytes of credit, so at most `WINDOW` bytes of
  one stream wait in the receiver's memory whatever its reader does, and a slow stream holds
  up only itself, never the connection. A peer that sends past its credit is cut.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import struct
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Any

log = logging.getLogger(__name__)

OPEN, DATA, CLOSE, CREDIT = 1, 2, 3, 4
_HEAD = struct.Struct(">BI")
_CREDIT = struct.Struct(">I")
WINDOW = 256 * 1024
MAX_DATA = 32 * 1024


class ProtocolError(Exception):
    """A frame the other side should not have sent: the whole connection is ended."""


def frame(kind: int, stream: int, payload: bytes = b"") -> bytes:
    return _HEAD.pack(kind, stream) + payload


def parse(message: bytes) -> tuple[int, int, bytes]:
    """A frame's type, stream id and payload; `ProtocolError` for a malformed one."""
    if len(message) < _HEAD.size:
        raise ProtocolError(f"a frame of {len(message)} bytes is shorter than its header")
    kind, stream = _HEAD.unpack_from(message)
    if kind not in (OPEN, DATA, CLOSE, CREDIT):
        raise ProtocolError(f"unknown frame type {kind}")
    payload = message[_HEAD.size :]
    if kind == CREDIT and len(payload) != _CREDIT.size:
        raise ProtocolError(f"a CREDIT frame of {len(payload)} bytes")
    if kind in (OPEN, CLOSE) and payload:
        raise ProtocolError("an OPEN or CLOSE frame with a payload")
    return kind, stream, payload


Send = Callable[[bytes], Awaitable[None]]


class Stream:
    """One stream: `read` what the other side wrote (b"" once it is closed), `write` to it
    (waiting for credit), `close` it."""

    def __init__(self, mux: Mux, sid: int, window: int) -> None:
        self.mux = mux
        self.sid = sid
        self._pieces: deque[bytes] = deque()
        self._buffered = 0
        self._arrived = asyncio.Event()
        self._credit = window
        self._credited = asyncio.Event()
        self._credited.set()
        self.closed = False  # by either side: no more writes; reads drain what is left

    async def read(self) -> bytes:
        while not self._pieces:
            if self.closed:
                return b""
            self._arrived.clear()
            await self._arrived.wait()
        piece = self._pieces.popleft()
        self._buffered -= len(piece)
        if not self.closed:
            await self.mux.send(frame(CREDIT, self.sid, _CREDIT.pack(len(piece))))
        return piece

    async def write(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            if self.closed:
                raise ConnectionResetError(f"stream {self.sid} is closed")
            if self._credit <= 0:
                self._credited.clear()
                await self._credited.wait()
                continue
            size = min(len(view), self._credit, MAX_DATA)
            self._credit -= size
            await self.mux.send(frame(DATA, self.sid, bytes(view[:size])))
            view = view[size:]

    async def close(self) -> None:
        if self.closed:
            return
        self._ended()
        self.mux.forget(self.sid)
        with contextlib.suppress(ConnectionError):
            await self.mux.send(frame(CLOSE, self.sid))

    def _data(self, payload: bytes) -> None:
        if self.closed:
            return  # sent before the other side saw our CLOSE
        if self._buffered + len(payload) > self.mux.window:
            raise ProtocolError(f"stream {self.sid}: more data than its credit")
        self._pieces.append(payload)
        self._buffered += len(payload)
        self._arrived.set()

    def _granted(self, amount: int) -> None:
        self._credit += amount
        self._credited.set()

    def _ended(self) -> None:
        self.closed = True
        self._arrived.set()
        self._credited.set()


class Mux:
    """The streams of one connection. `feed` each message received (in order), `send` is
    how a frame goes out; `end` when the connection is gone (every stream ends)."""

    def __init__(
        self,
        send: Send,
        *,
        opens: bool,
        on_open: Callable[[Stream], Awaitable[None]] | None = None,
        window: int = WINDOW,
    ) -> None:
        self._send = send
        self._sending = asyncio.Lock()
        self.opens = opens
        self.on_open = on_open
        self.window = window
        self._streams: dict[int, Stream] = {}
        self._next = 1
        self._tasks: set[asyncio.Task[Any]] = set()
        self.ended = False

    def __len__(self) -> int:
        return len(self._streams)

    async def send(self, message: bytes) -> None:
        if self.ended:
            raise ConnectionResetError("the tunnel is closed")
        async with self._sending:
            await self._send(message)

    async def open(self) -> Stream:
        if not self.opens:
            raise ProtocolError("this side does not open streams")
        sid, self._next = self._next, self._next + 1
        stream = self._streams[sid] = Stream(self, sid, self.window)
        try:
            await self.send(frame(OPEN, sid))
        except BaseException:
            self._streams.pop(sid, None)
            raise
        return stream

    def forget(self, sid: int) -> None:
        self._streams.pop(sid, None)

    def feed(self, message: bytes) -> None:
        """One received frame. `ProtocolError` ends the connection (the caller's to do)."""
        kind, sid, payload = parse(message)
        if kind == OPEN:
            if self.opens or self.on_open is None:
                raise ProtocolError("an OPEN from the side that may not open streams")
            if sid in self._streams:
                raise ProtocolError(f"stream {sid} opened twice")
            opened = self._streams[sid] = Stream(self, sid, self.window)
            task = asyncio.create_task(self._serve(opened), name=f"stream-{sid}")
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
            return
        stream = self._streams.get(sid)
        if stream is None:
            return  # closed here while the other side still spoke of it
        if kind == DATA:
            stream._data(payload)
        elif kind == CREDIT:
            (amount,) = _CREDIT.unpack(payload)
            stream._granted(amount)
        else:  # CLOSE
            self._streams.pop(sid, None)
            stream._ended()

    async def _serve(self, stream: Stream) -> None:
        assert self.on_open is not None
        try:
            await self.on_open(stream)
        except Exception as err:
            log.info("stream %d: %s", stream.sid, err)
        finally:
            await stream.close()

    async def end(self) -> None:
        """The connection is gone: every stream ends and what serves them is stopped."""
        self.ended = True
        for stream in list(self._streams.values()):
            stream._ended()
        self._streams.clear()
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


async def bridge(
    stream: Stream, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
) -> None:
    """Carry bytes both ways between a stream and a socket until either side ends; then
    both are closed."""

    async def up() -> None:
        while data := await reader.read(MAX_DATA):
            await stream.write(data)

    async def down() -> None:
        while data := await stream.read():
            writer.write(data)
            await writer.drain()

    tasks = [asyncio.create_task(up()), asyncio.create_task(down())]
    try:
        await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await stream.close()
        writer.close()
        with contextlib.suppress(ConnectionError, OSError):
            await writer.wait_closed()
