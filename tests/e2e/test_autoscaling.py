"""HorizontalPodAutoscalers and PodDisruptionBudgets written to the hub with plain kubectl go
with the workloads they concern, divided by those workloads' shares, and show their
children's status on the hub. A child's size is its own HPA's: kubectl-mc leaves it alone.

The children have no metrics-server: their HPAs say `FailedGetResourceMetric` and never
scale on metrics, so the tests scale a child the way its HPA would (`kubectl scale` in the
child) and never depend on real autoscaling.
"""

from __future__ import annotations

import json
from functools import partial
from typing import Any

from kmc_testbed import bed

from .conftest import CHILDREN, Kubectl
from .test_placement import placed_condition, wait_locations_settled, with_strategy
from .test_services import wait_for
from .test_testbed import deployment


def hpa(name: str, target: str, low: int, high: int) -> dict[str, Any]:
    return {
        "apiVersion": "autoscaling/v2",
        "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": name},
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": target},
            "minReplicas": low,
            "maxReplicas": high,
            "metrics": [
                {
                    "type": "Resource",
                    "resource": {
                        "name": "cpu",
                        "target": {"type": "Utilization", "averageUtilization": 60},
                    },
                }
            ],
        },
    }


def pdb(name: str, **budget: int | str) -> dict[str, Any]:
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": name},
        "spec": {"selector": {"matchLabels": {"app": "web"}}, **budget},
    }


def in_children(kubectl: dict[str, Kubectl], resource: str, name: str, ns: str) -> dict[str, Any]:
    """The child objects of that name, by location (where there is one)."""
    found = {}
    for child in CHILDREN:
        proc = kubectl[child].run("get", resource, name, "-n", ns, "-o", "json", check=False)
        if proc.returncode == 0:
            found[child] = json.loads(proc.stdout)
        else:
            assert "NotFound" in proc.stderr, proc.stderr
    return found


def nowhere(kubectl: dict[str, Kubectl], resource: str, name: str, ns: str) -> bool:
    return not in_children(kubectl, resource, name, ns)


def released(child: Kubectl, ns: str) -> bool:
    """Has kmc-sync's apply let go of the child Deployment's spec.replicas?"""
    obj = child.json("get", "deployment", "web", "-n", ns, "--show-managed-fields")
    return not any(
        entry.get("manager") == "kmc-sync"
        and entry.get("operation") == "Apply"
        and "f:replicas" in ((entry.get("fieldsV1") or {}).get("f:spec") or {})
        for entry in obj["metadata"].get("managedFields") or []
    )


def hub_replicas(hub: Kubectl, ns: str) -> Any:
    return hub.json("get", "deployment", "web", "-n", ns).get("status", {}).get("replicas")


def test_an_hpa_divides_its_bounds_and_leaves_each_childs_size_to_the_childs_hpa(
    installed: bed.State, kubectl: dict[str, Kubectl], namespace: str
) -> None:
    hub = kubectl["hub"]
    wait_locations_settled(hub)
    hub.apply(with_strategy(deployment("web", 3), {"type": "Split"}), namespace)
    hub.run("rollout", "status", "deployment/web", "-n", namespace, "--timeout=180s")
    hub.apply(hpa("web", "web", 3, 9), namespace)

    # 3 to 9 over three locations of 1 replica each: 1 to 3 in each.
    def bounds() -> dict[str, tuple[int, int]]:
        found = in_children(kubectl, "hpa", "web", namespace)
        return {
            loc: (h["spec"]["minReplicas"], h["spec"]["maxReplicas"]) for loc, h in found.items()
        }

    wait_for(lambda: bounds() == dict.fromkeys(CHILDREN, (1, 3)), say=f"divided bounds: {bounds()}")
    condition = wait_for(lambda: placed_condition(hub, "hpa", "web", namespace))
    assert condition["status"] == "True" and "deployments/web" in condition["message"]
    # Each child's size is its HPA's now: kmc-sync's apply no longer carries it.
    for child in CHILDREN:
        wait_for(partial(released, kubectl[child], namespace), say=f"{child}'s size released")

    # us-east's HPA would scale its copy to 3 (its maximum): do what it would do.
    kubectl["us-east"].run("scale", "deployment", "web", "-n", namespace, "--replicas=3")
    wait_for(lambda: hub_replicas(hub, namespace) == 5, say="the hub's status counts 1+1+3")
    # A sync of every child (a hub label) and a drift correction (a label edited in the
    # child) apply us-east's copy again, and leave its size as its HPA set it.
    hub.run("label", "deployment", "web", "-n", namespace, "round=1")

    def labelled(child: str, value: str) -> dict[str, Any] | None:
        obj = kubectl[child].json("get", "deployment", "web", "-n", namespace)
        return obj if obj["metadata"].get("labels", {}).get("round") == value else None

    for child in CHILDREN:
        wait_for(partial(labelled, child, "1"), say=f"the hub's label in {child}")
    kubectl["us-east"].run(
        "label", "deployment", "web", "-n", namespace, "round=hand", "--overwrite"
    )
    child = wait_for(lambda: labelled("us-east", "1"), say="drift put back in us-east")
    assert child["spec"]["replicas"] == 3
    assert hub_replicas(hub, namespace) == 5

    # The hub HPA shows its children's: replicas summed, no metrics (no metrics-server).
    def hub_hpa() -> dict[str, Any] | None:
        status = hub.json("get", "hpa", "web", "-n", namespace).get("status", {})
        return status if status.get("currentReplicas") == 5 else None

    status = wait_for(hub_hpa, say="the hub HPA's currentReplicas summed")
    conditions = {c["type"]: c for c in status["conditions"]}
    assert {"AbleToScale", "ScalingActive", "kmc.dev/Placed", "kmc.dev/Synced"} <= set(conditions)
    assert conditions["ScalingActive"]["status"] == "False"  # no metrics in any child

    # Without the HPA the children are the hub's to size again: 1 each.
    hub.run("delete", "hpa", "web", "-n", namespace)
    wait_for(lambda: not in_children(kubectl, "hpa", "web", namespace), say="child HPAs gone")
    wait_for(
        lambda: (
            [
                d["spec"]["replicas"]
                for d in in_children(kubectl, "deployment", "web", namespace).values()
            ]
            == [1, 1, 1]
        ),
        say="the children sized by the hub again",
    )
    hub.run("delete", "deployment", "web", "-n", namespace)
    wait_for(
        lambda: not in_children(kubectl, "deployment", "web", namespace),
        say="no child Deployment left",
    )


