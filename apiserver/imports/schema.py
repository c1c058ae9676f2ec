"""The common subset of several locations' structural schemas for one kind and version.

The hub's schema for an imported kind must only accept objects that every participating
location accepts unchanged: the hub stores what the user wrote and the sync loop sends it on
as is, so a field one location does not know would be pruned there (the 2021 "initContainers
disappear" case) and a value one location refuses would never get there. So, node by node:

- a field exists only if every location has it (or accepts any value there) with a compatible
  type (`integer` and `number` meet at `integer`); otherwise it is left out;
- keys an object does not name meet the same way: refused if any location refuses them, else
  the common subset of the typed `additionalProperties` (which, where present, decide over
  preserve-unknown-fields); a field left out where the hub keeps unknown fields takes its
  parent out, as the hub could not refuse that one key;
- `required` is the union (a required field that cannot be kept takes its parent out with it);
- `enum` is the intersection, numeric and length bounds the tightest, `nullable` only if all;
- `x-kubernetes-*` list/map semantics (list-type, list-map-keys, map-type,
  preserve-unknown-fields, int-or-string, embedded-resource), `format`, `pattern`,
  `multipleOf` and the combinators (`allOf`, `anyOf`, `oneOf`, `not`) must agree exactly, or
  the field is left out; CEL rules (`x-kubernetes-validations`) are kept only where they agree
  and nothing below them was dropped (a rule may name any field below it);
- descriptions and other annotations come from the first location (callers order them by
  name), `default` only where all agree.

Schemas are the raw `openAPIV3Schema` dicts of CRDs (structural schemas). `narrowed` says
where one schema would make another narrower: the verdict paths of an APIImport.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from typing import Any

Schema = dict[str, Any]

# Must be equal everywhere (absent and their defaults normalised away) or the node is left out.
SEMANTICS = (
    "x-kubernetes-list-type",
    "x-kubernetes-list-map-keys",
    "x-kubernetes-map-type",
    "x-kubernetes-preserve-unknown-fields",
    "x-kubernetes-int-or-string",
    "x-kubernetes-embedded-resource",
    "format",
    "pattern",
    "multipleOf",
    "allOf",
    "anyOf",
    "oneOf",
    "not",
)
_DEFAULTS: dict[str, Any] = {
    "x-kubernetes-list-type": "atomic",
    "x-kubernetes-map-type": "granular",
    "x-kubernetes-preserve-unknown-fields": False,
    "x-kubernetes-int-or-string": False,
    "x-kubernetes-embedded-resource": False,
}
# Taken from the first schema: they change nothing a server accepts.
ANNOTATIONS = ("description", "title", "example", "externalDocs")

# (lower bound key, exclusive flag) and (upper bound key, exclusive flag).
_NUMERIC_LOW = ("minimum", "exclusiveMinimum")
_NUMERIC_HIGH = ("maximum", "exclusiveMaximum")
_COUNT_LOW = ("minLength", "minItems", "minProperties")
_COUNT_HIGH = ("maxLength", "maxItems", "maxProperties")

# Fields every object has at the top level whatever the schema says.
TOP_LEVEL = ("apiVersion", "kind", "metadata")


class _Any:
    """A place that accepts any value (preserve-unknown-fields, additionalProperties: true)."""


ANY = _Any()
_Lookup = Schema | _Any | None


def canonical(value: Any) -> str:
    """Canonical JSON: the same data gives the same text (digests, equality of enums)."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def common(schemas: Sequence[Schema]) -> Schema | None:
    """The schema that accepts only what every one of `schemas` accepts (None: nothing)."""
    if not schemas:
        return None
    return _common(list(schemas), root=True)


def narrowed(hub: Schema, location: Schema, path: str = "") -> list[str]:
    """Paths where `location` accepts less than `hub` does: where the common subset of both
    differs from `hub`. Empty: every object the hub accepts, the location accepts."""
    alone, both = common([hub]), common([hub, location])
    if both is None or alone is None:
        return [path or "."]
    return sorted(set(_differences(alone, both, path)))


def _semantic(schema: Schema, key: str) -> str:
    value = schema.get(key, _DEFAULTS.get(key))
    if key in _DEFAULTS and value == _DEFAULTS[key]:
        value = None
    return canonical(value)


def _type(schemas: list[Schema]) -> str | bool | None:
    """The common type; None when all are untyped; False when they disagree."""
    types = {s.get("type") for s in schemas}
    if len(types) == 1:
        return types.pop()
    if types == {"integer", "number"}:
        return "integer"
    return False


