"""Drift on everything we own: a child whose labels or annotations no longer say what we
applied is applied again, even though its generation did not move."""

from __future__ import annotations

from typing import Any

from apiserver.contract import ORIGIN as ORIGIN_LABEL
from apiserver.kinds import DEPLOYMENT
from apiserver.loops.sync.apply import _wears
from apiserver.sync.desired import child_object

HUB: dict[str, Any] = {
    "apiVersion": "apps/v1",
    "kind": "Deployment",
    "metadata": {
        "name": "web",
        "namespace": "demo",
        "uid": "u-1",
        "labels": {"app": "web", "tier": "front"},
        "annotations": {"team": "a", "kmc.dev/placement": '{"us-east":2}'},
    },
    "spec": {"replicas": 2, "template": {"metadata": {"labels": {"app": "web"}}}},
}


def desired() -> dict[str, Any]:
    return child_object(HUB, DEPLOYMENT, "us-east", {"us-east": 2})


def child(labels: dict[str, str], annotations: dict[str, str]) -> dict[str, Any]:
    return {"metadata": {"name": "web", "labels": labels, "annotations": annotations}}


OURS = {"app": "web", "tier": "front", ORIGIN_LABEL: "u-1"}


def test_a_child_as_we_applied_it_wears_our_metadata() -> None:
    assert _wears(child(OURS, {"team": "a"}), desired())


def test_keys_others_added_do_not_count_as_drift() -> None:
    extra = child(
        {**OURS, "added-by": "hand"}, {"team": "a", "deployment.kubernetes.io/revision": "3"}
    )
    assert _wears(extra, desired())


def test_a_label_changed_by_hand_is_drift() -> None:
    assert not _wears(child({**OURS, "tier": "back"}, {"team": "a"}), desired())


def test_a_label_removed_by_hand_is_drift() -> None:
    assert not _wears(child({"app": "web", ORIGIN_LABEL: "u-1"}, {"team": "a"}), desired())


def test_an_annotation_changed_or_removed_by_hand_is_drift() -> None:
    assert not _wears(child(OURS, {"team": "b"}), desired())
    assert not _wears(child(OURS, {}), desired())
    assert not _wears({"metadata": {"labels": OURS}}, desired())
