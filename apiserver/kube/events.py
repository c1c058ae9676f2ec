"""Events on hub objects: how a person learns, with `kubectl describe` or `kubectl events`,
why kubectl-mc did something (spilled over, evacuated, refused a strategy)."""

from __future__ import annotations

import contextlib
import datetime
import secrets

from apiserver.kube.client import ApiError, Kube, Obj


async def record(
    hub: Kube, obj: Obj, event_type: str, reason: str, message: str, component: str
) -> None:
    """A core/v1 Event about `obj` (best effort: an Event is never worth failing for)."""
    meta = obj["metadata"]
    namespace = meta.get("namespace") or "default"
    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    event = {
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
    with contextlib.suppress(ApiError):
        await hub.create(f"/api/v1/namespaces/{namespace}/events", event)
