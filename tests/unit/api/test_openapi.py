"""OpenAPI documents: what `kubectl explain` needs, and what the hub can merge without harm.

Beyond "every $ref resolves", these tests replay what the consumers do: the hub's v2 filter
(keep the paths of one APIService and the definitions they use), the rules gnostic and
kubectl's models enforce on the hub's merged v2 document, and kubectl explain's v3 lookup
(GVK from the operations, then the first schema carrying it, then the field path).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator, Mapping
from typing import Any, get_args

import pytest

from apiserver.api import openapi
from apiserver.api.registry import Resource, Subresource
from apiserver.app import RESOURCES
from apiserver.contract import MC_GROUP as MC
from apiserver.contract import REMOTE_GROUP as REMOTE
from apiserver.contract import VERSION
from apiserver.placement.strategy import Strategy, StrategyType

GROUPS = (MC, REMOTE)


def v3(group: str) -> dict[str, Any]:
    document = openapi.v3_group(RESOURCES, group, VERSION)
    assert document is not None
    return document


def refs(node: Any) -> Iterator[str]:
    """Every `$ref` anywhere below `node`."""
    if isinstance(node, Mapping):
        for key, value in node.items():
            if key == "$ref":
                yield value
            else:
                yield from refs(value)
    elif isinstance(node, list):
        for value in node:
            yield from refs(value)


def schemas(node: Any) -> Iterator[Mapping[str, Any]]:
    """`node` and every schema nested in it."""
    if not isinstance(node, Mapping):
        return
    yield node
    for key in ("items", "additionalProperties", "not"):
        yield from schemas(node.get(key))
    for key in ("allOf", "anyOf", "oneOf"):
        for sub in node.get(key, []):
            yield from schemas(sub)
    for sub in node.get("properties", {}).values():
        yield from schemas(sub)


def kinds() -> set[tuple[str, str]]:
    """(group, kind) of every kind we serve: resources, their lists, their sub-resources
    (but those that stream, whose answer is bytes, not an object of their kind)."""
    found = set()
    for r in RESOURCES:
        found |= {(r.group, r.kind), (r.group, r.list_kind)}
        found |= {(r.group, sub.kind) for sub in r.subresources if not sub.stream}
    return found


def gvk(group: str, kind: str) -> dict[str, str]:
    return {"group": group, "kind": kind, "version": VERSION}


# --- every reference resolves, in every document -----------------------------------------------


def test_every_ref_in_v2_resolves() -> None:
    document = openapi.v2(RESOURCES)
    found = list(refs(document))
    assert found
    for reference in found:
        assert reference.startswith("#/definitions/")
        assert reference.removeprefix("#/definitions/") in document["definitions"]


@pytest.mark.parametrize("group", GROUPS)
def test_every_ref_in_v3_resolves_within_its_document(group: str) -> None:
    document = v3(group)
    schemas_ = document["components"]["schemas"]
    for reference in refs(document):
        assert reference.startswith("#/components/schemas/")
        assert reference.removeprefix("#/components/schemas/") in schemas_


@pytest.mark.parametrize("group", GROUPS)
def test_v3_documents_hold_only_what_they_use(group: str) -> None:
    document = v3(group)
    used = {reference.rsplit("/", 1)[1] for reference in refs(document)}
    assert set(document["components"]["schemas"]) == used


# --- one schema per kind -----------------------------------------------------------------------


def owners(definitions: Mapping[str, Mapping[str, Any]], group: str, kind: str) -> list[str]:
    return [
        name
        for name, schema in definitions.items()
        if gvk(group, kind) in schema.get("x-kubernetes-group-version-kind", [])
    ]


def test_each_kind_has_exactly_one_v2_definition_named_as_kubernetes_names_it() -> None:
    definitions = openapi.v2(RESOURCES)["definitions"]
    for group, kind in kinds():
        assert owners(definitions, group, kind) == [openapi.definition_name(group, VERSION, kind)]
    assert "dev.kmc.mc.v1alpha1.Deployment" in definitions
    assert "dev.kmc.remote.v1alpha1.Pod" in definitions
    assert "dev.kmc.remote.v1alpha1.PodList" in definitions
    carrying = [d for d in definitions.values() if "x-kubernetes-group-version-kind" in d]
    assert len(carrying) == len(kinds())


@pytest.mark.parametrize("group", GROUPS)
def test_each_kind_has_exactly_one_v3_schema_in_its_group_document(group: str) -> None:
    components = v3(group)["components"]["schemas"]
    for kind_group, kind in kinds():
        expected = [openapi.definition_name(group, VERSION, kind)] if kind_group == group else []
        assert owners(components, kind_group, kind) == expected


def test_every_definition_is_in_our_namespace() -> None:
    """The hub keeps its own definition on a name clash and renames ours; we avoid clashes."""
    for name in openapi.v2(RESOURCES)["definitions"]:
        assert name.startswith("dev.kmc.")
        # The hub's own CRD of the kmc.dev group.
        assert name not in ("dev.kmc.v1alpha1.Location", "dev.kmc.v1alpha1.LocationList")


# --- what the hub does with /openapi/v2 --------------------------------------------------------

SWAGGER_SCHEMA_KEYS = {
    "$ref", "additionalProperties", "allOf", "default", "description", "discriminator", "enum",
    "example", "exclusiveMaximum", "exclusiveMinimum", "externalDocs", "format", "items",
    "maxItems", "maxLength", "maxProperties", "maximum", "minItems", "minLength",
    "minProperties", "minimum", "multipleOf", "pattern", "properties", "readOnly", "required",
    "title", "type", "uniqueItems", "xml",
}  # fmt: skip


def v2_schemas(document: Mapping[str, Any]) -> Iterator[Mapping[str, Any]]:
    for definition in document["definitions"].values():
        yield from schemas(definition)
    for item in document["paths"].values():
        for method, operation in item.items():
            if method == "parameters":
                continue
            for parameter in operation.get("parameters", []):
                yield from schemas(parameter.get("schema"))
            for response in operation["responses"].values():
                yield from schemas(response.get("schema"))


def test_v2_schemas_are_swagger_only_so_the_hub_can_still_serve_protobuf() -> None:
    """gnostic rejects a whole document for one unknown key; kubectl's models reject a typed
    `$ref`, an array without items and types other than Swagger's."""
    for schema in v2_schemas(openapi.v2(RESOURCES)):
        unknown = {key for key in schema if key not in SWAGGER_SCHEMA_KEYS}
        assert all(key.startswith("x-") for key in unknown), unknown
        if "$ref" in schema:
            assert set(schema) <= {"$ref", "description"}
        if "type" in schema:
            assert schema["type"] in {"object", "array", "string", "integer", "number", "boolean"}
        if schema.get("type") == "array":
            assert isinstance(schema["items"], Mapping)
        if isinstance(schema.get("additionalProperties"), bool):
            pytest.fail("Kubernetes documents never close objects with additionalProperties")


