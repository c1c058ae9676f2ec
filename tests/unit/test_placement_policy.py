"""PlacementPolicy: which namespaces it selects, which locations it allows, what it adds to
child objects, and that no strategy widens it."""

from __future__ import annotations

from typing import Any

from apiserver.admission import judge
from apiserver.kinds import DEPLOYMENT
from apiserver.placement.engine import Why
from apiserver.placement.policy import (
    Policy,
    applying,
    constrain,
    constraints,
    denied,
    read_policy,
)
from apiserver.sync.desired import child_object

from .test_placement_engine import loc, reasons, run, strategy


def policy(name: str, **spec: Any) -> Policy:
    return read_policy(
        {
            "metadata": {"name": name},
            "spec": {"namespaceSelector": {"matchLabels": {"tier": "restricted"}}, **spec},
        }
    )


LOCATIONS = {"us-east": {"region": "us"}, "us-west": {"region": "us"}, "eu-west": {"region": "eu"}}


def test_a_policy_selects_namespaces_by_label() -> None:
    only = policy("restricted", locations=["eu-west"])
    assert applying([only], {"tier": "restricted"}) == [only]
    assert applying([only], {"tier": "open"}) == []


def test_locations_by_name_and_by_label_both_limit() -> None:
    by_name = policy("a", locations=["eu-west", "us-east"])
    assert denied([by_name], LOCATIONS) == {"us-west": "policy a"}
    by_label = policy("b", locationSelector={"matchLabels": {"region": "us"}})
    assert denied([by_name, by_label], LOCATIONS) == {"eu-west": "policy b", "us-west": "policy a"}
    assert denied([policy("c")], LOCATIONS) == {}


def test_a_policy_that_does_not_parse_selects_everything_and_allows_nothing() -> None:
    broken = read_policy({"metadata": {"name": "x"}, "spec": {"locations": "eu-west"}})
    assert broken.spec is None and broken.error
    assert applying([broken], {}) == [broken]
    assert denied([broken], LOCATIONS) == dict.fromkeys(LOCATIONS, "policy x")


def test_no_strategy_widens_a_policy_and_the_verdict_names_only_the_policy() -> None:
    bed = [loc(name, labels=labels) for name, labels in LOCATIONS.items()]
    refused = {"us-east": "policy restricted", "us-west": "policy restricted"}
    decision = run(bed, how=strategy(pin=["us-east", "eu-west"]), denied=refused)
    assert decision.placement == {"eu-west": 3}
    assert reasons(decision)["us-east"] == "policy restricted"
    assert next(v for v in decision.verdicts if v.location == "us-west").code is Why.POLICY
    nowhere = run(bed, how=strategy(pin=["us-east"]), denied=refused)
    assert nowhere.unplaceable is not None and "us-east: policy restricted" in nowhere.unplaceable


def test_a_policy_moves_what_it_no_longer_allows_even_if_immovable() -> None:
    bed = [loc(name, labels=labels) for name, labels in LOCATIONS.items()]
    fixed = strategy(movable=False)
    decision = run(bed, {"us-east": 3}, how=fixed, denied={"us-east": "policy p"})
    assert "us-east" not in decision.placement


def test_constraints_merge_first_policy_wins_and_go_into_the_child_only() -> None:
    first = policy(
        "a",
        childConstraints={
            "nodeSelector": {"pool": "secure"},
            "tolerations": [{"key": "secure", "operator": "Exists"}],
            "priorityClassName": "high",
        },
    )
    second = policy("b", childConstraints={"nodeSelector": {"pool": "other", "disk": "ssd"}})
    added = constraints([first, second])
    assert dict(added.node_selector) == {"disk": "ssd", "pool": "secure"}
    assert added.priority_class_name == "high"
    assert not constraints([policy("c")])

    hub: dict[str, Any] = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "demo", "uid": "u"},
        "spec": {
            "replicas": 1,
            "template": {
                "spec": {
                    "containers": [{"name": "c"}],
                    "nodeSelector": {"pool": "mine", "os": "linux"},
                    "tolerations": [{"key": "x", "operator": "Exists"}],
                    "priority": 5,
                }
            },
        },
    }
    child = child_object(hub, DEPLOYMENT, "us-east", {"us-east": 1}, {}, added)
    pod = child["spec"]["template"]["spec"]
    assert pod["nodeSelector"] == {"pool": "secure", "os": "linux", "disk": "ssd"}
    assert pod["tolerations"] == [
        {"key": "x", "operator": "Exists"},
        {"key": "secure", "operator": "Exists"},
    ]
    assert pod["priorityClassName"] == "high" and "priority" not in pod
    assert hub["spec"]["template"]["spec"]["nodeSelector"] == {"pool": "mine", "os": "linux"}
    spec: dict[str, Any] = {}
    constrain(spec, constraints([]))
    assert spec == {}


def test_the_webhook_refuses_a_pin_on_a_location_the_policy_rules_out() -> None:
    annotations = {"kmc.dev/strategy": '{"type": "Split", "pin": ["us-east"]}'}
    asked = {
        "kind": {"kind": "Deployment"},
        "namespace": "demo",
        "object": {"metadata": {"name": "web", "namespace": "demo", "annotations": annotations}},
    }
    names = set(LOCATIONS)
    answer = judge(asked, names, {"us-east": "policy restricted"})
    assert answer["allowed"] is False
    assert answer["status"]["message"] == (
        "kmc.dev/strategy on Deployment demo/web: pins a location it may not use: "
        "us-east: policy restricted"
    )
    assert judge(asked, names, {"eu-west": "policy restricted"}) == {"allowed": True}
