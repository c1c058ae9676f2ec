"""The ServiceAccount kmc-apiserver uses in a child joined with short-lived credentials.

A kubeconfig whose user is an exec plugin (cloud CLIs, OIDC helpers) or a token that expires
would leave kmc-apiserver with a credential that dies within hours. So `kubectl mc join`
uses it once, to create in the child `kmc-system/kmc-location`, bound to the least RBAC
kmc-apiserver needs there, and stores a token for that account (TokenRequest), which
kmc-apiserver renews before it expires (`apiserver/locations/renew.py`) with the account's
own permission to ask for its own token.

The objects are here, not read from `manifests/`, because the krew archive carries only
this package; `manifests/location-role.yaml` is the same list (a unit test says so), for
people who review or apply RBAC themselves. Each rule says what it is for.
"""

from __future__ import annotations

import base64
import json

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

NAMESPACE = "kmc-system"
ACCOUNT = "kmc-location"
ROLE = "kmc:location"
AGGREGATE_LABEL = "kmc.dev/aggregate-to-location"
# Annotation on the Location's Secret: whose token it holds, so kmc-apiserver renews it.
SERVICE_ACCOUNT_ANNOTATION = "kmc.dev/service-account"
TOKEN_SECONDS = 24 * 3600

_WRITE = ["get", "list", "watch", "create", "update", "patch", "delete"]
_READ = ["get", "list", "watch"]

