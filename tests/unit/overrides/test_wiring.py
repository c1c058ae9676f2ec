"""Overrides where the sync loop makes a child and folds a status: the child a location gets,
what never gets through, and the `Overridden` condition."""

from __future__ import annotations

import json
from typing import Any

import pytest

from apiserver.contract import ORIGIN, OVERRIDDEN, OVERRIDES
from apiserver.kinds import ALL, PLACED, Kind
from apiserver.overrides.apply import OverrideError
from apiserver.overrides.rules import RuleError
from apiserver.sync.desired import location_child
from apiserver.sync.status import fold
from tests.unit.hub_fakes import web_deployment

US = {"topology.kubernetes.io/region": "us"}


def entry(kind: str) -> Kind:
    return next(k for k in ALL if k.kind == kind)


def hub(overrides: Any = None, **annotations: str) -> dict[str, Any]:
    if overrides is not None:
        annotations[OVERRIDES] = json.dumps(overrides)
    return web_deployment(annotations, 3, uid="u-1", container="app", image="web:1", generation=1)


def child(obj: dict[str, Any], location: str, labels: dict[str, str]) -> dict[str, Any]:
    return location_child(obj, entry("Deployment"), location, {location: 2}, labels)


def test_each_location_gets_its_own_rules_with_its_share() -> None:
    obj = hub(
        {
            "topology.kubernetes.io/region=us": [{"env": {"set": {"SITE": "${location.name}"}}}],
            "us-west": [{"image": {"registry": "mirror.example"}}],
        }
    )
    west = child(obj, "us-west", US)
    app = west["spec"]["template"]["spec"]["containers"][0]
    assert app == {
        "name": "app",
        "image": "mirror.example/web:1",
        "env": [{"name": "SITE", "value": "us-west"}],
    }
    assert west["spec"]["replicas"] == 2  # the share, not the hub's 3
    east = child(obj, "us-east", US)["spec"]["template"]["spec"]["containers"][0]
    assert east == {"name": "app", "image": "web:1", "env": [{"name": "SITE", "value": "us-east"}]}
    eu = child(obj, "eu-west", {"topology.kubernetes.io/region": "eu"})
    assert eu["spec"]["template"]["spec"]["containers"][0] == {"name": "app", "image": "web:1"}
    assert "annotations" not in eu["metadata"]  # kmc.dev/overrides itself never gets through
    assert obj["spec"]["template"]["spec"]["containers"][0] == {"name": "app", "image": "web:1"}


def test_nothing_of_ours_gets_through_a_patch_and_the_origin_stays() -> None:
    obj = hub(
        {
            "us-west": [
                {
                    "patch": [
                        {"op": "add", "path": "/metadata/annotations", "value": {"kmc.dev/x": "1"}},
                        {"op": "replace", "path": "/metadata/labels", "value": {"a": "b"}},
                    ]
                }
            ]
        }
    )
    west = child(obj, "us-west", US)
    assert west["metadata"]["labels"] == {"a": "b", ORIGIN: "u-1"}
    assert "annotations" not in west["metadata"]


def test_a_rule_that_fails_or_a_bad_annotation_raises() -> None:
    bad = hub({"us-west": [{"patch": [{"op": "replace", "path": "/spec/nope", "value": 1}]}]})
    with pytest.raises(OverrideError, match=r'\["us-west"\]\[0\] \(patch\): replace /spec/nope'):
        child(bad, "us-west", US)
    child(bad, "us-east", US)  # the others go on
    with pytest.raises(RuleError, match="not JSON"):
        child(hub(None, **{OVERRIDES: "{"}), "us-east", US)


def status(obj: dict[str, Any], failures: dict[str, str]) -> dict[str, Any]:
    rules = PLACED["Deployment"].fold_rules
    assert rules is not None
    folded = fold(
        obj, rules, {"us-west": None}, {"us-west": 2}, {}, {}, "2026-12-06T00:00:00Z", failures
    )
    return {c["type"]: c for c in folded["conditions"]}


def test_the_overridden_condition() -> None:
    assert OVERRIDDEN not in status(hub(), {})
    failed = status(hub({"us-west": []}), {"us-west": "rule r[0] (patch): no such path"})
    assert failed[OVERRIDDEN] | {"lastTransitionTime": "", "lastUpdateTime": ""} == {
        "type": OVERRIDDEN,
        "status": "False",
        "reason": "OverrideFailed",
        "message": "in us-west: rule r[0] (patch): no such path",
        "lastTransitionTime": "",
        "lastUpdateTime": "",
    }
    assert status(hub({"us-west": []}), {})[OVERRIDDEN]["status"] == "True"
    had = hub()
    had["status"] = {"conditions": [failed[OVERRIDDEN]]}
    assert status(had, {})[OVERRIDDEN]["reason"] == "NoOverrides"