def _common(schemas: list[Schema], root: bool = False) -> Schema | None:
    first = schemas[0]
    for key in SEMANTICS:
        if len({_semantic(s, key) for s in schemas}) > 1:
            return None
    kind = _type(schemas)
    if kind is False:
        return None
    out: Schema = {}
    if kind is not None:
        out["type"] = kind
    for key in ANNOTATIONS:
        if key in first:
            out[key] = first[key]
    for key in SEMANTICS:
        if key in first:
            out[key] = first[key]
    if all(s.get("nullable") for s in schemas):
        out["nullable"] = True
    defaults = {canonical(s.get("default")) for s in schemas}
    if len(defaults) == 1 and "default" in first:
        out["default"] = first["default"]
    if any("enum" in s for s in schemas):
        values = _enum(schemas)
        if not values:
            return None
        out["enum"] = values
    if not _bounds(schemas, out):
        return None
    if any(s.get("uniqueItems") for s in schemas):
        out["uniqueItems"] = True
    if kind == "array" or any("items" in s for s in schemas):
        items = [s["items"] for s in schemas if isinstance(s.get("items"), dict)]
        if len(items) != len(schemas):
            if items:
                return None
        else:
            merged = _common(items)
            if merged is None:
                return None
            out["items"] = merged
    objects = kind == "object" or any(
        "properties" in s or "additionalProperties" in s for s in schemas
    )
    if objects and not _object(schemas, out, root):
        return None
    rules = {canonical(s.get("x-kubernetes-validations")) for s in schemas}
    if "x-kubernetes-validations" in first and len(rules) == 1:
        if _nothing_dropped(schemas, out):
            out["x-kubernetes-validations"] = first["x-kubernetes-validations"]
        else:
            return None
    elif any("x-kubernetes-validations" in s for s in schemas):
        return None
    return out


def _enum(schemas: list[Schema]) -> list[Any]:
    listed = [s["enum"] for s in schemas if "enum" in s]
    keep = set.intersection(*({canonical(v) for v in values} for values in listed))
    seen: set[str] = set()
    values = []
    for value in listed[0]:
        text = canonical(value)
        if text in keep and text not in seen:
            seen.add(text)
            values.append(value)
    return values


def _bounds(schemas: list[Schema], out: Schema) -> bool:
    """The tightest bounds into `out`; False when they leave no value at all."""
    low = _tightest(schemas, *_NUMERIC_LOW, higher_is_tighter=True)
    high = _tightest(schemas, *_NUMERIC_HIGH, higher_is_tighter=False)
    for (key, flag), bound in ((_NUMERIC_LOW, low), (_NUMERIC_HIGH, high)):
        if bound is not None:
            out[key] = bound[0]
            if bound[1]:
                out[flag] = True
    empty = (
        low is not None
        and high is not None
        and (low[0] > high[0] or (low[0] == high[0] and (low[1] or high[1])))
    )
    if empty:
        return False
    for low_key, high_key in zip(_COUNT_LOW, _COUNT_HIGH, strict=True):
        lows = [s[low_key] for s in schemas if low_key in s]
        highs = [s[high_key] for s in schemas if high_key in s]
        if lows:
            out[low_key] = max(lows)
        if highs:
            out[high_key] = min(highs)
        if lows and highs and max(lows) > min(highs):
            return False
    return True


def _tightest(
    schemas: list[Schema], key: str, flag: str, higher_is_tighter: bool
) -> tuple[float, bool] | None:
    best: tuple[float, bool] | None = None
    for schema in schemas:
        if key not in schema:
            continue
        bound = (schema[key], bool(schema.get(flag)))
        if best is None:
            best = bound
            continue
        if bound[0] == best[0]:
            best = (best[0], best[1] or bound[1])
        elif (bound[0] > best[0]) == higher_is_tighter:
            best = bound
    return best


def _lookup(schema: Schema, key: str, root: bool = False) -> _Lookup:
    """What `schema` says of the value under `key`: a schema, ANY, or None (refused)."""
    properties = schema.get("properties") or {}
    if key in properties:
        return properties[key]  # type: ignore[no-any-return]
    extra = _extra(schema)
    if extra is None and (root or schema.get("x-kubernetes-embedded-resource")):
        return ANY if key in TOP_LEVEL else None
    return extra


def _extra(schema: Schema) -> _Lookup:
    """What `schema` says of a key it does not name. A typed `additionalProperties` comes
    first: next to it `x-kubernetes-preserve-unknown-fields` keeps nothing more, so two
    locations that both preserve unknown fields may still disagree on what such a key holds."""
    extra = schema.get("additionalProperties")
    if isinstance(extra, dict):
        return extra
    if extra is True or schema.get("x-kubernetes-preserve-unknown-fields"):
        return ANY
    return None


