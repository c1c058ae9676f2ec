"""kubeconfig files: the user-facing one (contexts per cluster) and one per component."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import yaml


def entry(
    name: str, server: str, ca: Path, cert: Path, key: Path, role: str = "admin"
) -> dict[str, Any]:
    """One cluster+user+context triple, credentials embedded so the file travels alone."""
    return {
        "cluster": {
            "name": name,
            "cluster": {"server": server, "certificate-authority-data": _b64(ca)},
        },
        "user": {
            "name": f"{name}-{role}",
            "user": {"client-certificate-data": _b64(cert), "client-key-data": _b64(key)},
        },
        "context": {"name": name, "context": {"cluster": name, "user": f"{name}-{role}"}},
    }


def write(path: Path, entries: list[dict[str, Any]], current: str) -> None:
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "preferences": {},
        "clusters": [e["cluster"] for e in entries],
        "users": [e["user"] for e in entries],
        "contexts": [e["context"] for e in entries],
        "current-context": current,
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(yaml.safe_dump(config, sort_keys=False))
    tmp.chmod(0o600)
    tmp.replace(path)


def _b64(path: Path) -> str:
    return base64.b64encode(path.read_bytes()).decode()
