"""Drift on everything we own: labels and annotations we set on a child, edited there by
hand, are put back within seconds, as spec edits are; keys others add are left alone."""

from __future__ import annotations

import time

from kmc_testbed import bed

from .conftest import Kubectl
from .test_placement import wait_placement
from .test_sync import child_deployments, shares, wait_children
from .test_testbed import deployment


def test_labels_and_annotations_edited_in_a_child_are_put_back(
    installed: bed.State, kubectl: dict[str, Kubectl], namespace: str
) -> None:
    hub = kubectl["hub"]
    web = deployment("web", 3)
    web["metadata"]["labels"] = {"tier": "front"}
    web["metadata"]["annotations"] = {"team": "payments"}
    hub.apply(web, namespace)
    placement = wait_placement(hub, "deployment", "web", namespace, lambda p: len(p) == 3)
    wait_children(kubectl, "web", namespace, lambda c: shares(c) == placement, timeout=90)
    child = kubectl["us-east"]
    child.run("label", "deployment/web", "-n", namespace, "tier=back", "--overwrite")
    child.run("annotate", "deployment/web", "-n", namespace, "team-", "by-hand=yes")
    started = time.monotonic()

    def restored() -> bool:
        meta = child.json("get", "deployment", "web", "-n", namespace)["metadata"]
        labels, annotations = meta.get("labels") or {}, meta.get("annotations") or {}
        return bool(labels.get("tier") == "front" and annotations.get("team") == "payments")

    while not restored():
        assert time.monotonic() - started < 20, "the child's label and annotation stayed edited"
        time.sleep(0.25)
    # Keys others own on the child stay as they are.
    meta = child_deployments(kubectl, "web", namespace)["us-east"]["metadata"]
    assert meta["annotations"].get("by-hand") == "yes"
