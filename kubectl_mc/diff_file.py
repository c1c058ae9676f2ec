"""`kubectl mc diff -f FILE`: the objects of a file, read as kubectl reads them (YAML or JSON,
several documents, `List`s flattened), each previewed by kmc-apiserver's read-only `previews`
endpoint (see `diff.py` for the printing)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import yaml


class FileError(Exception):
    """The file cannot be read, or holds something that is not an object; kubectl's words."""


def read_objects(path: str) -> list[dict[str, Any]]:
    """The objects of the file (`-` for standard input), in order."""
    try:
        text = sys.stdin.read() if path == "-" else Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise FileError(f'error: the path "{path}" does not exist') from None
    except (OSError, UnicodeDecodeError) as err:
        raise FileError(f"error: reading {path}: {err}") from None
    try:
        documents = [d for d in yaml.safe_load_all(text) if d is not None]
    except yaml.YAMLError as err:
        raise FileError(f"error: error parsing {path}: {_one_line(err)}") from None
    objects: list[dict[str, Any]] = []
    for document in documents:
        items = document.get("items") if isinstance(document, dict) else None
        if isinstance(document, dict) and str(document.get("kind", "")).endswith("List"):
            objects.extend(items if isinstance(items, list) else [])
        else:
            objects.append(document)
    for obj in objects:
        if not isinstance(obj, dict) or not obj.get("apiVersion") or not obj.get("kind"):
            raise FileError(
                f"error: error validating {path}: an object has no apiVersion or kind: "
                f"{_short(obj)}"
            )
    if not objects:
        raise FileError(f"error: no objects passed to diff in {path}")
    return objects


def _one_line(err: yaml.YAMLError) -> str:
    return " ".join(str(err).split())


def _short(obj: Any) -> str:
    text = repr(obj)
    return text if len(text) <= 80 else text[:77] + "..."


class Scopes:
    """Whether a kind is namespaced, from the hub's discovery (one request per apiVersion of
    the file), as kubectl maps a file's objects to resources."""

    def __init__(self, client: Any, path: str) -> None:
        self.client, self.path = client, path
        self._known: dict[str, dict[str, bool]] = {}

    def namespaced(self, obj: dict[str, Any]) -> bool:
        from kubectl_mc.kube import KubeError

        version = str(obj["apiVersion"])
        if version not in self._known:
            path = f"/api/{version}" if "/" not in version else f"/apis/{version}"
            try:
                found = self.client.get(path).get("resources") or []
            except KubeError as err:
                if err.code != 404:
                    raise
                found = []
            self._known[version] = {
                r["kind"]: bool(r.get("namespaced")) for r in found if "/" not in r["name"]
            }
        scope = self._known[version].get(str(obj["kind"]))
        if scope is None:
            name = (obj.get("metadata") or {}).get("name", "")
            namespace = (obj.get("metadata") or {}).get("namespace", "")
            raise FileError(
                f'error: resource mapping not found for name: "{name}" namespace: '
                f'"{namespace}" from "{self.path}": no matches for kind "{obj["kind"]}" in '
                f'version "{version}"'
            )
        return scope
