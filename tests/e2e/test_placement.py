"""The placement loop on the real test bed: what `kmc.dev/placement` says for each strategy.

Objects are applied to the hub with the real kubectl; the test reads the annotation the
loop writes, the `kmc.dev/Placed` condition and the Events.
"""

from __future__ import annotations

import datetime
import json
import time
from collections.abc import Callable
from typing import Any

import pytest

from apiserver.quantity import parse_quantity
from kmc_testbed import bed

from .conftest import CHILDREN, Kubectl, run_testbed
from .test_testbed import deployment, job

Placement = dict[str, int | None]


def placement_of(hub: Kubectl, kind: str, name: str, namespace: str) -> Placement | None:
    obj = hub.json("get", kind, name, "-n", namespace)
    text = (obj["metadata"].get("annotations") or {}).get("kmc.dev/placement")
    return json.loads(text) if text else None


def wait_placement(
    hub: Kubectl,
    kind: str,
    name: str,
    namespace: str,
    ok: Callable[[Placement], bool] = bool,
    timeout: float = 30.0,
) -> Placement:
    deadline = time.monotonic() + timeout
    while True:
        placement = placement_of(hub, kind, name, namespace)
        if placement is not None and ok(placement):
            return placement
        assert time.monotonic() < deadline, f"{kind}/{name}: placement stayed {placement}"
        time.sleep(0.5)


def expect_placement(
    hub: Kubectl, kind: str, name: str, namespace: str, expected: Placement
) -> None:
    """Wait for exactly `expected` (a child still cooling down from an earlier test joins late)."""
    wait_placement(hub, kind, name, namespace, lambda p: p == expected)


def wait_locations_settled(hub: Kubectl) -> None:
    """Every child Ready for longer than the cooldown, so a first decision uses them all."""
    deadline = time.monotonic() + 60
    while True:
        now = datetime.datetime.now(datetime.UTC)
        settled = True
        for loc in hub.json("get", "locations")["items"]:
            ready = [c for c in loc.get("status", {}).get("conditions", []) if c["type"] == "Ready"]
            since = (
                datetime.datetime.fromisoformat(ready[0]["lastTransitionTime"]) if ready else now
            )
            if (
                not ready
                or ready[0]["status"] != "True"
                or (now - since).total_seconds() < bed.GRACE + 1
            ):
                settled = False
        if settled:
            return
        assert time.monotonic() < deadline, "locations did not settle"
        time.sleep(0.5)


def with_strategy(obj: dict[str, Any], strategy: dict[str, Any]) -> dict[str, Any]:
    obj["metadata"].setdefault("annotations", {})["kmc.dev/strategy"] = json.dumps(strategy)
    return obj


def annotate(hub: Kubectl, kind: str, name: str, namespace: str, annotation: str) -> None:
    """`kubectl annotate --overwrite` one object on the hub (`annotation` is key=value)."""
    hub.run("annotate", kind, name, "-n", namespace, "--overwrite", annotation)


def placed_condition(hub: Kubectl, kind: str, name: str, namespace: str) -> dict[str, Any]:
    conditions = (
        hub.json("get", kind, name, "-n", namespace).get("status", {}).get("conditions", [])
    )
    return next((c for c in conditions if c["type"] == "kmc.dev/Placed"), {})


def wait_placed_condition(
    hub: Kubectl,
    kind: str,
    name: str,
    namespace: str,
    ok: Callable[[dict[str, Any]], bool],
    timeout: float = 30.0,
) -> dict[str, Any]:
    """The `kmc.dev/Placed` condition once `ok` says it is the one expected."""
    deadline = time.monotonic() + timeout
    while True:
        condition = placed_condition(hub, kind, name, namespace)
        if condition and ok(condition):
            return condition
        assert time.monotonic() < deadline, f"{kind}/{name}: Placed stayed {condition}"
        time.sleep(0.5)


def events_of(hub: Kubectl, namespace: str, name: str) -> list[dict[str, Any]]:
    items = hub.json("get", "events", "-n", namespace)["items"]
    return [e for e in items if e["involvedObject"]["name"] == name]


