"""A pull location's health: the hub Lease its agent renews (docs/pull.md).

Nothing on the hub side dials a pull location, so the location loop cannot probe it: its agent
renews a `coordination.k8s.io/v1` Lease `kmc-agent-<location>` in `kmc-system` on the hub, and
the location is Ready while that Lease's `renewTime` is within its `leaseDurationSeconds`. A
lapsed lease is a pushed child that stops answering: the same Ready=False, and so the same
grace, evacuation and return. Both sides read the names and shapes here; pure, no I/O.
"""

from __future__ import annotations

import datetime
from typing import NamedTuple

from apiserver.models.location import SYSTEM_NAMESPACE
from apiserver.objects import Obj

NAMESPACE = SYSTEM_NAMESPACE
PREFIX = "kmc-agent-"
COLLECTION = f"/apis/coordination.k8s.io/v1/namespaces/{NAMESPACE}/leases"

# Ready reasons of a pull location, as the probe's are for a pushed one.
RENEWED = "AgentLease"
NO_LEASE = "NoAgentLease"
EXPIRED = "AgentLeaseExpired"
REVOKED = "JoinRevoked"


def name(location: str) -> str:
    return f"{PREFIX}{location}"


def path(location: str) -> str:
    return f"{COLLECTION}/{name(location)}"


def micro_time(moment: datetime.datetime) -> str:
    """A Lease's MicroTime: RFC 3339 with microseconds, in UTC."""
    return moment.astimezone(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def body(location: str, holder: str, duration: int, moment: datetime.datetime) -> Obj:
    """The Lease an agent writes (create, or update with the resourceVersion it read)."""
    return {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {"name": name(location), "namespace": NAMESPACE},
        "spec": {
            "holderIdentity": holder,
            "leaseDurationSeconds": duration,
            "renewTime": micro_time(moment),
        },
    }


def renewed(lease: Obj, holder: str, duration: int, moment: datetime.datetime) -> Obj:
    """`lease` as read, renewed now by `holder` (its resourceVersion kept: an update is
    refused if someone else wrote it meanwhile, and the next renewal reads it again)."""
    spec = dict(lease.get("spec") or {})
    if spec.get("holderIdentity") != holder:
        spec["acquireTime"] = micro_time(moment)
        spec["leaseTransitions"] = int(spec.get("leaseTransitions") or 0) + 1
    spec.update(holderIdentity=holder, leaseDurationSeconds=duration, renewTime=micro_time(moment))
    return {**lease, "spec": spec}


class Verdict(NamedTuple):
    status: str  # the Ready condition's
    reason: str
    message: str


def _parse(value: object) -> datetime.datetime | None:
    if not isinstance(value, str) or not value:
        return None
    try:
        parsed = datetime.datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=datetime.UTC)


def verdict(location: str, lease: Obj | None, now: datetime.datetime, revoked: str = "") -> Verdict:
    """Ready while the agent's lease was renewed within its duration, and its join (token id
    `revoked`) was not revoked. The message of a Ready one does not name the renewal time, so
    a renewal alone changes no Location status (its status is written only when something
    changed)."""
    where = f"{NAMESPACE}/{name(location)}"
    if revoked:
        return Verdict(
            "False",
            REVOKED,
            f"its join (token {revoked}) was revoked: its agent may not read its work or renew "
            f"its lease; `kubectl mc join {location} --mode pull` for a new one",
        )
    if lease is None:
        return Verdict("False", NO_LEASE, f"no lease from its agent (Lease {where} on the hub)")
    spec = lease.get("spec") or {}
    renew = _parse(spec.get("renewTime"))
    duration = spec.get("leaseDurationSeconds")
    if renew is None or not isinstance(duration, int) or duration <= 0:
        return Verdict(
            "False", NO_LEASE, f"no lease from its agent (Lease {where} has no renewTime)"
        )
    ends = renew + datetime.timedelta(seconds=duration)
    if now >= ends:
        when = ends.astimezone(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        return Verdict("False", EXPIRED, f"its agent's lease expired at {when}")
    holder = spec.get("holderIdentity") or "unnamed"
    return Verdict("True", RENEWED, f"its agent ({holder}) renews its {duration}s lease")
