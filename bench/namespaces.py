"""Waiting for a benchmark's namespace to be gone, so one measurement does not pay for the
last one's clean-up."""

from __future__ import annotations

import asyncio
import contextlib
import sys
import time

from apiserver.kube.client import ApiError, Kube


async def gone(kube: Kube, name: str, limit: float = 600, every: float = 2.0) -> None:
    """Wait until namespace `name` is gone from `kube`; after `limit` seconds say so on
    stderr and go on (the next figure may then carry some of this clean-up)."""
    started = time.monotonic()
    while time.monotonic() - started < limit:
        try:
            await kube.get(f"/api/v1/namespaces/{name}")
        except ApiError as err:
            if err.code == 404:
                return
            raise
        await asyncio.sleep(every)
    print(f"namespace {name} still there after {limit:.0f} s; going on", file=sys.stderr)


async def delete(kube: Kube, name: str, limit: float = 600) -> None:
    """Delete namespace `name` (if it is there) and wait until it is gone."""
    with contextlib.suppress(ApiError):
        await kube.delete(f"/api/v1/namespaces/{name}")
    await gone(kube, name, limit)