def test_five_replicas_split_two_two_one(
    installed: bed.State, kubectl: dict[str, Kubectl], namespace: str
) -> None:
    hub = kubectl["hub"]
    hub.apply(deployment("web", 5), namespace)
    # A child restarted by an earlier test may still be in its cooldown: it joins when over.
    placement = wait_placement(hub, "deployment", "web", namespace, lambda p: len(p) == 3)
    assert set(placement) == set(CHILDREN)
    assert sorted(v for v in placement.values() if v is not None) == [1, 2, 2]
    # Where it went is the condition's to say (the status write that folds the children's
    # status carries it); a first placement makes no Event of its own, changes later do.
    where = ", ".join(f"{k}={v}" for k, v in sorted(placement.items()))
    condition = wait_placed_condition(
        hub, "deployment", "web", namespace, lambda c: c["message"] == where
    )
    assert condition["status"] == "True" and condition["reason"] == "Placed"
    reasons = [(e["type"], e["reason"]) for e in events_of(hub, namespace, "web")]
    assert ("Normal", "Placed") not in reasons
    # Nothing under kmc.dev/ is needed from the user, and the spec is untouched.
    assert hub.json("get", "deployment", "web", "-n", namespace)["spec"]["replicas"] == 5


def test_an_outage_coagulates_after_the_grace_period_and_returns_after_cooldown(
    installed: bed.State, kubectl: dict[str, Kubectl], namespace: str
) -> None:
    hub = kubectl["hub"]
    hub.apply(deployment("web", 5), namespace)
    wait_placement(hub, "deployment", "web", namespace, lambda p: len(p) == 3)
    # Stopping takes a while and us-west may read not Ready before it is over: the grace period
    # starts no sooner than the stop does.
    stopping = time.monotonic()
    run_testbed("stop", "us-west")
    try:
        # Within the grace period nothing moves (the location may come back).
        time.sleep(bed.GRACE / 2)
        assert "us-west" in (placement_of(hub, "deployment", "web", namespace) or {})
        coagulated = wait_placement(
            hub, "deployment", "web", namespace, lambda p: "us-west" not in p, timeout=30
        )
        assert time.monotonic() - stopping >= bed.GRACE
        assert sum(v or 0 for v in coagulated.values()) == 5
        assert set(coagulated) == {"us-east", "eu-west"}
    finally:
        run_testbed("start", "us-west")
    returned = wait_placement(
        hub, "deployment", "web", namespace, lambda p: "us-west" in p, timeout=40
    )
    assert sum(v or 0 for v in returned.values()) == 5
    moved = sum(max(0, (returned.get(k) or 0) - (coagulated.get(k) or 0)) for k in returned)
    assert moved == min(returned.values(), key=lambda v: v or 0)  # only what us-west got
    reasons = {e["reason"] for e in events_of(hub, namespace, "web")}
    assert {"Evacuated", "SpilledOver"} <= reasons


def test_a_new_location_gets_a_share_moving_one_replica(
    installed: bed.State, kubectl: dict[str, Kubectl], namespace: str
) -> None:
    hub = kubectl["hub"]
    hub.apply(deployment("web", 5), namespace)
    before = wait_placement(hub, "deployment", "web", namespace, lambda p: len(p) == 3)
    run_testbed("add", "ap-south", "--labels", "topology.kubernetes.io/region=ap")
    try:
        run_testbed("install")
        after = wait_placement(
            hub, "deployment", "web", namespace, lambda p: "ap-south" in p, timeout=30
        )
        assert after["ap-south"] == 1
        assert sum(v or 0 for v in after.values()) == 5
        moved = sum(max(0, (before.get(k) or 0) - (after.get(k) or 0)) for k in before)
        assert moved == 1
    finally:
        run_testbed("remove", "ap-south")
    back = wait_placement(
        hub, "deployment", "web", namespace, lambda p: "ap-south" not in p, timeout=30
    )
    assert sum(v or 0 for v in back.values()) == 5


def test_region_selector_and_pin(
    installed: bed.State, kubectl: dict[str, Kubectl], namespace: str
) -> None:
    hub = kubectl["hub"]
    us = {
        "type": "Split",
        "locationSelector": {"matchLabels": {"topology.kubernetes.io/region": "us"}},
    }
    hub.apply(with_strategy(deployment("us-only", 4), us), namespace)
    hub.apply(
        with_strategy(deployment("pinned", 3), {"type": "Split", "pin": ["eu-west"]}), namespace
    )
    expect_placement(hub, "deployment", "us-only", namespace, {"us-east": 2, "us-west": 2})
    expect_placement(hub, "deployment", "pinned", namespace, {"eu-west": 3})


