"""A Location's `status.objects` is a hub write each time it moves: a count that merely moved
waits, and what a drain waits for (a count after its cordon, a count of 0) goes at once."""

from __future__ import annotations

from apiserver.loops.sync.loop import count_due
from apiserver.objects import Obj


def test_a_count_that_only_moved_waits_and_what_a_drain_waits_for_does_not() -> None:
    location: Obj = {"spec": {}, "status": {"objects": 5, "observedGeneration": 2}}
    moved = {"objects": 6, "observedGeneration": 2}
    assert not count_due(location, {"objects": 5, "observedGeneration": 2}, None, 0.0, 30.0)
    assert count_due(location, moved, None, 0.0, 30.0)  # not written since we started
    assert not count_due(location, moved, 100.0, 110.0, 30.0)
    assert count_due(location, moved, 100.0, 130.0, 30.0)
    assert count_due(location, {"objects": 5, "observedGeneration": 3}, 100.0, 101.0, 30.0)
    assert count_due(location, {"objects": 0, "observedGeneration": 2}, 100.0, 101.0, 30.0)
    cordoned = {**location, "spec": {"unschedulable": True}}
    assert count_due(cordoned, moved, 100.0, 101.0, 30.0)
