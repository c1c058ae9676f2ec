"""Applying rules to a child object: one worked case per rule, the errors, and properties."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from apiserver.objects import Obj
from apiserver.overrides.apply import OverrideError, apply_rules
from apiserver.overrides.rules import Rule, parse_rules

LABELS = {"topology.kubernetes.io/region": "us", "topology.kubernetes.io/zone": "us-west-1"}


def deployment() -> Obj:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "ns", "labels": {"app": "web", "old": "x"}},
        "spec": {
            "replicas": 2,
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {
                    "initContainers": [{"name": "init", "image": "busybox"}],
                    "containers": [
                        {
                            "name": "app",
                            "image": "registry.example:5000/team/web:1.0",
                            "args": ["--serve"],
                            "env": [
                                {"name": "DEBUG", "value": "1"},
                                {"name": "KEEP", "value": "k"},
                            ],
                        },
                        {"name": "side", "image": "nginx@sha256:" + "a" * 64},
                    ],
                },
            },
        },
    }


def apply(rules: list[Any], obj: Obj | None = None, location: str = "us-west") -> Obj:
    return apply_rules(obj or deployment(), parse_rules(rules, "r"), location, LABELS)


def containers(obj: Obj) -> dict[str, Obj]:
    spec = obj["spec"]["template"]["spec"]
    return {c["name"]: c for c in [*spec["initContainers"], *spec["containers"]]}


def test_image_parts() -> None:
    got = containers(apply([{"image": {"registry": "mirror.${location.name}.example"}}]))
    assert got["init"]["image"] == "mirror.us-west.example/busybox"
    assert got["app"]["image"] == "mirror.us-west.example/team/web:1.0"
    assert got["side"]["image"] == "mirror.us-west.example/nginx@sha256:" + "a" * 64
    got = containers(apply([{"image": {"tag": "2.0", "containers": ["app", "side"]}}]))
    assert got["app"]["image"] == "registry.example:5000/team/web:2.0"
    assert got["side"]["image"] == "nginx:2.0"  # the digest would win over the tag: it goes
    assert got["init"]["image"] == "busybox"
    digest = "sha256:" + "b" * 64
    got = containers(apply([{"image": {"repository": "other/web", "digest": digest}}]))
    assert got["app"]["image"] == f"registry.example:5000/other/web:1.0@{digest}"


def test_env_set_and_remove() -> None:
    got = containers(
        apply(
            [
                {
                    "env": {
                        "set": {"SITE": "${location.name}", "KEEP": "new"},
                        "remove": ["DEBUG"],
                        "containers": ["app"],
                    }
                }
            ]
        )
    )
    assert got["app"]["env"] == [
        {"name": "KEEP", "value": "new"},
        {"name": "SITE", "value": "us-west"},
    ]
    assert "env" not in got["side"]
    every = containers(apply([{"env": {"set": {"A": "1"}}}]))
    assert all({"name": "A", "value": "1"} in c["env"] for c in every.values())


def test_args_and_command() -> None:
    region = "--region=${location.labels['topology.kubernetes.io/region']}"
    got = containers(
        apply(
            [
                {
                    "args": {"append": [region]},
                },
                {"command": {"replace": ["/run"]}},
            ]
        )
    )
    assert got["app"]["args"] == ["--serve", "--region=us"]
    assert got["side"]["args"] == ["--region=us"]
    assert got["init"]["command"] == ["/run"]


def test_labels_and_annotations_on_object_and_template() -> None:
    got = apply(
        [
            {"labels": {"set": {"canary": "true"}, "remove": ["old"]}},
            {
                "labels": {
                    "set": {"zone": '${location.labels["topology.kubernetes.io/zone"]}'},
                    "on": "template",
                }
            },
            {"annotations": {"set": {"note": "for ${location.name}"}}},
        ]
    )
    assert got["metadata"]["labels"] == {"app": "web", "canary": "true"}
    assert got["spec"]["template"]["metadata"]["labels"] == {"app": "web", "zone": "us-west-1"}
    assert got["metadata"]["annotations"] == {"note": "for us-west"}


def test_resources() -> None:
    got = containers(
        apply(
            [
                {
                    "resources": {
                        "containers": ["app"],
                        "limits": {"cpu": "500m"},
                        "requests": {"memory": "64Mi"},
                    }
                }
            ]
        )
    )
    assert got["app"]["resources"] == {"limits": {"cpu": "500m"}, "requests": {"memory": "64Mi"}}


def test_patch_with_a_variable() -> None:
    got = apply(
        [
            {
                "patch": [
                    {
                        "op": "add",
                        "path": "/spec/template/spec/priorityClassName",
                        "value": "${location.name}",
                    }
                ]
            }
        ]
    )
    assert got["spec"]["template"]["spec"]["priorityClassName"] == "us-west"


def configmap(data: str) -> Obj:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"f": data}}


def test_field_patches_yaml_and_json_in_their_own_format() -> None:
    rule = {
        "field": {
            "path": "/data/f",
            "patch": [
                {"op": "replace", "path": "/log/level", "value": "debug"},
                {"op": "add", "path": "/site", "value": "${location.name}"},
            ],
        }
    }
    text = apply([rule], configmap("log:\n  level: info\nother: [1, 2]\n"))["data"]["f"]
    assert yaml.safe_load(text) == {"log": {"level": "debug"}, "other": [1, 2], "site": "us-west"}
    assert not text.lstrip().startswith("{")
    text = apply([rule], configmap('{"log": {"level": "info"}}'))["data"]["f"]
    assert json.loads(text) == {"log": {"level": "debug"}, "site": "us-west"}


@pytest.mark.parametrize(
    ("rules", "message"),
    [
        (
            [{"patch": [{"op": "replace", "path": "/spec/nope", "value": 1}]}],
            r"r\[0\] \(patch\): replace /spec/nope: no such path",
        ),
        (
            [{"env": {"set": {"A": "1"}}}, {"image": {"tag": "1", "containers": ["db"]}}],
            r"r\[1\] \(image\): no container named db \(containers: init, app, side\)",
        ),
        (
            [{"env": {"set": {"A": "${location.labels['gpu']}"}}}],
            r"location us-west has no label 'gpu'",
        ),
        ([{"labels": {"set": {"a": "${location.name}!"}}}], r"r\[0\] \(labels\): label a="),
        (
            [{"patch": [{"op": "replace", "path": "/spec", "value": {"replicas": 9}}]}],
            r"changes spec.replicas",
        ),
        ([{"patch": [{"op": "remove", "path": "/spec"}]}], r"changes spec.replicas"),
        (
            [{"field": {"path": "/spec/replicas", "patch": [{"op": "remove", "path": "/a"}]}}],
            r"not a string field",
        ),
    ],
)
def test_failures_name_the_rule(rules: list[Any], message: str) -> None:
    with pytest.raises(OverrideError, match=message):
        apply(rules)


def test_patch_paths_are_literal_and_only_values_are_filled() -> None:
    name = "${location.name}"
    got = apply(
        [
            {
                "patch": [
                    {"op": "add", "path": "/metadata/annotations", "value": {"a": name}},
                    {"op": "add", "path": f"/metadata/annotations/{name}", "value": name},
                ]
            }
        ]
    )
    assert got["metadata"]["annotations"] == {"a": "us-west", name: "us-west"}


def test_a_rule_cannot_rename_the_object() -> None:
    with pytest.raises(OverrideError, match="which object this is"):
        apply([{"patch": [{"op": "replace", "path": "/metadata/name", "value": "x"}]}])


def test_container_rules_need_a_pod_template() -> None:
    with pytest.raises(OverrideError, match="no pod template"):
        apply([{"env": {"set": {"A": "1"}}}], configmap("a: 1"))


# --- properties ------------------------------------------------------------------------------

_names = st.sampled_from(["A", "B", "C"])
_values = st.sampled_from(
    ["1", "x", "${location.name}", "${location.labels['topology.kubernetes.io/region']}"]
)
_rule = st.one_of(
    st.builds(lambda n, v: {"env": {"set": {n: v}}}, _names, _values),
    st.builds(lambda n: {"env": {"remove": [n]}}, _names),
    st.builds(lambda v: {"args": {"append": [v]}}, _values),
    st.builds(lambda v: {"command": {"replace": [v]}}, _values),
    st.builds(
        lambda n, v: {"labels": {"set": {n.lower(): v}}},
        _names,
        st.sampled_from(["1", "${location.name}"]),
    ),
    st.builds(lambda v: {"annotations": {"set": {"n": v}}}, _values),
    st.builds(lambda t: {"image": {"tag": t}}, st.sampled_from(["1", "2", "${location.name}"])),
    st.builds(
        lambda v: {
            "patch": [
                {"op": "add", "path": "/spec/template/metadata/annotations", "value": {"p": v}}
            ]
        },
        _values,
    ),
    st.just({"patch": [{"op": "replace", "path": "/spec", "value": {"replicas": 7}}]}),
    st.builds(lambda c: {"resources": {"limits": {"cpu": c}}}, st.sampled_from(["1", "500m"])),
)
_rules = st.lists(_rule, max_size=6)
_location = st.sampled_from(["us-west", "eu-west"])


def _outcome(rules: tuple[Rule, ...], location: str, obj: Obj) -> Obj | str:
    try:
        return apply_rules(obj, rules, location, LABELS)
    except OverrideError as err:
        return f"error: {err}"


@settings(max_examples=200, deadline=None)
@given(_rules, _location)
def test_deterministic_and_never_mutates_its_input(raw: list[Any], location: str) -> None:
    rules, obj = parse_rules(raw, "r"), deployment()
    kept = copy.deepcopy(obj)
    first = _outcome(rules, location, obj)
    assert obj == kept
    assert _outcome(rules, location, copy.deepcopy(obj)) == first


@settings(max_examples=200, deadline=None)
@given(_rules, _location)
def test_never_touches_replicas(raw: list[Any], location: str) -> None:
    result = _outcome(parse_rules(raw, "r"), location, deployment())
    if isinstance(result, dict):
        assert result["spec"]["replicas"] == 2
    else:
        assert "spec.replicas" in result


@settings(max_examples=200, deadline=None)
@given(_rules, _rules, _location)
def test_order_is_respected(first: list[Any], second: list[Any], location: str) -> None:
    """Applying a+b is applying a, then b to the result."""
    a, b = parse_rules(first, "r"), parse_rules(second, "r")
    whole = _outcome(a + b, location, deployment())
    step = _outcome(a, location, deployment())
    if isinstance(step, str):
        assert isinstance(whole, str)
        return
    then = _outcome(b, location, step)
    if isinstance(whole, dict):
        assert whole == then
    else:
        assert isinstance(then, str)


def test_order_matters() -> None:
    """The last rule's word stands: a later set wins over an earlier one."""
    one = apply([{"env": {"set": {"A": "1"}}}, {"env": {"set": {"A": "2"}}}])
    two = apply([{"env": {"set": {"A": "2"}}}, {"env": {"set": {"A": "1"}}}])
    assert {"name": "A", "value": "2"} in containers(one)["app"]["env"]
    assert {"name": "A", "value": "1"} in containers(two)["app"]["env"]