def test_v2_operations_are_valid_swagger() -> None:
    document = openapi.v2(RESOURCES)
    assert document["swagger"] == "2.0"
    assert set(document["info"]) == {"title", "version"}
    for path, item in document["paths"].items():
        assert path.startswith("/apis/")
        for parameter in item.get("parameters", []):
            assert parameter["in"] == "path" and parameter["required"] is True
            assert f"{{{parameter['name']}}}" in path
        for method, operation in item.items():
            if method == "parameters":
                continue
            assert method in ("get", "post", "put", "patch")
            assert all(response["description"] for response in operation["responses"].values())
            for parameter in operation.get("parameters", []):
                assert parameter["in"] in ("query", "body")
                assert ("schema" in parameter) == (parameter["in"] == "body")
                assert ("type" in parameter) == (parameter["in"] == "query")
    ids = [
        operation["operationId"]
        for item in document["paths"].values()
        for method, operation in item.items()
        if method != "parameters"
    ]
    assert len(ids) == len(set(ids))


def used_definitions(document: Mapping[str, Any], paths: Mapping[str, Any]) -> set[str]:
    """Definitions reachable from `paths`, following refs through definitions."""
    seen: set[str] = set()
    todo = [reference.rsplit("/", 1)[1] for reference in refs(paths)]
    while todo:
        name = todo.pop()
        if name not in seen:
            seen.add(name)
            todo.extend(
                reference.rsplit("/", 1)[1] for reference in refs(document["definitions"][name])
            )
    return seen


@pytest.mark.parametrize("group", GROUPS)
def test_v2_survives_the_hubs_filter_for_each_apiservice(group: str) -> None:
    """The hub keeps, per APIService, the paths under /apis/<group>/<version>/ and the
    definitions they use (or that no path uses at all): each kind must stay."""
    document = openapi.v2(RESOURCES)
    prefix = f"/apis/{group}/{VERSION}/"
    kept_paths = {path: item for path, item in document["paths"].items() if path.startswith(prefix)}
    assert kept_paths
    initially = used_definitions(document, document["paths"])
    used = used_definitions(document, kept_paths)
    kept = {name for name in document["definitions"] if name in used or name not in initially}
    for kind_group, kind in kinds():
        name = openapi.definition_name(kind_group, VERSION, kind)
        assert (name in kept) == (kind_group == group)
    assert not (set(document["definitions"]) - initially), "a definition no path uses"


