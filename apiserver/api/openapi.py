"""OpenAPI documents (`/openapi/v2`, `/openapi/v3`), so `kubectl explain` works through the hub.

What the hub and kubectl do with them, and what follows for these documents:

- `/openapi/v2`: the hub downloads ours once per APIService, keeps the paths under
  `/apis/<group>/<version>/` with the definitions they use (and any definition no path uses),
  and merges the result after its own specs. A spec with no such path adds nothing, so every
  kind is reachable from a path. A definition already in the hub under the same name but with
  other content is renamed `<name>_v2` in our part; that is harmless but clutters, and the hub's
  meta types change from one Kubernetes version to the next, so ours could never stay
  identical. Every definition is therefore named in our own namespace (`dev.kmc.*`, the
  reversed group as Kubernetes names custom kinds), metadata types included.
- The hub serves its merged v2 document as protobuf too, parsing it with gnostic, and kubectl
  builds models from it: one schema key Swagger 2.0 does not know (`nullable`, `anyOf`,
  `oneOf`, `const`...), a `$ref` with a `type` beside it or an array without `items` fails the
  hub's *whole* v2 document, not just ours. v2 schemas keep Swagger keys only; what they cannot
  say (nullable, one-of) is left to the descriptions, and anything else unknown is an error.
- `/openapi/v3`: the hub lists the entries of our index verbatim and proxies each
  `serverRelativeURL` (query included) back to us; nothing is merged, so each group-version
  document is self-contained. The `hash` is the SHA-512 of the served bytes, as Kubernetes
  computes it: clients cache a document by its URL, so the hash must change with the content.
- `kubectl explain` (OpenAPI v3 by default since kubectl 1.27) reads the kind's GVK from the
  `x-kubernetes-group-version-kind` of the operations on
  `/apis/<g>/<v>[/namespaces/{namespace}]/<plural>[/{name}]`, then takes the first
  `components/schemas` entry whose GVK list contains exactly `{group, kind, version}`. It
  follows `$ref`, `items`, `additionalProperties` and `allOf`, not `anyOf` or `oneOf`; so a
  `$ref` with a description is written `allOf: [{$ref}]` in v3, as Kubernetes does.
"""

from __future__ import annotations

import copy
import hashlib
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from apiserver.api.registry import (
    DEFS_PREFIX,
    JsonSchema,
    Resource,
    Subresource,
    group_versions,
    ref,
)

OBJECT_META = "dev.kmc.v1alpha1.ObjectMeta"
LIST_META = "dev.kmc.v1alpha1.ListMeta"

V2_PREFIX = "#/definitions/"
V3_PREFIX = "#/components/schemas/"

_TITLE = "kubectl-mc"

# Keys gnostic accepts in a Swagger 2.0 schema (besides `x-` extensions).
_V2_KEYS = frozenset(
    {
        "$ref", "additionalProperties", "allOf", "default", "description", "discriminator",
        "enum", "example", "exclusiveMaximum", "exclusiveMinimum", "externalDocs", "format",
        "items", "maxItems", "maxLength", "maxProperties", "maximum", "minItems", "minLength",
        "minProperties", "minimum", "multipleOf", "pattern", "properties", "readOnly",
        "required", "title", "type", "uniqueItems", "xml",
    }
)  # fmt: skip
# What v2 cannot express: dropped, the description says it in words.
_V2_DROPPED = frozenset({"nullable", "anyOf", "oneOf", "not"})
# Keys of an OpenAPI 3.0 schema object (besides `x-` extensions).
_V3_KEYS = _V2_KEYS | {"nullable", "anyOf", "oneOf", "not", "writeOnly", "deprecated"}
_TYPES = frozenset({"object", "array", "string", "integer", "number", "boolean"})


def definition_name(group: str, version: str, kind: str) -> str:
    """Kubernetes' name for the definition of a kind: `mc.kmc.dev` → `dev.kmc.mc.v1alpha1.Kind`."""
    return ".".join([*reversed(group.split(".")), version, kind])


