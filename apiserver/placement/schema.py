"""Does a location's OpenAPI schema know every field an object sets?

A kube-apiserver silently prunes fields its schema does not know. In 2021 a cluster upgrade
dropped `initContainers` from pods that had them, and nothing failed: the pods just ran without
them. So before placing an object on a location we walk the object together with the schema the
location serves for its kind, and a location that would lose a field is not eligible
(Incompatible) instead of quietly running something else than what the user wrote.

The walk follows the schema, not the object, so maps (labels, nodeSelector, resources.limits…)
stop at the map itself — their keys are data, not fields. Paths are dotted with `[]` for list
items and `{}` for the values of a map of objects, e.g. `spec.template.spec.initContainers[].image`.

Whenever the schema is ambiguous (free-form objects, `oneOf`, unresolvable `$ref`…) the walk
accepts: a false "missing" evacuates a healthy location, a false "present" only repeats what
Kubernetes would have done anyway.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

# Top-level fields every kind has and no location will drop: identity, metadata, and status,
# which the hub object's owner (us) writes, not the user.
_IGNORED_TOP_LEVEL = frozenset({"apiVersion", "kind", "metadata", "status"})

_SCALAR_TYPES = frozenset({"string", "integer", "number", "boolean"})

_REF_PREFIX = "#/components/schemas/"

# Fields an `x-kubernetes-embedded-resource` object always has, even when the schema omits them.
_EMBEDDED_FIELDS = ("apiVersion", "kind", "metadata")


@dataclass(slots=True, eq=False)
class _Node:
    """One schema compiled for walking: the only questions the walk asks are here."""

    fields: dict[str, _Node] = field(default_factory=dict)
    """Named properties."""
    values: _Node | None = None
    """`additionalProperties`: the schema of a map's values."""
    items: _Node | None = None
    """The schema of an array's items."""
    open: bool = False
    """Keys not in `fields` (and all below them) are accepted."""


def _leaf() -> _Node:
    return _Node(open=True)


def _is_leaf(node: _Node) -> bool:
    return not node.fields and node.values is None and node.items is None


class _Compiler:
    """Turns raw OpenAPI schemas into `_Node`s, each `$ref` compiled once and shared."""

    def __init__(self, schemas: Mapping[str, Any]) -> None:
        self._schemas = schemas
        self._refs: dict[str, _Node] = {}
        self._in_progress: set[str] = set()

    def ref(self, name: str) -> _Node:
        """The node of `#/components/schemas/<name>`; recursive schemas share the same node."""
        node = self._refs.get(name)
        if node is not None:
            return node
        raw = self._schemas.get(name)
        if not isinstance(raw, Mapping):
            node = self._refs[name] = _leaf()
            return node
        node = self._refs[name] = _Node()
        self._in_progress.add(name)
        self._fill(node, raw)
        self._in_progress.discard(name)
        return node

    def node(self, schema: object) -> _Node:
        """A node for an inline schema (a property, items, or additionalProperties)."""
        if not isinstance(schema, Mapping):
            return _leaf()
        only_ref = _sole_ref(schema)
        if only_ref is not None:
            return self._resolve(only_ref)
        node = _Node()
        self._fill(node, schema)
        return node

    def _resolve(self, ref: str) -> _Node:
        name = _ref_name(ref)
        return _leaf() if name is None else self.ref(name)

    def _fill(self, node: _Node, schema: Mapping[str, Any]) -> None:
        for ref in _refs_of(schema):
            self._merge(node, ref)
        props = schema.get("properties")
        if isinstance(props, Mapping):
            for key, sub in props.items():
                node.fields[key] = self.node(sub)
        extra = schema.get("additionalProperties")
        if isinstance(extra, Mapping):
            node.values = self.node(extra)
        elif extra is True:
            node.open = True
        if schema.get("type") == "array" or "items" in schema:
            node.items = self.node(schema.get("items"))
        if schema.get("x-kubernetes-embedded-resource") is True:
            for name in _EMBEDDED_FIELDS:
                node.fields.setdefault(name, _leaf())
        if _accepts_anything(schema, node):
            node.open = True

    def _merge(self, node: _Node, ref: str) -> None:
        """Fold a referenced schema into `node` (allOf with siblings, or $ref beside properties)."""
        if _ref_name(ref) in self._in_progress:
            node.open = True  # a cycle through a merge: we cannot know its fields yet, so accept
            return
        other = self._resolve(ref)
        node.fields.update(other.fields)
        node.values = node.values or other.values
        node.items = node.items or other.items
        node.open = node.open or other.open


def _ref_name(ref: str) -> str | None:
    """`#/components/schemas/<name>` → name (JSON-pointer unescaped); None for other refs."""
    if not ref.startswith(_REF_PREFIX):
        return None
    return ref[len(_REF_PREFIX) :].replace("~1", "/").replace("~0", "~")


def _refs_of(schema: Mapping[str, Any]) -> list[str]:
    """The `$ref`s a schema includes, directly or through `allOf`."""
    refs = []
    ref = schema.get("$ref")
    if isinstance(ref, str):
        refs.append(ref)
    for part in schema.get("allOf") or ():
        if isinstance(part, Mapping) and isinstance(part.get("$ref"), str):
            refs.append(part["$ref"])
    return refs


def _sole_ref(schema: Mapping[str, Any]) -> str | None:
    """The ref when the schema is nothing but one (how Kubernetes writes a typed field)."""
    refs = _refs_of(schema)
    if len(refs) != 1:
        return None
    structural = ("properties", "additionalProperties", "items", "x-kubernetes-embedded-resource")
    if any(key in schema for key in structural):
        return None
    if _preserves_unknown(schema):
        return None
    parts = schema.get("allOf") or ()
    return refs[0] if all(isinstance(p, Mapping) and "$ref" in p for p in parts) else None


