"""Each of our kinds is described twice: its CRD in `manifests/crds/` (what the hub validates
and `kubectl explain` prints) and the pydantic model the server reads it with. This test
holds them to one shape, field by field: the same properties at every level, the same
types, enums and required fields. A field added to one and not the other fails here."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import BaseModel

from apiserver.models.apiimport import APIImport
from apiserver.models.location import Location
from apiserver.models.override import ClusterOverrideSpec, OverrideSpec, OverrideStatus
from apiserver.placement.policy import PolicySpec

CRDS = Path(__file__).resolve().parents[2] / "manifests" / "crds"
Schema = dict[str, Any]


def crd_schema(name: str) -> Schema:
    crd = yaml.safe_load((CRDS / f"{name}.yaml").read_text())
    (version,) = crd["spec"]["versions"]
    schema: Schema = version["schema"]["openAPIV3Schema"]
    return schema


def model_schema(model: type[BaseModel]) -> Schema:
    """The model's JSON schema with every `$ref` put in place and optional fields unwrapped."""
    raw = model.model_json_schema(by_alias=True, mode="serialization")
    defs = raw.pop("$defs", {})

    def resolve(node: Any) -> Any:
        if isinstance(node, dict):
            if "$ref" in node:
                return resolve(defs[node["$ref"].rsplit("/", 1)[-1]])
            options = node.get("anyOf")
            if options is not None:
                real = [o for o in options if o != {"type": "null"}]
                if len(real) == 1:
                    return resolve(real[0])
            return {key: resolve(value) for key, value in node.items()}
        if isinstance(node, list):
            return [resolve(item) for item in node]
        return node

    resolved: Schema = resolve(raw)
    return resolved


def differences(model: Schema, crd: Schema, path: str = "") -> list[str]:
    """Where the two schemas disagree; [] when they have one shape."""
    found: list[str] = []
    kind = crd.get("type")
    if "const" in model:
        model = {**model, "enum": [model["const"]]}
    # A model's `dict[str, Any]` has no type of its own: an object of anything.
    untyped = model.get("type") is None and kind == "object"
    if model.get("type") != kind and not untyped:
        found.append(f"{path or '.'}: model {model.get('type')}, CRD {kind}")
    if set(model.get("enum") or ()) != set(crd.get("enum") or ()):
        found.append(f"{path}: enum {model.get('enum')} vs {crd.get('enum')}")
    crd_props, model_props = crd.get("properties") or {}, model.get("properties") or {}
    if crd_props or model_props:
        for name in sorted(set(crd_props) ^ set(model_props)):
            where = "the CRD" if name in crd_props else "the model"
            found.append(f"{path}.{name}: only in {where}")
        for name in sorted(set(crd_props) & set(model_props)):
            found += differences(model_props[name], crd_props[name], f"{path}.{name}")
        if set(crd.get("required") or ()) != set(model.get("required") or ()):
            found.append(f"{path}: required {model.get('required')} vs {crd.get('required')}")
    if "items" in crd or "items" in model:
        found += differences(model.get("items") or {}, crd.get("items") or {}, f"{path}[]")
    extra = crd.get("additionalProperties")
    if isinstance(extra, dict):
        found += differences(model.get("additionalProperties") or {}, extra, f"{path}{{}}")
    return found


def test_location_model_and_crd_agree() -> None:
    crd = crd_schema("locations.kmc.dev")
    model = model_schema(Location)
    for part in ("spec", "status"):
        assert differences(model["properties"][part], crd["properties"][part], f".{part}") == []


def test_apiimport_model_and_crd_agree() -> None:
    crd = crd_schema("apiimports.kmc.dev")
    model = model_schema(APIImport)
    for part in ("spec", "status"):
        assert differences(model["properties"][part], crd["properties"][part], f".{part}") == []


def test_placementpolicy_model_and_crd_agree() -> None:
    crd = crd_schema("placementpolicies.kmc.dev")
    assert differences(model_schema(PolicySpec), crd["properties"]["spec"], ".spec") == []


@pytest.mark.parametrize(
    ("name", "model"),
    [("overrides.kmc.dev", OverrideSpec), ("clusteroverrides.kmc.dev", ClusterOverrideSpec)],
)
def test_override_models_and_crds_agree(name: str, model: type[BaseModel]) -> None:
    crd = crd_schema(name)
    assert differences(model_schema(model), crd["properties"]["spec"], ".spec") == []
    status = crd["properties"]["status"]
    assert differences(model_schema(OverrideStatus), status, ".status") == []


@pytest.mark.parametrize(
    ("model", "crd", "expected"),
    [
        ({"type": "object", "properties": {"a": {"type": "string"}}}, {"type": "object"}, [".a"]),
        ({"type": "integer"}, {"type": "string"}, ["."]),
        ({"type": "string", "enum": ["A"]}, {"type": "string", "enum": ["A", "B"]}, [""]),
    ],
)
def test_a_difference_is_found(model: Schema, crd: Schema, expected: list[str]) -> None:
    found = differences(model, crd)
    assert [f.split(":")[0] for f in found] == expected
