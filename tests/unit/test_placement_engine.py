"""The placement engine: verdicts and their order, each strategy type, damping, Jobs, and the
promise that an unchanged world gives an unchanged placement."""

from __future__ import annotations

import dataclasses
import json
import random
from collections.abc import Mapping
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from apiserver.kinds.job import split as split_job
from apiserver.placement.engine import (
    Candidate,
    Change,
    Decision,
    Moved,
    Resources,
    Settings,
    Taint,
    Why,
    decide,
)
from apiserver.placement.strategy import Strategy, parse_strategy
from tests.unit.shapes import shape

NOW = 10_000.0
SERVED = frozenset({"apps/v1/Deployment", "apps/v1/DaemonSet", "batch/v1/Job", "v1/ConfigMap"})


def loc(name: str, **changes: Any) -> Candidate:
    """A healthy location, Ready for long, serving the usual kinds, unless told otherwise."""
    base = Candidate(
        name=name,
        labels={},
        taints=(),
        unschedulable=False,
        ready=True,
        ready_changed_at=0.0,
        served=SERVED,
    )
    return dataclasses.replace(base, **changes)


def strategy(**document: Any) -> Strategy:
    return parse_strategy(json.dumps({"type": "Split", **document}), "deployments demo/web")


def deployment(replicas: int | None = 3) -> dict[str, Any]:
    spec = {} if replicas is None else {"replicas": replicas}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web"},
        "spec": spec,
    }


def job(**spec: int) -> dict[str, Any]:
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "batch"}, "spec": spec}


CONFIGMAP = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "settings"}}


def run(
    candidates: list[Candidate],
    current: Mapping[str, int | None] | None = None,
    obj: Mapping[str, Any] | None = None,
    how: Strategy | None = None,
    **options: Any,
) -> Decision:
    obj = obj if obj is not None else deployment()
    return decide(
        obj,
        shape(obj),
        how if how is not None else strategy(),
        candidates,
        current or {},
        options.pop("now", NOW),
        **options,
    )


def reasons(decision: Decision) -> dict[str, str]:
    return {verdict.location: verdict.reason for verdict in decision.verdicts}


class Lacks:
    """A schema that lacks the given field paths whenever the object sets them."""

    def __init__(self, *paths: str) -> None:
        self.paths = paths

    def missing(self, obj: Mapping[str, Any]) -> list[str]:
        return [path for path in self.paths if _has(obj, path)]


def _has(obj: Mapping[str, Any], path: str) -> bool:
    node: Any = obj
    for part in path.split("."):
        if not isinstance(node, Mapping) or part not in node:
            return False
        node = node[part]
    return True


# --- replicas -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("obj", "expected"),
    [
        (deployment(4), 4),
        (deployment(None), 1),
        (deployment(0), 0),
        ({"kind": "StatefulSet", "spec": {"replicas": 2}}, 2),
        ({"kind": "ReplicaSet", "spec": {}}, 1),
        (job(completions=8, parallelism=2), 8),
        (job(parallelism=3), 3),
        (job(), 1),
        ({"kind": "DaemonSet", "spec": {}}, None),
        (CONFIGMAP, None),
    ],
)
def test_total_replicas_by_kind(obj: dict[str, Any], expected: int | None) -> None:
    assert shape(obj).total == expected


# --- verdicts -------------------------------------------------------------------------------

TAINTED = (Taint("gpu", "true", "NoSchedule"),)
DEPLOYMENT_KEY = "apps/v1/Deployment"
WITH_INIT = {
    **deployment(),
    "spec": {"replicas": 3, "template": {"spec": {"initContainers": [{"name": "x"}]}}},
}