def v2(resources: Sequence[Resource]) -> dict[str, Any]:
    """The Swagger 2.0 document of `/openapi/v2`, every group in one."""
    definitions = _definitions(resources)
    return {
        "swagger": "2.0",
        "info": {"title": _TITLE, "version": "unversioned"},
        "paths": {path.url: _v2_path(path) for path in _paths(resources)},
        "definitions": {name: _v2_schema(definitions[name]) for name in sorted(definitions)},
    }


def v3_group(resources: Sequence[Resource], group: str, version: str) -> dict[str, Any] | None:
    """The OpenAPI 3.0 document of `/openapi/v3/apis/<group>/<version>`, or None."""
    served = [r for r in resources if (r.group, r.version) == (group, version)]
    if not served:
        return None
    definitions = _definitions(served)
    return {
        "openapi": "3.0.0",
        "info": {"title": _TITLE, "version": version},
        "paths": {path.url: _v3_path(path) for path in _paths(served)},
        "components": {
            "schemas": {name: _v3_schema(definitions[name]) for name in sorted(definitions)}
        },
    }


def v3_index(resources: Sequence[Resource]) -> dict[str, Any]:
    """The `/openapi/v3` index: one entry per group-version, its URL carrying the content hash."""
    paths: dict[str, Any] = {}
    for group, version in group_versions(resources):
        document = v3_group(resources, group, version)
        assert document is not None  # group_versions only names what is served
        key = f"apis/{group}/{version}"
        paths[key] = {"serverRelativeURL": f"/openapi/v3/{key}?hash={spec_hash(document)}"}
    return {"paths": paths}


