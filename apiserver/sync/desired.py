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
from collections.abc import Callable, Mapping
from typing import Any

from apiserver.placement.dependencies import pod_spec_of
from apiserver.placement.engine import REPLICA_KINDS, split_job
from apiserver.placement.policy import Constraints, constrain
from apiserver.placement.quota import divide_quota
from apiserver.placement.template import strip_hub_only
from apiserver.remote import kinds as remote

ORIGIN_LABEL = "kmc.dev/origin-uid"
replica_kinds: frozenset[str] = REPLICA_KINDS

_OURS = "kmc.dev/"
_LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"
# Labels the Job strategy of every apiserver generates into the pod template from the Job's uid.
_JOB_GENERATED_LABELS = frozenset(
    {
        "batch.kubernetes.io/controller-uid",
        "controller-uid",
        "batch.kubernetes.io/job-name",
        "job-name",
    }
)
# Objects every cluster makes for itself: the hub's copy would be wrong anywhere else.
_SERVICE_ACCOUNT_TOKEN = "kubernetes.io/service-account-token"
_ROOT_CA_CONFIGMAP = "kube-root-ca.crt"


def syncable(hub: Mapping[str, Any], kind: str) -> bool:
    """False for hub objects that are the hub's own (token Secrets, the root CA ConfigMap)."""
    if kind == "Secret":
        return hub.get("type") != _SERVICE_ACCOUNT_TOKEN
    if kind == "ConfigMap":
        return _mapping(hub.get("metadata")).get("name") != _ROOT_CA_CONFIGMAP
    return True


def child_object(
    hub: Mapping[str, Any],
    api_version: str,
    kind: str,
    location: str,
    placement: Mapping[str, int | None],
    location_labels: Mapping[str, str] | None = None,
    added: Constraints | None = None,
) -> dict[str, Any]:
    """The object to apply into `location` for `hub`, given the (interim) `placement`.

    `placement` must name `location`; its value is that location's share (None: a kind copied
    whole). The pod template loses its hub-only `location.kmc.dev/` terms, read against the
    Location's labels, and gains what the namespace's PlacementPolicies `added`. The result
    is a new dict: `hub` is never modified.
    """
    if location not in placement:
        raise ValueError(f"location {location!r} is not in the placement {dict(placement)}")
    metadata = _mapping(hub.get("metadata"))
    uid = metadata.get("uid")
    if not isinstance(uid, str) or not uid:
        raise ValueError("the hub object has no metadata.uid")
    child: dict[str, Any] = {
        "apiVersion": api_version,
        "kind": kind,
        "metadata": _child_metadata(metadata, uid),
    }
    for key, value in hub.items():
        if key not in ("apiVersion", "kind", "metadata", "status"):
            child[key] = copy.deepcopy(value)
    share = _SHARES.get(kind)
    if share is not None:
        share(child, location, placement)
    pod_spec = pod_spec_of(child)
    if isinstance(pod_spec, dict):
        strip_hub_only(pod_spec, location, location_labels)
        if added:
            constrain(pod_spec, added)
    return child


def max_unavailable(hub: Mapping[str, Any], kind: str) -> int:
    """How many replicas the hub object's own rollout strategy lets be unavailable at once."""
    spec = _mapping(hub.get("spec"))
    if kind == "Deployment":
        return _deployment_max_unavailable(spec)
    if kind == "StatefulSet":
        rolling = _mapping(_mapping(spec.get("updateStrategy")).get("rollingUpdate"))
        value = rolling.get("maxUnavailable")
        if value is None:
            return 1
        # As the StatefulSet controller: a percentage rounds down, and at least one goes.
        return max(1, _scaled(value, _replicas(spec), round_up=False))
    return 1


# --- metadata ---------------------------------------------------------------------------------


def _child_metadata(hub_metadata: Mapping[str, Any], uid: str) -> dict[str, Any]:
    """Name, namespace, the author's labels and annotations; nothing of the hub's or ours."""
    metadata = {key: hub_metadata[key] for key in ("name", "namespace") if key in hub_metadata}
    labels = {
        key: value
        for key, value in _mapping(hub_metadata.get("labels")).items()
        if not key.startswith(_OURS)
    }
    labels[ORIGIN_LABEL] = uid
    metadata["labels"] = labels
    annotations = {
        key: value
        for key, value in _mapping(hub_metadata.get("annotations")).items()
        if not key.startswith(_OURS) and key != _LAST_APPLIED
    }
    if annotations:
        metadata["annotations"] = annotations
    return metadata


# --- the location's share, by kind --------------------------------------------------------------


_Share = Callable[[dict[str, Any], str, Mapping[str, int | None]], None]


def _replicas_share(
    child: dict[str, Any], location: str, placement: Mapping[str, int | None]
) -> None:
    share = placement[location]
    if share is not None:  # None: placed whole, as written
        _spec_of(child)["replicas"] = share


