"""The strategy annotation: strict parsing with one-line errors, canonical JSON, and the
label-selector and toleration semantics users know from Kubernetes."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from apiserver.kinds import PLACED, of_crd
from apiserver.placement.selector import matches, tolerated, tolerates
from apiserver.placement.strategy import (
    LabelSelector,
    Strategy,
    StrategyError,
    Toleration,
    effective_strategy,
    parse_strategy,
)

WHERE = "deployments demo/web"
PREFIX = f"kmc.dev/strategy on {WHERE}: "


def error_of(text: str) -> str:
    with pytest.raises(StrategyError) as caught:
        parse_strategy(text, WHERE)
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith(PREFIX)
    return message.removeprefix(PREFIX)


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("", "not JSON: Expecting value: line 1 column 1 (char 0)"),
        (
            '{"type": "Split",}',
            "not JSON: Expecting property name enclosed in double quotes: "
            "line 1 column 18 (char 17)",
        ),
        ('{"type": "Split", "weights": {"us-east": -1}}', ".weights.us-east: must be >= 0, got -1"),
        ('{"type": "Split", "replicas": 3}', ".replicas: unknown field"),
        (
            '{"type": "Spread"}',
            '.type: must be one of Split, Replicate, Single, got "Spread"',
        ),
        ("{}", ".type: required"),
        ("[]", "must be an object, got []"),
        (
            '{"type": "Split", "weights": {"us-east": 1.5}}',
            ".weights.us-east: must be an integer, got 1.5",
        ),
        (
            '{"type": "Split", "weights": "cpu"}',
            '.weights: must be an object of location weights or "capacity", got "cpu"',
        ),
        (
            '{"type": "Split", "weights": [1]}',
            '.weights: must be an object of location weights or "capacity", got [1]',
        ),
        (
            '{"type": "Split", "weights": {"US_East": 1}}',
            ".weights.US_East: must be a location name (a lowercase RFC 1123 subdomain), "
            'got "US_East"',
        ),
        (
            '{"type": "Split", "minPerLocation": "2"}',
            '.minPerLocation: must be an integer, got "2"',
        ),
        (
            '{"type": "Split", "minPerLocation": true}',
            ".minPerLocation: must be an integer, got true",
        ),
        ('{"type": "Split", "maxPerLocation": 0}', ".maxPerLocation: must be >= 1, got 0"),
        (
            '{"type": "Split", "minPerLocation": 3, "maxPerLocation": 2}',
            "minPerLocation (3) must be <= maxPerLocation (2)",
        ),
        (
            '{"type": "Split", "pin": ["b", "a"], "avoid": ["a", "b"]}',
            "pinned and avoided at once: a, b",
        ),
        ('{"type": "Split", "pin": "us-east"}', '.pin: must be a list, got "us-east"'),
        (
            '{"type": "Split", "locationSelector": {"matchExpressions": '
            '[{"key": "zone", "operator": "In", "values": []}]}}',
            ".locationSelector.matchExpressions[0]: operator In needs at least one value",
        ),
        (
            '{"type": "Split", "locationSelector": {"matchExpressions": '
            '[{"key": "zone", "operator": "NotIn"}]}}',
            ".locationSelector.matchExpressions[0]: operator NotIn needs at least one value",
        ),
        (
            '{"type": "Split", "locationSelector": {"matchExpressions": '
            '[{"key": "zone", "operator": "Exists", "values": ["a"]}]}}',
            ".locationSelector.matchExpressions[0]: operator Exists takes no values",
        ),
        (
            '{"type": "Split", "locationSelector": {"matchExpressions": '
            '[{"key": "zone", "operator": "Near"}]}}',
            ".locationSelector.matchExpressions[0].operator: must be one of In, NotIn, "
            'Exists, DoesNotExist, got "Near"',
        ),
        (
            '{"type": "Split", "locationSelector": {"matchLabels": '
            '{"topology.kubernetes.io/zone": 1}}}',
            '.locationSelector.matchLabels["topology.kubernetes.io/zone"]: must be a string, got 1',
        ),
        (
            '{"type": "Split", "locationSelector": {"matchLabels": {"-bad": "x"}}}',
            '.locationSelector.matchLabels["-bad"]: must be a label key like '
            'example.com/name, got "-bad"',
        ),
        (
            '{"type": "Split", "tolerations": [{"key": "gpu", "operator": "Exists", '
            '"value": "true"}]}',
            ".tolerations[0]: operator Exists takes no value",
        ),
        (
            '{"type": "Split", "tolerations": [{"key": "gpu", "effect": "Sometimes"}]}',
            ".tolerations[0].effect: must be one of NoSchedule, PreferNoSchedule, NoExecute, "
            'got "Sometimes"',
        ),
        (
            '{"type": "Split", "tolerations": [{"value": "x"}]}',
            ".tolerations[0]: a toleration without key needs operator Exists",
        ),
        (
            '{"type": "Single", "spreadBy": "a b", "minPerLocation": -1}',
            '.spreadBy: must be a label key like example.com/name, got "a b"; '
            ".minPerLocation: must be >= 0, got -1",
        ),
    ],
)
def test_every_problem_is_one_line_saying_where_and_what(text: str, error: str) -> None:
    assert error_of(text) == error


def test_a_full_strategy_parses_into_the_model() -> None:
    strategy = parse_strategy(
        json.dumps(
            {
                "type": "Split",
                "locationSelector": {
                    "matchLabels": {"kmc.dev/cloud": "aws"},
                    "matchExpressions": [
                        {
                            "key": "topology.kubernetes.io/region",
                            "operator": "In",
                            "values": ["us-east-1", "eu-west-1"],
                        },
                        {"key": "kmc.dev/legacy", "operator": "DoesNotExist"},
                    ],
                },
                "tolerations": [{"key": "gpu", "value": "true", "effect": "NoSchedule"}],
                "spreadBy": "topology.kubernetes.io/zone",
                "weights": {"us-east": 2, "eu-west": 0},
                "minPerLocation": 1,
                "maxPerLocation": 5,
                "pin": ["us-east", "eu-west"],
                "avoid": ["ap-south"],
            }
        ),
        WHERE,
    )
    assert strategy.type == "Split"
    assert strategy.location_selector is not None
    assert strategy.location_selector.match_expressions[0].values == ("us-east-1", "eu-west-1")
    assert strategy.tolerations == (
        Toleration(key="gpu", operator="Equal", value="true", effect="NoSchedule"),
    )
    assert strategy.weights == {"eu-west": 0, "us-east": 2}
    assert (strategy.min_per_location, strategy.max_per_location) == (1, 5)
    assert strategy.weight_of("us-east") == 2
    assert strategy.weight_of("elsewhere") == 1
    assert parse_strategy('{"type": "Split", "weights": "capacity"}', WHERE).weight_of("a") is None


def test_models_are_frozen() -> None:
    strategy = Strategy(type="Split")
    with pytest.raises(ValueError, match="frozen"):
        strategy.type = "Single"


def test_to_json_is_compact_and_canonical() -> None:
    text = (
        '{"weights": {"b": 2, "a": 1}, "type": "Split", "minPerLocation": 0, "pin": [],'
        ' "locationSelector": {"matchLabels": {"z": "1", "a": "2"}},'
        ' "tolerations": [{"key": "gpu", "operator": "Exists"}]}'
    )
    assert parse_strategy(text, WHERE).to_json() == (
        '{"type":"Split","locationSelector":{"matchLabels":{"a":"2","z":"1"}},'
        '"tolerations":[{"key":"gpu","operator":"Exists"}],"weights":{"a":1,"b":2}}'
    )
    assert Strategy(type="Replicate").to_json() == '{"type":"Replicate"}'


names = st.from_regex(r"[a-z][a-z0-9]{0,5}(-[a-z0-9]{1,4})?", fullmatch=True)
label_keys = st.sampled_from(["zone", "kmc.dev/cloud", "topology.kubernetes.io/region"])
requirements = st.one_of(
    st.fixed_dictionaries(
        {
            "key": label_keys,
            "operator": st.sampled_from(["In", "NotIn"]),
            "values": st.lists(names, min_size=1, max_size=3),
        }
    ),
    st.fixed_dictionaries(
        {"key": label_keys, "operator": st.sampled_from(["Exists", "DoesNotExist"])}
    ),
)
tolerations = st.fixed_dictionaries(
    {"key": label_keys},
    optional={
        "operator": st.just("Equal"),
        "value": names,
        "effect": st.sampled_from(["NoSchedule", "PreferNoSchedule", "NoExecute"]),
    },
)


@st.composite
def strategy_documents(draw: st.DrawFn) -> dict[str, Any]:
    pin = draw(st.lists(names, max_size=3, unique=True))
    low = draw(st.integers(0, 3))
    optional = {
        "locationSelector": st.fixed_dictionaries(
            {},
            optional={
                "matchLabels": st.dictionaries(label_keys, names, max_size=2),
                "matchExpressions": st.lists(requirements, max_size=2),
            },
        ),
        "tolerations": st.lists(tolerations, max_size=2),
        "spreadBy": label_keys,
        "weights": st.one_of(st.just("capacity"), st.dictionaries(names, st.integers(0, 9))),
        "maxPerLocation": st.one_of(st.none(), st.integers(max(low, 1), 9)),
        "pin": st.just(pin),
        "avoid": st.lists(names.filter(lambda name: name not in pin), max_size=2),
    }
    document: dict[str, Any] = draw(
        st.fixed_dictionaries(
            {"type": st.sampled_from(["Split", "Replicate", "Single"])}, optional=optional
        )
    )
    document["minPerLocation"] = low
    return document


@given(strategy_documents())
def test_to_json_round_trips(document: dict[str, Any]) -> None:
    strategy = parse_strategy(json.dumps(document), WHERE)
    canonical = strategy.to_json()
    assert parse_strategy(canonical, WHERE) == strategy
    assert parse_strategy(canonical, WHERE).to_json() == canonical
    assert canonical == json.dumps(json.loads(canonical), separators=(",", ":"))


# A kind the hub serves from a user's CRD: placed only when asked, copied whole by default.
CRONJOB_CRD = {
    "spec": {
        "group": "example.com",
        "scope": "Namespaced",
        "names": {"kind": "CronJob", "plural": "cronjobs"},
        "versions": [{"name": "v1", "storage": True}],
    }
}


@pytest.mark.parametrize(
    ("kind", "expected"),
    [
        ("Deployment", "Split"),
        ("StatefulSet", "Split"),
        ("ReplicaSet", "Split"),
        ("Job", "Split"),
        ("DaemonSet", "Replicate"),
        ("ConfigMap", "Replicate"),
        ("CronJob", "Replicate"),
    ],
)
def test_default_strategy_divides_only_kinds_with_replicas(kind: str, expected: str) -> None:
    entry = PLACED.get(kind) or of_crd(CRONJOB_CRD)
    assert entry is not None and entry.kind == kind
    assert effective_strategy(None, None, entry.default_type, WHERE) == (
        Strategy(type=expected),  # type: ignore[arg-type]
        "default",
    )


def test_effective_strategy_prefers_the_object_then_the_namespace() -> None:
    on_object, on_namespace = '{"type": "Single"}', '{"type": "Replicate"}'
    single, replicate = Strategy(type="Single"), Strategy(type="Replicate")
    assert effective_strategy(on_object, on_namespace, "Split", WHERE) == (single, "object")
    assert effective_strategy(None, on_namespace, "Split", WHERE) == (
        replicate,
        "namespace",
    )
    assert effective_strategy(None, None, "Split", WHERE) == (
        Strategy(type="Split"),
        "default",
    )


def test_a_malformed_annotation_never_falls_back() -> None:
    with pytest.raises(StrategyError, match=f"^{PREFIX}.type: required$"):
        effective_strategy("{}", '{"type": "Single"}', "Split", WHERE)
    with pytest.raises(
        StrategyError,
        match=f"^kmc.dev/strategy on the namespace of {WHERE}: not JSON: ",
    ):
        effective_strategy(None, "{", "Split", WHERE)


# --- selector -------------------------------------------------------------------------------


def selector(document: dict[str, Any]) -> LabelSelector:
    return LabelSelector.model_validate(document)


LABELS = {"zone": "a", "kmc.dev/cloud": "aws"}


@pytest.mark.parametrize(
    ("document", "expected"),
    [
        ({}, True),
        ({"matchLabels": {"zone": "a"}}, True),
        ({"matchLabels": {"zone": "a", "kmc.dev/cloud": "gcp"}}, False),
        ({"matchLabels": {"tier": "a"}}, False),
        ({"matchExpressions": [{"key": "zone", "operator": "In", "values": ["b", "a"]}]}, True),
        ({"matchExpressions": [{"key": "zone", "operator": "In", "values": ["b"]}]}, False),
        ({"matchExpressions": [{"key": "tier", "operator": "In", "values": ["a"]}]}, False),
        ({"matchExpressions": [{"key": "zone", "operator": "NotIn", "values": ["a"]}]}, False),
        ({"matchExpressions": [{"key": "zone", "operator": "NotIn", "values": ["b"]}]}, True),
        ({"matchExpressions": [{"key": "tier", "operator": "NotIn", "values": ["a"]}]}, True),
        ({"matchExpressions": [{"key": "zone", "operator": "Exists"}]}, True),
        ({"matchExpressions": [{"key": "tier", "operator": "Exists"}]}, False),
        ({"matchExpressions": [{"key": "tier", "operator": "DoesNotExist"}]}, True),
        ({"matchExpressions": [{"key": "zone", "operator": "DoesNotExist"}]}, False),
        (
            {
                "matchLabels": {"kmc.dev/cloud": "aws"},
                "matchExpressions": [
                    {"key": "zone", "operator": "Exists"},
                    {"key": "zone", "operator": "NotIn", "values": ["a"]},
                ],
            },
            False,
        ),
    ],
)
def test_selector_semantics_follow_kubernetes(document: dict[str, Any], expected: bool) -> None:
    assert matches(selector(document), LABELS) is expected


def test_no_selector_matches_everything() -> None:
    assert matches(None, {})
    assert matches(selector({}), {})


def toleration(**fields: str) -> Toleration:
    return Toleration.model_validate(fields)


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        ({"key": "gpu", "value": "true"}, True),
        ({"key": "gpu", "value": "true", "effect": "NoSchedule"}, True),
        ({"key": "gpu", "value": "true", "effect": "NoExecute"}, False),
        ({"key": "gpu", "value": "false"}, False),
        ({"key": "gpu"}, False),
        ({"key": "gpu", "operator": "Exists"}, True),
        ({"key": "ssd", "operator": "Exists"}, False),
        ({"operator": "Exists"}, True),
        ({"operator": "Exists", "effect": "NoExecute"}, False),
    ],
)
def test_tolerations_follow_kubernetes(fields: dict[str, str], expected: bool) -> None:
    assert tolerates(toleration(**fields), "gpu", "true", "NoSchedule") is expected


def test_prefer_no_schedule_never_filters_and_the_others_need_a_toleration() -> None:
    assert tolerated([], "gpu", "true", "PreferNoSchedule")
    assert not tolerated([], "gpu", "true", "NoSchedule")
    assert not tolerated([], "gpu", "true", "NoExecute")
    assert tolerated([toleration(key="gpu", operator="Exists")], "gpu", "", "NoExecute")
    assert tolerates(toleration(key="gpu"), "gpu", "", "NoSchedule")
