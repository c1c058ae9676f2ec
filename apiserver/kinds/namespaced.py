"""What follows a namespace: wherever the namespace's workloads run, it runs too.

A ResourceQuota is divided across those locations in proportion to the replicas the
namespace runs in each (`weighed`), so the children together allow what the hub allows.
Roles and RoleBindings go whole: punch-through reads impersonate the caller in the children,
and must be allowed there as they are on the hub. A LimitRange and a NetworkPolicy go whole:
the defaults and bounds, and the traffic rules, they set for the namespace's pods hold in
every location they run.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from apiserver.contract import REMOTE_GROUP, Placement
from apiserver.kinds.core import REMOTE
from apiserver.kinds.kind import Kind, Role
from apiserver.objects import Obj
from apiserver.placement.quota import divide_quota

_RBAC = "rbac.authorization.k8s.io/v1"


def _quota_share(child: Obj, location: str, placement: Placement) -> None:
    spec = child.get("spec")
    hard = spec.get("hard") if isinstance(spec, dict) else None
    if isinstance(spec, dict) and isinstance(hard, Mapping) and hard:
        weights = {name: share or 0 for name, share in placement.items()}
        spec["hard"] = divide_quota(hard, weights)[location]


def role_share(child: Obj, location: str, placement: Placement) -> None:
    """A Role (or a ClusterRole) that lets someone read `remote.kmc.dev` pods on the hub
    lets them read pods in the child, where the punch-through read impersonates them: the
    same decision both ways."""
    rules = child.get("rules")
    if isinstance(rules, list):
        child["rules"] = [out for rule in rules for out in _child_rules(rule)]


def _child_rules(rule: Any) -> list[Any]:
    groups = rule.get("apiGroups") if isinstance(rule, dict) else None
    if not isinstance(groups, list) or REMOTE_GROUP not in groups:
        return [rule]
    others = [g for g in groups if g != REMOTE_GROUP]
    out = [{**rule, "apiGroups": others}] if others else []
    asked = rule.get("resources") or []
    by_group: dict[str, list[str]] = {}
    for plural, kind in REMOTE.items():
        assert kind.remote is not None
        if named := kind.remote.resources(plural, asked):  # pods/log, pods/exec: streams
            by_group.setdefault(kind.group, []).extend(named)  # impersonate the caller too
    for group, plurals in sorted(by_group.items()):
        out.append({**rule, "apiGroups": [group], "resources": plurals})
    return out


RESOURCEQUOTA = Kind(
    "ResourceQuota",
    "ResourceQuota",
    "v1",
    "resourcequotas",
    role=Role.NAMESPACE_FOLLOWER,
    share=_quota_share,
    weighed=True,
)
ROLE = Kind("Role", "Role", _RBAC, "roles", role=Role.NAMESPACE_FOLLOWER, share=role_share)
ROLEBINDING = Kind(
    "RoleBinding", "RoleBinding", _RBAC, "rolebindings", role=Role.NAMESPACE_FOLLOWER
)
LIMITRANGE = Kind("LimitRange", "LimitRange", "v1", "limitranges", role=Role.NAMESPACE_FOLLOWER)
NETWORKPOLICY = Kind(
    "NetworkPolicy",
    "NetworkPolicy",
    "networking.k8s.io/v1",
    "networkpolicies",
    role=Role.NAMESPACE_FOLLOWER,
)

ENTRIES = (RESOURCEQUOTA, ROLE, ROLEBINDING, LIMITRANGE, NETWORKPOLICY)
