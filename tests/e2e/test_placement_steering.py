"""What steers placement besides the strategy, on the real test bed: placement gates,
immovable strategies, and the pod template's own constraints.
"""

from __future__ import annotations

import json
import time

from kmc_testbed import bed

from .conftest import Kubectl
from .test_placement import (
    events_of,
    placed_condition,
    placement_of,
    wait_locations_settled,
    wait_placement,
)
from .test_testbed import deployment

GATES = "kmc.dev/placement-gates"


def wait_condition_reason(
    hub: Kubectl, name: str, namespace: str, reason: str, timeout: float = 30.0
) -> dict[str, object]:
    deadline = time.monotonic() + timeout
    while True:
        condition = placed_condition(hub, "deployment", name, namespace)
        if condition.get("reason") == reason:
            return condition
        assert time.monotonic() < deadline, f"deployment/{name}: Placed stayed {condition}"
        time.sleep(0.5)


def test_a_gated_deployment_waits_unplaced_until_its_last_gate_goes(
    installed: bed.State, kubectl: dict[str, Kubectl], namespace: str
) -> None:
    hub = kubectl["hub"]
    wait_locations_settled(hub)
    web = deployment("web", 3)
    web["metadata"]["annotations"] = {GATES: json.dumps(["example.com/db", "example.com/ok"])}
    hub.apply(web, namespace)
    condition = wait_condition_reason(hub, "web", namespace, "Gated")
    assert condition["status"] == "False"
    assert condition["message"] == "waiting for placement gates: example.com/db, example.com/ok"
    assert placement_of(hub, "deployment", "web", namespace) is None
    row = hub.mc("get", "deployments", "web", "-n", namespace, "--no-headers").stdout
    assert "<gated>" in row, row

    hub.run(
        "annotate",
        "deployment",
        "web",
        "-n",
        namespace,
        "--overwrite",
        f"{GATES}=" + json.dumps(["example.com/ok"]),
    )
    wait_condition_reason(hub, "web", namespace, "Gated")  # one gate left: still held
    assert placement_of(hub, "deployment", "web", namespace) is None

    hub.run("annotate", "deployment", "web", "-n", namespace, f"{GATES}-")
    placement = wait_placement(hub, "deployment", "web", namespace)
    # Placed in one step: the first placement is already the whole of it.
    assert placement == {"eu-west": 1, "us-east": 1, "us-west": 1}
    assert wait_condition_reason(hub, "web", namespace, "Placed")["status"] == "True"
    reasons = [e["reason"] for e in events_of(hub, namespace, "web")]
    assert "Placed" in reasons and "Rebalanced" not in reasons and "SpilledOver" not in reasons


def test_a_malformed_gate_list_places_nothing_and_says_why(
    installed: bed.State, kubectl: dict[str, Kubectl], namespace: str
) -> None:
    hub = kubectl["hub"]
    web = deployment("web", 1)
    web["metadata"]["annotations"] = {GATES: '"not-a-list"'}
    hub.apply(web, namespace)
    condition = wait_condition_reason(hub, "web", namespace, "InvalidPlacementGates")
    assert "must be a list of gate names" in str(condition["message"])
    assert placement_of(hub, "deployment", "web", namespace) is None
