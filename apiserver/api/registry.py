"""What kmc-apiserver serves, described once as plain values.

Discovery (`/apis/...`) and OpenAPI (`/openapi/v2`, `/openapi/v3`) are two renderings of the same
facts: which resources exist, their kinds, scopes, verbs, sub-resources and schemas. Keeping
those facts in one table of frozen values (each wing's `resources.py`) means the renderings
cannot drift apart, and request handlers can look up the very entries that discovery announced.

Schemas are OpenAPI v3 JSON schemas in one neutral dialect that the renderers translate:
shared types sit under `$defs` keyed by their full definition name (`dev.kmc.v1alpha1.Strategy`)
and are referred to as `{"$ref": "#/$defs/<name>"}` (see `ref`); a `$ref` may carry a sibling
`description`. `nullable`, `oneOf` and `anyOf` are allowed; renderers drop what their format
cannot carry. A kind's schema leaves out `apiVersion`, `kind` and `metadata`: every kind has
them, so the renderers add them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

JsonSchema = Mapping[str, Any]

DEFS_PREFIX = "#/$defs/"


def ref(name: str, description: str | None = None) -> dict[str, Any]:
    """A reference to the shared schema `name` (a key of some schema's `$defs`)."""
    schema: dict[str, Any] = {"$ref": DEFS_PREFIX + name}
    if description is not None:
        schema["description"] = description
    return schema


@dataclass(frozen=True)
class Parameter:
    """A query parameter of a sub-resource that streams (`type`: an OpenAPI scalar type)."""

    name: str
    type: str
    description: str


@dataclass(frozen=True)
class Subresource:
    """`<plural>/<name>` of every object of a resource, answering with its own kind.

    One that streams (`pods/log`, `pods/exec`) answers bytes, not an object: as in
    Kubernetes, its `kind` is that of its options (`PodExecOptions`), which discovery names
    and OpenAPI gives no schema; its options are the query `parameters`. With `create` among
    its verbs it is a connection switched to another protocol (OpenAPI's `connect` action)."""

    name: str
    kind: str
    verbs: tuple[str, ...]
    schema: JsonSchema = field(default_factory=dict, hash=False)
    description: str = ""
    stream: bool = False
    parameters: tuple[Parameter, ...] = ()


@dataclass(frozen=True)
class Resource:
    """One resource of one group-version, as discovery and OpenAPI present it."""

    group: str
    version: str
    plural: str
    singular: str
    kind: str
    namespaced: bool
    verbs: tuple[str, ...]
    short_names: tuple[str, ...] = ()
    categories: tuple[str, ...] = ()
    subresources: tuple[Subresource, ...] = ()
    schema: JsonSchema = field(default_factory=dict, hash=False)
    description: str = ""

    @property
    def group_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def list_kind(self) -> str:
        return f"{self.kind}List"


def group_versions(resources: Iterable[Resource]) -> list[tuple[str, str]]:
    """Every (group, version) served, in the order they first appear: the order of preference."""
    seen: dict[tuple[str, str], None] = {}
    for resource in resources:
        seen.setdefault((resource.group, resource.version), None)
    return list(seen)


def find(resources: Iterable[Resource], group: str, version: str, plural: str) -> Resource | None:
    """The resource served at `/apis/<group>/<version>/.../<plural>`, if any."""
    for resource in resources:
        if (resource.group, resource.version, resource.plural) == (group, version, plural):
            return resource
    return None
