"""What a pod template names — ConfigMaps, Secrets, ServiceAccounts, PersistentVolumeClaims,
PriorityClasses — goes where its users go.

A Deployment placed in `us-east` is useless there without the objects its pods mount, read,
run as or run at. Each follows the workloads that name it (`placement/dependencies.py` reads
the pod spec), unless it carries a strategy of its own. The objects every cluster makes for
itself (service-account token Secrets, the root CA ConfigMap, the `system-` priority classes)
are the hub's own and never sent.

A claim is one volume per location: each child binds or provisions its own, and the hub
claim is Bound only when it is bound everywhere it is placed (Pending otherwise). A
ReadWriteOnce claim whose users run in two locations is two volumes with their own data,
which a Warning Event on the hub claim says. A PriorityClass is cluster-scoped: it follows
the workloads of every namespace that name it, and no child copy is its cluster's global
default (each cluster keeps its own).
"""

from __future__ import annotations

from apiserver.contract import Placement
from apiserver.kinds.kind import Kind, Remote, Role
from apiserver.objects import Obj, ReadOnly
from apiserver.sync.status import Children, Rules, mapping, status_of

_SERVICE_ACCOUNT_TOKEN = "kubernetes.io/service-account-token"
_ROOT_CA_CONFIGMAP = "kube-root-ca.crt"
# What a volume binder writes on a claim it binds or provisions for: about the hub's volumes
# (were its binder on), never a child's.
_BINDER_ANNOTATIONS = (
    "pv.kubernetes.io/bind-completed",
    "pv.kubernetes.io/bound-by-controller",
    "volume.beta.kubernetes.io/storage-provisioner",
    "volume.kubernetes.io/storage-provisioner",
    "volume.kubernetes.io/selected-node",
)
_ONE_NODE_MODES = ("ReadWriteOnce", "ReadWriteOncePod")


def _not_root_ca(obj: ReadOnly) -> bool:
    return (obj.get("metadata") or {}).get("name") != _ROOT_CA_CONFIGMAP


def _not_a_token(obj: ReadOnly) -> bool:
    return obj.get("type") != _SERVICE_ACCOUNT_TOKEN


def _account_share(child: Obj, location: str, placement: Placement) -> None:
    child.pop("secrets", None)  # token Secrets of the hub, which are not synced


def _not_a_system_class(obj: ReadOnly) -> bool:
    """`system-cluster-critical` and `system-node-critical` are every cluster's own."""
    return not str((obj.get("metadata") or {}).get("name", "")).startswith("system-")


def _class_share(child: Obj, location: str, placement: Placement) -> None:
    """A class goes to run the pods that name it; which class a pod naming none gets is each
    cluster's own say (and a second global default is refused there)."""
    child.pop("globalDefault", None)


def claim_share(child: Obj, location: str, placement: Placement) -> None:
    """Each child binds its own volume: a binding the hub's binder made (its annotations, the
    volume it chose) says nothing there. A volume the author named stays named."""
    meta = child["metadata"]
    annotations = meta.get("annotations") or {}
    bound_by_controller = annotations.get("pv.kubernetes.io/bound-by-controller") == "yes"
    for key in _BINDER_ANNOTATIONS:
        annotations.pop(key, None)
    if not annotations:
        meta.pop("annotations", None)
    spec = child.get("spec")
    if bound_by_controller and isinstance(spec, dict):
        spec.pop("volumeName", None)


def claim_fields(status: Obj, hub: ReadOnly, seen: Children, previous: ReadOnly) -> None:
    """Bound once bound everywhere it is placed, else Pending; with the children's capacity
    and access modes when it is Bound and they all agree."""
    placed = [seen.present.get(loc) for loc in seen.placed]
    children = [status_of(child) for child in placed if child is not None]
    bound = bool(placed) and len(children) == len(placed)
    bound = bound and all(child.get("phase") == "Bound" for child in children)
    status["phase"] = "Bound" if bound else "Pending"
    if not bound:
        return
    for field in ("accessModes", "capacity"):
        values = [child.get(field) for child in children]
        if values[0] and all(value == values[0] for value in values):
            status[field] = values[0]


def claim_note(claim: ReadOnly, placement: Placement) -> tuple[str, str] | None:
    """A claim one node may write in, placed in two locations or more: as many volumes."""
    modes = mapping(claim.get("spec")).get("accessModes") or []
    once = [mode for mode in _ONE_NODE_MODES if mode in modes]
    if len(placement) < 2 or not once:
        return None
    where = ", ".join(sorted(placement))
    return (
        "VolumePerLocation",
        f"{once[0]} claim used in {len(placement)} locations ({where}): each location binds "
        "a volume of its own, and what is written in one is not seen in the others",
    )


CONFIGMAP = Kind(
    "ConfigMap",
    "ConfigMap",
    "v1",
    "configmaps",
    role=Role.DEPENDENCY,
    syncable=_not_root_ca,
    remote=Remote("configmap", "configmaps", "core v1"),
)
SECRET = Kind(
    "Secret", "Secret", "v1", "secrets", role=Role.DEPENDENCY, syncable=_not_a_token
)  # never punched through: a child's Secrets are not read through the hub
SERVICEACCOUNT = Kind(
    "ServiceAccount",
    "ServiceAccount",
    "v1",
    "serviceaccounts",
    role=Role.DEPENDENCY,
    share=_account_share,
)

PERSISTENTVOLUMECLAIM = Kind(
    "PersistentVolumeClaim",
    "PersistentVolumeClaim",
    "v1",
    "persistentvolumeclaims",
    role=Role.DEPENDENCY,
    share=claim_share,
    fold_rules=Rules(fields=claim_fields, observes_generation=False),
    note=claim_note,
)
PRIORITYCLASS = Kind(
    "PriorityClass",
    "PriorityClass",
    "scheduling.k8s.io/v1",
    "priorityclasses",
    role=Role.DEPENDENCY,
    namespaced=False,
    syncable=_not_a_system_class,
    share=_class_share,
)

ENTRIES = (CONFIGMAP, SECRET, SERVICEACCOUNT, PERSISTENTVOLUMECLAIM, PRIORITYCLASS)
