"""The webhook refuses a malformed `kmc.dev/overrides` at the door, naming the field."""

from __future__ import annotations

import json
from typing import Any

from apiserver.admission import judge_override_object, judge_overrides
from apiserver.contract import OVERRIDES


def review(new: Any, old: Any = None) -> dict[str, Any]:
    def obj(value: Any) -> dict[str, Any]:
        annotations = {} if value is None else {OVERRIDES: json.dumps(value)}
        return {"metadata": {"name": "web", "namespace": "shop", "annotations": annotations}}

    return {
        "uid": "1",
        "kind": {"group": "apps", "version": "v1", "kind": "Deployment"},
        "object": obj(new),
        "oldObject": None if old is None else obj(old),
    }


def test_a_good_annotation_passes() -> None:
    assert judge_overrides(review({"us-west": [{"env": {"set": {"A": "${location.name}"}}}]})) == {
        "allowed": True
    }
    assert judge_overrides(review(None)) == {"allowed": True}


def test_a_malformed_one_is_refused_with_the_field_named() -> None:
    answer = judge_overrides(review({"us-west": [{"env": {"set": {"A": "1"}}, "image": {}}]}))
    assert answer["allowed"] is False
    assert answer["status"]["code"] == 422
    message = answer["status"]["message"]
    assert message.startswith('Deployment shop/web: kmc.dev/overrides["us-west"][0]: a rule has')
    assert message.endswith("Fix the annotation and apply again.")
    unknown = judge_overrides(review({"us-west": [{"env": {"set": {"A": "${zone}"}}}]}))
    assert "unknown variable ${zone}" in unknown["status"]["message"]


def test_an_unchanged_one_is_not_judged_again() -> None:
    """A bad annotation already there (from before the webhook) does not block other edits."""
    bad: dict[str, Any] = {"us-west": [{"nope": {}}]}
    assert judge_overrides(review(bad, old=bad)) == {"allowed": True}
    assert judge_overrides(review(bad, old={}))["allowed"] is False


def override_review(spec: Any, kind: str = "Override") -> dict[str, Any]:
    meta = {"name": "eu", **({"namespace": "shop"} if kind == "Override" else {})}
    return {
        "uid": "1",
        "kind": {"group": "kmc.dev", "version": "v1alpha1", "kind": kind},
        "object": {"apiVersion": "kmc.dev/v1alpha1", "kind": kind, "metadata": meta, "spec": spec},
    }


TARGET = {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}


def test_an_override_object_is_judged_like_the_annotation() -> None:
    good = {"targets": [TARGET], "rules": [{"image": {"registry": "mirror.eu"}}]}
    assert judge_override_object(override_review(good)) == {"allowed": True}
    cluster = {**good, "namespaceSelector": {"matchLabels": {"env": "prod"}}}
    assert judge_override_object(override_review(cluster, "ClusterOverride")) == {"allowed": True}

    bad_rule = {"targets": [TARGET], "rules": [{"image": {}}, {"imagee": {"tag": "2"}}]}
    message = judge_override_object(override_review(bad_rule))["status"]["message"]
    assert message.startswith("Override shop/eu: spec.rules[0].image: write at least one of")

    replicas = {
        "targets": [TARGET],
        "rules": [{"patch": [{"op": "replace", "path": "/spec/replicas", "value": 1}]}],
    }
    message = judge_override_object(override_review(replicas))["status"]["message"]
    assert "spec.rules[0].patch[0]: /spec/replicas is the placement's" in message

    no_kind = {"targets": [{"apiVersion": "apps/v1"}], "rules": [{"image": {"tag": "2"}}]}
    message = judge_override_object(override_review(no_kind))["status"]["message"]
    assert message == "Override shop/eu: spec.targets[0].kind: required. Fix it and apply again."
    selector = {
        "targets": [TARGET],
        "locations": {"locationSelector": {"matchExpressions": [{"key": "a", "operator": "In"}]}},
        "rules": [{"image": {"tag": "2"}}],
    }
    message = judge_override_object(override_review(selector))["status"]["message"]
    assert "spec.locations.locationSelector.matchExpressions[0]" in message
    assert "operator In needs at least one value" in message