# (what for, rule)
RULES: list[tuple[str, dict[str, Any]]] = [
    (
        "sync: the workloads placed here, written and watched for drift; punch-through reads",
        {
            "apiGroups": ["apps"],
            "resources": ["deployments", "statefulsets", "replicasets", "daemonsets"],
            "verbs": _WRITE,
        },
    ),
    ("sync: Jobs, the same", {"apiGroups": ["batch"], "resources": ["jobs"], "verbs": _WRITE}),
    (
        "sync: what pod templates refer to (follows its workloads: claims too), Services (follow"
        " the workloads they select), and a namespace's quota share and limit ranges",
        {
            "apiGroups": [""],
            "resources": [
                "configmaps",
                "secrets",
                "serviceaccounts",
                "persistentvolumeclaims",
                "services",
                "resourcequotas",
                "limitranges",
            ],
            "verbs": _WRITE,
        },
    ),
    (
        "sync: the PriorityClasses pod templates name follow their workloads (cluster-scoped)",
        {"apiGroups": ["scheduling.k8s.io"], "resources": ["priorityclasses"], "verbs": _WRITE},
    ),
    (
        "sync: a namespace's Roles and RoleBindings go where its workloads run, so punch-through"
        " reads (impersonating the caller) are allowed there as on the hub; bind and escalate"
        " because copying a Role that grants more than this account holds is refused otherwise",
        {
            "apiGroups": ["rbac.authorization.k8s.io"],
            "resources": ["roles", "rolebindings"],
            "verbs": [*_WRITE, "bind", "escalate"],
        },
    ),
    (
        "sync: ClusterRoles and ClusterRoleBindings that carry a strategy on the hub are placed"
        " here; bind and escalate because copying one that grants more than this account holds"
        " is refused otherwise, which makes this account as strong as cluster-admin here (see"
        " docs/strategy.md, Cluster-scoped objects)",
        {
            "apiGroups": ["rbac.authorization.k8s.io"],
            "resources": ["clusterroles", "clusterrolebindings"],
            "verbs": [*_WRITE, "bind", "escalate"],
        },
    ),
    (
        "sync: StorageClasses and IngressClasses that carry a strategy on the hub are placed here",
        {"apiGroups": ["storage.k8s.io"], "resources": ["storageclasses"], "verbs": _WRITE},
    ),
    (
        "sync: a namespace's NetworkPolicies go where its workloads run, Ingresses where the"
        " Services they name are, IngressClasses where their strategy says",
        {
            "apiGroups": ["networking.k8s.io"],
            "resources": ["networkpolicies", "ingresses", "ingressclasses"],
            "verbs": _WRITE,
        },
    ),
    (
        "sync: a Gateway API HTTPRoute goes where the Services it names are (where this cluster"
        " serves the Gateway API's CRDs)",
        {"apiGroups": ["gateway.networking.k8s.io"], "resources": ["httproutes"], "verbs": _WRITE},
    ),
    (
        "sync: a HorizontalPodAutoscaler goes where the workload it scales runs",
        {
            "apiGroups": ["autoscaling"],
            "resources": ["horizontalpodautoscalers"],
            "verbs": _WRITE,
        },
    ),
    (
        "sync: a PodDisruptionBudget goes where the pods it selects run",
        {"apiGroups": ["policy"], "resources": ["poddisruptionbudgets"], "verbs": _WRITE},
    ),
    (
        "sync: bare Pods placed here from the hub (kubectl run), written and watched",
        {"apiGroups": [""], "resources": ["pods"], "verbs": _WRITE},
    ),
    (
        "sync: the namespaces synced objects live in, made when missing, removed with the hub's",
        {"apiGroups": [""], "resources": ["namespaces"], "verbs": _WRITE},
    ),
    (
        "probes: nodes for capacity and readiness, running pods for what is allocated;"
        " services and events also for punch-through reads",
        {"apiGroups": [""], "resources": ["nodes", "services", "events"], "verbs": _READ},
    ),
    (
        "API import: the CRDs served here, read to negotiate the hub's schema of each kind;"
        " sync: a user's CRD that carries a strategy on the hub is placed here",
        {
            "apiGroups": ["apiextensions.k8s.io"],
            "resources": ["customresourcedefinitions"],
            "verbs": _WRITE,
        },
    ),
    (
        "punch-through: endpointslices read from the child",
        {"apiGroups": ["discovery.k8s.io"], "resources": ["endpointslices"], "verbs": _READ},
    ),
    (
        "exports (Multi-Cluster Services API): a Service exported on the hub gets its"
        " ServiceImport here, and the other locations' endpoints as EndpointSlices labelled"
        " endpointslice.kubernetes.io/managed-by=kmc.dev",
        {
            "apiGroups": ["multicluster.x-k8s.io"],
            "resources": ["serviceimports"],
            "verbs": _WRITE,
        },
    ),
    (
        "exports: the other locations' endpoints, written",
        {
            "apiGroups": ["discovery.k8s.io"],
            "resources": ["endpointslices"],
            "verbs": ["create", "update", "patch", "delete"],
        },
    ),
    (
        "punch-through: reads impersonate the caller, so the child's RBAC decides",
        {
            "apiGroups": [""],
            "resources": ["users", "groups", "serviceaccounts"],
            "verbs": ["impersonate"],
        },
    ),
    (
        "punch-through from a watch cache: the child's SubjectAccessReview for the caller",
        {
            "apiGroups": ["authorization.k8s.io"],
            "resources": ["subjectaccessreviews"],
            "verbs": ["create"],
        },
    ),
    (
        "probes and schema checks: version, readiness, discovery and OpenAPI v3",
        {
            "nonResourceURLs": [
                "/version",
                "/readyz",
                "/api",
                "/api/*",
                "/apis",
                "/apis/*",
                "/openapi/v3",
                "/openapi/v3/*",
            ],
            "verbs": ["get"],
        },
    ),
]