# --- what kubectl explain does with /openapi/v3 ------------------------------------------------


def resolve(document: Mapping[str, Any], schema: Mapping[str, Any]) -> Mapping[str, Any]:
    reference = schema.get("$ref")
    if reference is None:
        return schema
    resolved: Mapping[str, Any] = document["components"]["schemas"][reference.rsplit("/", 1)[1]]
    return resolved


def field(
    document: Mapping[str, Any], schema: Mapping[str, Any], name: str
) -> Mapping[str, Any] | None:
    """kubectl's `output` template: properties, then items, additionalProperties, allOf."""
    resolved = resolve(document, schema)
    if name in resolved.get("properties", {}):
        found: Mapping[str, Any] = resolved["properties"][name]
        return found
    for key in ("items", "additionalProperties"):
        if isinstance(resolved.get(key), Mapping):
            return field(document, resolved[key], name)
    for sub in resolved.get("allOf", []):
        nested = field(document, sub, name)
        if nested is not None:
            return nested
    return None


def field_names(document: Mapping[str, Any], schema: Mapping[str, Any]) -> set[str]:
    """kubectl's `fieldList` template: the fields listed under FIELDS."""
    resolved = resolve(document, schema)
    names = set(resolved.get("properties", {}))
    for sub in resolved.get("allOf", []):
        names |= field_names(document, sub)
    for key in ("items", "additionalProperties"):
        if isinstance(resolved.get(key), Mapping):
            names |= field_names(document, resolved[key])
    return names


def explain(
    group: str, plural: str, *path: str
) -> tuple[dict[str, str], Mapping[str, Any], Mapping[str, Any]]:
    """What kubectl explain finds for `<plural>.<group>.<path...>`: GVK, kind schema, field."""
    document = v3(group)
    prefix = f"/apis/{group}/{VERSION}"
    found: dict[str, str] | None = None
    for url in (
        f"{prefix}/{plural}",
        f"{prefix}/{plural}/{{name}}",
        f"{prefix}/namespaces/{{namespace}}/{plural}",
        f"{prefix}/namespaces/{{namespace}}/{plural}/{{name}}",
    ):
        item = document["paths"].get(url, {})
        for method in ("get", "post", "put", "patch", "delete"):
            if "x-kubernetes-group-version-kind" in item.get(method, {}):
                found = item[method]["x-kubernetes-group-version-kind"]
                break
    assert found is not None, f"GVR {group}/{plural} not found in OpenAPI schema"
    components = document["components"]["schemas"]
    names = [
        n
        for n in sorted(components)
        if found in components[n].get("x-kubernetes-group-version-kind", [])
    ]
    assert names, f"GVK {found} not found in OpenAPI schema"
    kind_schema = components[names[0]]
    schema: Mapping[str, Any] = kind_schema
    for name in path:
        nested = field(document, schema, name)
        assert nested is not None, f'field "{name}" does not exist'
        schema = nested
    return found, kind_schema, schema


@pytest.mark.parametrize("resource", RESOURCES, ids=lambda r: f"{r.plural}.{r.group}")
def test_kubectl_explain_finds_every_resource(resource: Resource) -> None:
    found, kind_schema, _ = explain(resource.group, resource.plural)
    assert found == gvk(resource.group, resource.kind)
    assert kind_schema["description"] == resource.description
    assert {"apiVersion", "kind", "metadata"} <= set(kind_schema["properties"])


def test_kubectl_explain_deployments_mc() -> None:
    document = v3(MC)
    _, kind_schema, _ = explain(MC, "deployments")
    assert set(kind_schema["properties"]) == {"apiVersion", "kind", "metadata", "spec", "status"}
    _, _, spec = explain(MC, "deployments", "spec")
    assert field_names(document, spec) == {"replicas", "strategy", "strategySource"}
    _, _, selector = explain(MC, "deployments", "spec", "strategy", "locationSelector")
    assert field_names(document, selector) == {"matchLabels", "matchExpressions"}
    _, _, operator = explain(MC, "deployments", "spec", "strategy", "tolerations", "operator")
    assert operator["enum"] == ["Equal", "Exists"]


def test_kubectl_explain_deployments_mc_status_locations() -> None:
    document = v3(MC)
    _, _, locations = explain(MC, "deployments", "status", "locations")
    assert locations["type"] == "array"
    assert field_names(document, locations) == {
        "location",
        "desired",
        "ready",
        "available",
        "syncedGeneration",
        "state",
        "message",
    }
    _, _, state = explain(MC, "deployments", "status", "locations", "state")
    assert state["enum"] == [
        "Pending",
        "Synced",
        "Moving",
        "Evacuating",
        "Unreachable",
        "Waiting",
        "Incompatible",
    ]