def serialize(document: Mapping[str, Any]) -> bytes:
    """The bytes to serve: compact JSON with sorted keys, so equal documents are equal bytes."""
    return json.dumps(document, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def spec_hash(document: Mapping[str, Any]) -> str:
    """Upper-case hex SHA-512 of `serialize(document)`, as Kubernetes hashes its documents;
    also the document's ETag."""
    return hashlib.sha512(serialize(document)).hexdigest().upper()


# --- definitions, in the registry's dialect ----------------------------------------------------

_OBJECT_META: dict[str, Any] = {
    "type": "object",
    "description": (
        "Standard object metadata. Placement views carry the hub object's name, namespace, "
        "uid, resourceVersion, generation, creationTimestamp, deletionTimestamp and labels "
        "(a watch on a view is a watch on the hub object); remote.kmc.dev items carry the "
        "child object's own metadata, annotation kmc.dev/location added."
    ),
    "x-kubernetes-preserve-unknown-fields": True,
    "properties": {
        "name": {"type": "string", "description": "Name, unique within the namespace."},
        "namespace": {"type": "string", "description": "Namespace of the object."},
        "uid": {"type": "string", "description": "Unique identifier of the object."},
        "resourceVersion": {
            "type": "string",
            "description": "Opaque version of the object, to watch from or to detect changes.",
        },
        "generation": {
            "type": "integer",
            "format": "int64",
            "description": "Sequence number of the object's desired state (its spec).",
        },
        "creationTimestamp": {
            "type": "string",
            "format": "date-time",
            "description": "When the object was created.",
        },
        "deletionTimestamp": {
            "type": "string",
            "format": "date-time",
            "description": "Set once the object is being deleted.",
        },
        "labels": {
            "type": "object",
            "description": "Labels of the object.",
            "additionalProperties": {"type": "string"},
        },
        "annotations": {
            "type": "object",
            "description": (
                "Annotations of the object; on remote.kmc.dev items, kmc.dev/location names "
                "the location the item came from."
            ),
            "additionalProperties": {"type": "string"},
        },
    },
}

_LIST_META: dict[str, Any] = {
    "type": "object",
    "description": "Standard list metadata.",
    "properties": {
        "resourceVersion": {
            "type": "string",
            "description": "Version of the list, to start a watch from.",
        },
        "continue": {
            "type": "string",
            "description": "Set when the list is incomplete: pass it back to get the next page.",
        },
        "remainingItemCount": {
            "type": "integer",
            "format": "int64",
            "description": "How many items the following pages hold, when known.",
        },
    },
}

_API_VERSION = {
    "type": "string",
    "description": "Group and version of the object's schema, such as mc.kmc.dev/v1alpha1.",
}
_KIND = {"type": "string", "description": "Kind of the object, in CamelCase."}


class _Definitions:
    """Definitions by name; one name must always mean one schema."""

    def __init__(self) -> None:
        self.by_name: dict[str, dict[str, Any]] = {}

    def add(self, name: str, schema: JsonSchema) -> None:
        """Add `schema` under `name`, its `$defs` hoisted beside it."""
        body = {key: value for key, value in schema.items() if key != "$defs"}
        for nested, definition in schema.get("$defs", {}).items():
            self.add(nested, definition)
        known = self.by_name.get(name)
        if known is not None and known != body:
            raise ValueError(f"two different schemas are named {name}")
        self.by_name[name] = body


def _definitions(resources: Iterable[Resource]) -> dict[str, dict[str, Any]]:
    definitions = _Definitions()
    definitions.add(OBJECT_META, _OBJECT_META)
    definitions.add(LIST_META, _LIST_META)
    for r in resources:
        name = definition_name(r.group, r.version, r.kind)
        definitions.add(name, _kind(r.group, r.version, r.kind, r.description, r.schema))
        definitions.add(
            definition_name(r.group, r.version, r.list_kind),
            _list(r.group, r.version, r.kind, r.plural, name),
        )
        for sub in r.subresources:
            if sub.stream:
                continue  # its answer is bytes: no schema, as in Kubernetes
            definitions.add(
                definition_name(r.group, r.version, sub.kind),
                _kind(r.group, r.version, sub.kind, sub.description, sub.schema),
            )
    return definitions.by_name


def _gvk(group: str, version: str, kind: str) -> dict[str, str]:
    return {"group": group, "kind": kind, "version": version}


def _kind(
    group: str, version: str, kind: str, description: str, schema: JsonSchema
) -> dict[str, Any]:
    """The schema of a kind: the registry's, with apiVersion, kind and metadata added."""
    properties = dict(schema.get("properties", {}))
    for added in ("apiVersion", "kind", "metadata"):
        if added in properties:
            raise ValueError(f"the schema of {kind} must leave {added} to the renderer")
    result = {key: value for key, value in schema.items() if key not in ("properties", "type")}
    result.update(
        {
            "type": "object",
            "description": description or schema.get("description", ""),
            "properties": {
                "apiVersion": _API_VERSION,
                "kind": _KIND,
                "metadata": ref(OBJECT_META, "Standard object metadata."),
                **properties,
            },
            "x-kubernetes-group-version-kind": [_gvk(group, version, kind)],
        }
    )
    return result


def _list(group: str, version: str, kind: str, plural: str, item: str) -> dict[str, Any]:
    return {
        "type": "object",
        "description": f"A list of {plural}.",
        "required": ["items"],
        "properties": {
            "apiVersion": _API_VERSION,
            "kind": _KIND,
            "metadata": ref(LIST_META, "Standard list metadata."),
            "items": {"type": "array", "description": f"The {plural}.", "items": ref(item)},
        },
        "x-kubernetes-group-version-kind": [_gvk(group, version, f"{kind}List")],
    }


# --- schema dialects ---------------------------------------------------------------------------


def _children(key: str, value: Any, convert: Callable[[JsonSchema], dict[str, Any]]) -> Any:
    """`value` of schema key `key`, with the schemas inside it converted."""
    if key == "properties":
        return {name: convert(sub) for name, sub in value.items()}
    if key in ("items", "not", "additionalProperties") and isinstance(value, Mapping):
        return convert(value)
    if key in ("allOf", "anyOf", "oneOf"):
        return [convert(sub) for sub in value]
    return copy.deepcopy(value)


def _target(reference: str, prefix: str) -> str:
    if not reference.startswith(DEFS_PREFIX):
        raise ValueError(f"unexpected $ref {reference!r}: refer to shared schemas through $defs")
    return prefix + reference.removeprefix(DEFS_PREFIX)


def _checked(schema: JsonSchema, allowed: frozenset[str], dialect: str) -> None:
    for key in schema:
        if key not in allowed and not key.startswith("x-"):
            raise ValueError(f"{key!r} is not an OpenAPI {dialect} schema key")
    kind = schema.get("type")
    if kind is not None and kind not in _TYPES:
        raise ValueError(f"type {kind!r} cannot be written in OpenAPI {dialect}")


def _v2_schema(schema: JsonSchema) -> dict[str, Any]:
    """Swagger 2.0: a `$ref` keeps its description only; nullable and one-ofs are dropped."""
    if "$ref" in schema:
        result = {"$ref": _target(schema["$ref"], V2_PREFIX)}
        if "description" in schema:
            result["description"] = schema["description"]
        return result
    kept = {key: value for key, value in schema.items() if key not in _V2_DROPPED}
    _checked(kept, _V2_KEYS, "v2")
    if kept.get("type") == "array" and not isinstance(kept.get("items"), Mapping):
        raise ValueError("an array needs one items schema")
    return {key: _children(key, value, _v2_schema) for key, value in kept.items()}


def _v3_schema(schema: JsonSchema) -> dict[str, Any]:
    """OpenAPI 3.0: a `$ref` with siblings becomes `allOf: [{$ref}]` beside them."""
    if "$ref" in schema:
        target = {"$ref": _target(schema["$ref"], V3_PREFIX)}
        siblings = {key: value for key, value in schema.items() if key != "$ref"}
        if not siblings:
            return target
        return {"allOf": [target], **_v3_schema(siblings)}
    _checked(schema, _V3_KEYS, "v3")
    return {key: _children(key, value, _v3_schema) for key, value in schema.items()}


# --- paths -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Param:
    name: str
    type: str
    description: str


@dataclass(frozen=True)
class _Operation:
    method: str  # get, post, put or patch
    action: str  # x-kubernetes-action: list, get, put, patch or connect
    operation_id: str
    description: str
    gvk: tuple[str, str, str]
    response: str | None  # definition name; None: a stream of bytes (a string)
    body: str | None = None  # definition name of a PUT body; PATCH bodies are free-form
    query: tuple[_Param, ...] = ()
    watch: bool = False


@dataclass(frozen=True)
class _Path:
    url: str
    params: tuple[_Param, ...]
    operations: tuple[_Operation, ...]
    tag: str


_NAMESPACE = _Param("namespace", "string", "Namespace of the objects.")
_NAME = _Param("name", "string", "Name of the object.")
_LIST_QUERY = (
    _Param("labelSelector", "string", "Only objects whose labels match this selector."),
    _Param("fieldSelector", "string", "Only objects whose fields match this selector."),
    _Param("limit", "integer", "At most this many items; the rest come with continue."),
    _Param("continue", "string", "The continue token of the previous page."),
    _Param("resourceVersion", "string", "List or watch from this resource version."),
)
_WATCH_QUERY = (
    _Param("watch", "boolean", "Stream changes instead of listing."),
    _Param("allowWatchBookmarks", "boolean", "Let a watch send BOOKMARK events."),
    _Param("timeoutSeconds", "integer", "End a watch after this many seconds."),
)
_SUB_METHODS = {"get": ("get", "read"), "update": ("put", "replace"), "patch": ("patch", "patch")}


def _paths(resources: Iterable[Resource]) -> list[_Path]:
    return [path for r in resources for path in _resource_paths(r)]


def _resource_paths(r: Resource) -> list[_Path]:
    base = f"/apis/{r.group}/{r.version}"
    scope = f"{base}/namespaces/{{namespace}}" if r.namespaced else base
    scope_params = (_NAMESPACE,) if r.namespaced else ()
    prefix = "".join(part.capitalize() for part in r.group.split(".")) + r.version.capitalize()
    scoped = "Namespaced" if r.namespaced else ""
    gvk = (r.group, r.version, r.kind)
    kind_name = definition_name(r.group, r.version, r.kind)
    list_name = definition_name(r.group, r.version, r.list_kind)
    tag = f"{r.group}_{r.version}"
    paths: list[_Path] = []

    if "list" in r.verbs:
        watch = "watch" in r.verbs
        query = _LIST_QUERY + (_WATCH_QUERY if watch else ())
        what = f"list{' or watch' if watch else ''} {r.plural}"

        def lister(operation_id: str, description: str) -> _Operation:
            return _Operation(
                "get", "list", operation_id, description, gvk, list_name, None, query, watch
            )

        paths.append(
            _Path(
                f"{scope}/{r.plural}",
                scope_params,
                (lister(f"list{prefix}{scoped}{r.kind}", what.capitalize()),),
                tag,
            )
        )
        if r.namespaced:
            everywhere = lister(
                f"list{prefix}{r.kind}ForAllNamespaces", f"{what.capitalize()} in every namespace"
            )
            paths.append(_Path(f"{base}/{r.plural}", (), (everywhere,), tag))
    if "get" in r.verbs:
        read = _Operation(
            "get", "get", f"read{prefix}{scoped}{r.kind}", f"Read one {r.singular}", gvk, kind_name
        )
        paths.append(_Path(f"{scope}/{r.plural}/{{name}}", (*scope_params, _NAME), (read,), tag))
    for sub in r.subresources:
        if sub.stream:
            url = f"{scope}/{r.plural}/{{name}}/{sub.name}"
            streams = _stream_operations(r, sub, f"{prefix}{scoped}{r.kind}")
            paths.append(_Path(url, (*scope_params, _NAME), streams, tag))
            continue
        sub_gvk = (r.group, r.version, sub.kind)
        sub_name = definition_name(r.group, r.version, sub.kind)
        suffix = sub.name.capitalize()
        operations = []
        for verb in sorted(sub.verbs, key=list(_SUB_METHODS).index):
            method, word = _SUB_METHODS[verb]
            operations.append(
                _Operation(
                    method,
                    method,
                    f"{word}{prefix}{scoped}{r.kind}{suffix}",
                    f"{word.capitalize()} the {sub.name} of one {r.singular}",
                    sub_gvk,
                    sub_name,
                    sub_name if verb == "update" else None,
                )
            )
        url = f"{scope}/{r.plural}/{{name}}/{sub.name}"
        paths.append(_Path(url, (*scope_params, _NAME), tuple(operations), tag))
    return paths


def _stream_operations(r: Resource, sub: Subresource, named: str) -> tuple[_Operation, ...]:
    """`pods/log` is read (GET); `pods/exec` is connected to (GET for WebSocket, POST for
    SPDY), as Kubernetes documents them."""
    gvk = (r.group, r.version, sub.kind)
    query = tuple(_Param(p.name, p.type, p.description) for p in sub.parameters)
    suffix = sub.name.capitalize()
    if "create" not in sub.verbs:
        description = f"Read the {sub.name} of one {r.singular}"
        return (
            _Operation("get", "get", f"read{named}{suffix}", description, gvk, None, None, query),
        )
    return tuple(
        _Operation(
            method,
            "connect",
            f"connect{method.capitalize()}{named}{suffix}",
            f"Connect {method.upper()} requests to {sub.name} of one {r.singular}",
            gvk,
            None,
            None,
            query,
        )
        for method in ("get", "post")
    )


def _produces(operation: _Operation) -> list[str]:
    if operation.response is None:
        return ["*/*"]
    return (
        ["application/json", "application/json;stream=watch"]
        if operation.watch
        else ["application/json"]
    )


def _extensions(operation: _Operation) -> dict[str, Any]:
    return {
        "x-kubernetes-action": operation.action,
        "x-kubernetes-group-version-kind": _gvk(*operation.gvk),
    }


# A PATCH body: a JSON merge patch (an object) or a JSON patch (a list of operations).
_PATCH_BODIES: dict[str, dict[str, Any]] = {
    "application/merge-patch+json": {
        "type": "object",
        "description": "A JSON merge patch: the fields to change, null to remove one.",
    },
    "application/json-patch+json": {
        "type": "array",
        "description": "A JSON patch: a list of operations.",
        "items": {"type": "object"},
    },
}
_PATCH_BODY_V2 = {"description": "A JSON merge patch (an object) or a JSON patch (a list)."}


def _v2_param(param: _Param, where: str) -> dict[str, Any]:
    result: dict[str, Any] = {
        "name": param.name,
        "in": where,
        "description": param.description,
        "type": param.type,
    }
    if where == "path":
        result.update(required=True, uniqueItems=True)
    return result


def _v2_path(path: _Path) -> dict[str, Any]:
    item: dict[str, Any] = {}
    if path.params:
        item["parameters"] = [_v2_param(param, "path") for param in path.params]
    for operation in path.operations:
        parameters = [_v2_param(param, "query") for param in operation.query]
        result: dict[str, Any] = {
            "description": operation.description,
            "operationId": operation.operation_id,
            "tags": [path.tag],
            "schemes": ["https"],
            "produces": _produces(operation),
        }
        if operation.method in ("put", "patch"):
            body = {"$ref": V2_PREFIX + operation.body} if operation.body else dict(_PATCH_BODY_V2)
            parameters.append({"name": "body", "in": "body", "required": True, "schema": body})
            result["consumes"] = (
                ["application/json"] if operation.method == "put" else list(_PATCH_BODIES)
            )
        if parameters:
            result["parameters"] = parameters
        schema = (
            {"type": "string"}
            if operation.response is None
            else {"$ref": V2_PREFIX + operation.response}
        )
        result["responses"] = {"200": {"description": "OK", "schema": schema}}
        result.update(_extensions(operation))
        item[operation.method] = result
    return item


def _v3_param(param: _Param, where: str) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": param.type}
    result: dict[str, Any] = {"name": param.name, "in": where, "description": param.description}
    if where == "path":
        schema["uniqueItems"] = True
        result["required"] = True
    result["schema"] = schema
    return result


def _v3_path(path: _Path) -> dict[str, Any]:
    item: dict[str, Any] = {}
    if path.params:
        item["parameters"] = [_v3_param(param, "path") for param in path.params]
    for operation in path.operations:
        result: dict[str, Any] = {
            "description": operation.description,
            "operationId": operation.operation_id,
            "tags": [path.tag],
        }
        if operation.query:
            result["parameters"] = [_v3_param(param, "query") for param in operation.query]
        if operation.method in ("put", "patch"):
            if operation.body:
                content = {"application/json": {"schema": {"$ref": V3_PREFIX + operation.body}}}
            else:
                content = {
                    media: {"schema": copy.deepcopy(schema)}
                    for media, schema in _PATCH_BODIES.items()
                }
            result["requestBody"] = {"content": content, "required": True}
        response = (
            {"type": "string"}
            if operation.response is None
            else {"$ref": V3_PREFIX + operation.response}
        )
        result["responses"] = {
            "200": {
                "description": "OK",
                "content": {media: {"schema": dict(response)} for media in _produces(operation)},
            }
        }
        result.update(_extensions(operation))
        item[operation.method] = result
    return item
