"""How long a watch event can trail the read that proves it was written: the margin behind
`_SETTLE` in `apiserver/mc/handlers.py`.

A list of `mc.kmc.dev` views without a resourceVersion must show every write made before it.
kmc-apiserver asks the hub its current resourceVersion (a list of one item) and then waits
for its own watch of the kind to bring everything up to it; when that watch stays quiet for
`_SETTLE`, it has nothing more to bring. That holds if an event is never later than `_SETTLE`
behind the probe's answer. Here a Lease is written, the probe is sent the moment the write
returns, and the time from the probe's answer to the write's watch event is taken (0 when
the event came first), with other writers keeping the hub busy meanwhile. The figure is the
worst trail seen, against `_SETTLE`.

    PYTHONPATH=hack .venv/bin/python -m bench.settle [--samples 300] [--writers 4]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import statistics
import sys
import time
import uuid
from typing import Any

import aiohttp

from apiserver.kube import config as kubeconfig
from apiserver.kube.client import Kube
from apiserver.kube.informer import Informer
from apiserver.mc import handlers as workloads
from bench.report import row
from kmc_testbed import config as bedconfig


def _lease(name: str) -> dict[str, Any]:
    return {"metadata": {"name": name}, "spec": {"holderIdentity": "bench"}}


async def _busy(hub: Kube, path: str, name: str, stop: asyncio.Event) -> None:
    """Another writer: the hub's watch cache has more to send than the write we follow."""
    await hub.create(path, _lease(name))
    i = 0
    while not stop.is_set():
        i += 1
        await hub.merge_patch(f"{path}/{name}", {"spec": {"leaseTransitions": i}})


async def _measure(samples: int, writers: int) -> list[float]:
    ns = f"bench-settle-{uuid.uuid4().hex[:5]}"
    path = f"/apis/coordination.k8s.io/v1/namespaces/{ns}/leases"
    async with aiohttp.ClientSession() as session:
        hub = Kube(session, await kubeconfig.from_file(bedconfig.kubeconfig_path(), "hub"), "hub")
        await hub.create("/api/v1/namespaces", {"metadata": {"name": ns}})
        stop = asyncio.Event()
        tasks: list[asyncio.Task[Any]] = []
        try:
            await hub.create(path, _lease("followed"))
            informer = Informer(hub, path)
            tasks.append(asyncio.create_task(informer.run()))
            await informer.synced.wait()
            tasks += [
                asyncio.create_task(_busy(hub, path, f"busy-{i}", stop)) for i in range(writers)
            ]
            trails = []
            for i in range(samples):
                written = await hub.merge_patch(
                    f"{path}/followed", {"spec": {"leaseDurationSeconds": i + 1}}
                )
                version = int(written["metadata"]["resourceVersion"])
                await hub.get(path, limit="1")  # the probe kmc-apiserver sends
                answered = time.monotonic()
                async with asyncio.timeout(30):
                    while informer.version < version:
                        await informer.caught_up(version, 1.0, 30)
                trails.append(max(0.0, time.monotonic() - answered) * 1000)
            return trails
        finally:
            stop.set()
            for task in tasks:
                task.cancel()
            with contextlib.suppress(BaseException):
                await asyncio.gather(*tasks, return_exceptions=True)
            await hub.delete(f"/api/v1/namespaces/{ns}")


def measure(samples: int = 300, writers: int = 4) -> list[dict[str, Any]]:
    trails = sorted(asyncio.run(_measure(samples, writers)))
    settle_ms = workloads._SETTLE * 1000
    p99 = trails[min(len(trails) - 1, int(0.99 * len(trails)))]
    return [
        row(
            "settle.trailing_event",
            f"max_ms_{samples}_writes_{writers}_writers",
            trails[-1],
            settle_ms,
            2,
        ),
        row("settle.trailing_event", "p99_ms", p99, settle_ms, 2),
        row("settle.trailing_event", "median_ms", statistics.median(trails), settle_ms, 2),
    ]


def main(argv: list[str]) -> None:
    from bench.report import emit

    parser = argparse.ArgumentParser(prog="python -m bench.settle")
    parser.add_argument("--samples", type=int, default=300)
    parser.add_argument("--writers", type=int, default=4)
    args = parser.parse_args(argv)
    emit(measure(args.samples, args.writers))


if __name__ == "__main__":
    main(sys.argv[1:])