@pytest.mark.parametrize(
    ("candidate", "how", "reason", "code"),
    [
        (loc("x"), strategy(avoid=["x"]), "avoided", Why.AVOIDED),
        (loc("x"), strategy(pin=["y"]), "not pinned", Why.NOT_PINNED),
        (loc("x", unschedulable=True), strategy(), "cordoned", Why.CORDONED),
        (
            loc("x", ready=False, ready_changed_at=NOW - 75),
            strategy(),
            "not Ready for 75s",
            Why.NOT_READY,
        ),
        (
            loc("x", ready=False, ready_changed_at=NOW - 10),
            strategy(),
            "not Ready for 10s",
            Why.NOT_READY,
        ),
        (
            loc("x", labels={"region": "eu"}),
            strategy(locationSelector={"matchLabels": {"region": "us"}}),
            "filtered by selector",
            Why.FILTERED,
        ),
        (
            loc("x", taints=TAINTED),
            strategy(),
            "taint gpu=true:NoSchedule not tolerated",
            Why.TAINTED,
        ),
        (
            loc("x", taints=(Taint("dedicated", "", "NoExecute"),)),
            strategy(),
            "taint dedicated:NoExecute not tolerated",
            Why.TAINTED,
        ),
        (
            loc("x", served=frozenset({"v1/ConfigMap"})),
            strategy(),
            "apps/v1 Deployment not served",
            Why.NOT_SERVED,
        ),
        (
            loc("x", ready_changed_at=NOW - 10),
            strategy(),
            "cooling down (Ready for 10s of 60s)",
            Why.COOLING_DOWN,
        ),
        (loc("x", ready_changed_at=NOW - 60), strategy(), "eligible", Why.ELIGIBLE),
        (
            loc("x", taints=(Taint("gpu", "true", "PreferNoSchedule"),)),
            strategy(),
            "eligible",
            Why.ELIGIBLE,
        ),
        (
            loc("x", schemas={"apps/v1/Job": Lacks("spec")}),
            strategy(),
            "eligible",
            Why.ELIGIBLE,
        ),
    ],
)
def test_each_reason(candidate: Candidate, how: Strategy, reason: str, code: Why) -> None:
    # Placed elsewhere already: a first placement waits for no cooldown.
    decision = run([candidate], current={"elsewhere": 1}, how=how)
    (verdict,) = decision.verdicts
    assert (verdict.location, verdict.eligible, verdict.reason) == (
        "x",
        reason == "eligible",
        reason,
    )
    assert verdict.code == code


def test_a_field_the_schema_lacks_makes_a_location_incompatible() -> None:
    lacking = loc("old", schemas={DEPLOYMENT_KEY: Lacks("spec.template.spec.initContainers")})
    decision = run([lacking, loc("new")], obj=WITH_INIT)
    assert reasons(decision)["old"] == "field spec.template.spec.initContainers not in schema"
    assert decision.placement == {"new": 3}
    assert run([lacking], obj=deployment()).placement == {"old": 3}


def test_the_first_failing_check_is_the_reason() -> None:
    everything_wrong = loc(
        "x",
        unschedulable=True,
        ready=False,
        ready_changed_at=NOW - 500,
        taints=TAINTED,
        served=frozenset(),
    )
    order = [
        (strategy(avoid=["x"]), "avoided"),
        (strategy(pin=["y"]), "not pinned"),
        (strategy(), "cordoned"),
    ]
    for how, reason in order:
        assert reasons(run([everything_wrong], how=how)) == {"x": reason}
    ready_again = dataclasses.replace(everything_wrong, unschedulable=False)
    assert reasons(run([ready_again])) == {"x": "not Ready for 8m20s"}
    tolerating = strategy(tolerations=[{"key": "gpu", "operator": "Exists"}])
    healthy = dataclasses.replace(ready_again, ready=True)
    assert reasons(run([healthy], how=strategy())) == {
        "x": "taint gpu=true:NoSchedule not tolerated"
    }
    assert reasons(run([healthy], how=tolerating)) == {"x": "apps/v1 Deployment not served"}


