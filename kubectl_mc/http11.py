"""HTTP/1.1 over TLS, as much of it as the plugin uses: standard library sockets only.

`http.client` imports the `email` package to parse headers, and that import costs about as
much as the rest of `kubectl mc get`'s Python. A Kubernetes API server needs little of it:
one request at a time per connection, kept open for the next; a body by Content-Length,
chunked, or up to the close; a watch read line by line as it streams; a tunnel through an
HTTP proxy with CONNECT. Errors are `OSError`s with http.client's words, so callers and
users see what they saw before.
"""

from __future__ import annotations

import socket

TYPE_CHECKING = False  # typing is not imported at run time: it costs a few milliseconds
if TYPE_CHECKING:
    import ssl
    from io import BufferedReader

_MAX_LINE = 65536
_MAX_HEADERS = 100


class RemoteDisconnected(ConnectionResetError):
    """The server closed the connection before answering (a kept-alive one it dropped)."""


class ProtocolError(OSError):
    """An answer that is not HTTP/1.x."""


class Response:
    """One answer: status, headers (names lowercased), and its body read once."""

    def __init__(self, stream: BufferedReader, method: str) -> None:
        self._stream = stream
        while True:
            self.status, version = _status_line(stream)
            self.headers = _headers(stream)
            if self.status != 100:
                break
        self._chunked = "chunked" in self.header("transfer-encoding").lower()
        length = self.header("content-length")
        self._left: int | None = None  # body bytes not read yet (None: chunked or to the end)
        if not self._chunked and length.strip().isdigit():
            self._left = int(length)
        if method == "HEAD" or self.status in (101, 204, 304):
            self._left = 0  # after a 101 the connection is another protocol's
        connection = self.header("connection").lower()
        self.will_close = (
            "close" in connection
            or (version == "HTTP/1.0" and "keep-alive" not in connection)
            or (self._left is None and not self._chunked)
        )
        self._chunk_left = 0
        self._done = self._left == 0
        self._buffer = b""

    def header(self, name: str) -> str:
        """The first value of a header ('' when absent)."""
        for key, value in self.headers:
            if key == name:
                return value
        return ""

    def header_values(self, name: str) -> list[str]:
        return [value for key, value in self.headers if key == name]

    def read(self) -> bytes:
        """The rest of the body."""
        parts = [self._buffer]
        self._buffer = b""
        while not self._done:
            parts.append(self._next())
        return b"".join(parts)

    def readline(self) -> bytes:
        """The body's next line, with its newline (b"" at the end)."""
        while b"\n" not in self._buffer and not self._done:
            self._buffer += self._next()
        line, newline, self._buffer = self._buffer.partition(b"\n")
        return line + newline

    def _next(self) -> bytes:
        """The next piece of the body as it arrives."""
        stream = self._stream
        if self._chunked:
            if self._chunk_left == 0:
                line = stream.readline(_MAX_LINE)
                if not line:
                    raise _incomplete()  # the server went away between two chunks
                size = line.split(b";", 1)[0].strip()
                try:
                    self._chunk_left = int(size, 16)
                except ValueError:
                    raise ProtocolError(f"bad chunk size {size[:20]!r}") from None
                if self._chunk_left == 0:
                    while stream.readline(_MAX_LINE) not in (b"\r\n", b"\n", b""):
                        pass  # trailers
                    self._done = True
                    return b""
            data = stream.read1(self._chunk_left)
            if not data:
                raise _incomplete()
            self._chunk_left -= len(data)
            if self._chunk_left == 0:
                stream.readline(_MAX_LINE)  # the CRLF after a chunk
            return data
        if self._left is None:
            data = stream.read1(65536)
            self._done = not data
            return data
        data = stream.read1(min(self._left, 65536))
        if not data:
            raise _incomplete()
        self._left -= len(data)
        self._done = self._left == 0
        return data


def _incomplete() -> OSError:
    return ConnectionResetError("Connection closed before the whole answer was read")


