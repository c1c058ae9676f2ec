"""The path from a pull location's agent to the hub: a plain TCP forwarder on loopback, run
as a bed component (`hub-path-NAME`) so a test can cut it (`hack/testbed stop hub-path-NAME`:
the agent's connections to the hub drop and new ones are refused) and restore it (`start`),
while the agent and the hub keep running. TLS passes through untouched: the agent still
verifies the hub's certificate (it names 127.0.0.1) and the hub still sees the agent's.

Standalone (the standard library only): the bed starts it as
`python hack/kmc_testbed/hubpath.py LISTEN_PORT TARGET_PORT`.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while chunk := await reader.read(65536):
            writer.write(chunk)
            await writer.drain()
    except (ConnectionError, OSError):
        pass
    finally:
        with contextlib.suppress(ConnectionError, OSError):
            writer.close()


async def serve(listen: int, target: int) -> None:
    async def client(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", target)
        except OSError:
            writer.close()
            return
        await asyncio.gather(_pipe(reader, up_writer), _pipe(up_reader, writer))

    server = await asyncio.start_server(client, "127.0.0.1", listen)
    print(f"hub path: 127.0.0.1:{listen} -> 127.0.0.1:{target}", flush=True)
    async with server:
        await server.serve_forever()


def main(argv: list[str]) -> None:
    if len(argv) != 2:
        sys.exit("usage: hubpath.py LISTEN_PORT TARGET_PORT")
    asyncio.run(serve(int(argv[0]), int(argv[1])))


if __name__ == "__main__":
    main(sys.argv[1:])