def test_selector_with_match_expressions() -> None:
    how = strategy(
        locationSelector={
            "matchLabels": {"kmc.dev/cloud": "aws"},
            "matchExpressions": [
                {"key": "topology.kubernetes.io/region", "operator": "NotIn", "values": ["cn"]},
                {"key": "kmc.dev/legacy", "operator": "DoesNotExist"},
            ],
        }
    )
    candidates = [
        loc("a", labels={"kmc.dev/cloud": "aws", "topology.kubernetes.io/region": "us"}),
        loc("b", labels={"kmc.dev/cloud": "aws", "topology.kubernetes.io/region": "cn"}),
        loc("c", labels={"kmc.dev/cloud": "aws", "kmc.dev/legacy": "yes"}),
        loc("d", labels={"kmc.dev/cloud": "gcp"}),
        loc("e", labels={"kmc.dev/cloud": "aws"}),
    ]
    decision = run(candidates, obj=deployment(4), how=how)
    assert decision.placement == {"a": 2, "e": 2}
    assert [v.eligible for v in decision.verdicts] == [True, False, False, False, True]


def test_taints_need_a_matching_toleration() -> None:
    candidates = [loc("gpu", taints=TAINTED), loc("plain")]
    assert run(candidates, obj=deployment(4)).placement == {"plain": 4}
    for toleration in (
        {"key": "gpu", "value": "true"},
        {"key": "gpu", "operator": "Exists", "effect": "NoSchedule"},
        {"operator": "Exists"},
    ):
        how = strategy(tolerations=[toleration])
        assert run(candidates, obj=deployment(4), how=how).placement == {"gpu": 2, "plain": 2}
    wrong = strategy(tolerations=[{"key": "gpu", "value": "false"}])
    assert run(candidates, obj=deployment(4), how=wrong).placement == {"plain": 4}


def test_pin_and_avoid() -> None:
    candidates = [loc("a"), loc("b"), loc("c")]
    assert run(candidates, obj=deployment(4), how=strategy(pin=["a", "c"])).placement == {
        "a": 2,
        "c": 2,
    }
    assert run(candidates, obj=deployment(4), how=strategy(avoid=["a"])).placement == {
        "b": 2,
        "c": 2,
    }


# --- grace and cooldown ---------------------------------------------------------------------


def test_a_not_ready_location_keeps_its_share_through_the_grace_period() -> None:
    down = loc("west", ready=False, ready_changed_at=NOW - 45)
    decision = run([loc("east"), down], current={"east": 3, "west": 3}, obj=deployment(6))
    assert reasons(decision)["west"] == "not Ready, evacuating in 15s"
    assert decision.placement == {"east": 3, "west": 3}
    assert decision.messages == ()


def test_after_the_grace_period_its_share_moves() -> None:
    down = loc("us-west", ready=False, ready_changed_at=NOW - 60)
    decision = run(
        [loc("us-east"), loc("eu-west"), down],
        current={"us-east": 2, "eu-west": 2, "us-west": 2},
        obj=deployment(6),
    )
    assert reasons(decision)["us-west"] == "not Ready for 60s"
    assert decision.placement == {"eu-west": 3, "us-east": 3}
    assert decision.messages == (
        "evacuated us-west: not Ready for 60s",
        "scaled eu-west 2 -> 3",
        "scaled us-east 2 -> 3",
    )


def test_grace_is_a_setting() -> None:
    down = loc("west", ready=False, ready_changed_at=NOW - 45)
    decision = run([loc("east"), down], current={"east": 1, "west": 1}, settings=Settings(grace=30))
    assert decision.placement == {"east": 3}


def test_scaling_up_while_a_location_is_evacuating_leaves_it_alone() -> None:
    down = loc("west", ready=False, ready_changed_at=NOW - 5)
    decision = run([loc("east"), down], current={"east": 2, "west": 2}, obj=deployment(7))
    assert decision.placement == {"east": 5, "west": 2}


def test_only_evacuating_locations_left_still_hold_everything() -> None:
    down = loc("west", ready=False, ready_changed_at=NOW - 5)
    decision = run([down], current={"west": 2}, obj=deployment(3))
    assert decision.placement == {"west": 3}
    assert decision.unplaceable is None