def test_daemonsets_have_no_replicas_and_jobs_count_pods() -> None:
    document = v3(MC)
    _, _, spec = explain(MC, "daemonsets", "spec")
    assert "replicas" not in field_names(document, spec)
    _, _, status = explain(MC, "jobs", "status")
    assert {"active", "succeeded", "failed"} <= field_names(document, status)
    assert "readyReplicas" not in field_names(document, status)


def test_kubectl_explain_pods_remote_points_at_the_real_kind() -> None:
    _, pod, _ = explain(REMOTE, "pods")
    assert pod["x-kubernetes-preserve-unknown-fields"] is True
    assert "kubectl explain pods" in pod["description"]
    assert "kmc.dev/location" in pod["description"]
    _, deployment, _ = explain(REMOTE, "deployments")
    assert "kubectl explain deployments.apps" in deployment["description"]


def test_sub_resource_kinds_are_documented() -> None:
    document = v3(MC)
    components = document["components"]["schemas"]
    placement = components["dev.kmc.mc.v1alpha1.Placement"]
    assert field_names(document, placement) == {"apiVersion", "kind", "metadata", "locations"}
    strategy = components["dev.kmc.mc.v1alpha1.Strategy"]
    assert field_names(document, strategy) == {"apiVersion", "kind", "metadata", "spec", "status"}
    status = field(document, strategy, "status")
    assert status is not None
    verdicts = field(document, status, "verdicts")
    assert verdicts is not None
    assert field_names(document, verdicts) == {"location", "eligible", "reason"}
    operations = document["paths"][
        f"/apis/{MC}/{VERSION}/namespaces/{{namespace}}/jobs/{{name}}/strategy"
    ]
    assert set(operations) == {"parameters", "get", "put", "patch"}
    assert operations["put"]["x-kubernetes-group-version-kind"] == gvk(MC, "Strategy")


def test_pod_streams_are_documented_as_kubernetes_documents_them() -> None:
    """Connect operations (GET and POST) for exec, attach and portforward, a read for log;
    each answers a string, takes its options as query parameters, and names the options'
    kind, which has no schema (Kubernetes has none either)."""
    document = v3(REMOTE)
    pods = f"/apis/{REMOTE}/{VERSION}/namespaces/{{namespace}}/pods/{{name}}"
    log = document["paths"][f"{pods}/log"]
    assert set(log) == {"parameters", "get"}
    assert log["get"]["operationId"] == "readRemoteKmcDevV1alpha1NamespacedPodLog"
    assert log["get"]["x-kubernetes-action"] == "get"
    assert {p["name"] for p in log["get"]["parameters"]} >= {"container", "follow", "tailLines"}
    for sub, kind in (
        ("exec", "PodExecOptions"),
        ("attach", "PodAttachOptions"),
        ("portforward", "PodPortForwardOptions"),
    ):
        item = document["paths"][f"{pods}/{sub}"]
        assert set(item) == {"parameters", "get", "post"}
        for method in ("get", "post"):
            operation = item[method]
            assert operation["x-kubernetes-action"] == "connect"
            assert operation["x-kubernetes-group-version-kind"] == gvk(REMOTE, kind)
            assert operation["operationId"].startswith(f"connect{method.capitalize()}")
            schema = operation["responses"]["200"]["content"]["*/*"]["schema"]
            assert schema == {"type": "string"}
        assert f"dev.kmc.remote.v1alpha1.{kind}" not in document["components"]["schemas"]
    exec_query = {p["name"] for p in document["paths"][f"{pods}/exec"]["get"]["parameters"]}
    assert exec_query == {"command", "container", "stdin", "stdout", "stderr", "tty"}


def test_every_field_has_a_description() -> None:
    """kubectl explain prints `<no description>` otherwise."""
    for document in (
        openapi.v2(RESOURCES)["definitions"],
        *(v3(g)["components"]["schemas"] for g in GROUPS),
    ):
        for name, definition in document.items():
            assert definition.get("description"), name
            for schema in schemas(definition):
                for field_name, prop in schema.get("properties", {}).items():
                    assert prop.get("description"), f"{name}: {field_name}"


