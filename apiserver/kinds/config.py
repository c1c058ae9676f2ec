"""What a pod template names — ConfigMaps, Secrets, ServiceAccounts — goes where its users go.

A Deployment placed in `us-east` is useless there without the objects its pods mount, read or
run as. Each follows the workloads that name it (`placement/dependencies.py` reads the pod
spec), unless it carries a strategy of its own. The objects every cluster makes for itself
(service-account token Secrets, the root CA ConfigMap) are the hub's own and never sent.
"""

from __future__ import annotations

from apiserver.contract import Placement
from apiserver.kinds.kind import Kind, Remote, Role
from apiserver.objects import Obj, ReadOnly

_SERVICE_ACCOUNT_TOKEN = "kubernetes.io/service-account-token"
_ROOT_CA_CONFIGMAP = "kube-root-ca.crt"


def _not_root_ca(obj: ReadOnly) -> bool:
    return (obj.get("metadata") or {}).get("name") != _ROOT_CA_CONFIGMAP


def _not_a_token(obj: ReadOnly) -> bool:
    return obj.get("type") != _SERVICE_ACCOUNT_TOKEN


def _account_share(child: Obj, location: str, placement: Placement) -> None:
    child.pop("secrets", None)  # token Secrets of the hub, which are not synced


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

ENTRIES = (CONFIGMAP, SECRET, SERVICEACCOUNT)