def test_an_hpa_whose_target_is_not_placed_stays_on_the_hub_and_says_why(
    installed: bed.State, kubectl: dict[str, Kubectl], namespace: str
) -> None:
    hub = kubectl["hub"]
    hub.apply(hpa("ghost", "nothing", 1, 3), namespace)
    condition = wait_for(lambda: placed_condition(hub, "hpa", "ghost", namespace))
    assert (condition["status"], condition["reason"]) == ("False", "TargetNotFound")
    # A gated workload is placed nowhere: its HPA waits on the hub with it, then follows it.
    gated = deployment("web", 2)
    gated["metadata"]["annotations"] = {"kmc.dev/placement-gates": '["example.com/wait"]'}
    hub.apply(gated, namespace)
    hub.apply(hpa("web", "web", 2, 4), namespace)
    condition = wait_for(
        lambda: (
            (c := placed_condition(hub, "hpa", "web", namespace)).get("reason") == "TargetNotPlaced"
            and c
        )
    )
    assert condition["status"] == "False" and "deployments/web" in condition["message"]
    assert not in_children(kubectl, "hpa", "web", namespace)
    assert not in_children(kubectl, "hpa", "ghost", namespace)
    hub.run("annotate", "deployment", "web", "-n", namespace, "kmc.dev/placement-gates-")
    wait_for(lambda: in_children(kubectl, "hpa", "web", namespace), say="the HPA follows it")
    condition = wait_for(
        lambda: (c := placed_condition(hub, "hpa", "web", namespace)).get("status") == "True" and c
    )
    assert condition["reason"] == "Placed"
    assert not in_children(kubectl, "hpa", "ghost", namespace)


def test_a_pdb_is_divided_by_the_replicas_in_each_location_and_its_status_folded(
    installed: bed.State, kubectl: dict[str, Kubectl], namespace: str
) -> None:
    hub = kubectl["hub"]
    wait_locations_settled(hub)
    hub.apply(with_strategy(deployment("web", 6), {"type": "Split"}), namespace)
    hub.apply(pdb("web", minAvailable=4), namespace)
    hub.apply(pdb("web-half", maxUnavailable="50%"), namespace)
    hub.run("rollout", "status", "deployment/web", "-n", namespace, "--timeout=180s")

    def budgets(name: str, field: str) -> dict[str, Any]:
        found = in_children(kubectl, "pdb", name, namespace)
        return {loc: p["spec"].get(field) for loc, p in found.items()}

    # 4 over 2, 2 and 2 replicas: 1.33 each; the one left over goes to the first by name.
    want = {"eu-west": 2, "us-east": 1, "us-west": 1}
    wait_for(
        lambda: budgets("web", "minAvailable") == want, say=f"{budgets('web', 'minAvailable')}"
    )
    wait_for(
        lambda: budgets("web-half", "maxUnavailable") == dict.fromkeys(CHILDREN, "50%"),
        say="a percentage kept as written",
    )
    condition = wait_for(lambda: placed_condition(hub, "pdb", "web", namespace))
    assert condition["status"] == "True" and "deployments/web" in condition["message"]

    # Healthy pods 6 of 6 expected; desired 2+1+1; allowed 0 (eu-west) + 1 + 1.
    def folded() -> dict[str, Any] | None:
        status = hub.json("get", "pdb", "web", "-n", namespace).get("status", {})
        counts = [
            status.get(c)
            for c in ("expectedPods", "currentHealthy", "desiredHealthy", "disruptionsAllowed")
        ]
        return status if counts == [6, 6, 4, 2] else None

    status = wait_for(folded, say="the hub PDB's status folded")
    allowed = next(c for c in status["conditions"] if c["type"] == "DisruptionAllowed")
    assert (allowed["status"], allowed["reason"]) == ("True", "SufficientPods")

    # Everything deleted on the hub: nothing of it is left in any child.
    hub.run("delete", "pdb", "web", "web-half", "-n", namespace)
    hub.run("delete", "deployment", "web", "-n", namespace)
    for resource, name in (("pdb", "web"), ("pdb", "web-half"), ("deployment", "web")):
        wait_for(
            partial(nowhere, kubectl, resource, name, namespace),
            say=f"no {resource}/{name} left in any child",
        )


