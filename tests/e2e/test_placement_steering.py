"""What steers placement besides the strategy, on the real test bed: placement gates,
immovable strategies, and the pod template's own constraints.
"""

from __future__ import annotations

import json
from typing import Any

from kmc_testbed import bed

from .conftest import Kubectl
from .test_locations import wait_until
from .test_placement import (
    annotate,
    events_of,
    placed_condition,
    placement_of,
    wait_locations_settled,
    wait_placement,
    wait_pods,
    with_strategy,
)
from .test_testbed import deployment

REGION = "topology.kubernetes.io/region"
ZONE = "topology.kubernetes.io/zone"

GATES = "kmc.dev/placement-gates"


def wait_condition_reason(
    hub: Kubectl, name: str, namespace: str, reason: str, timeout: float = 30.0
) -> dict[str, object]:
    def reached() -> dict[str, object] | None:
        condition = placed_condition(hub, "deployment", name, namespace)
        return condition if condition.get("reason") == reason else None

    found: dict[str, object] = wait_until(f"deployment/{name} Placed {reason}", reached, timeout)
    return found


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

    annotate(hub, "deployment", "web", namespace, f"{GATES}=" + json.dumps(["example.com/ok"]))
    wait_condition_reason(hub, "web", namespace, "Gated")  # one gate left: still held
    assert placement_of(hub, "deployment", "web", namespace) is None

    hub.run("annotate", "deployment", "web", "-n", namespace, f"{GATES}-")
    placement = wait_placement(hub, "deployment", "web", namespace)
    # Placed in one step: the first placement is already the whole of it.
    assert placement == {"eu-west": 1, "us-east": 1, "us-west": 1}
    placed = wait_condition_reason(hub, "web", namespace, "Placed")
    assert placed["status"] == "True"
    assert placed["message"] == "eu-west=1, us-east=1, us-west=1"
    # Rolled out: any later decision, and its Event, would have come by now.
    hub.run("rollout", "status", "deployment/web", "-n", namespace, "--timeout=90s")
    reasons = [e["reason"] for e in events_of(hub, namespace, "web")]
    assert "Rebalanced" not in reasons and "SpilledOver" not in reasons, reasons
    assert placement_of(hub, "deployment", "web", namespace) == placement


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


def test_an_immovable_deployment_does_not_spill_but_leaves_a_lost_location(
    installed: bed.State, kubectl: dict[str, Kubectl], namespace: str
) -> None:
    """A location label of the test's own opens and closes locations to both twins: the
    movable one spills into a location that joins, the immovable one stays."""
    hub = kubectl["hub"]
    wait_locations_settled(hub)
    label = f"e2e.kmc.dev/{namespace[-5:]}"
    selector = {"locationSelector": {"matchLabels": {label: "on"}}}
    fixed = with_strategy(deployment("fixed", 4), {"type": "Split", "movable": False, **selector})
    loose = with_strategy(deployment("loose", 4), {"type": "Split", **selector})
    try:
        hub.run("label", "location", "us-east", "us-west", f"{label}=on")
        hub.apply(fixed, namespace)
        hub.apply(loose, namespace)
        expected = {"us-east": 2, "us-west": 2}
        wait_placement(hub, "deployment", "fixed", namespace, lambda p: p == expected)
        wait_placement(hub, "deployment", "loose", namespace, lambda p: p == expected)

        hub.run("label", "location", "eu-west", f"{label}=on")
        wait_placement(hub, "deployment", "loose", namespace, lambda p: "eu-west" in p)
        assert placement_of(hub, "deployment", "fixed", namespace) == expected

        hub.run("label", "location", "us-west", f"{label}-")
        moved = wait_placement(hub, "deployment", "fixed", namespace, lambda p: "us-west" not in p)
        assert moved == {"us-east": 4}  # where it already is, not the newcomer
    finally:
        hub.run("label", "location", "us-east", "us-west", "eu-west", f"{label}-")