def _job_share(child: dict[str, Any], location: str, placement: Mapping[str, int | None]) -> None:
    spec = _spec_of(child)
    spec.update(split_job(spec, placement)[location])
    if spec.get("manualSelector") is True:
        return
    # The hub's apiserver generated these from the hub Job's uid; the child's makes its own.
    spec.pop("selector", None)
    template = spec.get("template")
    template_metadata = template.get("metadata") if isinstance(template, dict) else None
    if not isinstance(template_metadata, dict):
        return
    labels = _mapping(template_metadata.get("labels"))
    kept = {key: value for key, value in labels.items() if key not in _JOB_GENERATED_LABELS}
    if kept:
        template_metadata["labels"] = kept
    else:
        template_metadata.pop("labels", None)


def _quota_share(child: dict[str, Any], location: str, placement: Mapping[str, int | None]) -> None:
    spec = child.get("spec")
    hard = spec.get("hard") if isinstance(spec, dict) else None
    if isinstance(spec, dict) and isinstance(hard, Mapping) and hard:
        weights = {name: share or 0 for name, share in placement.items()}
        spec["hard"] = divide_quota(hard, weights)[location]


def _service_account_share(
    child: dict[str, Any], location: str, placement: Mapping[str, int | None]
) -> None:
    child.pop("secrets", None)  # token Secrets of the hub, which are not synced


def _service_share(
    child: dict[str, Any], location: str, placement: Mapping[str, int | None]
) -> None:
    """Addresses and node ports are allocated by each cluster from its own ranges."""
    spec = child.get("spec")
    if not isinstance(spec, dict):
        return
    if spec.get("clusterIP") != "None":  # headless stays headless
        spec.pop("clusterIP", None)
        spec.pop("clusterIPs", None)
    spec.pop("healthCheckNodePort", None)
    for port in spec.get("ports") or []:
        if isinstance(port, dict):
            port.pop("nodePort", None)


def _role_share(child: dict[str, Any], location: str, placement: Mapping[str, int | None]) -> None:
    """A Role that lets someone read `remote.kmc.dev` pods on the hub lets them read pods in
    the child, where the punch-through read impersonates them: the same decision both ways."""
    rules = child.get("rules")
    if isinstance(rules, list):
        child["rules"] = [out for rule in rules for out in _child_rules(rule)]


def _child_rules(rule: Any) -> list[Any]:
    groups = rule.get("apiGroups") if isinstance(rule, dict) else None
    if not isinstance(groups, list) or remote.GROUP not in groups:
        return [rule]
    others = [g for g in groups if g != remote.GROUP]
    out = [{**rule, "apiGroups": others}] if others else []
    asked = rule.get("resources") or []
    by_group: dict[str, list[str]] = {}
    for kind in remote.KINDS.values():
        if named := kind.resources(asked):  # pods/log and pods/exec too: streams impersonate
            by_group.setdefault(kind.group, []).extend(named)
    for group, plurals in sorted(by_group.items()):
        out.append({**rule, "apiGroups": [group], "resources": plurals})
    return out


_SHARES: dict[str, _Share] = {
    **{kind: _replicas_share for kind in REPLICA_KINDS},
    "Job": _job_share,
    "ResourceQuota": _quota_share,
    "ServiceAccount": _service_account_share,
    "Service": _service_share,
    "Role": _role_share,
}


# --- rollout budgets --------------------------------------------------------------------------


def _deployment_max_unavailable(spec: Mapping[str, Any]) -> int:
    """As the Deployment controller resolves maxSurge/maxUnavailable, capped at the replicas.

    Recreate takes every replica down at once, so all of them may be unavailable.
    """
    replicas = _replicas(spec)
    strategy = _mapping(spec.get("strategy"))
    if strategy.get("type") == "Recreate":
        return replicas
    rolling = _mapping(strategy.get("rollingUpdate"))
    surge = _scaled(rolling.get("maxSurge", "25%"), replicas, round_up=True)
    unavailable = _scaled(rolling.get("maxUnavailable", "25%"), replicas, round_up=False)
    if surge == 0 and unavailable == 0:
        unavailable = 1
    return min(unavailable, replicas)


def _scaled(value: object, total: int, *, round_up: bool) -> int:
    """An IntOrString: an int as is, "N%" of `total` rounded as asked.

    The hub's apiserver validated the object, so anything else does not occur; it counts as 0.
    """
    if isinstance(value, int) and not isinstance(value, bool):
        return max(0, value)
    if isinstance(value, str) and value.endswith("%") and value[:-1].isdigit():
        scaled = int(value[:-1]) * total
        return -(-scaled // 100) if round_up else scaled // 100
    return 0


def _replicas(spec: Mapping[str, Any]) -> int:
    value = spec.get("replicas", 1)
    return value if isinstance(value, int) and not isinstance(value, bool) else 1


# --- helpers ----------------------------------------------------------------------------------


def _mapping(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _spec_of(child: dict[str, Any]) -> dict[str, Any]:
    """The child's own (deep-copied) spec, created if the hub object had none."""
    spec = child.get("spec")
    if not isinstance(spec, dict):
        spec = child["spec"] = {}
    return spec
