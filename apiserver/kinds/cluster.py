"""Cluster-scoped objects an administrator places: ClusterRoles, ClusterRoleBindings,
StorageClasses, IngressClasses, and CustomResourceDefinitions.

They belong to no namespace, so nothing follows them and no namespace strategy reaches them:
each is placed only when it carries its own `kmc.dev/strategy` (`Role.ASKED`, Replicate for
these kinds), with everything a strategy says — location selectors, pins, avoids, taints —,
the placement gates and the PlacementPolicies that hold for every namespace
(`placement/policy.py`). Without a strategy they stay the hub's own: a hub's ClusterRoles
are mostly its own controllers' and its users', which the children have of their own.

A ClusterRole's rules about `remote.kmc.dev` become rules about the kinds themselves in the
child, as a Role's do (`namespaced._role_share`). A StorageClass cannot change its
provisioner, parameters, reclaim policy or binding mode in place: a change makes the child
anew. A CustomResourceDefinition goes as its author wrote it; one we made from an API
import (`kmc.dev/imported`) came from the children and never goes back down.
"""

from __future__ import annotations

from apiserver.contract import IMPORTED
from apiserver.kinds.kind import Change, Kind, Role
from apiserver.kinds.namespaced import role_share
from apiserver.objects import Obj, ReadOnly

_RBAC = "rbac.authorization.k8s.io/v1"
# What a StorageClass cannot change once made (the apiserver refuses an update of them).
_FIXED_CLASS_FIELDS = ("provisioner", "parameters", "reclaimPolicy", "volumeBindingMode")


def _not_imported(crd: ReadOnly) -> bool:
    """A CRD we negotiated from the children's is theirs already: never sent down."""
    labels = (crd.get("metadata") or {}).get("labels") or {}
    return labels.get(IMPORTED) != "true"


def storage_class_change(current: Obj, desired: Obj) -> Change:
    """In place, unless a field the apiserver keeps fixed differs: then made anew."""
    fixed = any(current.get(f) != desired.get(f) for f in _FIXED_CLASS_FIELDS if f in desired)
    return Change.REPLACE if fixed else Change.APPLY


CLUSTERROLE = Kind(
    "ClusterRole",
    "ClusterRole",
    _RBAC,
    "clusterroles",
    role=Role.ASKED,
    namespaced=False,
    share=role_share,
)
CLUSTERROLEBINDING = Kind(
    "ClusterRoleBinding",
    "ClusterRoleBinding",
    _RBAC,
    "clusterrolebindings",
    role=Role.ASKED,
    namespaced=False,
)
STORAGECLASS = Kind(
    "StorageClass",
    "StorageClass",
    "storage.k8s.io/v1",
    "storageclasses",
    role=Role.ASKED,
    namespaced=False,
    change=storage_class_change,
)
INGRESSCLASS = Kind(
    "IngressClass",
    "IngressClass",
    "networking.k8s.io/v1",
    "ingressclasses",
    role=Role.ASKED,
    namespaced=False,
)
CUSTOMRESOURCEDEFINITION = Kind(
    "CustomResourceDefinition",
    "CustomResourceDefinition",
    "apiextensions.k8s.io/v1",
    "customresourcedefinitions",
    role=Role.ASKED,
    namespaced=False,
    syncable=_not_imported,
)

ENTRIES = (CLUSTERROLE, CLUSTERROLEBINDING, STORAGECLASS, INGRESSCLASS, CUSTOMRESOURCEDEFINITION)