def test_weights_and_max_per_location(
    installed: bed.State, kubectl: dict[str, Kubectl], namespace: str
) -> None:
    hub = kubectl["hub"]
    weighted = {"type": "Split", "weights": {"us-east": 3}}
    capped = {"type": "Split", "weights": {"us-east": 10}, "maxPerLocation": 3}
    hub.apply(with_strategy(deployment("weighted", 8), weighted), namespace)
    hub.apply(with_strategy(deployment("capped", 6), capped), namespace)

    # 8 by 3:1:1 is 4.8/1.6/1.6: floors 4/1/1, the two spare replicas by largest remainder:
    # one to us-east, and one to eu-west or us-west, tied (a hash of the uid picks).
    def us_east_and_a_tie(east: int, tied: list[int]) -> Callable[[Placement], bool]:
        return lambda p: (
            p.get("us-east") == east
            and sorted(p.get(loc) or 0 for loc in ("eu-west", "us-west")) == tied
        )

    wait_placement(hub, "deployment", "weighted", namespace, us_east_and_a_tie(5, [1, 2]))
    wait_placement(hub, "deployment", "capped", namespace, us_east_and_a_tie(3, [1, 2]))


def test_taints_keep_out_what_does_not_tolerate_them(
    installed: bed.State, kubectl: dict[str, Kubectl], namespace: str
) -> None:
    hub = kubectl["hub"]
    taint = {"spec": {"taints": [{"key": "gpu", "value": "true", "effect": "NoSchedule"}]}}
    hub.run("patch", "location", "eu-west", "--type=merge", "-p", json.dumps(taint))
    try:
        tolerant = {"type": "Replicate", "tolerations": [{"key": "gpu", "operator": "Exists"}]}
        hub.apply(deployment("plain", 3), namespace)
        hub.apply(with_strategy(deployment("tolerant", 1), tolerant), namespace)
        plain = wait_placement(hub, "deployment", "plain", namespace)
        assert "eu-west" not in plain and sum(v or 0 for v in plain.values()) == 3
        expect_placement(
            hub,
            "deployment",
            "tolerant",
            namespace,
            {
                "eu-west": 1,
                "us-east": 1,
                "us-west": 1,
            },
        )
    finally:
        hub.run("patch", "location", "eu-west", "--type=merge", "-p", '{"spec":{"taints":null}}')


def test_jobs_daemonsets_and_namespace_strategies(
    installed: bed.State, kubectl: dict[str, Kubectl], namespace: str
) -> None:
    hub = kubectl["hub"]
    wait_locations_settled(hub)  # a Job, once placed, stays where it started
    hub.apply(job("crunch", 3, 6), namespace)
    expect_placement(
        hub,
        "job",
        "crunch",
        namespace,
        {
            "eu-west": 2,
            "us-east": 2,
            "us-west": 2,
        },
    )
    ds = deployment("agent", 1)
    ds["kind"] = "DaemonSet"
    del ds["spec"]["replicas"]
    hub.apply(ds, namespace)
    expect_placement(hub, "daemonset", "agent", namespace, dict.fromkeys(CHILDREN))
    hub.run("annotate", "namespace", namespace, 'kmc.dev/strategy={"type":"Single"}')
    hub.apply(deployment("solo", 4), namespace)
    solo = wait_placement(hub, "deployment", "solo", namespace)
    assert len(solo) == 1 and next(iter(solo.values())) == 4


def test_a_configmap_follows_the_workloads_that_use_it(
    installed: bed.State, kubectl: dict[str, Kubectl], namespace: str
) -> None:
    hub = kubectl["hub"]
    hub.run("create", "configmap", "settings", "-n", namespace, "--from-literal=a=b")
    web = deployment("web", 2)
    pod = web["spec"]["template"]["spec"]
    pod["volumes"] = [{"name": "settings", "configMap": {"name": "settings"}}]
    us = {
        "type": "Split",
        "locationSelector": {"matchLabels": {"topology.kubernetes.io/region": "us"}},
    }
    hub.apply(with_strategy(web, us), namespace)
    expect_placement(
        hub,
        "configmap",
        "settings",
        namespace,
        {
            "us-east": None,
            "us-west": None,
        },
    )


