"""The webhook refuses a malformed `kmc.dev/overrides` at the door, naming the field."""

from __future__ import annotations

import json
from typing import Any

from apiserver.admission import judge_overrides
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