def test_a_location_gets_no_new_work_during_its_cooldown() -> None:
    fresh = loc("eu-west", ready_changed_at=NOW - 10)
    current = {"us-east": 4}
    decision = run([loc("us-east"), fresh], current=current, obj=deployment(4))
    assert decision.placement == current
    assert decision.messages == ()
    later = run([loc("us-east"), fresh], current=current, obj=deployment(4), now=NOW + 50)
    assert later.placement == {"eu-west": 2, "us-east": 2}
    assert later.messages == (
        "spilled into eu-west: new eligible location",
        "scaled us-east 4 -> 2",
    )


def test_cooldown_does_not_touch_a_location_already_placed() -> None:
    fresh = loc("eu-west", ready_changed_at=NOW - 10)
    decision = run([loc("us-east"), fresh], current={"us-east": 2, "eu-west": 2})
    assert reasons(decision)["eu-west"] == "eligible"
    assert decision.placement == {"eu-west": 2, "us-east": 1}


def test_cooldown_is_a_setting() -> None:
    fresh = loc("b", ready_changed_at=NOW - 10)
    assert run([loc("a"), fresh], settings=Settings(cooldown=5)).placement == {"a": 2, "b": 1}


# --- Split ----------------------------------------------------------------------------------


def test_first_placement_and_weights() -> None:
    candidates = [loc("a"), loc("b"), loc("c")]
    decision = run(candidates, obj=deployment(5))
    assert decision.placement == {"a": 2, "b": 2, "c": 1}
    assert decision.messages == ("placed in a", "placed in b", "placed in c")
    weighted = run(candidates, obj=deployment(8), how=strategy(weights={"a": 3, "c": 0}))
    assert weighted.placement == {"a": 6, "b": 2}


def test_a_new_location_takes_the_fewest_replicas_from_the_others() -> None:
    current = {"a": 3, "b": 3, "c": 3}
    decision = run([loc("a"), loc("b"), loc("c"), loc("d")], current=current, obj=deployment(9))
    assert decision.placement == {"a": 3, "b": 2, "c": 2, "d": 2}
    assert decision.messages == (
        "spilled into d: new eligible location",
        "scaled b 3 -> 2",
        "scaled c 3 -> 2",
    )


def test_min_and_max_per_location() -> None:
    candidates = [loc("a"), loc("b"), loc("c")]
    how = strategy(weights={"a": 10}, minPerLocation=2, maxPerLocation=5)
    assert run(candidates, obj=deployment(10), how=how).placement == {"a": 5, "b": 3, "c": 2}
    full = run(candidates, obj=deployment(20), how=strategy(maxPerLocation=5))
    assert full.placement == {"a": 5, "b": 5, "c": 5}
    assert full.unplaceable == (
        "5 of 20 replicas not placed: every eligible location is at maxPerLocation 5"
    )


def test_capacity_weights() -> None:
    candidates = [
        loc("big", free=Resources(cpu_milli=6000, memory=0, pods=100)),
        loc("small", free=Resources(cpu_milli=2000, memory=0, pods=100)),
        loc("full", free=Resources(cpu_milli=0, memory=0, pods=0)),
    ]
    how = strategy(weights="capacity")
    assert run(candidates, obj=deployment(8), how=how).placement == {"big": 6, "small": 2}
    unknown = [loc("a"), loc("b")]
    assert run(unknown, obj=deployment(4), how=how).placement == {"a": 2, "b": 2}


