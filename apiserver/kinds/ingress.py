"""What routes outside traffic to Services: an Ingress goes wherever they are.

An Ingress in a location whose Services are not there routes to nothing, and one missing
where they are leaves those pods unreachable from outside. So it follows the Services its
rules and default backend name, to every location any of them is placed in, and its TLS
Secrets follow it as a pod template's Secrets follow a workload. One that names no placed
Service stays on the hub, and a Warning Event `NothingPlaced` says so: an Ingress's status
has no conditions to carry `kmc.dev/Placed`. Its hub status lists every location's
load-balancer ingress points, as a LoadBalancer Service's does. (A backend `resource`, a
CRD's object, is the child's to have; the IngressClass, cluster-scoped, too.)
"""

from __future__ import annotations

from collections.abc import Iterator

from apiserver.kinds.core import load_balancer_fields
from apiserver.kinds.kind import Kind, Role
from apiserver.objects import ReadOnly
from apiserver.sync.status import Rules, items_of, mapping


def _backends(ingress: ReadOnly) -> Iterator[ReadOnly]:
    spec = mapping(ingress.get("spec"))
    yield mapping(spec.get("defaultBackend"))
    for rule in items_of(spec.get("rules")):
        for path in items_of(mapping(rule.get("http")).get("paths")):
            yield mapping(path.get("backend"))


def services_of(ingress: ReadOnly) -> frozenset[tuple[str, str]]:
    """The Services its default backend and rules route to."""
    names = (mapping(backend.get("service")).get("name") for backend in _backends(ingress))
    return frozenset(("Service", name) for name in names if isinstance(name, str) and name)


def tls_secrets_of(ingress: ReadOnly) -> frozenset[tuple[str, str]]:
    """The Secrets its TLS entries name: the certificates its controller serves."""
    tls = items_of(mapping(ingress.get("spec")).get("tls"))
    names = (entry.get("secretName") for entry in tls)
    return frozenset(("Secret", name) for name in names if isinstance(name, str) and name)


INGRESS = Kind(
    "Ingress",
    "Ingress",
    "networking.k8s.io/v1",
    "ingresses",
    role=Role.REFERENCE_FOLLOWER,
    follows=services_of,
    uses=tls_secrets_of,
    # networking.k8s.io/v1's IngressStatus has no conditions: only its load balancer's points.
    fold_rules=Rules(
        fields=load_balancer_fields, observes_generation=False, conditions_in_status=False
    ),
)

ENTRIES = (INGRESS,)