def objects() -> list[dict[str, Any]]:
    """Everything join applies in the child, in order."""
    meta = {"labels": {"app.kubernetes.io/part-of": "kubectl-mc"}}
    return [
        {
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {"name": NAMESPACE, **meta},
        },
        {
            "apiVersion": "v1",
            "kind": "ServiceAccount",
            "metadata": {"name": ACCOUNT, "namespace": NAMESPACE, **meta},
        },
        {
            # What the account holds: every ClusterRole with the label. Kinds synced from the
            # hub's own CRDs need one of those, e.g. kubectl create clusterrole … and label it.
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": {"name": ROLE, **meta},
            "aggregationRule": {
                "clusterRoleSelectors": [{"matchLabels": {AGGREGATE_LABEL: "true"}}]
            },
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": {
                "name": f"{ROLE}-builtin",
                "labels": {**meta["labels"], AGGREGATE_LABEL: "true"},
            },
            "rules": [rule for _, rule in RULES],
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": ROLE, **meta},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": ROLE,
            },
            "subjects": [{"kind": "ServiceAccount", "name": ACCOUNT, "namespace": NAMESPACE}],
        },
        {
            # Renewal: the account may ask for its own token, and for no one else's.
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "Role",
            "metadata": {"name": f"{ROLE}-token", "namespace": NAMESPACE, **meta},
            "rules": [
                {
                    "apiGroups": [""],
                    "resources": ["serviceaccounts/token"],
                    "resourceNames": [ACCOUNT],
                    "verbs": ["create"],
                }
            ],
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": {"name": f"{ROLE}-token", "namespace": NAMESPACE, **meta},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "Role",
                "name": f"{ROLE}-token",
            },
            "subjects": [{"kind": "ServiceAccount", "name": ACCOUNT, "namespace": NAMESPACE}],
        },
    ]


def removal() -> list[dict[str, Any]]:
    """What `unjoin` deletes in the child, in order: all but the Namespace (it may hold other
    things), bindings first, and the aggregating ClusterRole before the one it aggregates —
    deleted the other way round, kube-controller-manager's aggregation, woken by the first,
    applies the aggregating role's rules again and so makes it anew."""
    made = objects()
    order = ["RoleBinding", "Role", "ClusterRoleBinding", "ClusterRole", "ServiceAccount"]
    kept = [obj for obj in made if obj["kind"] in order]
    return sorted(kept, key=lambda obj: (order.index(obj["kind"]), "aggregationRule" not in obj))


def path(obj: dict[str, Any]) -> str:
    """Where an object of `objects()` lives."""
    kind, meta = obj["kind"], obj["metadata"]
    plural = {
        "Namespace": "/api/v1/namespaces",
        "ServiceAccount": f"/api/v1/namespaces/{NAMESPACE}/serviceaccounts",
        "ClusterRole": "/apis/rbac.authorization.k8s.io/v1/clusterroles",
        "ClusterRoleBinding": "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
        "Role": f"/apis/rbac.authorization.k8s.io/v1/namespaces/{NAMESPACE}/roles",
        "RoleBinding": f"/apis/rbac.authorization.k8s.io/v1/namespaces/{NAMESPACE}/rolebindings",
    }[kind]
    return f"{plural}/{meta['name']}"


TOKEN_PATH = f"/api/v1/namespaces/{NAMESPACE}/serviceaccounts/{ACCOUNT}/token"


def token_request(seconds: int = TOKEN_SECONDS) -> dict[str, Any]:
    return {
        "apiVersion": "authentication.k8s.io/v1",
        "kind": "TokenRequest",
        "spec": {"expirationSeconds": seconds},
    }


def short_lived(user: dict[str, Any]) -> bool:
    """Would a credential copied from this kubeconfig user die: an exec plugin (client-go's
    precedence: only when no token or certificate is written), a token file (projected
    tokens rotate), or a token that carries an expiry?"""
    if user.get("token"):
        return jwt_expiry(str(user["token"])) is not None
    if user.get("tokenFile"):
        return True
    if user.get("client-certificate") or user.get("client-certificate-data"):
        return False
    return bool(user.get("exec"))


def jwt_expiry(token: str) -> int | None:
    """The `exp` claim of a JWT (seconds since the epoch); None for anything else."""
    parts = token.split(".")
    if len(parts) != 3:
        return None
    try:
        claims = json.loads(base64.urlsafe_b64decode(parts[1] + "=" * (-len(parts[1]) % 4)))
    except ValueError:
        return None
    exp = claims.get("exp") if isinstance(claims, dict) else None
    return int(exp) if isinstance(exp, int | float) else None