def _preserves_unknown(schema: Mapping[str, Any]) -> bool:
    return (
        schema.get("x-kubernetes-preserve-unknown-fields") is True
        or schema.get("x-kubernetes-int-or-string") is True
        or schema.get("format") == "int-or-string"
    )


def _accepts_anything(schema: Mapping[str, Any], node: _Node) -> bool:
    """Free-form: explicitly (preserve-unknown-fields, int-or-string) or by saying nothing."""
    if _preserves_unknown(schema):
        return True
    if schema.get("type") in _SCALAR_TYPES:
        return True
    # `type: object` without properties (RawExtension, FieldsV1), or no shape at all
    # (Quantity's oneOf): nothing to check below.
    return _is_leaf(node) and not node.open and "additionalProperties" not in schema


def _parse_api_version(api_version: str) -> tuple[str, str]:
    group, _, version = api_version.rpartition("/")
    return group, version


def _find_kind(schemas: Mapping[str, Any], group: str, version: str, kind: str) -> str | None:
    """The schema carrying exactly this group/version/kind, preferring one that carries only it."""
    wanted = {"group": group, "version": version, "kind": kind}
    candidates: list[tuple[int, str]] = []
    for name, schema in schemas.items():
        if not isinstance(schema, Mapping):
            continue
        gvks = schema.get("x-kubernetes-group-version-kind")
        if not isinstance(gvks, list):
            continue
        for gvk in gvks:
            if isinstance(gvk, Mapping) and all(gvk.get(k, "") == v for k, v in wanted.items()):
                candidates.append((len(gvks), name))
                break
    return min(candidates)[1] if candidates else None


def _child(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _walk(node: _Node, value: object, path: str, out: list[str], every: bool) -> None:
    """Append to `out` the unknown paths below `value` (and, with `every`, the known leaves too)."""
    if isinstance(value, Mapping) and value and (node.fields or node.values is not None):
        _walk_mapping(node, value, path, out, every)
    elif isinstance(value, list) and value and node.items is not None:
        for item in value:
            if item is not None:
                _walk(node.items, item, path + "[]", out, every)
    elif every:
        out.append(path)


def _walk_mapping(
    node: _Node, value: Mapping[str, Any], path: str, out: list[str], every: bool
) -> None:
    map_seen = False
    for key, sub in value.items():
        if sub is None:
            continue  # null sets nothing
        child = node.fields.get(key)
        if child is not None:
            _walk(child, sub, _child(path, key), out, every)
        elif node.values is not None:
            if not _is_leaf(node.values):
                _walk(node.values, sub, path + "{}", out, every)
            elif every and not map_seen:
                out.append(path)  # a map of plain values is one field: the map
            map_seen = True
        elif not node.open or every:
            out.append(_child(path, key))


@dataclass(frozen=True, slots=True)
class SchemaIndex:
    """The fields one location's API server knows for one kind. Build once, ask per object."""

    api_version: str
    kind: str
    _root: _Node

    @classmethod
    def from_openapi(
        cls, doc: Mapping[str, Any], api_version: str, kind: str
    ) -> SchemaIndex | None:
        """From an OpenAPI v3 document (`/openapi/v3/apis/<group>/<version>`, or `/api/v1`).

        None when no schema in the document carries that `x-kubernetes-group-version-kind`.
        """
        components = doc.get("components")
        schemas = components.get("schemas") if isinstance(components, Mapping) else None
        if not isinstance(schemas, Mapping):
            return None
        group, version = _parse_api_version(api_version)
        name = _find_kind(schemas, group, version, kind)
        if name is None:
            return None
        return cls(api_version, kind, _Compiler(schemas).ref(name))

    def missing(self, obj: Mapping[str, Any]) -> list[str]:
        """Sorted paths `obj` sets that the schema does not know, each at its shallowest."""
        return sorted(set(self._walk_root(obj, every=False)))

    def field_paths(self, obj: Mapping[str, Any]) -> frozenset[str]:
        """Every leaf path `obj` sets, as the schema shapes it (maps end at the map itself)."""
        return frozenset(self._walk_root(obj, every=True))

    def _walk_root(self, obj: Mapping[str, Any], every: bool) -> list[str]:
        out: list[str] = []
        for key, value in obj.items():
            if key in _IGNORED_TOP_LEVEL or value is None:
                continue
            child = self._root.fields.get(key)
            if child is None:
                if every or not self._root.open:
                    out.append(key)
            else:
                _walk(child, value, key, out, every=every)
        return out


def field_paths(obj: Mapping[str, Any], index: SchemaIndex | None = None) -> frozenset[str]:
    """Every leaf path `obj` sets, ignoring apiVersion, kind, metadata and status.

    With an `index`, maps end at the map itself (see `SchemaIndex.field_paths`). Without one
    nothing tells a map from an object, so every mapping key becomes a path segment: a superset,
    fine for showing what an object touches, not for judging a location.
    """
    if index is not None:
        return index.field_paths(obj)
    out: list[str] = []
    for key, value in obj.items():
        if key not in _IGNORED_TOP_LEVEL and value is not None:
            _walk_blind(value, key, out)
    return frozenset(out)


def _walk_blind(value: object, path: str, out: list[str]) -> None:
    if isinstance(value, Mapping) and value:
        for key, sub in value.items():
            if sub is not None:
                _walk_blind(sub, _child(path, key), out)
    elif isinstance(value, list) and value:
        for item in value:
            if item is not None:
                _walk_blind(item, path + "[]", out)
    else:
        out.append(path)
