"""The pod template steers placement: required and preferred node affinity, nodeSelector and
topologySpreadConstraints read against the labels Locations carry."""

from __future__ import annotations

from typing import Any

from apiserver.kinds import CONFIGMAP, DEPLOYMENT
from apiserver.placement.engine import Why
from apiserver.placement.template import steering

from .test_placement_engine import deployment, loc, reasons, run, strategy

REGION = "topology.kubernetes.io/region"
ZONE = "topology.kubernetes.io/zone"
LABELS = {
    "us-east": {REGION: "us", ZONE: "us-east-1"},
    "us-west": {REGION: "us", ZONE: "us-west-1"},
    "eu-west": {REGION: "eu", ZONE: "eu-west-1"},
}
BED = [loc(name, labels=labels) for name, labels in LABELS.items()]


def with_pod_spec(replicas: int = 6, **pod: Any) -> dict[str, Any]:
    obj = deployment(replicas)
    obj["spec"]["template"] = {"spec": {"containers": [{"name": "c", "image": "x"}], **pod}}
    return obj


def required(*terms: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": term} for term in terms]
            }
        }
    }


def expr(key: str, operator: str, *values: str) -> dict[str, Any]:
    return {"key": key, "operator": operator, **({"values": list(values)} if values else {})}


def test_required_region_affinity_keeps_only_matching_locations() -> None:
    obj = with_pod_spec(affinity=required([expr(REGION, "In", "us")]))
    decision = run(BED, obj=obj)
    assert decision.placement == {"us-east": 3, "us-west": 3}
    eu = next(v for v in decision.verdicts if v.location == "eu-west")
    assert (eu.eligible, eu.code) == (False, Why.TEMPLATE)
    assert eu.reason == "nodeAffinity requires topology.kubernetes.io/region in [us]"


def test_terms_are_ored_and_node_keys_are_left_to_the_clusters() -> None:
    affinity = required(
        [expr(REGION, "In", "eu"), expr("kubernetes.io/os", "In", "linux")],
        [expr(ZONE, "In", "us-west-1")],
    )
    decision = run(BED, obj=with_pod_spec(affinity=affinity))
    assert set(decision.placement) == {"eu-west", "us-west"}
    assert reasons(decision)["us-east"] == (
        "nodeAffinity requires topology.kubernetes.io/region in [eu] or "
        "topology.kubernetes.io/zone in [us-west-1]"
    )
    nodes_only = required([expr("kubernetes.io/os", "In", "linux")])
    assert len(run(BED, obj=with_pod_spec(affinity=nodes_only)).placement) == 3


def test_node_selector_on_a_location_label() -> None:
    decision = run(BED, obj=with_pod_spec(nodeSelector={REGION: "eu", "disk": "ssd"}))
    assert decision.placement == {"eu-west": 6}
    assert reasons(decision)["us-east"] == "nodeSelector requires topology.kubernetes.io/region=eu"


def test_hub_only_keys_name_a_location_or_its_labels() -> None:
    by_name = required([expr("location.kmc.dev/name", "In", "eu-west")])
    assert run(BED, obj=with_pod_spec(affinity=by_name)).placement == {"eu-west": 6}
    located = [loc("a", labels={"tier": "gold"}), loc("b", labels={"tier": "iron"})]
    by_label = required([expr("location.kmc.dev/tier", "NotIn", "iron")])
    assert run(located, obj=with_pod_spec(affinity=by_label)).placement == {"a": 6}


def test_a_zone_spread_divides_evenly_between_zones() -> None:
    spread = [{"maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "DoNotSchedule"}]
    obj = with_pod_spec(topologySpreadConstraints=spread)
    assert run(BED, obj=obj).placement == {"eu-west": 2, "us-east": 2, "us-west": 2}
    # By region: half in eu, half over the two us locations, even with weights against it.
    by_region = [{"maxSkew": 1, "topologyKey": REGION, "whenUnsatisfiable": "DoNotSchedule"}]
    weighted = strategy(weights={"eu-west": 1, "us-east": 5, "us-west": 5})
    placement = run(BED, obj=with_pod_spec(topologySpreadConstraints=by_region), how=weighted)
    assert placement.placement == {"eu-west": 3, "us-east": 2, "us-west": 1} or (
        placement.placement == {"eu-west": 3, "us-east": 1, "us-west": 2}
    )


def test_a_spread_rules_out_locations_without_the_key_and_schedule_anyway_is_ignored() -> None:
    bare = [*BED, loc("bare")]
    spread = [{"maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "DoNotSchedule"}]
    decision = run(bare, obj=with_pod_spec(topologySpreadConstraints=spread))
    assert "bare" not in decision.placement
    assert reasons(decision)["bare"] == (
        "topologySpreadConstraints: no topology.kubernetes.io/zone label"
    )
    soft = [{"maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "ScheduleAnyway"}]
    assert "bare" in run(bare, obj=with_pod_spec(topologySpreadConstraints=soft)).placement


def test_preferred_terms_weigh_locations() -> None:
    preferred = {
        "nodeAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": 2, "preference": {"matchExpressions": [expr(REGION, "In", "us")]}},
                {"weight": 1, "preference": {"matchExpressions": [expr(REGION, "In", "eu")]}},
            ]
        }
    }
    obj = with_pod_spec(8, affinity=preferred)
    assert run(BED, obj=obj).placement == {"eu-west": 2, "us-east": 3, "us-west": 3}
    # Weights the strategy writes win.
    even = strategy(weights={"eu-west": 1})
    assert sum(v or 0 for v in run(BED, obj=obj, how=even).placement.values()) == 8
    assert run(BED, obj=obj, how=even).placement["eu-west"] in (2, 3)


def test_a_strategy_that_says_where_wins_and_the_verdict_says_so() -> None:
    obj = with_pod_spec(affinity=required([expr(REGION, "In", "us")]))
    pinned = run(BED, obj=obj, how=strategy(pin=["eu-west"]))
    assert pinned.placement == {"eu-west": 6}
    assert reasons(pinned)["eu-west"] == (
        "eligible (the strategy wins over "
        "nodeAffinity requires topology.kubernetes.io/region in [us])"
    )
    selected = run(BED, obj=obj, how=strategy(locationSelector={"matchLabels": {REGION: "eu"}}))
    assert selected.placement == {"eu-west": 6}


def test_nothing_to_say_without_location_terms() -> None:
    plain = steering(DEPLOYMENT.pod_spec(with_pod_spec()), lambda: {"a": {REGION: "us"}})
    assert not plain.ruled_out and plain.preferences is None and plain.spread_key is None
    assert steering(CONFIGMAP.pod_spec({"kind": "ConfigMap"}), lambda: {"a": {}}).ruled_out == {}


def test_gt_and_lt_compare_integers() -> None:
    located = {"a": {"gen": "3"}, "b": {"gen": "7"}, "c": {"gen": "x"}}
    newer = required([expr("gen", "Gt", "5")])
    assert set(
        steering(DEPLOYMENT.pod_spec(with_pod_spec(affinity=newer)), lambda: located).ruled_out
    ) == {"a", "c"}