def test_the_strategy_schema_is_the_models() -> None:
    definition = v3(MC)["components"]["schemas"]["dev.kmc.v1alpha1.Strategy"]
    aliases = {info.alias or name for name, info in Strategy.model_fields.items()}
    assert set(definition["properties"]) == aliases
    assert definition["properties"]["type"]["enum"] == list(get_args(StrategyType))
    assert definition["required"] == ["type"]
    # Nullable in v3; v2 cannot say it and must not try.
    assert definition["properties"]["maxPerLocation"]["nullable"] is True
    assert definition["properties"]["locationSelector"]["allOf"] == [
        {"$ref": "#/components/schemas/dev.kmc.v1alpha1.LabelSelector"}
    ]
    assert {"oneOf", "nullable"} <= set(definition["properties"]["weights"])
    v2_weights = openapi.v2(RESOURCES)["definitions"]["dev.kmc.v1alpha1.Strategy"]["properties"][
        "weights"
    ]
    assert set(v2_weights) == {"description"}


def test_secrets_are_not_documented() -> None:
    for document in (openapi.v2(RESOURCES), *(v3(g) for g in GROUPS)):
        text = json.dumps(document)
        assert "/secrets" not in text
        assert "Secret" not in text


# --- the v3 index and its hashes ----------------------------------------------------------------


def test_v3_index_points_at_each_group_version_with_its_hash() -> None:
    index = openapi.v3_index(RESOURCES)
    assert set(index) == {"paths"}
    assert set(index["paths"]) == {f"apis/{g}/{VERSION}" for g in GROUPS}
    for group in GROUPS:
        url = index["paths"][f"apis/{group}/{VERSION}"]["serverRelativeURL"]
        assert url == f"/openapi/v3/apis/{group}/{VERSION}?hash={openapi.spec_hash(v3(group))}"


def test_hashes_are_stable_and_follow_the_content() -> None:
    assert openapi.v3_index(RESOURCES) == openapi.v3_index(RESOURCES)
    assert openapi.serialize(openapi.v2(RESOURCES)) == openapi.serialize(openapi.v2(RESOURCES))
    digest = openapi.spec_hash(v3(MC))
    assert len(digest) == 128 and digest == digest.upper()
    assert digest == openapi.spec_hash(json.loads(openapi.serialize(v3(MC))))
    changed = tuple(dataclasses.replace(r, description=r.description + "!") for r in RESOURCES)
    assert openapi.spec_hash(openapi.v3_group(changed, MC, VERSION) or {}) != digest


def test_unknown_group_version_has_no_document() -> None:
    assert openapi.v3_group(RESOURCES, MC, "v1") is None
    assert openapi.v3_group(RESOURCES, "apps", "v1") is None


def test_documents_are_json() -> None:
    for document in (openapi.v2(RESOURCES), openapi.v3_index(RESOURCES), *(v3(g) for g in GROUPS)):
        assert json.loads(openapi.serialize(document)) == document


def test_building_documents_leaves_the_registry_untouched() -> None:
    before = json.dumps(
        [(r.schema, [s.schema for s in r.subresources]) for r in RESOURCES], sort_keys=True
    )
    document = openapi.v2(RESOURCES)
    document["definitions"]["dev.kmc.v1alpha1.Strategy"]["properties"].clear()
    v3(MC)["components"]["schemas"]["dev.kmc.mc.v1alpha1.LocationState"]["properties"].clear()
    after = json.dumps(
        [(r.schema, [s.schema for s in r.subresources]) for r in RESOURCES], sort_keys=True
    )
    assert before == after


# --- mistakes in a registry are errors, not broken documents -----------------------------------


def thing(schema: Mapping[str, Any], *subresources: Subresource) -> Resource:
    return Resource(
        "x.example",
        "v1",
        "things",
        "thing",
        "Thing",
        True,
        ("get", "list"),
        subresources=subresources,
        schema=schema,
        description="A thing.",
    )


def test_one_name_for_two_schemas_is_refused() -> None:
    a = Subresource("a", "Part", ("get",), {"type": "object", "description": "one"})
    b = Subresource("b", "Part", ("get",), {"type": "object", "description": "two"})
    with pytest.raises(ValueError, match=r"example\.x\.v1\.Part"):
        openapi.v2([thing({"type": "object"}, a, b)])


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "object", "properties": {"n": {"const": 1, "description": "n"}}},
        {"type": "object", "properties": {"n": {"type": "null", "description": "n"}}},
        {"type": "object", "properties": {"kind": {"type": "string", "description": "k"}}},
        {"type": "object", "properties": {"n": {"$ref": "#/definitions/elsewhere"}}},
    ],
)
def test_schemas_that_cannot_be_written_are_refused(schema: Mapping[str, Any]) -> None:
    with pytest.raises(ValueError):
        openapi.v2([thing(schema)])
    with pytest.raises(ValueError):
        openapi.v3_group([thing(schema)], "x.example", "v1")
