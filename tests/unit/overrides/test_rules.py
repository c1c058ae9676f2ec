"""Parsing rules and the `kmc.dev/overrides` annotation: what is refused, and in what words."""

from __future__ import annotations

import json
from typing import Any

import pytest

from apiserver.overrides.annotation import parse_overrides, rules_for
from apiserver.overrides.rules import EnvRule, RuleError, parse_rules


def test_every_rule_key_parses() -> None:
    rules = parse_rules(
        [
            {"image": {"registry": "mirror.eu.example", "containers": ["app"]}},
            {"env": {"set": {"SITE": "${location.name}"}, "remove": ["DEBUG"]}},
            {"args": {"append": ["--region=${location.labels['topology.kubernetes.io/region']}"]}},
            {"command": {"replace": ["/bin/run"]}},
            {"labels": {"set": {"canary": "true"}, "remove": ["old"], "on": "template"}},
            {"annotations": {"set": {"note": "x y z"}}},
            {"resources": {"containers": ["app"], "limits": {"cpu": "500m"}}},
            {
                "patch": [
                    {"op": "add", "path": "/spec/template/spec/priorityClassName", "value": "low"}
                ]
            },
            {
                "field": {
                    "path": "/data/config.yaml",
                    "patch": [{"op": "replace", "path": "/log", "value": 1}],
                }
            },
        ],
        "rules",
    )
    assert [r.key for r in rules] == [
        "image",
        "env",
        "args",
        "command",
        "labels",
        "annotations",
        "resources",
        "patch",
        "field",
    ]
    assert isinstance(rules[1].body, EnvRule)
    assert rules[1].name == "rules[1] (env)"


@pytest.mark.parametrize(
    ("rule", "message"),
    [
        ({"imagee": {"tag": "1"}}, r'rules\[0\]: unknown rule "imagee": write one of image, env'),
        ({"image": {"tag": "1"}, "env": {}}, r"exactly one key, got image, env: write each"),
        ({}, "a rule is an object with one key"),
        ({"image": {}}, r"rules\[0\]\.image: write at least one of registry"),
        ({"image": {"tga": "1"}}, r"rules\[0\]\.image\.tga: unknown field"),
        ({"image": {"digest": "abc"}}, "digest must look like sha256"),
        ({"env": {"set": {"A": 1}}}, r"rules\[0\]\.env\.set\.A: .*string"),
        ({"args": {"append": ["a"], "replace": ["b"]}}, "exactly one of append"),
        ({"labels": {"set": {"kmc.dev/x": "1"}}}, "kubectl-mc's own"),
        ({"labels": {"set": {"a": "not ok!"}}}, r'labels\.set\["a"\]: a valid label'),
        ({"labels": {"set": {"a": "b"}, "on": "pod"}}, r"labels\.on: .*object.*template"),
        ({"resources": {"limits": {"cpu": "lots"}}}, "not a quantity"),
        ({"patch": [{"op": "upsert", "path": "/a"}]}, r"patch\[0\]: op must be one of"),
        ({"patch": [{"op": "add", "path": "a", "value": 1}]}, r'must be "" or start with "/"'),
        ({"patch": [{"op": "replace", "path": "/spec/replicas", "value": 1}]}, "placement's"),
        ({"patch": []}, "list of RFC 6902 operations"),
        (
            {"env": {"set": {"A": "${location.zone}"}}},
            r"unknown variable \$\{location.zone\}: write",
        ),
        ({"env": {"set": {"A": "${location.name"}}}, "not closed"),
        ({"field": {"path": "", "patch": [{"op": "remove", "path": "/a"}]}}, "string field"),
    ],
)
def test_refusals_name_the_field(rule: dict[str, Any], message: str) -> None:
    with pytest.raises(RuleError, match=message):
        parse_rules([rule], "rules")


def test_not_a_list() -> None:
    with pytest.raises(RuleError, match="must be a list of rules"):
        parse_rules({"env": {}}, "rules")


def test_annotation_keys_are_names_or_selectors() -> None:
    text = json.dumps(
        {
            "us-west": [{"labels": {"set": {"a": "1"}}}],
            "topology.kubernetes.io/region=us": [{"labels": {"set": {"b": "1"}}}],
            "tier in (edge),!gpu": [{"labels": {"set": {"c": "1"}}}],
            "*": [{"labels": {"set": {"d": "1"}}}],
        }
    )
    entries = parse_overrides(text)
    assert [e.selector is None for e in entries] == [True, False, False, False]
    us_west = rules_for(entries, "us-west", {"topology.kubernetes.io/region": "us"})
    assert [r.source for r in us_west] == [
        'kmc.dev/overrides["us-west"][0]',
        'kmc.dev/overrides["topology.kubernetes.io/region=us"][0]',
        'kmc.dev/overrides["*"][0]',
    ]
    eu = rules_for(entries, "eu-west", {"topology.kubernetes.io/region": "eu"})
    assert [r.source for r in eu] == ['kmc.dev/overrides["*"][0]']
    assert len(rules_for(entries, "edge-1", {"tier": "edge"})) == 2


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("{", "not JSON"),
        ("[]", "must be a JSON object"),
        ('{"Us_West": []}', "neither a location name"),
        ('{"region in (us": []}', "not a label selector"),
        ('{"us-west": [{"nope": 1}]}', r'kmc.dev/overrides\["us-west"\]\[0\]: unknown rule'),
    ],
)
def test_annotation_refusals(text: str, message: str) -> None:
    with pytest.raises(RuleError, match=message):
        parse_overrides(text)
