"""`kubectl mc join` / `unjoin`: make a cluster a Location of the hub, or stop it being one.

Join checks the child answers with the credentials given before it writes anything, then
stores a self-contained kubeconfig in a Secret in kmc-system and creates the Location that
points at it. Both writes are server-side applies, so joining again updates labels and
credentials in place. The credentials themselves are never printed.

Unjoin drains first: it cordons the location, so everything placed there moves away (make
before break, by the sync loop), and waits until the location holds none of our objects.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Callable
from typing import Any

import yaml

from kubectl_mc import drain, kube, location_account
from kubectl_mc.kube import Client, KubeError
from kubectl_mc.kubeconfig import KubeconfigError, flatten, load, select

SYSTEM_NAMESPACE = "kmc-system"
LOCATIONS = drain.LOCATIONS
NAME_RE = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")


class JoinError(Exception):
    """What is wrong and what to do, in one line."""


def secret_name(location: str) -> str:
    return f"location-{location}"


def join(
    hub: Client,
    name: str,
    kubeconfig: str,
    context: str | None,
    labels: dict[str, str],
    credentials: str = "auto",
) -> str:
    """Join a cluster; returns kubectl's verb for what happened ("created"/"configured").

    `credentials`: "auto" stores the given credential unless it is short-lived (an exec
    plugin, a token file, a token that expires), in which case a ServiceAccount is made in
    the child for kmc-apiserver (`location_account.py`) and its token stored; "as-is"
    always stores the given one."""
    if credentials not in ("auto", "as-is"):
        raise JoinError(f'--credentials must be "auto" or "as-is", not "{credentials}"')
    if not NAME_RE.match(name):
        raise JoinError(
            f'invalid location name "{name}": a lowercase RFC 1123 label '
            "(letters, digits and '-', at most 63 characters)"
        )
    try:
        config, base = load(kubeconfig)
        selected = select(config, context, base=base)
        standalone = flatten(selected)
    except KubeconfigError as err:
        raise JoinError(f"--cluster-kubeconfig {kubeconfig}: {err}") from err
    server = str(selected.cluster.get("server", ""))
    for other, other_server in _joined_servers(hub):
        if other != name and _same_server(other_server, server):
            raise JoinError(
                f"the cluster at {server} is already joined as {other}: one cluster can be one "
                "location only (two would fight over the same objects); "
                f"`kubectl mc unjoin {other}` first to join it under another name"
            )
    child = kube.connect(select(standalone), timeout=10)
    try:
        child.get("/version")
        child.request("GET", "/readyz")
    except KubeError as err:
        raise JoinError(
            f"cannot join {name}: the cluster at {selected.cluster.get('server')} "
            f"(context {selected.context}) did not answer: {err}"
        ) from err
    annotations = {}
    if credentials == "auto" and location_account.short_lived(selected.user):
        standalone = _account_kubeconfig(child, standalone, name)
        ns, account = location_account.NAMESPACE, location_account.ACCOUNT
        annotations[location_account.SERVICE_ACCOUNT_ANNOTATION] = f"{ns}/{account}"
    existed = _exists(hub, f"{LOCATIONS}/{name}")
    hub.apply(
        "/api/v1/namespaces/" + SYSTEM_NAMESPACE,
        {
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {"name": SYSTEM_NAMESPACE, "labels": {"kmc.dev/exclude": "true"}},
        },
    )
    hub.apply(
        f"/api/v1/namespaces/{SYSTEM_NAMESPACE}/secrets/{secret_name(name)}",
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {
                "name": secret_name(name),
                "namespace": SYSTEM_NAMESPACE,
                "labels": {"kmc.dev/location": name},
                "annotations": annotations,
            },
            "type": "Opaque",
            "stringData": {"kubeconfig": yaml.safe_dump(standalone)},
        },
    )
    hub.apply(
        f"{LOCATIONS}/{name}",
        {
            "apiVersion": "kmc.dev/v1alpha1",
            "kind": "Location",
            "metadata": {"name": name, "labels": labels},
            "spec": {"secretRef": {"name": secret_name(name), "namespace": SYSTEM_NAMESPACE}},
        },
    )
    return "configured" if existed else "joined"


def _account_kubeconfig(child: Client, standalone: dict[str, Any], name: str) -> dict[str, Any]:
    """Make kmc-apiserver's ServiceAccount in the child (with the given credential, used only
    here), and a kubeconfig with a token for it."""
    try:
        for obj in location_account.objects():
            child.apply(location_account.path(obj), obj)
        answer = child.request(
            "POST", location_account.TOKEN_PATH, body=location_account.token_request()
        )
    except KubeError as err:
        account = f"{location_account.NAMESPACE}/{location_account.ACCOUNT}"
        raise JoinError(
            f"cannot join {name}: making the ServiceAccount {account} for kmc-apiserver there "
            f"failed: {err} (--credentials as-is stores the given credential instead)"
        ) from err
    token = str((answer.get("status") or {}).get("token") or "")
    context = standalone["current-context"]
    account_config = {
        **standalone,
        "users": [{"name": context, "user": {"token": token}}],
    }
    try:
        kube.connect(select(account_config), timeout=10).get("/version")
    except KubeError as err:
        raise JoinError(f"cannot join {name}: the new ServiceAccount's token: {err}") from err
    return account_config


def unjoin(
    hub: Client,
    name: str,
    force: bool = False,
    timeout: float = 300.0,
    progress: Callable[[str], None] = print,
    kubeconfig: str | None = None,
    context: str | None = None,
) -> None:
    """Drain (cordon, wait until nothing of ours is left there), then forget the location.

    With `force` it is forgotten at once: what runs there stays, unmanaged. When join made a
    ServiceAccount in the cluster, `kubeconfig` (the cluster's, as given to join) removes it
    and its RBAC there; without it, what is left and how to remove it is said."""
    location = hub.get(f"{LOCATIONS}/{name}")
    secret_path = f"/api/v1/namespaces/{SYSTEM_NAMESPACE}/secrets/{secret_name(name)}"
    try:
        secret = hub.get(secret_path)
    except KubeError as err:
        if err.code != 404:
            raise
        secret = {}
    made = ((secret.get("metadata") or {}).get("annotations") or {}).get(
        location_account.SERVICE_ACCOUNT_ANNOTATION
    )
    child = _child(name, kubeconfig, context) if kubeconfig and made else None
    if not force:
        _drain(hub, name, location, timeout, progress)
    if ((location.get("spec") or {}).get("mode") or "Push") == "Pull":
        from kubectl_mc import join_pull

        # Its agent's rights go first: its certificate cannot be revoked, they are what it opens.
        join_pull.unjoin(hub, name)
    hub.delete(f"{LOCATIONS}/{name}")
    try:
        hub.delete(secret_path)
    except KubeError as err:
        if err.code != 404:
            raise
    if not made:
        return
    left = location_account.removal()
    if child is None:
        names = ", ".join(f"{o['kind'].lower()}/{o['metadata']['name']}" for o in left)
        progress(
            f"{name} still has what join made for kmc-apiserver there ({names}, in "
            f"{location_account.NAMESPACE} where namespaced): pass --cluster-kubeconfig to "
            "remove it, or delete it in that cluster"
        )
        return
    for obj in left:
        try:
            child.delete(location_account.path(obj))
        except KubeError as err:
            if err.code != 404:
                raise JoinError(
                    f"{name} is unjoined, but removing {obj['kind']} {obj['metadata']['name']} "
                    f"there failed: {err}"
                ) from err
    progress(
        f"removed ServiceAccount {made} and its RBAC from {name} "
        f"(namespace {location_account.NAMESPACE} is left: it may hold other things)"
    )


def _child(name: str, kubeconfig: str, context: str | None) -> Client:
    """A client for the cluster, checked before unjoin changes anything."""
    try:
        config, base = load(kubeconfig)
        child = kube.connect(select(flatten(select(config, context, base=base))), timeout=10)
        child.get("/version")
    except KubeconfigError as err:
        raise JoinError(f"--cluster-kubeconfig {kubeconfig}: {err}") from err
    except KubeError as err:
        raise JoinError(
            f"cannot remove what join made in {name}: the cluster did not answer: {err}; "
            "nothing was changed"
        ) from err
    return child


def _drain(
    hub: Client,
    name: str,
    location: dict[str, Any],
    timeout: float,
    progress: Callable[[str], None],
) -> None:
    ready = _ready(location)
    if ready.get("status") != "True":
        raise JoinError(
            f"cannot drain {name}: it is not Ready ({ready.get('reason', 'no status yet')}: "
            f"{ready.get('message', '')}); `kubectl mc unjoin {name} --force` forgets it now "
            "(what runs there stays, unmanaged)"
        )
    generation, _ = drain.set_unschedulable(hub, name, True)
    progress(f"location.kmc.dev/{name} cordoned")
    try:
        drain.wait_drained(hub, name, generation, timeout, progress)
    except drain.StillThere as err:
        there = err.listed
        raise JoinError(
            f"timed out after {timeout:g}s draining {name} ({err}); it stays cordoned. "
            f"Run `kubectl mc unjoin {name}` again to keep waiting, add --force to unjoin now "
            f"(what runs there stays, unmanaged), or `kubectl mc uncordon {name}` to keep it"
            f"{'. Still there:' if there else ''}{there}"
        ) from None


def _ready(location: dict[str, Any]) -> dict[str, Any]:
    conditions = (location.get("status") or {}).get("conditions") or []
    return next((c for c in conditions if c.get("type") == "Ready"), {})


def _joined_servers(hub: Client) -> list[tuple[str, str]]:
    """(location, server) of every joined cluster, from the Secrets join wrote."""
    secrets = hub.get(
        f"/api/v1/namespaces/{SYSTEM_NAMESPACE}/secrets", labelSelector="kmc.dev/location"
    )
    found = []
    for secret in secrets.get("items", []):
        location = secret["metadata"].get("labels", {}).get("kmc.dev/location", "")
        try:
            config = yaml.safe_load(base64.b64decode(secret.get("data", {}).get("kubeconfig", "")))
            found.append((location, str(config["clusters"][0]["cluster"]["server"])))
        except (ValueError, TypeError, KeyError, IndexError, yaml.YAMLError):
            continue  # not one of ours after all
    return found


def _same_server(a: str, b: str) -> bool:
    def norm(url: str) -> str:
        return url.strip().rstrip("/").lower().replace("://localhost:", "://127.0.0.1:")

    return norm(a) == norm(b)


def _exists(hub: Client, path: str) -> bool:
    try:
        hub.get(path)
    except KubeError as err:
        if err.code == 404:
            return False
        raise
    return True
