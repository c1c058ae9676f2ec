"""What `remote.kmc.dev` punches through to: each resource and where it really lives.

One table serves the listing handlers (which path to ask a child), the discovery documents,
and the sync loop, which rewrites RBAC rules about `remote.kmc.dev` into rules about the real
groups when Roles follow their namespace to the children. Secrets are never listed here.
"""

from __future__ import annotations

from dataclasses import dataclass

GROUP = "remote.kmc.dev"
VERSION = "v1alpha1"


@dataclass(frozen=True)
class RemoteKind:
    plural: str
    kind: str
    group: str  # the real group in the children ("" for core)
    version: str
    # Sub-resources served through to the children (pods' streams), by the same names there.
    subresources: tuple[str, ...] = ()

    def resources(self, asked: list[str]) -> list[str]:
        """What an RBAC rule's `resources` about this kind names in the child: the kind
        (`pods`, or `*`) and the sub-resources it serves, as RBAC matches them (`pods/log`,
        `*/log`, `*`; RBAC has no `pods/*`)."""
        found = [self.plural] if "*" in asked or self.plural in asked else []
        for sub in self.subresources:
            named = (f"{self.plural}/{sub}", f"*/{sub}", "*")
            if any(name in asked for name in named):
                found.append(f"{self.plural}/{sub}")
        return found

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    def path(self, namespace: str | None, name: str | None = None) -> str:
        """The child's own path: all namespaces, one namespace, or one object."""
        prefix = f"/apis/{self.api_version}" if self.group else "/api/v1"
        where = f"/namespaces/{namespace}" if namespace else ""
        return f"{prefix}{where}/{self.plural}" + (f"/{name}" if name else "")


KINDS: dict[str, RemoteKind] = {
    k.plural: k
    for k in (
        RemoteKind("pods", "Pod", "", "v1", ("log", "exec", "attach", "portforward")),
        RemoteKind("replicasets", "ReplicaSet", "apps", "v1"),
        RemoteKind("deployments", "Deployment", "apps", "v1"),
        RemoteKind("statefulsets", "StatefulSet", "apps", "v1"),
        RemoteKind("daemonsets", "DaemonSet", "apps", "v1"),
        RemoteKind("jobs", "Job", "batch", "v1"),
        RemoteKind("services", "Service", "", "v1"),
        RemoteKind("endpointslices", "EndpointSlice", "discovery.k8s.io", "v1"),
        RemoteKind("configmaps", "ConfigMap", "", "v1"),
        RemoteKind("events", "Event", "", "v1"),
    )
}
