"""A first placement is immediate and whole: a new workload has nothing to churn, so
locations Ready for only a moment take it at once; the cooldown damps only the spill-over of
workloads already placed."""

from __future__ import annotations

from apiserver.placement.engine import Why
from tests.unit.test_placement_engine import NOW, deployment, loc, run

JUST_READY = [loc(name, ready_changed_at=NOW - 1) for name in ("eu-west", "us-east", "us-west")]


def test_a_new_workload_goes_over_every_location_just_ready() -> None:
    decision = run(JUST_READY, obj=deployment(6))
    assert decision.placement == {"eu-west": 2, "us-east": 2, "us-west": 2}
    assert decision.unplaceable is None
    assert all(v.eligible and v.code is Why.ELIGIBLE for v in decision.verdicts)


def test_a_placed_workload_still_waits_out_the_cooldown_to_spill_over() -> None:
    ready = [loc("us-east"), *JUST_READY[:1]]
    decision = run(ready, current={"us-east": 6}, obj=deployment(6))
    assert decision.placement == {"us-east": 6}
    (cooling,) = (v for v in decision.verdicts if v.location == "eu-west")
    assert cooling.code is Why.COOLING_DOWN and not cooling.eligible