def test_a_malformed_strategy_changes_nothing_and_says_why(
    installed: bed.State, kubectl: dict[str, Kubectl], namespace: str
) -> None:
    hub = kubectl["hub"]
    hub.apply(deployment("web", 3), namespace)
    before = wait_placement(hub, "deployment", "web", namespace)
    cases = {
        "{not json": "not JSON",
        '{"type":"Spread"}': '.type: must be one of Split, Replicate, Single, got "Spread"',
        '{"type":"Split","weights":{"us-east":-1}}': ".weights.us-east: must be >= 0, got -1",
    }
    annotate = ("annotate", "--overwrite", "deployment", "web", "-n", namespace)
    for text, expected in cases.items():
        refused = hub.run(*annotate, f"kmc.dev/strategy={text}", check=False)
        assert refused.returncode == 1 and "denied the request" in refused.stderr
        assert expected in refused.stderr
    # The loop must be safe without the webhook too (it ignores failures, and may be gone).
    hub.run("delete", "validatingwebhookconfiguration", "strategy.kmc.dev")
    try:
        _refused_by_the_loop(hub, namespace, annotate, cases, before)
    finally:
        run_testbed("install")


def _refused_by_the_loop(
    hub: Kubectl,
    namespace: str,
    annotate: tuple[str, ...],
    cases: dict[str, str],
    before: Placement,
) -> None:
    for text, expected in cases.items():
        hub.run(*annotate, f"kmc.dev/strategy={text}")
        deadline = time.monotonic() + 20
        while (condition := placed_condition(hub, "deployment", "web", namespace)).get(
            "reason"
        ) != "InvalidStrategy" or expected not in condition.get("message", ""):
            assert time.monotonic() < deadline, condition
            time.sleep(0.5)
        assert condition["status"] == "False"
        assert condition["message"].startswith(f"kmc.dev/strategy on deployments {namespace}/web: ")
        assert placement_of(hub, "deployment", "web", namespace) == before
    warnings = [e for e in events_of(hub, namespace, "web") if e["type"] == "Warning"]
    assert len(warnings) == len(cases)
    assert all(e["reason"] == "InvalidStrategy" for e in warnings)


WIDGET_CRD: dict[str, Any] = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "widgets.example.com"},
    "spec": {
        "group": "example.com",
        "scope": "Namespaced",
        "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
        "versions": [
            {
                "name": "v1",
                "served": True,
                "storage": True,
                "schema": {
                    "openAPIV3Schema": {
                        "type": "object",
                        "properties": {
                            "spec": {"type": "object", "properties": {"size": {"type": "integer"}}}
                        },
                    }
                },
            }
        ],
    },
}


def test_a_crd_object_goes_where_its_api_is_served_and_leaves_where_it_goes_away(
    installed: bed.State, kubectl: dict[str, Kubectl], namespace: str
) -> None:
    hub = kubectl["hub"]
    serving = ("us-east", "eu-west")
    for cluster in ("hub", *serving):
        kubectl[cluster].apply(WIDGET_CRD)
        kubectl[cluster].run("wait", "--for=condition=Established", "crd/widgets.example.com")
    try:
        deadline = time.monotonic() + 30
        while not all(
            "example.com/v1/Widget" in hub.json("get", "location", loc)["status"]["resources"]
            for loc in serving
        ):
            assert time.monotonic() < deadline, "the locations never reported the Widget API"
            time.sleep(0.5)
        widget = {
            "apiVersion": "example.com/v1",
            "kind": "Widget",
            "metadata": {"name": "gadget"},
            "spec": {"size": 3},
        }
        hub.apply(with_strategy(widget, {"type": "Replicate"}), namespace)
        expect_placement(hub, "widget", "gadget", namespace, {"eu-west": None, "us-east": None})
        # The API goes away in one location: the object leaves it, and an Event says why.
        kubectl["eu-west"].run("delete", "crd", "widgets.example.com")
        expect_placement(hub, "widget", "gadget", namespace, {"us-east": None})
        messages = [e["message"] for e in events_of(hub, namespace, "gadget")]
        assert "evacuated eu-west: example.com/v1 Widget not served" in messages
    finally:
        # Children first: while a child still serves it, API import would re-create the hub's.
        for cluster in (*serving, "hub"):
            kubectl[cluster].run("delete", "crd", "widgets.example.com", "--ignore-not-found")


