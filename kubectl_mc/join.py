"""`kubectl mc join` / `unjoin`: make a cluster a Location of the hub, or stop it being one.

Join checks the child answers with the credentials given before it writes anything, then
stores a self-contained kubeconfig in a Secret in kmc-system and creates the Location that
points at it. Both writes are server-side applies, so joining again updates labels and
credentials in place. The credentials themselves are never printed.
"""

from __future__ import annotations

import re

import yaml

from kubectl_mc import kube
from kubectl_mc.kube import Client, KubeError
from kubectl_mc.kubeconfig import KubeconfigError, flatten, load, select

SYSTEM_NAMESPACE = "kmc-system"
LOCATIONS = "/apis/kmc.dev/v1alpha1/locations"
NAME_RE = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")


class JoinError(Exception):
    """What is wrong and what to do, in one line."""


def secret_name(location: str) -> str:
    return f"location-{location}"


def join(
    hub: Client, name: str, kubeconfig: str, context: str | None, labels: dict[str, str]
) -> str:
    """Join a cluster; returns kubectl's verb for what happened ("created"/"configured")."""
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
    child = kube.connect(select(standalone), timeout=10)
    try:
        child.get("/version")
        child.request("GET", "/readyz")
    except KubeError as err:
        raise JoinError(
            f"cannot join {name}: the cluster at {selected.cluster.get('server')} "
            f"(context {selected.context}) did not answer: {err}"
        ) from err
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


def unjoin(hub: Client, name: str) -> None:
    hub.delete(f"{LOCATIONS}/{name}")
    try:
        hub.delete(f"/api/v1/namespaces/{SYSTEM_NAMESPACE}/secrets/{secret_name(name)}")
    except KubeError as err:
        if err.code != 404:
            raise


def _exists(hub: Client, path: str) -> bool:
    try:
        hub.get(path)
    except KubeError as err:
        if err.code == 404:
            return False
        raise
    return True
