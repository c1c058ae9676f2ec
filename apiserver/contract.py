"""The hub contract: every mark kubectl-mc reads or writes on hub objects, in one place.

DESIGN.md §2 names them: the annotations a user writes (`kmc.dev/strategy`,
`kmc.dev/placement-gates`) and the ones only we write (`kmc.dev/placement`, the finalizer),
the label that ties a child to its hub object, the conditions we own, the namespaces never
placed. The loops, the views and the admission webhook all speak through this module, so
no loop needs another loop for a constant, and a key is spelled once.

Also here: how a placement reads and prints, and the body that server-side applies a status,
since every loop that writes a hub object's status must send the same shape.
"""

from __future__ import annotations

import datetime
import json
from collections.abc import Mapping

from apiserver.objects import Obj

OURS = "kmc.dev/"  # nothing under it on a hub object reaches a child but the origin label

# Annotations on hub objects.
STRATEGY = "kmc.dev/strategy"  # the user's (or their namespace's) strategy, JSON
PLACEMENT = "kmc.dev/placement"  # the placement loop's decision, JSON; the durable record
PLACEMENT_GATES = "kmc.dev/placement-gates"  # while not empty, the object is not placed
OVERRIDES = "kmc.dev/overrides"  # the user's one-off per-location overrides, JSON
LOCATION = "kmc.dev/location"  # on punch-through items: the location they came from
SERVICE_ACCOUNT = "kmc.dev/service-account"  # on a Location's Secret: a token we renew
# Labels.
EXCLUDE = "kmc.dev/exclude"  # on a Namespace, "true": its objects stay on the hub
ORIGIN = "kmc.dev/origin-uid"  # on child objects: the uid of the hub object they came from
IMPORTED = "kmc.dev/imported"  # on hub CRDs made from an API import (never the user's)
# Kubernetes refuses a CRD of a `*.k8s.io` or `*.kubernetes.io` group without this annotation.
API_APPROVED = "api-approved.kubernetes.io"
# EndpointSlices we write: the children's endpoints mirrored on the hub (one per child slice,
# also labelled with the Service and the location), and in each location the other locations'
# endpoints of an exported Service (the Multi-Cluster Services API's labels).
SERVICE_NAME = "kubernetes.io/service-name"
MANAGED_BY = "endpointslice.kubernetes.io/managed-by"
SOURCE_CLUSTER = "multicluster.kubernetes.io/source-cluster"
MCS_SERVICE_NAME = "multicluster.kubernetes.io/service-name"
SLICE_MANAGER = "kmc.dev"  # the value of MANAGED_BY on them
# The scheduling gate our webhook puts on hub Pods we place: the hub's scheduler never binds them.
PLACED_ELSEWHERE = "kmc.dev/placed-elsewhere"
# The sync loop's finalizer: the children are deleted before the hub object goes.
CLEANUP = "kmc.dev/cleanup"
# Conditions on hub objects.
PLACED = "kmc.dev/Placed"  # where, or why nowhere: the placement loop decides, sync writes
SYNCED = "kmc.dev/Synced"  # the sync loop's: every placed child there and current
# Whether every location's overrides applied (False, reason OVERRIDE_FAILED, naming the rule).
OVERRIDDEN = "Overridden"
OVERRIDE_FAILED = "OverrideFailed"

# Field managers and Event sources: who wrote what, in managedFields and in Events.
PLACEMENT_MANAGER = "kmc-placement"  # its Events; the Placed condition when no fold carries it
SYNC_MANAGER = "kmc-sync"  # the children, the folded status (with the Placed condition)
# A child's spec.replicas handed to its autoscaler: held under this name (never written again)
# so that `kmc-sync` can let go of it without server-side apply resetting it.
SCALE_HANDOVER_MANAGER = "kmc-scale-handover"

# The hub's own business stays on the hub.
NEVER_PLACED = frozenset({"kube-system", "kube-public", "kube-node-lease", "kmc-system"})

Placement = dict[str, int | None]
"""Replicas per location name; None for a kind copied whole rather than divided."""


def never_placed(namespace: Obj) -> bool:
    """Is this hub Namespace's content the hub's own: a system namespace, or one labelled
    `kmc.dev/exclude=true`?"""
    meta = namespace["metadata"]
    return meta["name"] in NEVER_PLACED or (meta.get("labels") or {}).get(EXCLUDE) == "true"


def read_placement(obj: Obj) -> Placement:
    """The placement a hub object carries; empty when it has none (or one that does not
    parse, which only we write)."""
    text = (obj["metadata"].get("annotations") or {}).get(PLACEMENT)
    if not text:
        return {}
    try:
        value = json.loads(text)
    except json.JSONDecodeError:
        return {}
    if not isinstance(value, dict):
        return {}
    return {str(k): v if isinstance(v, int) else None for k, v in value.items()}


def placement_text(placement: Mapping[str, int | None]) -> str:
    """The annotation's value: compact JSON, locations sorted."""
    return json.dumps(dict(sorted(placement.items())), separators=(",", ":"))


def describe(placement: Mapping[str, int | None]) -> str:
    """A placement for people: `eu-west=2, us-east=1` (a name alone for a whole copy)."""
    if not placement:
        return "nowhere"
    return ", ".join(k if v is None else f"{k}={v}" for k, v in sorted(placement.items()))


def only_status_changed(new: Obj, old: Obj) -> bool:
    """Is the status all that differs between two versions of an object (its version aside)?
    Status is what the loops themselves write; no decision reads it."""
    if new.keys() != old.keys():
        return False
    for field, value in new.items():
        if field == "metadata":
            skip = ("resourceVersion", "managedFields")
            if {k: v for k, v in value.items() if k not in skip} != {
                k: v for k, v in old[field].items() if k not in skip
            }:
                return False
        elif field != "status" and value != old[field]:
            return False
    return True


def status_body(obj: Obj, status: Obj, whole_conditions: bool = False) -> Obj:
    """The body that server-side applies `status` to a hub object. Where the kind's
    conditions list is atomic (`whole_conditions`: an apply replaces it whole) the conditions
    we do not write go back as read, in their places, under the resourceVersion they were
    read at."""
    meta = obj["metadata"]
    head = {"name": meta["name"]}
    if meta.get("namespace"):
        head["namespace"] = meta["namespace"]
    if whole_conditions and "conditions" in status:
        ours = {c["type"]: c for c in status["conditions"]}
        read = (obj.get("status") or {}).get("conditions") or []
        merged = [ours.pop(c["type"], c) for c in read] + list(ours.values())
        status = {**status, "conditions": merged}
        head["resourceVersion"] = meta["resourceVersion"]
    return {
        "apiVersion": obj["apiVersion"],
        "kind": obj["kind"],
        "metadata": head,
        "status": status,
    }


def condition(obj: Obj, type_: str) -> Obj | None:
    """A condition of the object's status by type, as the hub holds it."""
    conditions = (obj.get("status") or {}).get("conditions") or []
    return next((c for c in conditions if c.get("type") == type_), None)


def now() -> str:
    """A condition's or an Event's time: RFC 3339 in whole seconds, as Kubernetes writes it."""
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


# The aggregated API groups kmc-apiserver serves.
MC_GROUP = "mc.kmc.dev"  # placement views of hub workloads
REMOTE_GROUP = "remote.kmc.dev"  # punch-through reads of the children's objects
VERSION = "v1alpha1"
# On a pull location's child (set by the work feed): the hub generation it was made from, so
# its agent's report says which hub generation the child reflects (docs/pull.md).
HUB_GENERATION = f"{MC_GROUP}/generation"