def with_pod_spec(obj: dict[str, Any], **pod: Any) -> dict[str, Any]:
    obj["spec"]["template"]["spec"].update(pod)
    return obj


def running(count: int) -> Any:
    def ok(pods: list[dict[str, Any]]) -> bool:
        phases = [p.get("status", {}).get("phase") for p in pods]
        return len(pods) == count and all(phase == "Running" for phase in phases)

    return ok


def child_pod_spec(child: Kubectl, name: str, namespace: str) -> dict[str, Any]:
    spec: dict[str, Any] = child.json("get", "deployment", name, "-n", namespace)["spec"]
    return dict(spec["template"]["spec"])


def test_a_required_region_affinity_in_the_template_places_only_there(
    installed: bed.State, kubectl: dict[str, Kubectl], namespace: str
) -> None:
    hub = kubectl["hub"]
    wait_locations_settled(hub)
    affinity = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {"matchExpressions": [{"key": REGION, "operator": "In", "values": ["us"]}]}
                ]
            }
        }
    }
    hub.apply(with_pod_spec(deployment("web", 6), affinity=affinity), namespace)
    placement = wait_placement(hub, "deployment", "web", namespace)
    assert placement == {"us-east": 3, "us-west": 3}
    verdicts = hub.json(
        "get", "deployments.mc.kmc.dev", "web", "-n", namespace, "--subresource", "strategy"
    )["status"]["verdicts"]
    eu = next(v for v in verdicts if v["location"] == "eu-west")
    assert eu == {
        "location": "eu-west",
        "eligible": False,
        "reason": "nodeAffinity requires topology.kubernetes.io/region in [us]",
    }
    for child in ("us-east", "us-west"):  # the constraint goes along, and holds there
        wait_pods(kubectl[child], namespace, running(3), 120)
        assert child_pod_spec(kubectl[child], "web", namespace)["affinity"] == affinity


def test_a_zone_spread_in_the_template_spreads_evenly_over_zones(
    installed: bed.State, kubectl: dict[str, Kubectl], namespace: str
) -> None:
    hub = kubectl["hub"]
    wait_locations_settled(hub)
    spread = [
        {
            "maxSkew": 1,
            "topologyKey": ZONE,
            "whenUnsatisfiable": "DoNotSchedule",
            "labelSelector": {"matchLabels": {"app": "web"}},
        }
    ]
    web = with_pod_spec(deployment("web", 6), topologySpreadConstraints=spread)
    hub.apply(web, namespace)
    placement = wait_placement(hub, "deployment", "web", namespace, lambda p: len(p) == 3)
    assert placement == {"eu-west": 2, "us-east": 2, "us-west": 2}
    for child in ("us-east", "us-west", "eu-west"):
        wait_pods(kubectl[child], namespace, running(2), 120)
        assert child_pod_spec(kubectl[child], "web", namespace)["topologySpreadConstraints"] == (
            spread
        )


def test_a_hub_only_location_term_places_there_and_is_stripped_from_the_child(
    installed: bed.State, kubectl: dict[str, Kubectl], namespace: str
) -> None:
    hub = kubectl["hub"]
    wait_locations_settled(hub)
    term = {"key": "location.kmc.dev/name", "operator": "In", "values": ["eu-west"]}
    node_term = {"key": REGION, "operator": "Exists"}
    affinity = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": [term, node_term]}]
            }
        }
    }
    hub.apply(with_pod_spec(deployment("web", 2), affinity=affinity), namespace)
    assert wait_placement(hub, "deployment", "web", namespace) == {"eu-west": 2}
    eu = kubectl["eu-west"]
    wait_pods(eu, namespace, running(2), 120)
    child = child_pod_spec(eu, "web", namespace)
    assert "location.kmc.dev/" not in json.dumps(child)
    assert child["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"] == {
        "nodeSelectorTerms": [{"matchExpressions": [node_term]}]
    }
    on_hub = hub.json("get", "deployment", "web", "-n", namespace)["spec"]["template"]["spec"]
    assert on_hub["affinity"] == affinity  # the hub object keeps what its author wrote