def test_spread_by_picks_one_location_per_value() -> None:
    zone = "topology.kubernetes.io/zone"
    candidates = [
        loc("a1", labels={zone: "a"}),
        loc("a2", labels={zone: "a"}),
        loc("b1", labels={zone: "b"}),
        loc("b2", labels={zone: "b"}),
        loc("none"),
    ]
    how = strategy(spreadBy=zone, weights={"a2": 2})
    assert run(candidates, obj=deployment(4), how=how).placement == {"a2": 3, "b1": 1}
    decision = run(candidates, current={"a1": 2, "b2": 2}, obj=deployment(4), how=how)
    assert decision.placement == {"a1": 2, "b2": 2}
    assert decision.messages == ()
    unlabelled = run([loc("x"), loc("y")], current={"x": 1}, how=how)
    assert unlabelled.placement == {"x": 1}
    assert unlabelled.unplaceable == (
        "no eligible location has the spreadBy label topology.kubernetes.io/zone: x, y"
    )


def test_missing_capacity_moves_the_unschedulable_replicas_elsewhere() -> None:
    candidates = [loc("a"), loc("b"), loc("c")]
    current = {"a": 4, "b": 4, "c": 4}
    decision = run(candidates, current=current, obj=deployment(12), missing_capacity={"a": 3})
    assert decision.placement == {"a": 1, "b": 6, "c": 5}
    assert decision.messages == (
        "scaled a 4 -> 1: 3 replicas unschedulable there",
        "scaled b 4 -> 6",
        "scaled c 4 -> 5",
    )
    alone = run([loc("a")], current={"a": 4}, obj=deployment(4), missing_capacity={"a": 3})
    assert alone.placement == {"a": 4}


def test_a_held_location_does_not_grow_back_once_its_stuck_pods_are_gone() -> None:
    candidates = [loc("a"), loc("b"), loc("c")]
    current = {"a": 1, "b": 6, "c": 5}
    free = run(candidates, current=current, obj=deployment(12))
    assert free.placement == {"a": 4, "b": 4, "c": 4}
    held = run(candidates, current=current, obj=deployment(12), limits={"a": 1})
    assert held.placement == current
    assert held.changes == ()
    grown = run(candidates, current=current, obj=deployment(15), limits={"a": 1})
    assert grown.placement["a"] == 1
    assert sum(v or 0 for v in grown.placement.values()) == 15


def test_scaling_to_zero_keeps_the_copies() -> None:
    decision = run([loc("a"), loc("b")], current={"a": 2, "b": 1}, obj=deployment(0))
    assert decision.placement == {"a": 0, "b": 0}
    assert decision.messages == ("scaled a 2 -> 0", "scaled b 1 -> 0")
    assert run([loc("a"), loc("b")], obj=deployment(0)).placement == {}


def test_a_location_that_is_gone_is_evacuated() -> None:
    decision = run([loc("a")], current={"a": 1, "gone": 2})
    assert decision.placement == {"a": 3}
    assert decision.messages == ("evacuated gone: location removed", "scaled a 1 -> 3")


def test_evacuation_for_an_api_that_is_no_longer_served() -> None:
    no_jobs = loc("us-east", served=SERVED - {"batch/v1/Job"})
    decision = run([no_jobs, loc("eu-west")], current={"us-east": 2}, obj=job(parallelism=2))
    assert decision.placement == {"eu-west": 2}
    assert decision.messages == (
        "evacuated us-east: batch/v1 Job not served",
        "spilled into eu-west: replacing us-east",
    )


# --- Replicate and Single -------------------------------------------------------------------


def test_replicate_copies_to_every_eligible_location() -> None:
    candidates = [loc("a"), loc("b"), loc("c", unschedulable=True)]
    how = strategy(type="Replicate")
    assert run(candidates, obj=deployment(3), how=how).placement == {"a": 3, "b": 3}
    assert run(candidates, obj=CONFIGMAP, how=how).placement == {"a": None, "b": None}
    daemonset = {"apiVersion": "apps/v1", "kind": "DaemonSet", "spec": {}}
    assert run(candidates, obj=daemonset).placement == {"a": None, "b": None}


