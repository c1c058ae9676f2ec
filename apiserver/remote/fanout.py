"""Ask every Ready location the same question at once, as the caller, and wait for none long.

Each location gets its own timeout; one that fails, is slow or is not Ready is left out and
named in a `Warning` header, so a listing always answers with what the others said. Reads
impersonate the hub's caller (user and groups): a child never shows more than that caller
could see there by asking it directly.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Any

from multidict import CIMultiDict

from apiserver.api.authn import UserInfo
from apiserver.kube.client import ApiError, Kube
from apiserver.kube.informer import Informer
from apiserver.locations.fleet import Fleet

Obj = dict[str, Any]


@dataclass(frozen=True)
class Answer:
    location: str
    body: Any = None
    error: ApiError | None = None


def impersonating(user: UserInfo, accept: str | None = None) -> CIMultiDict[str]:
    headers: CIMultiDict[str] = CIMultiDict({"Impersonate-User": user.name})
    for group in user.groups:
        headers.add("Impersonate-Group", group)
    if accept:
        headers["Accept"] = accept
    return headers


def targets(
    locations: Informer, fleet: Fleet, only: str | None = None
) -> tuple[dict[str, Kube], list[str]]:
    """The clients of the Ready locations, and a warning for each location left out."""
    ready: dict[str, Kube] = {}
    warnings: list[str] = []
    for location in sorted(locations.cache.values(), key=lambda o: o["metadata"]["name"]):
        name = location["metadata"]["name"]
        if only is not None and name != only:
            continue
        condition = next(
            (
                c
                for c in (location.get("status") or {}).get("conditions") or []
                if c["type"] == "Ready"
            ),
            None,
        )
        kube = fleet.get(name)
        if condition is None or condition.get("status") != "True" or kube is None:
            why = (condition or {}).get("message") or "not Ready"
            warnings.append(f"location {name} left out: {why}")
            continue
        ready[name] = kube
    return ready, warnings


async def fan_out(
    clients: dict[str, Kube],
    call: Callable[[Kube], Awaitable[Any]],
    timeout: float,
) -> list[Answer]:
    """`call` on every client concurrently; an error or timeout is that location's answer."""

    async def one(name: str, kube: Kube) -> Answer:
        try:
            async with asyncio.timeout(timeout):
                return Answer(name, await call(kube))
        except TimeoutError:
            return Answer(name, error=ApiError.of(504, "Timeout", f"no answer within {timeout:g}s"))
        except ApiError as err:
            return Answer(name, error=err)

    return list(await asyncio.gather(*(one(n, k) for n, k in sorted(clients.items()))))


def warning_headers(warnings: Iterable[str]) -> CIMultiDict[str]:
    """RFC 7234 warnings as kube-apiserver sends them; kubectl prints each as "Warning: …"."""
    headers: CIMultiDict[str] = CIMultiDict()
    for text in warnings:
        escaped = text.replace("\\", "\\\\").replace('"', '\\"')
        headers.add("Warning", f'299 - "{escaped}"')
    return headers


def failed(answer: Answer) -> str:
    assert answer.error is not None
    return f"location {answer.location} left out: {answer.error}"
