"""Events on hub objects: how a person learns, with `kubectl describe` or `kubectl events`,
why kubectl-mc did something (spilled over, evacuated, refused a strategy)."""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import logging
import secrets

from apiserver.kube.client import ApiError, Kube
from apiserver.objects import Obj

log = logging.getLogger(__name__)


async def record(
    hub: Kube, obj: Obj, event_type: str, reason: str, message: str, component: str
) -> None:
    """A core/v1 Event about `obj` (best effort: an Event is never worth failing for)."""
    event = _event(obj, event_type, reason, message, component)
    with contextlib.suppress(ApiError):
        await hub.create(f"/api/v1/namespaces/{event['metadata']['namespace']}/events", event)


class Recorder:
    """Events posted in the background, so a reconcile never waits for one: at most `at_once`
    in flight, and beyond `backlog` waiting the newest are dropped (and logged) rather than
    memory growing while the hub is away."""

    def __init__(self, hub: Kube, component: str, at_once: int = 8, backlog: int = 2000) -> None:
        self.hub, self.component, self.backlog = hub, component, backlog
        self._gate = asyncio.Semaphore(at_once)
        self._pending: set[asyncio.Task[None]] = set()

    def post(self, obj: Obj, event_type: str, reason: str, message: str) -> None:
        if len(self._pending) >= self.backlog:
            log.info(
                "event %s on %s dropped: %d waiting",
                reason,
                obj["metadata"]["name"],
                len(self._pending),
            )
            return
        event = _event(obj, event_type, reason, message, self.component)
        task = asyncio.create_task(self._create(event))
        self._pending.add(task)
        task.add_done_callback(self._pending.discard)

    async def _create(self, event: Obj) -> None:
        async with self._gate:
            with contextlib.suppress(ApiError):
                await self.hub.create(
                    f"/api/v1/namespaces/{event['metadata']['namespace']}/events", event
                )

    async def flush(self) -> None:
        """Wait for every Event posted so far (tests, and a graceful stop)."""
        while self._pending:
            await asyncio.gather(*list(self._pending), return_exceptions=True)


def _event(obj: Obj, event_type: str, reason: str, message: str, component: str) -> Obj:
    meta = obj["metadata"]
    namespace = meta.get("namespace") or "default"
    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": f"{meta['name']}.{secrets.token_hex(8)}", "namespace": namespace},
        "involvedObject": {
            "apiVersion": obj.get("apiVersion"),
            "kind": obj.get("kind"),
            "name": meta["name"],
            "namespace": meta.get("namespace"),
            "uid": meta.get("uid"),
            "resourceVersion": meta.get("resourceVersion"),
        },
        "type": event_type,
        "reason": reason,
        "message": message,
        "source": {"component": component},
        "reportingComponent": component,
        "reportingInstance": component,
        "firstTimestamp": now,
        "lastTimestamp": now,
        "count": 1,
    }