def test_single_is_sticky() -> None:
    candidates = [loc("a"), loc("b"), loc("c")]
    how = strategy(type="Single", weights={"c": 5})
    first = run(candidates, obj=deployment(3), how=how)
    assert first.placement == {"c": 3}
    assert run(candidates, current={"b": 3}, obj=deployment(3), how=how).placement == {"b": 3}
    cordoned = [loc("a"), loc("b", unschedulable=True), loc("c")]
    moved = run(cordoned, current={"b": 3}, obj=deployment(3), how=how)
    assert moved.placement == {"c": 3}
    assert moved.changes == (
        Change(Moved.EVACUATED, "evacuated b: cordoned"),
        Change(Moved.SPILLED_OVER, "spilled into c: replacing b"),
    )


def test_single_prefers_weight_then_free_cpu_then_name() -> None:
    how = strategy(type="Single")
    roomy = Resources(cpu_milli=4000, memory=0, pods=10)
    tight = Resources(cpu_milli=1000, memory=0, pods=10)
    assert run([loc("a", free=tight), loc("b", free=roomy)], how=how).placement == {"b": 3}
    assert run([loc("b"), loc("a")], how=how).placement == {"a": 3}
    assert run([loc("a")], obj=CONFIGMAP, how=how).placement == {"a": None}


# --- Jobs -----------------------------------------------------------------------------------


def test_jobs_split_completions_and_parallelism() -> None:
    decision = run([loc("a"), loc("b")], obj=job(completions=10, parallelism=4))
    assert decision.placement == {"a": 5, "b": 5}
    assert split_job({"completions": 10, "parallelism": 4}, decision.placement) == {
        "a": {"parallelism": 2, "completions": 5},
        "b": {"parallelism": 2, "completions": 5},
    }
    assert split_job({"parallelism": 5}, {"a": 3, "b": 2}) == {
        "a": {"parallelism": 3},
        "b": {"parallelism": 2},
    }
    assert split_job({"completions": 7, "parallelism": 3}, {"a": 6, "b": 1}) == {
        "a": {"parallelism": 2, "completions": 6},
        "b": {"parallelism": 1, "completions": 1},
    }


def test_a_job_uses_no_more_locations_than_its_parallelism() -> None:
    candidates = [loc("a"), loc("b"), loc("c")]
    decision = run(candidates, obj=job(completions=9, parallelism=2))
    assert decision.placement == {"a": 5, "b": 4}
    assert split_job({"completions": 9, "parallelism": 2}, decision.placement) == {
        "a": {"parallelism": 1, "completions": 5},
        "b": {"parallelism": 1, "completions": 4},
    }


def test_a_placed_job_stays_put_while_its_locations_are_eligible() -> None:
    current = {"a": 6}
    decision = run([loc("a"), loc("b")], current=current, obj=job(completions=6, parallelism=3))
    assert decision.placement == current
    assert decision.messages == ()


# --- unplaceable, determinism, stability ----------------------------------------------------


def test_no_eligible_location_leaves_the_placement_alone() -> None:
    how = strategy(locationSelector={"matchLabels": {"region": "us"}})
    candidates = [loc("us-east", unschedulable=True, labels={"region": "us"}), loc("eu-west")]
    decision = run(candidates, current={"us-east": 3}, how=how)
    assert decision.placement == {"us-east": 3}
    assert decision.unplaceable == (
        "no eligible location: eu-west: filtered by selector; us-east: cordoned"
    )
    assert decision.messages == ()
    nothing = run([], current={})
    assert nothing.unplaceable == "no eligible location: there are no locations"


def test_duplicate_candidates_are_a_bug() -> None:
    with pytest.raises(ValueError, match="distinct"):
        run([loc("a"), loc("a")])


