"""The kinds of hub object the control plane handles, and how one object is named between
modules.

One table: what the placement loop places, what the sync loop copies into the children, what
the hub cache watches and what the views serve all derive from it. A CRD's kind joins at run
time (`Kind.of_crd`). Modules pass `Key`s, never strings they would have to parse.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NamedTuple


@dataclass(frozen=True)
class Kind:
    """A namespaced kind; `key` is the Kind, or Kind.group for a CRD's."""

    key: str
    kind: str
    api_version: str
    plural: str

    @property
    def collection(self) -> str:
        """The all-namespaces list path."""
        return f"{self._prefix}/{self.plural}"

    @property
    def _prefix(self) -> str:
        return "/api/v1" if self.api_version == "v1" else f"/apis/{self.api_version}"

    def path(self, namespace: str, name: str, subresource: str = "") -> str:
        path = f"{self._prefix}/namespaces/{namespace}/{self.plural}/{name}"
        return f"{path}/{subresource}" if subresource else path

    @staticmethod
    def of_crd(crd: dict[str, Any]) -> Kind | None:
        """The kind a namespaced CRD serves (its storage version), or None."""
        spec = crd.get("spec", {})
        version = next((v["name"] for v in spec.get("versions", []) if v.get("storage")), None)
        if spec.get("scope") != "Namespaced" or version is None:
            return None
        group, names = spec["group"], spec["names"]
        return Kind(
            f"{names['kind']}.{group}", names["kind"], f"{group}/{version}", names["plural"]
        )


class Key(NamedTuple):
    """One hub object (or, with kind `Namespace` and no namespace, one namespace)."""

    kind: str  # a Kind's key
    namespace: str
    name: str

    @property
    def cache_key(self) -> str:
        """How informers file it."""
        return f"{self.namespace}/{self.name}" if self.namespace else self.name

    @property
    def lane(self) -> str:
        """Whose turn it is in a fair queue: its namespace."""
        return self.namespace or self.name

    def __str__(self) -> str:
        return f"{self.kind} {self.cache_key}"

    @classmethod
    def of(cls, kind: str, obj: dict[str, Any]) -> Key:
        meta = obj["metadata"]
        return cls(kind, meta.get("namespace") or "", meta["name"])


NAMESPACE = "Namespace"  # Key(NAMESPACE, "", name): a namespace, for the loops that follow them


def _builtin(kind: str, api_version: str, plural: str) -> Kind:
    return Kind(kind, kind, api_version, plural)


WORKLOADS = {
    k.key: k
    for k in (
        _builtin("Deployment", "apps/v1", "deployments"),
        _builtin("StatefulSet", "apps/v1", "statefulsets"),
        _builtin("ReplicaSet", "apps/v1", "replicasets"),
        _builtin("DaemonSet", "apps/v1", "daemonsets"),
        _builtin("Job", "batch/v1", "jobs"),
    )
}
# Objects a pod template refers to: they go where the workloads that use them go.
DEPENDENCIES = {
    k.key: k
    for k in (
        _builtin("ConfigMap", "v1", "configmaps"),
        _builtin("Secret", "v1", "secrets"),
        _builtin("ServiceAccount", "v1", "serviceaccounts"),
    )
}
# A namespace's quota goes where its workloads are, weighted by the replicas there (the sync
# loop divides `spec.hard` by those weights). Roles and RoleBindings go, whole, wherever the
# namespace's workloads run: punch-through reads impersonate the caller in the children, and
# must be allowed there as they are on the hub.
QUOTA = _builtin("ResourceQuota", "v1", "resourcequotas")
RBAC = "rbac.authorization.k8s.io/v1"
NAMESPACE_FOLLOWERS = {
    k.key: k
    for k in (QUOTA, _builtin("Role", RBAC, "roles"), _builtin("RoleBinding", RBAC, "rolebindings"))
}
BUILTIN = {**WORKLOADS, **DEPENDENCIES, **NAMESPACE_FOLLOWERS}