def test_a_resource_quota_is_weighted_by_where_the_namespace_runs(
    installed: bed.State, kubectl: dict[str, Kubectl], namespace: str
) -> None:
    hub = kubectl["hub"]
    hub.run("create", "quota", "compute", "-n", namespace, "--hard=cpu=10,memory=20Gi,pods=50")
    us = {
        "type": "Split",
        "locationSelector": {"matchLabels": {"topology.kubernetes.io/region": "us"}},
    }
    hub.apply(with_strategy(deployment("web", 4), us), namespace)
    hub.apply(with_strategy(deployment("db", 1), {"type": "Single", "pin": ["eu-west"]}), namespace)
    expect_placement(
        hub, "resourcequota", "compute", namespace, {"eu-west": 1, "us-east": 2, "us-west": 2}
    )
    # Scaling a workload moves the weights with it.
    hub.run("scale", "deployment", "db", "-n", namespace, "--replicas=3")
    expect_placement(
        hub, "resourcequota", "compute", namespace, {"eu-west": 3, "us-east": 2, "us-west": 2}
    )
    # Each child enforces its part, and the parts add up to the hub's quota exactly.
    # 20Gi by 3:2:2 is 9203501348.57 / 6135667565.71 / 6135667565.71 bytes: floors, and the
    # two spare bytes to the largest remainders.
    expected = {
        "eu-west": {"cpu": "4286m", "memory": "9203501348", "pods": "22"},
        "us-east": {"cpu": "2857m", "memory": "6135667566", "pods": "14"},
        "us-west": {"cpu": "2857m", "memory": "6135667566", "pods": "14"},
    }
    deadline = time.monotonic() + 30
    while True:
        hard = {}
        for child in CHILDREN:
            proc = kubectl[child].run(
                "get", "quota", "compute", "-n", namespace, "-o", "json", check=False
            )
            hard[child] = json.loads(proc.stdout)["spec"]["hard"] if proc.returncode == 0 else None
        if hard == expected:
            break
        assert time.monotonic() < deadline, hard
        time.sleep(0.5)
    assert sum(parse_quantity(h["memory"]) for h in expected.values()) == parse_quantity("20Gi")
    assert sum(parse_quantity(h["cpu"]) for h in expected.values()) == 10


FOLLOWERS = {
    "limitrange": {
        "apiVersion": "v1",
        "kind": "LimitRange",
        "metadata": {"name": "defaults"},
        "spec": {
            "limits": [
                {"type": "Container", "default": {"cpu": "200m"}, "defaultRequest": {"cpu": "50m"}}
            ]
        },
    },
    "networkpolicy": {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {"name": "defaults"},
        "spec": {"podSelector": {}, "policyTypes": ["Ingress"]},
    },
}


@pytest.mark.parametrize("kind", sorted(FOLLOWERS))
def test_a_namespace_follower_goes_wherever_its_namespace_runs(
    installed: bed.State, kubectl: dict[str, Kubectl], namespace: str, kind: str
) -> None:
    """LimitRange and NetworkPolicy follow their namespace, like a Role: one kind entry each,
    nothing else."""
    hub = kubectl["hub"]
    follower = FOLLOWERS[kind]
    hub.apply(follower, namespace)
    single = {"type": "Single", "pin": ["eu-west"]}
    hub.apply(with_strategy(deployment("web", 1), single), namespace)

    def children_are(expected: set[str]) -> dict[str, Any]:
        deadline = time.monotonic() + 120
        while True:
            found = {
                child: proc
                for child in CHILDREN
                if (
                    proc := kubectl[child].run(
                        "get", kind, "defaults", "-n", namespace, "-o", "json", check=False
                    )
                ).returncode
                == 0
            }
            if set(found) == expected:
                return {child: json.loads(proc.stdout) for child, proc in found.items()}
            assert time.monotonic() < deadline, f"{kind} in {sorted(found)}, not {expected}"
            time.sleep(0.5)

    wait_placement(hub, kind, "defaults", namespace, lambda p: p == {"eu-west": None}, 120)
    (copy,) = children_are({"eu-west"}).values()
    assert copy["spec"] == follower["spec"]
    # The namespace's workloads move: the follower goes with them, and leaves where they left.
    single["pin"] = ["us-east"]
    hub.apply(with_strategy(deployment("web", 1), single), namespace)
    wait_placement(hub, kind, "defaults", namespace, lambda p: p == {"us-east": None}, 120)
    children_are({"us-east"})
    hub.run("delete", kind, "defaults", "-n", namespace)
    children_are(set())