candidate_sets = st.lists(
    st.builds(
        loc,
        st.sampled_from(["ap-south", "eu-west", "us-east", "us-west", "sa-east"]),
        ready=st.booleans(),
        ready_changed_at=st.sampled_from([0.0, NOW - 30, NOW - 90]),
        unschedulable=st.booleans(),
        labels=st.fixed_dictionaries({"zone": st.sampled_from(["a", "b", "c"])}),
        free=st.one_of(
            st.none(), st.builds(Resources, st.integers(0, 9000), st.just(0), st.just(9))
        ),
    ),
    max_size=5,
    unique_by=lambda candidate: candidate.name,
)
strategies = st.sampled_from(
    [
        strategy(),
        strategy(weights={"us-east": 3, "eu-west": 0}),
        strategy(weights="capacity", minPerLocation=1),
        strategy(maxPerLocation=4),
        strategy(spreadBy="zone"),
        strategy(type="Replicate"),
        strategy(type="Single"),
    ]
)


@given(candidate_sets, strategies, st.integers(0, 20), st.randoms(use_true_random=False))
def test_an_unchanged_world_gives_an_unchanged_placement(
    candidates: list[Candidate], how: Strategy, replicas: int, rng: random.Random
) -> None:
    first = run(candidates, obj=deployment(replicas), how=how)
    shuffled = list(candidates)
    rng.shuffle(shuffled)
    assert run(shuffled, obj=deployment(replicas), how=how) == first
    again = run(candidates, current=first.placement, obj=deployment(replicas), how=how)
    assert again.placement == first.placement
    assert again.changes == ()
    assert list(first.placement) == sorted(first.placement)


@given(
    candidate_sets,
    st.integers(0, 20),
    st.dictionaries(st.sampled_from(["eu-west", "us-east"]), st.integers(0, 5)),
)
def test_split_places_exactly_the_replicas_on_eligible_locations(
    candidates: list[Candidate], replicas: int, current: dict[str, int]
) -> None:
    decision = run(candidates, current=current, obj=deployment(replicas))
    eligible = {verdict.location for verdict in decision.verdicts if verdict.eligible}
    if not eligible:
        assert decision.placement == dict(sorted(current.items()))
        assert decision.unplaceable is not None
        return
    values = [value or 0 for value in decision.placement.values()]
    assert sum(values) == replicas
    assert set(decision.placement) <= eligible
    assert decision.unplaceable is None
    assert (decision.messages == ()) == (decision.placement == current)


# Locations that serve different kinds, some with a schema that lacks a field.
varied_candidate_sets = st.lists(
    st.builds(
        loc,
        st.sampled_from(["ap-south", "eu-west", "us-east", "us-west", "sa-east"]),
        ready=st.booleans(),
        ready_changed_at=st.sampled_from([0.0, NOW - 30, NOW - 90]),
        unschedulable=st.booleans(),
        labels=st.fixed_dictionaries({"zone": st.sampled_from(["a", "b", "c"])}),
        served=st.sets(st.sampled_from(sorted(SERVED))).map(frozenset),
        schemas=st.sampled_from([{}, {DEPLOYMENT_KEY: Lacks("spec.replicas")}]),
    ),
    max_size=5,
    unique_by=lambda candidate: candidate.name,
)


@given(
    varied_candidate_sets,
    strategies,
    strategies,
    st.integers(0, 20),
    st.dictionaries(st.sampled_from(["eu-west", "us-east", "sa-east"]), st.integers(0, 5)),
    st.sampled_from([NOW - 20, NOW, NOW + 40, NOW + 100]),
)
def test_what_decide_remembers_changes_no_decision(
    candidates: list[Candidate],
    how: Strategy,
    other: Strategy,
    replicas: int,
    current: dict[str, int],
    later: float,
) -> None:
    """`decide` remembers how it judged the same candidate and strategy objects: a later
    decision on them, at another time, for another placement, kind or strategy, is the one
    fresh copies get."""
    for obj in (deployment(replicas), job(completions=replicas, parallelism=2), CONFIGMAP):
        run(candidates, obj=obj, how=other)
        run(candidates, obj=obj, how=how)
        remembered = run(candidates, current=current, obj=obj, how=how, now=later)
        copies = [dataclasses.replace(candidate) for candidate in candidates]
        fresh = run(copies, current=current, obj=obj, how=how.model_copy(), now=later)
        assert remembered == fresh