def hpa_bounds(kubectl: dict[str, Kubectl], ns: str) -> dict[str, tuple[int, int]]:
    found = in_children(kubectl, "hpa", "web", ns)
    return {loc: (h["spec"]["minReplicas"], h["spec"]["maxReplicas"]) for loc, h in found.items()}


def test_a_move_carries_the_hpas_share_with_its_workload(
    installed: bed.State, kubectl: dict[str, Kubectl], namespace: str
) -> None:
    hub = kubectl["hub"]
    wait_locations_settled(hub)
    hub.apply(with_strategy(deployment("web", 2), {"type": "Split", "pin": ["us-east"]}), namespace)
    hub.apply(hpa("web", "web", 2, 6), namespace)
    wait_for(
        lambda: hpa_bounds(kubectl, namespace) == {"us-east": (2, 6)},
        say="the whole HPA where its workload runs, us-east",
    )
    hub.mc("move", "deployment/web", "--to", "us-west", "--wait", "-n", namespace)
    wait_for(
        lambda: hpa_bounds(kubectl, namespace) == {"us-west": (2, 6)},
        say="the HPA's share moved with its workload to us-west, and gone from us-east",
    )
    wait_for(partial(released, kubectl["us-west"], namespace), say="us-west's size released")
    hub.run("delete", "hpa,deployment", "web", "-n", namespace)
    for resource in ("hpa", "deployment"):
        wait_for(partial(nowhere, kubectl, resource, "web", namespace), say=f"no {resource} left")


def synced_condition(hub: Kubectl, ns: str) -> dict[str, Any]:
    conditions = hub.json("get", "deployment", "web", "-n", ns).get("status", {}).get("conditions")
    return next((c for c in conditions or [] if c["type"] == "kmc.dev/Synced"), {})


def test_a_move_keeps_the_pods_a_pdb_asks_for_until_the_new_location_runs_them(
    installed: bed.State, kubectl: dict[str, Kubectl], namespace: str
) -> None:
    """A Recreate Deployment may lose every pod at once, so nothing but the hub PDB holds its
    pods in us-east while us-west's copies cannot start (an Override keeps them off every
    node there); once they can, the move ends."""
    hub = kubectl["hub"]
    wait_locations_settled(hub)
    web = with_strategy(deployment("web", 2), {"type": "Split", "pin": ["us-east"]})
    web["spec"]["strategy"] = {"type": "Recreate"}
    hub.apply(web, namespace)
    hub.apply(pdb("web", minAvailable=2), namespace)
    hub.run("rollout", "status", "deployment/web", "-n", namespace, "--timeout=180s")
    nowhere_to_run = {
        "apiVersion": "kmc.dev/v1alpha1",
        "kind": "Override",
        "metadata": {"name": "nowhere-to-run"},
        "spec": {
            "targets": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}],
            "locations": {"names": ["us-west"]},
            "rules": [
                {
                    "patch": [
                        {
                            "op": "add",
                            "path": "/spec/template/spec/nodeSelector",
                            "value": {"kmc.dev/test-no-such-node": "true"},
                        }
                    ]
                }
            ],
        },
    }
    hub.apply(nowhere_to_run, namespace)
    hub.mc("move", "deployment/web", "--to", "us-west", "-n", namespace)
    condition = wait_for(
        lambda: (
            (c := synced_condition(hub, namespace)).get("reason") == "Moving"
            and "waits for 2 more available elsewhere" in c.get("message", "")
            and c
        ),
        say="the move waiting for the PDB's 2 pods elsewhere",
    )
    assert condition["status"] == "False", condition
    east = in_children(kubectl, "deployment", "web", namespace)["us-east"]
    assert east["spec"]["replicas"] == 2 and east["status"].get("availableReplicas") == 2, east
    hub.run("delete", "override", "nowhere-to-run", "-n", namespace)
    wait_for(
        lambda: in_children(kubectl, "deployment", "web", namespace).keys() == {"us-west"},
        say="the move done once us-west runs the 2 pods",
    )
    wait_for(lambda: synced_condition(hub, namespace).get("status") == "True", say="Synced again")
    hub.run("delete", "pdb,deployment", "web", "-n", namespace)
    for resource in ("pdb", "deployment"):
        wait_for(partial(nowhere, kubectl, resource, "web", namespace), say=f"no {resource} left")
