"""What a rule sets, for conflicts between overrides."""

from __future__ import annotations

from apiserver.overrides.paths import overlap, sets
from apiserver.overrides.rules import parse_rule


def of(rule: object) -> frozenset[str]:
    return sets(parse_rule(rule, "r"))


def test_each_rule_says_what_it_sets() -> None:
    assert of({"image": {"tag": "2", "containers": ["app"]}}) == {"containers/app/image"}
    assert of({"env": {"set": {"A": "1"}, "remove": ["B"]}}) == {
        "containers/*/env/A",
        "containers/*/env/B",
    }
    assert of({"labels": {"set": {"a": "b"}, "on": "template"}}) == {"template/labels/a"}
    assert of({"patch": [{"op": "add", "path": "/spec/x", "value": 1}]}) == {"/spec/x"}
    assert of({"field": {"path": "/data/c", "patch": [{"op": "remove", "path": "/a"}]}}) == {
        "/data/c/a"
    }
    assert of({"resources": {"limits": {"cpu": "1"}}}) == {"containers/*/resources/limits/cpu"}


def test_every_container_overlaps_a_named_one() -> None:
    everywhere = of({"image": {"tag": "2"}})
    app = of({"image": {"registry": "m", "containers": ["app"]}})
    assert overlap(everywhere, app) == ["containers/app/image"]
    assert overlap(of({"env": {"set": {"A": "1"}}}), of({"env": {"set": {"B": "1"}}})) == []
