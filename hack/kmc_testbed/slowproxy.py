"""A slow location for real: a TCP proxy on loopback in front of one child's apiserver that
sleeps before every chunk it forwards, both ways. The child keeps running (it is not stopped,
as `hack/testbed stop` does); it only answers late. Its Location is pointed at the proxy by
rewriting the server in its kubeconfig Secret (`pointed_at`); kmc-apiserver rebuilds its
client for that child at the next probe.

Used by the slow-location fault test (`tests/faults/test_slow.py`) and the load benchmark
(`bench/load.py`). The proxy runs its own event loop in a thread, so a synchronous test can
use it as a context manager beside blocking `kubectl` calls.
"""

from __future__ import annotations

import asyncio
import base64
import threading
from collections.abc import Mapping

import yaml

from kmc_testbed import bed

# Seconds before every chunk, both ways: beyond kmc-apiserver's 3 s per-location list timeout
# (`--remote-timeout`) and the bed's 3 s probe timeout, so lists leave the location out and
# its probes soon find it not Ready.
DELAY = 5.0


class SlowProxy:
    """Forwards 127.0.0.1:<port> to a target port, sleeping `delay` seconds before every chunk."""

    def __init__(self, target: int, delay: float = DELAY) -> None:
        self.target = target
        self.delay = delay
        self.port = bed.free_ports(1)[0]
        self.connections = 0  # accepted so far: kmc-apiserver's client now goes through us
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)

    def __enter__(self) -> SlowProxy:
        self.thread.start()
        asyncio.run_coroutine_threadsafe(self._serve(), self.loop).result(10)
        return self

    def __exit__(self, *_: object) -> None:
        asyncio.run_coroutine_threadsafe(self._shutdown(), self.loop).result(10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        self.loop.close()

    async def _serve(self) -> None:
        self.server = await asyncio.start_server(self._client, "127.0.0.1", self.port)

    async def _shutdown(self) -> None:
        self.server.close()
        others = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        for task in others:
            task.cancel()
        await asyncio.gather(*others, return_exceptions=True)

    async def _client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.target)
            await asyncio.gather(self._pipe(reader, up_writer), self._pipe(up_reader, writer))
        except asyncio.CancelledError:
            # Stopped by `_shutdown`: end quietly (asyncio's server logs a traceback for
            # every connection task that ends cancelled).
            writer.close()

    async def _pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while chunk := await reader.read(65536):
                await asyncio.sleep(self.delay)
                writer.write(chunk)
                await writer.drain()
        except (ConnectionError, OSError):
            pass
        finally:
            writer.close()


def pointed_at(data: Mapping[str, str], port: int) -> dict[str, str]:
    """A Location Secret's `data` with every kubeconfig server in it reaching `port` on the
    same host: the proxy's port, or the child's own to restore it."""
    rewritten = {}
    for key, encoded in data.items():
        config = yaml.safe_load(base64.b64decode(encoded))
        for cluster in config["clusters"]:
            server = cluster["cluster"]["server"]
            cluster["cluster"]["server"] = server.rsplit(":", 1)[0] + f":{port}"
        rewritten[key] = base64.b64encode(yaml.safe_dump(config).encode()).decode()
    return rewritten
