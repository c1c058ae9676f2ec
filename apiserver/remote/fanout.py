"""Ask every Ready location the same question at once, as the caller, and wait for none long.

Each location gets its own timeout; one that fails, is slow or is not Ready is left out and
named in a `Warning` header, so a listing always answers with what the others said. Reads
impersonate the hub's caller (user and groups): a child never shows more than that caller
could see there by asking it directly.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Awaitable, Callable, Collection, Iterable
from dataclasses import dataclass
from typing import Any

from multidict import CIMultiDict

from apiserver.api.authn import UserInfo
from apiserver.kube.client import ApiError, Kube, Unreachable
from apiserver.kube.informer import Informer
from apiserver.locations.fleet import Fleet
from apiserver.locations.tunnels import NOT_CONNECTED
from apiserver.models.location import PULL

# How many `--remote-timeout`s a location may stay silent while no other has answered, or in
# the middle of its answer.
STALL_TIMEOUTS = 4

# What a pull location cannot do through its agent's tunnel (it carries reads only).
NOT_FOR_PULL = "not available for pull locations"

# What an HTTP header value may not hold (RFC 9110 field-value: tab is allowed).
_CONTROL = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")


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
    """The clients of the Ready locations, and a warning for each location left out. A pull
    location's client goes through its agent's reverse tunnel (read-only): while that is not
    connected, the location is left out saying so."""
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
        if (location.get("spec") or {}).get("mode") == PULL:
            # Nothing on the hub side dials it: it is read through its agent's tunnel.
            kube = fleet.tunnel(name)
            if kube is None:
                warnings.append(f"location {name} left out: {NOT_CONNECTED}")
                continue
        else:
            kube = fleet.get(name)
        if condition is None or condition.get("status") != "True" or kube is None:
            why = (condition or {}).get("message") or "not Ready"
            warnings.append(f"location {name} left out: {why}")
            continue
        ready[name] = kube
    return ready, warnings


@dataclass(frozen=True)
class Asked:
    """What `fan_out` hands each call: how long the location may stay silent within its
    answer (for `Kube.request`'s `idle_timeout`), and the event to set once it answers."""

    idle_timeout: float
    answering: asyncio.Event


async def fan_out(
    clients: dict[str, Kube],
    call: Callable[[Kube, Asked], Awaitable[Any]],
    timeout: float,
) -> list[Answer]:
    """`call` on every client concurrently; an error is that location's answer.

    A slow location must not hold the others up, but when every location is slow (a busy
    machine) nobody should be left out for it. So: once one location has answered, the others
    have `timeout` more seconds to start answering, or are left out; one that has started is
    read to its end. Until then, and within an answer, a location may stay silent (connecting,
    or between two pieces) for `STALL_TIMEOUTS` times `timeout`."""
    asked = {name: Asked(STALL_TIMEOUTS * timeout, asyncio.Event()) for name in clients}

    async def one(name: str, kube: Kube) -> Answer:
        try:
            return Answer(name, await call(kube, asked[name]))
        except Unreachable as err:
            if isinstance(err.__cause__, TimeoutError):
                stalled = f"no answer for {asked[name].idle_timeout:g}s"
                return Answer(name, error=ApiError.of(504, "Timeout", stalled))
            return Answer(name, error=err)
        except ApiError as err:
            return Answer(name, error=err)

    tasks = {name: asyncio.create_task(one(name, kube)) for name, kube in sorted(clients.items())}
    try:
        if tasks:
            await first_then(tasks.values(), timeout)
            late = ApiError.of(
                504, "Timeout", f"no answer {timeout:g}s after another location had answered"
            )
            answers = []
            for name, task in tasks.items():
                if not task.done() and not asked[name].answering.is_set():
                    task.cancel()
                    answers.append(Answer(name, error=late))
                else:
                    answers.append(await task)
            return answers
    finally:
        for task in tasks.values():
            task.cancel()
    return []


async def first_then(tasks: Collection[asyncio.Task[Any]], timeout: float) -> None:
    """Wait until one of `tasks` is done, then `timeout` more seconds for the others: a slow
    one must not hold the rest up, and when all are slow alike nobody is left out for it."""
    if not tasks:
        return
    _, pending = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    if pending:
        await asyncio.wait(pending, timeout=timeout)


def warning_headers(warnings: Iterable[str]) -> CIMultiDict[str]:
    """RFC 7234 warnings as kube-apiserver sends them; kubectl prints each as "Warning: …".

    A child's message may quote what the caller sent, newlines included, and a header cannot
    hold control characters (aiohttp drops the connection rather than write one): each becomes
    a space, as Go's net/http writes a newline in a header value."""
    headers: CIMultiDict[str] = CIMultiDict()
    for text in warnings:
        escaped = _CONTROL.sub(" ", text).replace("\\", "\\\\").replace('"', '\\"')
        headers.add("Warning", f'299 - "{escaped}"')
    return headers


def failed(answer: Answer) -> str:
    assert answer.error is not None
    return f"location {answer.location} left out: {answer.error}"
