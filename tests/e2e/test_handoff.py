"""The placement is handed to the sync loop before the hub has it; the hub stays the record.

A ValidatingAdmissionPolicy on the real hub refuses our placement write for one labelled
ConfigMap, after the sync loop may already have written its children: they must go, stay
gone while the write keeps failing (no children coming and going with every retry), and
come back once the hub accepts the placement. Deleting the hub object leaves nothing behind.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator

import pytest

from kmc_testbed import bed

from .conftest import CHILDREN, Kubectl


def _in_children(kubectl: dict[str, Kubectl], name: str, namespace: str) -> list[str]:
    return [
        child
        for child in CHILDREN
        if kubectl[child]
        .run("get", "configmap", name, "-n", namespace, "--ignore-not-found", "-o", "name")
        .stdout.strip()
    ]


def _wait(what: str, ok: object, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while not ok():  # type: ignore[operator]
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.5)


@pytest.fixture
def refusing_policy(kubectl: dict[str, Kubectl]) -> Iterator[str]:
    """A policy (and its binding) that refuses a kmc.dev/placement on labelled ConfigMaps."""
    name = f"deny-placement-{uuid.uuid4().hex[:5]}"
    label = f"kmc-test/{name}"
    policy = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": name},
        "spec": {
            "failurePolicy": "Fail",
            "matchConstraints": {
                "resourceRules": [
                    {
                        "apiGroups": [""],
                        "apiVersions": ["v1"],
                        "operations": ["UPDATE"],
                        "resources": ["configmaps"],
                    }
                ]
            },
            "validations": [
                {
                    "expression": "!has(object.metadata.annotations) || "
                    "!('kmc.dev/placement' in object.metadata.annotations)",
                    "message": "placement refused by the test's policy",
                }
            ],
        },
    }
    binding = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": name},
        "spec": {
            "policyName": name,
            "validationActions": ["Deny"],
            "matchResources": {"objectSelector": {"matchLabels": {label: "true"}}},
        },
    }
    kubectl["hub"].apply(policy)
    kubectl["hub"].apply(binding)
    yield label
    kubectl["hub"].run("delete", "validatingadmissionpolicybinding", name, "--ignore-not-found")
    kubectl["hub"].run("delete", "validatingadmissionpolicy", name, "--ignore-not-found")


def test_a_placement_the_hub_refuses_leaves_no_children_and_one_it_takes_brings_them(
    installed: bed.State, kubectl: dict[str, Kubectl], namespace: str, refusing_policy: str
) -> None:
    hub = kubectl["hub"]
    label = refusing_policy
    # The policy takes effect once the hub's admission has loaded it: a probe object is
    # refused first, so the real one is judged by it for sure.
    probe = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "probe", "labels": {label: "true"}},
    }
    hub.apply(probe, namespace)

    def refused() -> bool:
        patch = json.dumps({"metadata": {"annotations": {"kmc.dev/placement": "{}"}}})
        proc = hub.run("patch", "configmap", "probe", "-n", namespace, "-p", patch, check=False)
        return proc.returncode != 0 and "refused by the test's policy" in proc.stderr

    _wait("the policy to refuse a placement", refused, 60)
    config = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": "settings",
            "labels": {label: "true"},
            "annotations": {"kmc.dev/strategy": json.dumps({"type": "Replicate"})},
        },
        "data": {"colour": "blue"},
    }
    hub.apply(config, namespace)
    # Whatever the hand-over wrote goes again: the hub never took that placement.
    _wait("no child left", lambda: not _in_children(kubectl, "settings", namespace))
    for _ in range(6):  # and none comes back while the write keeps failing
        assert _in_children(kubectl, "settings", namespace) == []
        time.sleep(1.0)
    annotations = hub.json("get", "configmap", "settings", "-n", namespace)["metadata"].get(
        "annotations", {}
    )
    assert "kmc.dev/placement" not in annotations
    # The hub takes it now: the placement is written, and the children follow it.
    hub.run("label", "configmap", "settings", "-n", namespace, f"{label}-")
    _wait(
        "a child in every location",
        lambda: sorted(_in_children(kubectl, "settings", namespace)) == sorted(CHILDREN),
        180,
    )
    placed = hub.json("get", "configmap", "settings", "-n", namespace)["metadata"]["annotations"]
    assert json.loads(placed["kmc.dev/placement"]) == dict.fromkeys(CHILDREN)
    hub.run("delete", "configmap", "settings", "-n", namespace)
    _wait(
        "no child left after the delete", lambda: not _in_children(kubectl, "settings", namespace)
    )