def _meet(extras: list[_Lookup]) -> _Lookup:
    """The common policy for keys no location names: refused if any location refuses them,
    any value if all take any, else the common subset of the typed ones (None: refused)."""
    if any(e is None for e in extras):
        return None
    typed = [e for e in extras if isinstance(e, dict)]
    return _common(typed) if typed else ANY


def _object(schemas: list[Schema], out: Schema, root: bool) -> bool:
    """Properties, additionalProperties and required into `out`; False: no common object.

    A key's value is judged against what each location says of that key, named or not (a
    location's typed additionalProperties, or its preserve-unknown-fields, speaks for every key
    it does not name). The hub's own policy for the keys it does not name (its
    additionalProperties and preserve-unknown-fields) must then be no wider than every
    location's policy for every such key: the ones no location names and the ones some location
    names but the hub could not keep. A structural schema cannot say "any key but these", so a
    key left out must be refused outright; preserve-unknown-fields must stay as the locations
    have it (SEMANTICS), so a hub node that would have to drop it is left out instead."""
    named = any("properties" in s for s in schemas)
    properties: Schema = {}
    dropped: list[str] = []
    for key in _keys(s.get("properties") or {} for s in schemas):
        found = [_lookup(s, key, root) for s in schemas]
        typed = [f for f in found if isinstance(f, dict)]
        merged = _common(typed) if typed and None not in found else None
        if merged is None:
            dropped.append(key)
        else:
            properties[key] = merged
    extra = None if dropped else _meet([_extra(s) for s in schemas])
    if isinstance(extra, dict) and properties:
        # Properties and a typed additionalProperties exclude each other in a structural
        # schema. Where the node must stay open, one schema for every key keeps it; otherwise
        # the named fields keep their own schemas and other keys are refused.
        if out.get("x-kubernetes-preserve-unknown-fields"):
            extra = _common([extra, *properties.values()])
            properties = {} if extra is not None else properties
        else:
            extra = None
    if isinstance(extra, dict):
        out["additionalProperties"] = extra
    elif extra is ANY and all(s.get("additionalProperties") is True for s in schemas):
        out["additionalProperties"] = True
    if extra is None and out.get("x-kubernetes-preserve-unknown-fields"):
        return False  # it would take, under any key, what some location refuses
    if named and (properties or not isinstance(extra, dict)):
        out["properties"] = properties
    if any(_lookup(out, key, root) is not None for key in dropped):
        return False  # apiVersion, kind or metadata at the top: the hub takes them regardless
    required = _keys(s.get("required") or [] for s in schemas)
    if required:
        if any(_lookup(out, r, root) is None for r in required):
            return False
        out["required"] = required
    return True


def _keys(groups: Iterable[Iterable[str]]) -> list[str]:
    """Keys in first-seen order, each once."""
    seen: dict[str, None] = {}
    for group in groups:
        for key in group:
            seen.setdefault(key, None)
    return list(seen)


def _nothing_dropped(schemas: list[Schema], out: Schema) -> bool:
    kept = set(out.get("properties") or {})
    return all(set(s.get("properties") or {}) <= kept for s in schemas) and (
        all("items" in s for s in schemas) or "items" not in out
    )


def _differences(hub: Any, both: Any, path: str) -> Iterable[str]:
    """Paths under which `both` (the common subset) is narrower than `hub`."""
    if not isinstance(hub, dict) or not isinstance(both, dict):
        if canonical(hub) != canonical(both):
            yield path or "."
        return
    for key in sorted(set(hub) | set(both)):
        if key in ANNOTATIONS or key == "default":
            continue
        if key == "properties":
            hub_props, both_props = hub.get(key) or {}, both.get(key) or {}
            for name in sorted(set(hub_props) | set(both_props)):
                where = f"{path}.{name}" if path else name
                if name not in both_props:
                    yield where
                elif name not in hub_props:
                    continue
                else:
                    yield from _differences(hub_props[name], both_props[name], where)
        elif key == "items":
            yield from _differences(hub.get(key), both.get(key), f"{path}[]")
        elif key == "additionalProperties":
            yield from _differences(hub.get(key), both.get(key), f"{path}{{}}")
        elif canonical(hub.get(key)) != canonical(both.get(key)):
            name = _explain(key)
            yield f"{path or '.'} ({name(hub.get(key), both.get(key))})"


def _explain(key: str) -> Callable[[Any, Any], str]:
    def say(was: Any, now: Any) -> str:
        return f"{key}: {canonical(was)} -> {canonical(now)}"

    return say
