"""RFC 6902 JSON Patch over RFC 6901 JSON Pointers, on plain JSON values.

Our own rather than the `jsonpatch` library: it is about a hundred lines, it is typed (the
library has no type information, and mypy is strict here), its checks double as the admission
webhook's syntax checks, and its errors say which operation failed and why in the words the
override's condition shows (`replace /spec/x: no such path`). `apply_patch` never changes its
input: it works on a deep copy and returns it.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Sequence
from typing import Any

OPS = ("add", "remove", "replace", "move", "copy", "test")
_INDEX = re.compile(r"0|[1-9][0-9]*")


class PatchError(ValueError):
    """A patch that is malformed, or that cannot apply to this document."""


def parse_pointer(pointer: str) -> list[str]:
    """The reference tokens of a JSON Pointer: "" is the whole document, else "/a/b~1c"."""
    if pointer == "":
        return []
    if not pointer.startswith("/"):
        raise PatchError(f'path {json.dumps(pointer)} must be "" or start with "/"')
    tokens = pointer[1:].split("/")
    for token in tokens:
        if re.search(r"~(?![01])", token):
            raise PatchError(
                f'path {json.dumps(pointer)}: "~" must be written "~0" and "/" inside a key "~1"'
            )
    return [t.replace("~1", "/").replace("~0", "~") for t in tokens]


def check_operation(operation: Any) -> None:
    """Raise `PatchError` unless `operation` is a well-formed RFC 6902 operation."""
    if not isinstance(operation, dict):
        raise PatchError(f"an operation must be an object, got {json.dumps(operation)}")
    op = operation.get("op")
    if op not in OPS:
        raise PatchError(f"op must be one of {', '.join(OPS)}, got {json.dumps(op)}")
    if not isinstance(operation.get("path"), str):
        raise PatchError(f"{op}: path is required (a JSON Pointer such as /spec/template)")
    parse_pointer(operation["path"])
    if op in ("add", "replace", "test") and "value" not in operation:
        raise PatchError(f"{op} {operation['path']}: value is required")
    if op in ("move", "copy"):
        if not isinstance(operation.get("from"), str):
            raise PatchError(f"{op} {operation['path']}: from is required (a JSON Pointer)")
        parse_pointer(operation["from"])
    allowed = {"op", "path", "value", "from"}
    extra = sorted(set(operation) - allowed)
    if extra:
        raise PatchError(f"{op} {operation['path']}: unknown field {', '.join(extra)}")


def apply_patch(document: Any, operations: Sequence[Any]) -> Any:
    """`document` with every operation applied in order; a new value, `document` untouched."""
    result = copy.deepcopy(document)
    for operation in operations:
        check_operation(operation)
        result = _apply_one(result, operation)
    return result


def _apply_one(document: Any, operation: dict[str, Any]) -> Any:
    op, path = operation["op"], operation["path"]
    tokens = parse_pointer(path)
    where = f"{op} {path or '(the whole document)'}"
    try:
        if op == "test":
            if _get(document, tokens) != operation["value"]:
                raise PatchError("the value there is not the one tested for")
            return document
        if op == "remove":
            return _remove(document, tokens)
        if op == "replace":
            _get(document, tokens)  # must exist
            return _add(_remove(document, tokens), tokens, copy.deepcopy(operation["value"]))
        if op == "add":
            return _add(document, tokens, copy.deepcopy(operation["value"]))
        source = parse_pointer(operation["from"])
        value = copy.deepcopy(_get(document, source))
        if op == "move":
            if tokens[: len(source)] == source and tokens != source:
                raise PatchError("cannot move a value into itself")
            document = _remove(document, source)
        return _add(document, tokens, value)
    except PatchError as err:
        raise PatchError(f"{where}: {err}") from None


def _get(document: Any, tokens: list[str]) -> Any:
    for token in tokens:
        document = _child(document, token)
    return document


def _child(value: Any, token: str) -> Any:
    if isinstance(value, dict):
        if token not in value:
            raise PatchError(f"no such path (no key {json.dumps(token)})")
        return value[token]
    if isinstance(value, list):
        index = _index(value, token, adding=False)
        return value[index]
    raise PatchError(f"no such path ({json.dumps(token)} is below a value that is not a container)")


def _index(array: list[Any], token: str, adding: bool) -> int:
    if adding and token == "-":
        return len(array)
    if not _INDEX.fullmatch(token):
        raise PatchError(f"{json.dumps(token)} is not an array index")
    index = int(token)
    if index > len(array) or (index == len(array) and not adding):
        raise PatchError(f"index {index} is out of range (the array has {len(array)} items)")
    return index


def _add(document: Any, tokens: list[str], value: Any) -> Any:
    if not tokens:
        return value
    parent, last = _get(document, tokens[:-1]), tokens[-1]
    if isinstance(parent, dict):
        parent[last] = value
    elif isinstance(parent, list):
        parent.insert(_index(parent, last, adding=True), value)
    else:
        raise PatchError("no such path (its parent is not an object or an array)")
    return document


def _remove(document: Any, tokens: list[str]) -> Any:
    if not tokens:
        return None
    parent, last = _get(document, tokens[:-1]), tokens[-1]
    if isinstance(parent, dict):
        if last not in parent:
            raise PatchError(f"no such path (no key {json.dumps(last)})")
        del parent[last]
    elif isinstance(parent, list):
        del parent[_index(parent, last, adding=False)]
    else:
        raise PatchError("no such path (its parent is not an object or an array)")
    return document
