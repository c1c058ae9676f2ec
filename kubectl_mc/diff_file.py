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