def test_a_location_that_stops_serving_an_api_is_evacuated_with_the_reason(
    installed: bed.State, kubectl: dict[str, Kubectl], namespace: str
) -> None:
    hub = kubectl["hub"]
    wait_locations_settled(hub)
    hub.apply(job("nightly", 3, 3), namespace)
    expect_placement(hub, "job", "nightly", namespace, {"eu-west": 1, "us-east": 1, "us-west": 1})
    # us-west's apiserver comes back without batch/v1, as after a bad upgrade.
    run_testbed("reconfigure", "us-west", "--apiserver-arg=--runtime-config=batch/v1=false")
    try:
        evacuated = wait_placement(
            hub, "job", "nightly", namespace, lambda p: "us-west" not in p, timeout=40
        )
        assert sum(v or 0 for v in evacuated.values()) == 3
        messages = [e["message"] for e in events_of(hub, namespace, "nightly")]
        assert "evacuated us-west: batch/v1 Job not served" in messages
        # Deployments (apps/v1, still served) stay where they are.
        hub.apply(deployment("web", 3), namespace)
        expect_placement(
            hub, "deployment", "web", namespace, {"eu-west": 1, "us-east": 1, "us-west": 1}
        )
    finally:
        run_testbed("reconfigure", "us-west")


def test_capacity_weights_follow_free_cpu(
    installed: bed.State, kubectl: dict[str, Kubectl], namespace_everywhere: str
) -> None:
    namespace = namespace_everywhere
    hub = kubectl["hub"]
    # Fill us-east from inside: 4 pods of 4 CPU leave it 8 of its 24 CPU free.
    hog = deployment("hog", 4)
    hog["spec"]["template"]["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "4"}}
    kubectl["us-east"].apply(hog, namespace)
    kubectl["us-east"].run(
        "wait", "-n", namespace, "--for=condition=Available", "deployment/hog", "--timeout=60s"
    )
    deadline = time.monotonic() + 90  # requests alone are written every 10 s
    while (
        parse_quantity(
            hub.json("get", "location", "us-east")["status"]["requested"].get("cpu", "0")
        )
        < 16
    ):
        assert time.monotonic() < deadline, "us-east never reported its 16 CPU requested"
        time.sleep(0.5)
    # 7 replicas by free CPU (about 8:24:24): us-east gets less than either other location,
    # where an even split would give it as many as us-west (3/2/2 by name).
    hub.apply(
        with_strategy(deployment("web", 7), {"type": "Split", "weights": "capacity"}), namespace
    )
    placement = wait_placement(hub, "deployment", "web", namespace, lambda p: len(p) == 3)
    assert sum(v or 0 for v in placement.values()) == 7
    assert (placement["us-east"] or 0) < min(placement["us-west"] or 0, placement["eu-west"] or 0)
    # The hog goes: us-east's room comes back, and with it its share (about 24:24:24 now),
    # though nothing about the Deployment changed.
    kubectl["us-east"].run("delete", "deployment", "hog", "-n", namespace, "--wait=true")
    placement = wait_placement(
        hub,
        "deployment",
        "web",
        namespace,
        lambda p: (p.get("us-east") or 0) >= min(p.get("us-west") or 0, p.get("eu-west") or 0),
        timeout=90,
    )
    assert sum(v or 0 for v in placement.values()) == 7


def test_pods_a_location_cannot_schedule_go_elsewhere_and_stay_away(
    installed: bed.State, kubectl: dict[str, Kubectl], namespace: str
) -> None:
    """The CERN case: a location that looks roomy but cannot schedule keeps only what runs."""
    hub, west = kubectl["hub"], kubectl["us-west"]
    wait_locations_settled(hub)
    hub.apply(deployment("web", 3), namespace)
    expect_placement(
        hub, "deployment", "web", namespace, {"eu-west": 1, "us-east": 1, "us-west": 1}
    )
    # us-west's controller-manager can take a minute to act after an earlier test restarted
    # its apiserver (client-go's watch backoff).
    wait_pods(west, namespace, lambda pods: len(pods) == 1 and all(scheduled(p) for p in pods), 120)
    nodes = [n["metadata"]["name"] for n in west.json("get", "nodes")["items"]]
    west.run("cordon", *nodes)
    try:
        see_cordon(west, namespace)
        hub.run("scale", "deployment", "web", "--replicas=6", "-n", namespace)
        # 2/2/2 first; us-west's second pod stays Pending. How soon us-west's own controllers
        # make it and its scheduler gives up is theirs to say (slow after a restart), so the
        # clock for our part starts when the pod is stuck, or when we already acted on it.
        wait_pods(
            west,
            namespace,
            lambda pods: (
                any(stuck(p) for p in pods)
                or us_west_cut_to_one(placement_of(hub, "deployment", "web", namespace) or {})
            ),
            120,
        )
        # After the grace period its share is cut to the one that runs.
        placement = wait_placement(
            hub, "deployment", "web", namespace, us_west_cut_to_one, timeout=bed.GRACE + 40
        )
        assert set(placement) == set(CHILDREN)
        messages = [e["message"] for e in events_of(hub, namespace, "web")]
        assert "scaled us-west 2 -> 1: 1 replicas unschedulable there" in messages
        wait_pods(west, namespace, lambda pods: len(pods) == 1 and scheduled(pods[0]))
        # Its stuck pod is gone, yet the share stays down while the location is held.
        time.sleep(bed.GRACE + 2)
        assert placement_of(hub, "deployment", "web", namespace) == placement
    finally:
        west.run("uncordon", *nodes)


def see_cordon(child: Kubectl, namespace: str) -> None:
    """Wait until the child's scheduler knows its nodes are cordoned: a bare pod of our
    template is found unschedulable. A scheduler whose node watch is still backing off after
    an earlier restart places pods on cordoned nodes for a while; a probe it places is deleted
    and another one tried."""
    probe = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "cordon-probe"},
        "spec": deployment("probe", 1)["spec"]["template"]["spec"],
    }

    def decided(pods: list[dict[str, Any]]) -> bool:
        return any(
            p["metadata"]["name"] == "cordon-probe" and (stuck(p) or scheduled(p)) for p in pods
        )

    deadline = time.monotonic() + 120
    while True:
        child.apply(probe, namespace)
        wait_pods(child, namespace, decided, 60)
        refused = stuck(child.json("get", "pod", "cordon-probe", "-n", namespace))
        child.run("delete", "pod", "cordon-probe", "-n", namespace)
        if refused:
            return
        assert time.monotonic() < deadline, "the scheduler kept using cordoned nodes"
        time.sleep(2)


def us_west_cut_to_one(placement: Placement) -> bool:
    return sum(v or 0 for v in placement.values()) == 6 and placement.get("us-west") == 1


def scheduled(pod: dict[str, Any]) -> bool:
    return bool(pod.get("spec", {}).get("nodeName"))


def stuck(pod: dict[str, Any]) -> bool:
    """Has the scheduler given up on this pod for now?"""
    return any(
        c.get("type") == "PodScheduled" and c.get("reason") == "Unschedulable"
        for c in pod.get("status", {}).get("conditions", [])
    )


def wait_pods(
    child: Kubectl,
    namespace: str,
    ok: Callable[[list[dict[str, Any]]], bool],
    timeout: float = 30,
) -> None:
    deadline = time.monotonic() + timeout
    while True:
        pods = child.json("get", "pods", "-n", namespace)["items"]
        if ok(pods):
            return
        assert time.monotonic() < deadline, [p["metadata"]["name"] for p in pods]
        time.sleep(0.5)
