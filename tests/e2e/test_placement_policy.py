"""PlacementPolicy on the real test bed: an administrator limits a namespace's locations and
adds constraints to its children that the hub objects never show."""

from __future__ import annotations

import json

from kmc_testbed import bed

from .conftest import Kubectl
from .test_placement import wait_locations_settled, wait_placement, wait_pods
from .test_placement_steering import child_pod_spec, running
from .test_testbed import deployment

ZONE = "topology.kubernetes.io/zone"


def test_a_policy_limits_locations_constrains_children_and_refuses_a_wider_pin(
    installed: bed.State, kubectl: dict[str, Kubectl], namespace: str
) -> None:
    hub = kubectl["hub"]
    wait_locations_settled(hub)
    name = f"e2e-{namespace[-5:]}"
    # A label of this test's own, so that the policy selects no other test's namespace.
    hub.run("label", "namespace", namespace, f"tier={name}")
    policy = {
        "apiVersion": "kmc.dev/v1alpha1",
        "kind": "PlacementPolicy",
        "metadata": {"name": name},
        "spec": {
            "namespaceSelector": {"matchLabels": {"tier": name}},
            "locations": ["eu-west"],
            "childConstraints": {"nodeSelector": {ZONE: "eu-west-1"}},
        },
    }
    hub.apply(policy)
    try:
        hub.apply(deployment("web", 2), namespace)
        assert wait_placement(hub, "deployment", "web", namespace) == {"eu-west": 2}
        eu = kubectl["eu-west"]
        wait_pods(eu, namespace, running(2), 120)
        assert child_pod_spec(eu, "web", namespace)["nodeSelector"] == {ZONE: "eu-west-1"}
        on_hub = hub.json("get", "deployment", "web", "-n", namespace)
        assert "nodeSelector" not in on_hub["spec"]["template"]["spec"]

        verdicts = hub.json(
            "get", "deployments.mc.kmc.dev", "web", "-n", namespace, "--subresource", "strategy"
        )["status"]["verdicts"]
        assert {v["location"]: v["reason"] for v in verdicts} == {
            "eu-west": "eligible",
            "us-east": f"policy {name}",
            "us-west": f"policy {name}",
        }

        wider = json.dumps({"type": "Split", "pin": ["us-east", "eu-west"]})
        refused = hub.run(
            "annotate",
            "deployment",
            "web",
            "-n",
            namespace,
            f"kmc.dev/strategy={wider}",
            check=False,
        )
        assert refused.returncode != 0
        assert f"us-east: policy {name}" in refused.stderr, refused.stderr
        on_hub = hub.json("get", "deployment", "web", "-n", namespace)
        assert "kmc.dev/strategy" not in (on_hub["metadata"].get("annotations") or {})

        # Changing the policy moves what it no longer allows.
        hub.run(
            "patch",
            "placementpolicy",
            name,
            "--type=merge",
            "-p",
            json.dumps({"spec": {"locations": ["us-east"], "childConstraints": None}}),
        )
        assert wait_placement(
            hub, "deployment", "web", namespace, lambda p: p == {"us-east": 2}, timeout=60
        ) == {"us-east": 2}
    finally:
        hub.run("delete", "placementpolicy", name, "--ignore-not-found")
