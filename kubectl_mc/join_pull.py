"""`kubectl mc join NAME --mode pull` and the pull half of `unjoin` (docs/pull.md).

A pull location's agent dials out to the hub, so the hub keeps no credential for it. Join
makes, on the hub only:

- the Location (`spec.mode: Pull`, no `secretRef`), carrying the id of the token below;
- a bootstrap token (a `bootstrap.kubernetes.io/token` Secret in `kube-system`, one hour,
  authentication only, extra group `system:bootstrappers:kmc:<name>`), which the agent uses
  once to ask for a client certificate (a CSR that kmc-apiserver approves for this join
  only, and marks used);
- the agent's rights, named for the location and bound to this join's group
  `kmc:join:<token id>` (which its certificate carries): it may list and watch its feed
  (`workfeeds`, its own name only), update its report and CRDs (`locations/report`,
  `locations/crds`), get and update its Lease `kmc-system/kmc-agent-<name>` (made here, so
  no `create` on leases),
  and create and read CertificateSigningRequests (to renew); the token's group may create
  and read them too. Joining again binds them to the new join's group: a certificate of an
  older join opens nothing from then on.

A certificate cannot be revoked; its rights can. `revoke` deletes the bindings and marks the
join revoked on the Location (kmc-apiserver then approves no renewal of it, and the Location
is not Ready); the Location, its Lease and what the location runs stay, until a new join.
Unjoin deletes the rights, the token, the Lease and the Location. The names are kmc-apiserver's too
(`apiserver/locations/joins.py`; this package cannot import it, a unit test checks they
agree).
"""

from __future__ import annotations

import base64
import datetime
import secrets
import string

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from kubectl_mc.kube import Client

Obj = dict[str, "Any"]

SYSTEM_NAMESPACE = "kmc-system"
TOKEN_NAMESPACE = "kube-system"
TOKEN_TTL = datetime.timedelta(hours=1)
USER_PREFIX = "kmc:location:"
BOOTSTRAP_GROUP_PREFIX = "system:bootstrappers:kmc:"
JOIN_GROUP_PREFIX = "kmc:join:"
TOKEN_ANNOTATION = "kmc.dev/join-token-id"
REVOKED_ANNOTATION = "kmc.dev/join-revoked"
LEASE_PREFIX = "kmc-agent-"
BOOTSTRAPPER_ROLE = "kmc:bootstrapper"
LOCATIONS = "/apis/kmc.dev/v1alpha1/locations"
RBAC = "rbac.authorization.k8s.io"
_RBAC_PATH = f"/apis/{RBAC}/v1"
_TOKEN_CHARS = string.ascii_lowercase + string.digits
_CSR_VERBS = ["create", "get", "list", "watch"]


class JoinError(Exception):
    """What is wrong and what to do, in one line."""


def user(name: str) -> str:
    return f"{USER_PREFIX}{name}"


def bootstrap_group(name: str) -> str:
    return f"{BOOTSTRAP_GROUP_PREFIX}{name}"


def join_group(token_id: str) -> str:
    return f"{JOIN_GROUP_PREFIX}{token_id}"


def new_token() -> tuple[str, str]:
    """A bootstrap token's id (6) and secret (16): `[a-z0-9]`, as kube-apiserver wants them."""
    return (
        "".join(secrets.choice(_TOKEN_CHARS) for _ in range(6)),
        "".join(secrets.choice(_TOKEN_CHARS) for _ in range(16)),
    )


def token_secret(name: str, token_id: str, token: str, expires: datetime.datetime) -> Obj:
    """The bootstrap token Secret: authentication only, for one hour, in the join's group."""
    data = {
        "token-id": token_id,
        "token-secret": token,
        "expiration": expires.astimezone(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "usage-bootstrap-authentication": "true",
        "auth-extra-groups": bootstrap_group(name),
        "description": f"kubectl mc join {name} --mode pull: its agent's first certificate",
    }
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {
            "name": f"bootstrap-token-{token_id}",
            "namespace": TOKEN_NAMESPACE,
            "labels": {"kmc.dev/location": name},
        },
        "type": "bootstrap.kubernetes.io/token",
        "data": {k: base64.b64encode(v.encode()).decode() for k, v in data.items()},
    }


def location(name: str, labels: dict[str, str], token_id: str) -> Obj:
    return {
        "apiVersion": "kmc.dev/v1alpha1",
        "kind": "Location",
        "metadata": {
            "name": name,
            "labels": labels,
            "annotations": {TOKEN_ANNOTATION: token_id},
        },
        "spec": {"mode": "Pull"},
    }


