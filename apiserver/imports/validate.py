"""A small validator for the structural schemas `schema.common` handles: does a server with
this schema accept this object unchanged (strict field validation: an unknown field is an
error, not pruned)?

It checks types, `nullable`, `enum`, bounds, `pattern`, `uniqueItems`, list-type set/map
uniqueness, properties, additionalProperties, required and the x-kubernetes-* escapes. It does
not run CEL rules, formats or the combinators: negotiation only keeps those where all
locations agree exactly, so they accept or refuse alike. Used by the negotiation's property
tests, and by what later judges hub objects against a location (Narrow).
"""

from __future__ import annotations

import math
import re
from typing import Any

from apiserver.imports.schema import TOP_LEVEL, Schema, canonical


def errors(schema: Schema, value: Any, path: str = "", root: bool = True) -> list[str]:
    """Every reason the value is refused, as `path: reason` (empty: accepted)."""
    found: list[str] = []
    _check(schema, value, path, root, found)
    return found


def _check(schema: Schema, value: Any, path: str, root: bool, found: list[str]) -> None:
    where = path or "."
    if value is None:
        if not schema.get("nullable"):
            found.append(f"{where}: null")
        return
    if schema.get("x-kubernetes-int-or-string"):
        if not (_is_int(value) or isinstance(value, str)):
            found.append(f"{where}: not int-or-string")
            return
    elif not _type_ok(schema.get("type"), value):
        found.append(f"{where}: not {schema.get('type')}")
        return
    if "enum" in schema and canonical(value) not in {canonical(v) for v in schema["enum"]}:
        found.append(f"{where}: not in enum")
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        _numbers(schema, value, where, found)
    if isinstance(value, str):
        _counts(schema, len(value), "Length", where, found)
        if "pattern" in schema and re.search(schema["pattern"], value) is None:
            found.append(f"{where}: does not match pattern")
    if isinstance(value, list):
        _array(schema, value, path, found)
    if isinstance(value, dict):
        _object(schema, value, path, root, found)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _type_ok(kind: Any, value: Any) -> bool:
    if kind is None:
        return True
    if kind == "object":
        return isinstance(value, dict)
    if kind == "array":
        return isinstance(value, list)
    if kind == "string":
        return isinstance(value, str)
    if kind == "integer":
        return _is_int(value)
    if kind == "number":
        return (_is_int(value) or isinstance(value, float)) and math.isfinite(value)
    if kind == "boolean":
        return isinstance(value, bool)
    return False


def _numbers(schema: Schema, value: float, where: str, found: list[str]) -> None:
    if "minimum" in schema:
        low = schema["minimum"]
        if value < low or (schema.get("exclusiveMinimum") and value == low):
            found.append(f"{where}: below minimum")
    if "maximum" in schema:
        high = schema["maximum"]
        if value > high or (schema.get("exclusiveMaximum") and value == high):
            found.append(f"{where}: above maximum")


def _counts(schema: Schema, count: int, what: str, where: str, found: list[str]) -> None:
    if count < schema.get(f"min{what}", 0):
        found.append(f"{where}: fewer than min{what}")
    if f"max{what}" in schema and count > schema[f"max{what}"]:
        found.append(f"{where}: more than max{what}")


def _array(schema: Schema, value: list[Any], path: str, found: list[str]) -> None:
    where = path or "."
    _counts(schema, len(value), "Items", where, found)
    list_type = schema.get("x-kubernetes-list-type")
    unique = schema.get("uniqueItems") or list_type == "set"
    if unique and len({canonical(v) for v in value}) != len(value):
        found.append(f"{where}: duplicate items")
    if list_type == "map":
        keys = schema.get("x-kubernetes-list-map-keys") or []
        seen = {canonical([v.get(k) for k in keys]) for v in value if isinstance(v, dict)}
        if len(seen) != len(value):
            found.append(f"{where}: duplicate map keys")
    items = schema.get("items")
    if isinstance(items, dict):
        for item in value:
            _check(items, item, f"{path}[]", False, found)


def _object(schema: Schema, value: dict[str, Any], path: str, root: bool, found: list[str]) -> None:
    where = path or "."
    _counts(schema, len(value), "Properties", where, found)
    properties = schema.get("properties") or {}
    extra = schema.get("additionalProperties")
    implicit = root or schema.get("x-kubernetes-embedded-resource")
    for key, item in value.items():
        below = f"{path}.{key}" if path else key
        if key in properties:
            _check(properties[key], item, below, False, found)
        elif isinstance(extra, dict):
            _check(extra, item, below, False, found)
        elif not (
            extra is True
            or schema.get("x-kubernetes-preserve-unknown-fields")
            or (implicit and key in TOP_LEVEL)
        ):
            found.append(f"{below}: unknown field")
    for key in schema.get("required") or []:
        if key not in value:
            found.append(f"{path}.{key}: required" if path else f"{key}: required")
