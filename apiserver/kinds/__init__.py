"""Every kind of object kubectl-mc knows, one entry each, and how one object is named between
modules.

`kind.py` says what an entry holds; each family's entries live beside their own share and
fold functions (`workloads.py`, `job.py`, `config.py`, `namespaced.py`, `core.py`,
`ingress.py`, `autoscaling.py`, `policy.py`, `cluster.py`, `gateway.py`). What the hub cache
watches, what the loops place, what the views and punch-through serve all derive from the
tables below. A CRD's kind joins at run time (`of_crd`): as an entry of `SERVED_BY_CRDS` when
it is one kubectl-mc knows (an HTTPRoute), else as a kind placed only when asked. Modules pass
`Key`s, never strings they would have to parse.

Adding a kind: write its entry (and its share or fold, if it has any) in the family it
belongs to, and list it in that family's `ENTRIES`.
"""

from __future__ import annotations

from apiserver.kinds import (
    autoscaling,
    cluster,
    config,
    core,
    gateway,
    ingress,
    job,
    namespaced,
    policy,
    workloads,
)
from apiserver.kinds.autoscaling import HORIZONTALPODAUTOSCALER
from apiserver.kinds.cluster import (
    CLUSTERROLE,
    CLUSTERROLEBINDING,
    CUSTOMRESOURCEDEFINITION,
    INGRESSCLASS,
    STORAGECLASS,
)
from apiserver.kinds.config import (
    CONFIGMAP,
    PERSISTENTVOLUMECLAIM,
    PRIORITYCLASS,
    SECRET,
    SERVICEACCOUNT,
)
from apiserver.kinds.core import ENDPOINTSLICE, EVENT, POD, REMOTE, SERVICE
from apiserver.kinds.gateway import HTTPROUTE
from apiserver.kinds.ingress import INGRESS
from apiserver.kinds.job import JOB
from apiserver.kinds.kind import Change, Key, Kind, Remote, Role, Target, View
from apiserver.kinds.namespaced import (
    LIMITRANGE,
    NETWORKPOLICY,
    RESOURCEQUOTA,
    ROLE,
    ROLEBINDING,
)
from apiserver.kinds.policy import PODDISRUPTIONBUDGET
from apiserver.kinds.workloads import DAEMONSET, DEPLOYMENT, REPLICASET, STATEFULSET
from apiserver.objects import NAMESPACE, ReadOnly

OURS = "kmc.dev"  # the API group of kubectl-mc's own kinds, and its sub-groups

__all__ = [
    "ALL",
    "BUILT_IN_APIS",
    "CLUSTERROLE",
    "CLUSTERROLEBINDING",
    "CONFIGMAP",
    "CUSTOMRESOURCEDEFINITION",
    "DAEMONSET",
    "DEPLOYMENT",
    "ENDPOINTSLICE",
    "EVENT",
    "HORIZONTALPODAUTOSCALER",
    "HTTPROUTE",
    "INGRESS",
    "INGRESSCLASS",
    "JOB",
    "LIMITRANGE",
    "NAMESPACE",
    "NETWORKPOLICY",
    "PERSISTENTVOLUMECLAIM",
    "PLACED",
    "POD",
    "PODDISRUPTIONBUDGET",
    "PRIORITYCLASS",
    "REMOTE",
    "REPLICASET",
    "RESOURCEQUOTA",
    "ROLE",
    "ROLEBINDING",
    "SECRET",
    "SERVED_BY_CRDS",
    "SERVICE",
    "SERVICEACCOUNT",
    "STATEFULSET",
    "STORAGECLASS",
    "VIEWS",
    "Change",
    "Key",
    "Kind",
    "Remote",
    "Role",
    "Target",
    "View",
    "of_crd",
]

ALL: tuple[Kind, ...] = (
    *workloads.ENTRIES,
    *job.ENTRIES,
    *config.ENTRIES,
    *namespaced.ENTRIES,
    *core.ENTRIES,
    *ingress.ENTRIES,
    *autoscaling.ENTRIES,
    *policy.ENTRIES,
    *cluster.ENTRIES,
)
# Kinds kubectl-mc knows that CRDs serve (an imported kind): they join, with their own
# entry, when the hub serves their CRD, and are never watched before.
SERVED_BY_CRDS: dict[str, Kind] = {k.key: k for k in gateway.ENTRIES}
# What every Kubernetes cluster serves of ours, as a probe lists it ("apps/v1/Deployment"): a
# pull location is taken to serve these until its agent reports its own probe (docs/pull.md).
BUILT_IN_APIS: frozenset[str] = frozenset(f"{k.api_version}/{k.kind}" for k in ALL)
# Built-in kinds the hub cache watches and the placement loop places, by key.
PLACED: dict[str, Kind] = {k.key: k for k in ALL if k.role is not None}
# `mc.kmc.dev` views, by plural (`REMOTE`, punch-through's, is `core.py`'s).
VIEWS: dict[str, Kind] = {k.plural: k for k in ALL if k.view is not None}


def of_crd(crd: ReadOnly) -> Kind | None:
    """The kind a CRD serves (its storage version), namespaced or cluster-scoped: its entry in
    `SERVED_BY_CRDS` when it is a kind we know at the version and scope that entry is for;
    None when it has no storage version, or it is one of ours."""
    spec = crd.get("spec") or {}
    version = next((v["name"] for v in spec.get("versions", []) if v.get("storage")), None)
    scope = spec.get("scope")
    if scope not in ("Namespaced", "Cluster") or version is None:
        return None
    group, names = spec["group"], spec["names"]
    if group == OURS or group.endswith(f".{OURS}"):
        return None  # our own kinds (Locations, PlacementPolicies, APIImports) stay the hub's
    known = SERVED_BY_CRDS.get(f"{names['kind']}.{group}")
    if (
        known is not None
        and known.api_version == f"{group}/{version}"
        and known.plural == names["plural"]
        and known.namespaced == (scope == "Namespaced")
    ):
        return known
    return Kind(
        f"{names['kind']}.{group}",
        names["kind"],
        f"{group}/{version}",
        names["plural"],
        role=Role.ASKED,
        namespaced=scope == "Namespaced",
        crd=True,
    )