def rbac(name: str, token_id: str) -> list[Obj]:
    """The hub RBAC of a pull location's agent (bound to the group of join `token_id`, which
    its certificate carries), and of its join's token: every object here is named for the
    location (so unjoin removes exactly these) except the shared ClusterRole the token's
    group is bound to."""
    lease = f"{LEASE_PREFIX}{name}"
    role = f"kmc:location:{name}"
    agent = {"apiGroup": RBAC, "kind": "Group", "name": join_group(token_id)}
    return [
        {
            "apiVersion": f"{RBAC}/v1",
            "kind": "ClusterRole",
            "metadata": {"name": role, "labels": {"kmc.dev/location": name}},
            "rules": [
                {  # its work feed: a list or watch pinned to its name by a field selector
                    "apiGroups": ["mc.kmc.dev"],
                    "resources": ["workfeeds"],
                    "resourceNames": [name],
                    "verbs": ["list", "watch"],
                },
                {  # its status report, and the CRDs the hub asks it for (API import)
                    "apiGroups": ["mc.kmc.dev"],
                    "resources": ["locations/report", "locations/crds"],
                    "resourceNames": [name],
                    "verbs": ["update"],
                },
                {  # its reverse tunnel, for punch-through reads (a WebSocket, long-running)
                    "apiGroups": ["mc.kmc.dev"],
                    "resources": ["locations/proxy"],
                    "resourceNames": [name],
                    "verbs": ["get"],
                },
                {  # renewing its certificate (RBAC cannot name what a create makes)
                    "apiGroups": ["certificates.k8s.io"],
                    "resources": ["certificatesigningrequests"],
                    "verbs": _CSR_VERBS,
                },
            ],
        },
        {
            "apiVersion": f"{RBAC}/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": role, "labels": {"kmc.dev/location": name}},
            "roleRef": {"apiGroup": RBAC, "kind": "ClusterRole", "name": role},
            "subjects": [agent],
        },
        {
            "apiVersion": f"{RBAC}/v1",
            "kind": "Role",
            "metadata": {
                "name": role,
                "namespace": SYSTEM_NAMESPACE,
                "labels": {"kmc.dev/location": name},
            },
            "rules": [
                {  # its heartbeat: the Lease join makes, so it needs no create
                    "apiGroups": ["coordination.k8s.io"],
                    "resources": ["leases"],
                    "resourceNames": [lease],
                    "verbs": ["get", "update"],
                }
            ],
        },
        {
            "apiVersion": f"{RBAC}/v1",
            "kind": "RoleBinding",
            "metadata": {
                "name": role,
                "namespace": SYSTEM_NAMESPACE,
                "labels": {"kmc.dev/location": name},
            },
            "roleRef": {"apiGroup": RBAC, "kind": "Role", "name": role},
            "subjects": [agent],
        },
        {
            "apiVersion": f"{RBAC}/v1",
            "kind": "ClusterRole",
            "metadata": {"name": BOOTSTRAPPER_ROLE},
            "rules": [
                {
                    "apiGroups": ["certificates.k8s.io"],
                    "resources": ["certificatesigningrequests"],
                    "verbs": _CSR_VERBS,
                }
            ],
        },
        {
            "apiVersion": f"{RBAC}/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {
                "name": f"{BOOTSTRAPPER_ROLE}:{name}",
                "labels": {"kmc.dev/location": name},
            },
            "roleRef": {"apiGroup": RBAC, "kind": "ClusterRole", "name": BOOTSTRAPPER_ROLE},
            "subjects": [{"apiGroup": RBAC, "kind": "Group", "name": bootstrap_group(name)}],
        },
    ]


def lease(name: str) -> Obj:
    """The agent's Lease, empty: the location is not Ready until its agent renews it."""
    return {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {"name": f"{LEASE_PREFIX}{name}", "namespace": SYSTEM_NAMESPACE},
        "spec": {},
    }


def path(obj: Obj) -> str:
    """Where an object of `rbac`, `lease` or `token_secret` lives."""
    kind, meta = obj["kind"], obj["metadata"]
    plural = {
        "ClusterRole": f"{_RBAC_PATH}/clusterroles",
        "ClusterRoleBinding": f"{_RBAC_PATH}/clusterrolebindings",
        "Role": f"{_RBAC_PATH}/namespaces/{meta.get('namespace')}/roles",
        "RoleBinding": f"{_RBAC_PATH}/namespaces/{meta.get('namespace')}/rolebindings",
        "Lease": f"/apis/coordination.k8s.io/v1/namespaces/{meta.get('namespace')}/leases",
        "Secret": f"/api/v1/namespaces/{meta.get('namespace')}/secrets",
    }[kind]
    return f"{plural}/{meta['name']}"


def mode_of(found: Obj) -> str:
    return str((found.get("spec") or {}).get("mode") or "Push")


