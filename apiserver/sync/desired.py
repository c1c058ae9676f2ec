"""What the sync loop server-side-applies into one child cluster for a hub object.

A child is the hub object as its author wrote it, minus everything the hub's own apiserver
and controllers added (uid, resourceVersion, status, generated Job selectors…) and everything
of ours (`kmc.dev/…`), plus the origin label that ties it back to the hub object, with its
location's share of the replicas, Job pods or quota. It is a pure function of the hub object
and the placement, so applying it again is a no-op and a hand-edited child is put back.

Fields the child's apiserver fills in itself are left out rather than copied: copying them
would make the child's managedFields claim values that belong to another cluster (a Job's
selector carries the hub's uid, a Service's clusterIP comes from the hub's service range).
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping, Sequence
from typing import Protocol

from apiserver.contract import ORIGIN, OURS, Placement
from apiserver.objects import Obj, ReadOnly
from apiserver.overrides.annotation import overrides_for
from apiserver.overrides.apply import apply_rules
from apiserver.overrides.rules import Rule
from apiserver.placement.policy import Constraints, constrain
from apiserver.placement.template import strip_hub_only

_LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"

Share = Callable[[Obj, str, Placement], None]


class ChildKind(Protocol):
    """What making a child asks of the hub object's kind (a `kinds.Kind`)."""

    @property
    def kind(self) -> str: ...
    @property
    def api_version(self) -> str: ...
    @property
    def share(self) -> Share | None: ...
    def pod_spec(self, obj: ReadOnly) -> ReadOnly | None: ...


def child_object(
    hub: ReadOnly,
    kind: ChildKind,
    location: str,
    placement: Mapping[str, int | None],
    location_labels: Mapping[str, str] | None = None,
    added: Constraints | None = None,
    overrides: Sequence[Rule] = (),
) -> Obj:
    """The object to apply into `location` for `hub`, given the (interim) `placement`.

    `placement` must name `location`; its value is that location's share, which the kind's
    `share` cuts into the child (None, or no `share`: the object as written). The pod template
    loses its hub-only `location.kmc.dev/` terms, read against the Location's labels; then
    the location's `overrides` apply in order (they never change the share: a rule that would
    raises `OverrideError`, as does any rule that cannot apply); last, it gains what the
    namespace's PlacementPolicies `added`, which an override cannot take away. Nothing under
    `kmc.dev/` survives, whatever a rule wrote, but the origin label. The result is a new
    dict: `hub` is never modified.
    """
    if location not in placement:
        raise ValueError(f"location {location!r} is not in the placement {dict(placement)}")
    metadata = mapping(hub.get("metadata"))
    uid = metadata.get("uid")
    if not isinstance(uid, str) or not uid:
        raise ValueError("the hub object has no metadata.uid")
    child: Obj = {
        "apiVersion": kind.api_version,
        "kind": kind.kind,
        "metadata": _child_metadata(metadata, uid),
    }
    for key, value in hub.items():
        if key not in ("apiVersion", "kind", "metadata", "status"):
            child[key] = copy.deepcopy(value)
    if kind.share is not None:
        kind.share(child, location, dict(placement))
    pod_spec = kind.pod_spec(child)
    if isinstance(pod_spec, dict):
        strip_hub_only(pod_spec, location, location_labels)
    if overrides:
        child = apply_rules(child, overrides, location, location_labels or {})
        child["metadata"] = _child_metadata(child.get("metadata") or {}, uid)
    pod_spec = kind.pod_spec(child)
    if isinstance(pod_spec, dict) and added:
        constrain(pod_spec, added)
    return child


def location_child(
    hub: ReadOnly,
    kind: ChildKind,
    location: str,
    placement: Mapping[str, int | None],
    location_labels: Mapping[str, str] | None = None,
    added: Constraints | None = None,
    before: Sequence[Rule] = (),
) -> Obj:
    """What `location` gets: `child_object` with the location's rules, `before` (those of the
    Override and ClusterOverride objects that target the hub object there, in their order:
    `models/override_index.py`), then those of its own `kmc.dev/overrides`. The sync loop
    applies it; `kubectl mc diff` shows it. Raises `RuleError` (an annotation that does not
    parse) or `OverrideError` (a rule that cannot apply here)."""
    rules = (*before, *overrides_for(hub, location, location_labels or {}))
    return child_object(hub, kind, location, placement, location_labels, added, rules)


# --- metadata ---------------------------------------------------------------------------------


def _child_metadata(hub_metadata: ReadOnly, uid: str) -> Obj:
    """Name, namespace, the author's labels and annotations; nothing of the hub's or ours."""
    metadata = {key: hub_metadata[key] for key in ("name", "namespace") if key in hub_metadata}
    labels = {
        key: value
        for key, value in mapping(hub_metadata.get("labels")).items()
        if not key.startswith(OURS)
    }
    labels[ORIGIN] = uid
    metadata["labels"] = labels
    annotations = {
        key: value
        for key, value in mapping(hub_metadata.get("annotations")).items()
        if not key.startswith(OURS) and key != _LAST_APPLIED
    }
    if annotations:
        metadata["annotations"] = annotations
    return metadata


# --- namespaces -------------------------------------------------------------------------------

# Set by every cluster's apiserver on its own namespaces, to the namespace's own name.
_NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"


def child_namespace(hub_namespace: ReadOnly) -> Obj:
    """The Namespace to apply into a child for a hub Namespace: its name, the labels and
    annotations its author gave it (a Pod Security level, a team's label), nothing of ours
    but the origin label, which ties it to the hub namespace's uid."""
    meta = mapping(hub_namespace.get("metadata"))
    child = _child_metadata({"name": meta["name"], **_own(meta)}, str(meta.get("uid") or ""))
    child["labels"].pop(_NAMESPACE_NAME_LABEL, None)
    if not meta.get("uid"):
        child["labels"].pop(ORIGIN)
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": child}


def _own(meta: ReadOnly) -> Obj:
    return {key: meta[key] for key in ("labels", "annotations") if key in meta}


# --- shares every kind with replicas uses -------------------------------------------------------


def replicas_share(child: Obj, location: str, placement: Placement) -> None:
    """`spec.replicas` is the location's share (None: placed whole, as written)."""
    share = placement[location]
    if share is not None:
        spec_of(child)["replicas"] = share


# --- helpers ----------------------------------------------------------------------------------


def mapping(value: object) -> ReadOnly:
    return value if isinstance(value, Mapping) else {}


def spec_of(child: Obj) -> Obj:
    """The child's own (deep-copied) spec, created if the hub object had none."""
    spec = child.get("spec")
    if not isinstance(spec, dict):
        spec = child["spec"] = {}
    return spec