def _status_line(stream: BufferedReader) -> tuple[int, str]:
    line = stream.readline(_MAX_LINE)
    if not line:
        raise RemoteDisconnected("Remote end closed connection without response")
    version, _, rest = line.decode("latin-1").partition(" ")
    code = rest[:3]
    if not version.startswith("HTTP/1.") or not code.isdigit():
        raise ProtocolError(f"not an HTTP answer: {line[:40]!r}")
    return int(code), version


def _headers(stream: BufferedReader) -> list[tuple[str, str]]:
    headers: list[tuple[str, str]] = []
    while True:
        line = stream.readline(_MAX_LINE)
        if line in (b"\r\n", b"\n", b""):
            return headers
        if len(headers) >= _MAX_HEADERS:
            raise ProtocolError(f"more than {_MAX_HEADERS} headers")
        name, _, value = line.decode("latin-1").partition(":")
        headers.append((name.strip().lower(), value.strip()))


class Connection:
    """One TLS connection to `host:port` (through a proxy's CONNECT tunnel if given), with
    the certificate checked for `server_name`; opened by the first request."""

    def __init__(
        self,
        host: str,
        port: int,
        context: ssl.SSLContext,
        timeout: float,
        server_name: str,
        proxy: tuple[str, int, dict[str, str]] | None = None,
    ) -> None:
        self.host, self.port, self.tls_context = host, port, context
        self.timeout, self.server_name, self.proxy = timeout, server_name, proxy
        self.sock: socket.socket | None = None
        self._stream: BufferedReader | None = None

    def request(
        self, method: str, target: str, body: bytes | None, headers: dict[str, str]
    ) -> Response:
        if self.sock is None or self._stream is None:
            self._connect()
        assert self.sock is not None and self._stream is not None
        host = f"[{self.host}]" if ":" in self.host else self.host
        lines = [f"{method} {target} HTTP/1.1", f"Host: {host}:{self.port}"]
        lines.append("Accept-Encoding: identity")
        lines.extend(f"{name}: {value}" for name, value in headers.items())
        if body is not None or method in ("POST", "PUT", "PATCH"):
            lines.append(f"Content-Length: {len(body or b'')}")
        head = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
        self.sock.sendall(head + body if body else head)
        return Response(self._stream, method)

    def _connect(self) -> None:
        address = (self.host, self.port) if self.proxy is None else self.proxy[:2]
        # ASCII names as bytes: neither socket nor ssl then loads the IDNA codec.
        # (socket takes a host as bytes too, as typeshed does not say)
        target = (_ascii(address[0]), address[1])
        sock = socket.create_connection(target, self.timeout)  # type: ignore[arg-type]
        try:
            if self.proxy is not None:
                self._tunnel(sock, self.proxy[2])
            sock = self.tls_context.wrap_socket(sock, server_hostname=_ascii(self.server_name))
        except BaseException:
            sock.close()
            raise
        self.sock, self._stream = sock, sock.makefile("rb")

    def _tunnel(self, sock: socket.socket, headers: dict[str, str]) -> None:
        lines = [f"CONNECT {self.host}:{self.port} HTTP/1.0", f"Host: {self.host}:{self.port}"]
        lines.extend(f"{name}: {value}" for name, value in headers.items())
        sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1"))
        with sock.makefile("rb", buffering=0) as raw:
            line = raw.readline(_MAX_LINE)  # unbuffered: nothing of TLS is read ahead
            version, _, rest = line.decode("latin-1").strip().partition(" ")
            code, _, message = rest.partition(" ")
            while raw.readline(_MAX_LINE) not in (b"\r\n", b"\n", b""):
                pass
        if not version.startswith("HTTP/") or not code.isdigit():
            raise ProtocolError(f"not an HTTP answer from the proxy: {line[:40]!r}")
        if code != "200":
            raise OSError(f"Tunnel connection failed: {code} {message.strip()}")

    @property
    def stream(self) -> BufferedReader | None:
        """What the server sends, buffered: after a 101, the other protocol's first bytes may
        already be in it."""
        return self._stream

    def close(self) -> None:
        stream, sock = self._stream, self.sock
        self._stream = self.sock = None
        if stream is not None:
            stream.close()
        if sock is not None:
            sock.close()


def _ascii(name: str) -> str | bytes:
    return name.encode() if name.isascii() else name