def join(
    hub: Client,
    name: str,
    labels: dict[str, str],
    now: datetime.datetime | None = None,
) -> tuple[str, str, datetime.datetime]:
    """Make a pull location and its join; (kubectl's verb, the token, when it expires).

    Joining an existing pull location again makes a new token (the old one is refused from
    then on: the Location names the latest); an existing push location is refused."""
    from kubectl_mc.kube import KubeError

    NS = SYSTEM_NAMESPACE

    try:
        existing = hub.get(f"{LOCATIONS}/{name}")
    except KubeError as err:
        if err.code != 404:
            raise
        existing = None
    if existing is not None and mode_of(existing) != "Pull":
        raise JoinError(
            f"location {name} already exists as a push location (its credential is in a hub "
            f"Secret): `kubectl mc unjoin {name}` first to join it in pull mode"
        )
    token_id, secret = new_token()
    expires = (now or datetime.datetime.now(datetime.UTC)) + TOKEN_TTL
    hub.apply(
        f"/api/v1/namespaces/{NS}",
        {
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {"name": NS, "labels": {"kmc.dev/exclude": "true"}},
        },
    )
    for obj in rbac(name, token_id):  # binding this join's group: an older one's loses them
        hub.apply(path(obj), obj)
    try:
        hub.get(path(lease(name)))
    except KubeError as err:
        if err.code != 404:
            raise
        hub.apply(path(lease(name)), lease(name))
    hub.apply(
        path(token_secret(name, token_id, secret, expires)),
        token_secret(name, token_id, secret, expires),
    )
    hub.apply(f"{LOCATIONS}/{name}", location(name, labels, token_id))
    return ("configured" if existing else "joined"), f"{token_id}.{secret}", expires


def unjoin(hub: Client, name: str) -> None:
    """Remove what join made for a pull location but the Location itself: its rights first
    (what revokes its certificate), then its tokens and its Lease."""
    gone = [path(obj) for obj in rbac(name, "") if obj["metadata"]["name"] != BOOTSTRAPPER_ROLE]
    _delete(hub, [*gone, *_tokens(hub, name), path(lease(name))])


def revoke(hub: Client, name: str) -> str:
    """Take a pull location's agent's rights away and keep everything else; the revoked
    join's token id. The join is marked revoked first (kmc-apiserver then approves no renewal
    of it and reports the Location not Ready), then its bindings and tokens go."""
    from kubectl_mc.kube import KubeError

    try:
        found = hub.get(f"{LOCATIONS}/{name}")
    except KubeError as err:
        if err.code == 404:
            raise JoinError(
                f'no location "{name}" on the hub (`kubectl mc get locations` lists them)'
            ) from err
        raise
    if mode_of(found) != "Pull":
        raise JoinError(
            f"location {name} is a push location: the hub dials it with the credential in its "
            f"Secret, and no agent of it has rights to revoke; `kubectl mc unjoin {name}` "
            "removes it"
        )
    annotations = (found.get("metadata") or {}).get("annotations") or {}
    token_id = str(annotations.get(TOKEN_ANNOTATION) or "")
    mark = {
        "apiVersion": found["apiVersion"],
        "kind": "Location",
        "metadata": {"name": name, "annotations": {REVOKED_ANNOTATION: token_id}},
    }
    hub.apply(f"{LOCATIONS}/{name}", mark, manager="kubectl-mc-revoke")
    binds = ("ClusterRoleBinding", "RoleBinding")
    bindings = [path(obj) for obj in rbac(name, token_id) if obj["kind"] in binds]
    _delete(hub, [*bindings, *_tokens(hub, name)])
    return token_id


def _tokens(hub: Client, name: str) -> list[str]:
    """Where the bootstrap tokens of `name`'s joins are."""
    tokens = hub.get(
        f"/api/v1/namespaces/{TOKEN_NAMESPACE}/secrets", labelSelector=f"kmc.dev/location={name}"
    )
    return [
        f"/api/v1/namespaces/{TOKEN_NAMESPACE}/secrets/{t['metadata']['name']}"
        for t in tokens.get("items", [])
        if t.get("type") == "bootstrap.kubernetes.io/token"
    ]


def _delete(hub: Client, paths: list[str]) -> None:
    from kubectl_mc.kube import KubeError

    for each in paths:
        try:
            hub.delete(each)
        except KubeError as err:
            if err.code != 404:
                raise


def instructions(name: str, token: str, expires: datetime.datetime, server: str, ca: str) -> str:
    """What to run in the location: a Secret for manifests/agent/, or the agent directly."""
    when = expires.astimezone(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    ca_note = "" if ca else "  (no CA in your kubeconfig: the agent trusts the system's CAs)\n"
    return (
        f"bootstrap token (one use, expires {when}): {token}\n"
        f"{ca_note}"
        "In the location's cluster, with the agent's manifests (manifests/agent/):\n"
        f"  kubectl create namespace {SYSTEM_NAMESPACE}\n"
        f"  kubectl -n {SYSTEM_NAMESPACE} create configmap kmc-agent "
        f"--from-literal=location={name} --from-literal=hub-url={server}\n"
        f"  kubectl -n {SYSTEM_NAMESPACE} create secret generic kmc-agent-join "
        f"--from-literal=token={token} --from-file=ca.crt=hub-ca.crt\n"
        "  kubectl apply -k manifests/agent/\n"
        "or outside a pod:\n"
        f"  kmc-agent --location {name} --hub-url {server} --hub-ca hub-ca.crt "
        f"--bootstrap-token {token} --kubeconfig LOCATION-KUBECONFIG\n"
        + (f"hub-ca.crt:\n{ca}" if ca else "")
    )
