"""`kubectl mc version`: the plugin's version, the hub's, and whether kmc-apiserver answers.

kmc-apiserver has no `/version` of its own that the hub passes on (the aggregator routes
only its API groups), so the honest thing to say about it is whether the hub serves those
groups now: a discovery GET of each, through the hub, as any user may make.
"""

from __future__ import annotations

import platform
import sys
from typing import TYPE_CHECKING, Any

from kubectl_mc import __version__

if TYPE_CHECKING:
    from kubectl_mc.kube import Client

GROUPS = ("mc.kmc.dev/v1alpha1", "remote.kmc.dev/v1alpha1")


def client_version() -> dict[str, str]:
    machine = {"x86_64": "amd64", "aarch64": "arm64"}.get(platform.machine(), platform.machine())
    return {
        "gitVersion": f"v{__version__}",
        "platform": f"{sys.platform}/{machine}",
        "pythonVersion": platform.python_version(),
    }


def server_versions(client: Client) -> dict[str, Any]:
    """The hub's /version, and each of kmc-apiserver's groups: "served" or the error."""
    from kubectl_mc.kube import KubeError

    hub = client.get("/version")
    groups: dict[str, str] = {}
    for group_version in GROUPS:
        try:
            client.get(f"/apis/{group_version}")
            groups[group_version] = "served"
        except KubeError as err:
            if err.code == 404:
                groups[group_version] = "not installed on this hub"
            else:
                groups[group_version] = str(err)
    return {"serverVersion": hub, "kmcApiserver": groups}


def text(versions: dict[str, Any]) -> str:
    lines = [f"Client Version: {versions['clientVersion']['gitVersion']}"]
    if "serverVersion" in versions:
        lines.append(f"Server Version: {versions['serverVersion'].get('gitVersion', '')}")
    for group_version, state in (versions.get("kmcApiserver") or {}).items():
        lines.append(f"kmc-apiserver: {group_version} {state}")
    return "\n".join(lines)


def healthy(versions: dict[str, Any]) -> bool:
    return all(state == "served" for state in (versions.get("kmcApiserver") or {}).values())
