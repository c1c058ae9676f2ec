"""Hub-only `location.kmc.dev/` terms: read by placement, taken out of the children's pod
templates, leaving what the rest of the template means in each location."""

from __future__ import annotations

import copy
from typing import Any

from apiserver.kinds import DEPLOYMENT
from apiserver.placement.template import strip_hub_only
from apiserver.sync.desired import child_object

NAME = "location.kmc.dev/name"
REGION = "topology.kubernetes.io/region"


def expr(key: str, operator: str, *values: str) -> dict[str, Any]:
    return {"key": key, "operator": operator, **({"values": list(values)} if values else {})}


def required(*terms: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": term} for term in terms]
            }
        }
    }


def stripped(location: str = "eu-west", labels: dict[str, str] | None = None, **pod: Any) -> Any:
    spec = copy.deepcopy(pod)
    strip_hub_only(spec, location, labels)
    return spec


def test_a_term_of_hub_only_expressions_that_holds_drops_the_requirement() -> None:
    assert stripped(affinity=required([expr(NAME, "In", "eu-west")])) == {}


def test_a_term_keeps_its_node_expressions() -> None:
    affinity = required([expr(NAME, "In", "eu-west"), expr("disk", "In", "ssd")])
    assert stripped(affinity=affinity) == {"affinity": required([expr("disk", "In", "ssd")])}


def test_a_term_false_here_goes_and_the_others_decide() -> None:
    affinity = required([expr(NAME, "In", "us-east")], [expr(REGION, "In", "eu")])
    assert stripped(affinity=affinity) == {"affinity": required([expr(REGION, "In", "eu")])}


def test_location_labels_are_read_when_known_and_assumed_otherwise() -> None:
    affinity = required([expr("location.kmc.dev/tier", "In", "gold")], [expr("disk", "Exists")])
    assert stripped(labels={"tier": "iron"}, affinity=affinity) == {
        "affinity": required([expr("disk", "Exists")])
    }
    assert stripped(labels={"tier": "gold"}, affinity=affinity) == {}
    assert stripped(labels=None, affinity=affinity) == {}


def test_templates_without_hub_only_terms_are_untouched() -> None:
    pod: dict[str, Any] = {
        "affinity": required([expr(REGION, "In", "us")]),
        "nodeSelector": {"disk": "ssd"},
        "topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "zone"}],
    }
    assert stripped(**pod) == pod


def test_preferred_terms_node_selector_and_spreads_lose_their_hub_only_parts() -> None:
    preferred = {
        "nodeAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": 5, "preference": {"matchExpressions": [expr(NAME, "In", "a")]}},
                {
                    "weight": 2,
                    "preference": {
                        "matchExpressions": [expr(NAME, "In", "b"), expr("disk", "Exists")]
                    },
                },
            ]
        },
        "podAntiAffinity": {"x": 1},
    }
    spec = stripped(
        affinity=preferred,
        nodeSelector={NAME: "eu-west", "disk": "ssd"},
        topologySpreadConstraints=[
            {"maxSkew": 1, "topologyKey": NAME},
            {"maxSkew": 1, "topologyKey": "zone"},
        ],
    )
    assert spec == {
        "affinity": {
            "nodeAffinity": {
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {"weight": 2, "preference": {"matchExpressions": [expr("disk", "Exists")]}}
                ]
            },
            "podAntiAffinity": {"x": 1},
        },
        "nodeSelector": {"disk": "ssd"},
        "topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "zone"}],
    }
    only_hub = stripped(nodeSelector={NAME: "x"}, topologySpreadConstraints=[{"topologyKey": NAME}])
    assert only_hub == {}


def test_a_child_deployment_has_no_hub_only_term_and_the_hub_object_keeps_its_own() -> None:
    affinity = required([expr(NAME, "In", "eu-west")])
    hub = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "demo", "uid": "u-1"},
        "spec": {
            "replicas": 2,
            "template": {"spec": {"containers": [{"name": "c"}], "affinity": affinity}},
        },
    }
    before = copy.deepcopy(hub)
    child = child_object(hub, DEPLOYMENT, "eu-west", {"eu-west": 2}, {})
    assert "affinity" not in child["spec"]["template"]["spec"]
    assert hub == before
