"""The fold holds back statuses that only move counters partway, and nothing else.

Every status write is a write on the user's hub: while pods start, the children's statuses
change a handful of times per object. A status whose counters are still on their way is
written at most once per hold (a second, longer while our status writes are slow); a
condition that flips, a new observedGeneration or counters that reached spec.replicas are
written at once, so `kubectl wait` and `kubectl rollout status` see them as soon as the
children do.
"""

from __future__ import annotations

import time
from typing import Any

from apiserver.kinds import DEPLOYMENT, JOB
from apiserver.loops.sync.fold import Hold, _partway, _why
from apiserver.objects import Obj
from apiserver.sync.status import reported

from .fold_fakes import KEY, Folding, child


def status(
    replicas: int, ready: int, available: str = "False", generation: int = 1
) -> dict[str, Any]:
    return {
        "observedGeneration": generation,
        "replicas": replicas,
        "updatedReplicas": replicas,
        "readyReplicas": ready,
        "availableReplicas": ready,
        "conditions": [{"type": "Available", "status": available, "message": f"{ready} ready"}],
    }


HUB = {"metadata": {"generation": 1}, "spec": {"replicas": 3}}


def test_counters_on_their_way_are_partway() -> None:
    assert _partway(status(3, 0), status(3, 1), HUB)
    assert _partway(status(3, 1), status(3, 2), HUB)


def test_words_alone_moving_after_the_end_are_partway() -> None:
    """A child's Progressing reason changes once its rollout is done: nothing to wait for."""
    done = status(3, 3, "True")
    reworded = {**done, "conditions": [{**done["conditions"][0], "message": "all good"}]}
    assert _partway(done, reworded, HUB)


def test_a_flipped_condition_a_new_generation_or_the_end_are_not() -> None:
    assert not _partway(status(3, 2), status(3, 3, "True"), HUB)
    assert not _partway(status(3, 1), status(3, 2, generation=2), HUB)
    # Scaled up while Available: the counters reached spec.replicas, no condition moved.
    assert not _partway(status(2, 2, "True"), status(3, 3, "True"), HUB)
    # Scaled to zero: the counters are gone from the new status.
    zero = {"metadata": {"generation": 1}, "spec": {"replicas": 0}}
    ended = {k: v for k, v in status(0, 0, "True").items() if k not in ("replicas",)}
    assert not _partway(status(1, 1, "True"), ended, zero)


async def written_partway(hold: float, ready: int) -> Folding:
    """A new object's first status, written partway (`ready` of its pods ready) once the
    ceiling of its first hold was up; `hold` is the hold of the partway statuses after it."""
    bed = Folding(hold)
    await bed.fold(child(ready))
    record = bed.records.of(KEY)
    assert record.first_look is not None
    record.first_look -= bed.folder.hold.first_most
    await bed.fold(child(ready))
    return bed


async def test_partway_statuses_wait_and_the_settled_one_does_not() -> None:
    bed = await written_partway(60.0, 0)
    assert len(bed.hub.writes) == 1
    bed.later.clear()
    await bed.fold(child(1))
    await bed.fold(child(2))
    assert len(bed.hub.writes) == 1  # held: the object is looked at again when the hold ends
    assert [key for key, _ in bed.later] == [KEY, KEY]
    await bed.fold(child(3))
    assert len(bed.hub.writes) == 2  # Available: at once
    assert bed.hub.writes[-1]["status"]["availableReplicas"] == 3


async def test_a_new_objects_first_status_waits_for_its_children_to_report() -> None:
    """Written before the children's controllers have seen them, it would say "on its way",
    and the next write, a moment later, what they say."""
    bed = Folding(5.0)
    await bed.fold({"metadata": {"name": "web", "namespace": "demo", "generation": 1}})
    assert bed.hub.writes == [] and bed.later == [(KEY, 5.0)]
    await bed.fold(child(3))
    assert len(bed.hub.writes) == 1  # its controller has seen it, and all are there: now


async def test_a_new_objects_first_status_waits_for_its_counters_up_to_the_ceiling() -> None:
    """A first status written while pods start would be followed, a moment later, by the
    settled one: two writes per create. It waits for the counters to reach spec.replicas, at
    most the hold's ceiling after the object was first seen, and then goes as it is."""
    bed = Folding(1.0)
    await bed.fold(child(0))
    await bed.fold(child(2))
    assert bed.hub.writes == [] and [round(d) for _, d in bed.later] == [10, 10]  # one new
    await bed.fold(child(3))
    assert len(bed.hub.writes) == 1 and bed.hub.writes[0]["status"]["availableReplicas"] == 3
    late = await written_partway(1.0, 1)
    assert len(late.hub.writes) == 1 and late.hub.writes[0]["status"]["availableReplicas"] == 1
    assert late.folder.hold.settling is None  # not settled yet: nothing learnt


def test_a_first_status_waits_about_as_long_as_new_objects_lately_took_to_settle() -> None:
    """Half as long again, between the partway hold's ceiling and four minutes: in a burst
    the children settle minutes after the first look, alone within seconds."""
    hold = Hold(1.0, 10.0)
    assert hold.first(0.0) == 10.0
    for _ in range(40):
        hold.settled(30.0)
    assert 44.0 < hold.first(0.0) <= 45.0
    for _ in range(40):
        hold.settled(100.0)
    assert 145.0 < hold.first(0.0) <= 150.0
    for _ in range(40):
        hold.settled(400.0)
    assert hold.first(0.0) == 240.0  # the ceiling
    for _ in range(80):
        hold.settled(2.0)
    assert hold.first(0.0) == 10.0


def test_a_first_status_waits_longer_while_many_new_objects_came_lately() -> None:
    """A burst's objects all come before any has settled: their number is the sign."""
    hold = Hold(1.0, 10.0)
    hold.new_object(100.0)
    assert hold.first(100.0) == 10.2  # one create alone: ten seconds
    for i in range(199):
        hold.new_object(100.0 + i / 10)
    assert hold.first(120.0) == 50.0  # 200 within the minute
    for i in range(1000):
        hold.new_object(120.0 + i / 100)
    assert hold.first(130.0) == 240.0  # a thousand more: the ceiling
    assert hold.first(300.0) == 10.0  # a quiet minute later, forgotten


async def test_a_burst_objects_first_status_keeps_the_wait_judged_at_its_first_look() -> None:
    """Its last objects settle minutes after the burst, when the burst has left the window:
    the wait judged at the first look still holds them."""
    bed = Folding(1.0)
    for _ in range(1000):
        bed.folder.hold.new_object(time.monotonic())
    await bed.fold(child(1))
    record = bed.records.of(KEY)
    assert record.first_look is not None and record.first_hold == 210.2  # 1,001 new: 10 s a 50
    bed.folder.hold.news.clear()  # the burst's minute is over
    record.first_look -= 150  # first seen 150 s ago: past the hold of a quiet moment
    await bed.fold(child(2))
    assert bed.hub.writes == []
    await bed.fold(child(3))
    assert len(bed.hub.writes) == 1 and bed.hub.writes[0]["status"]["availableReplicas"] == 3


async def test_a_first_status_written_partway_teaches_the_wait_when_it_settles() -> None:
    bed = await written_partway(1.0, 1)
    record = bed.records.of(KEY)
    assert record.first_look is not None
    record.first_look -= 30  # first seen the ceiling and 30 s ago
    record.folded = (record.folded or 0) - 10
    await bed.fold(child(3))
    assert len(bed.hub.writes) == 2 and record.first_look is None
    settling, took = bed.folder.hold.settling, bed.folder.hold.first_most + 30
    assert settling is not None and took - 1 < settling < took + 1


def test_the_hold_follows_our_status_writes_latency_within_its_bounds() -> None:
    """Twenty times what our status writes take lately, between one second and ten: a hub
    slow to answer has no room for writes that say little."""
    hold = Hold(1.0, 10.0)
    assert hold.seconds == 1.0
    hold.took(0.01)
    assert hold.seconds == 1.0
    for _ in range(30):
        hold.took(0.2)
    assert 3.9 < hold.seconds <= 4.0
    for _ in range(30):
        hold.took(5.0)
    assert hold.seconds == 10.0


async def test_a_partway_status_after_a_quiet_while_waits_a_hold_too() -> None:
    """Counters that move long after the last write still wait: the settled status, coming
    soon after, is then the one write instead of two."""
    bed = await written_partway(5.0, 0)
    record = bed.records.of(KEY)
    assert record.folded is not None
    record.folded -= 100  # a long quiet since
    await bed.fold(child(1))
    held = bed.later[-1][1]
    assert len(bed.hub.writes) == 1 and 4.9 < held <= 5.0  # held from now, not from then
    assert record.partway is not None
    record.partway -= 5  # the hold is up: the latest goes
    await bed.fold(child(2))
    writes = bed.hub.writes
    assert len(writes) == 2 and writes[-1]["status"]["availableReplicas"] == 2
    assert record.partway is None
    await bed.fold(child(3))  # settled: at once, held by nothing
    writes = bed.hub.writes
    assert len(writes) == 3 and writes[-1]["status"]["availableReplicas"] == 3


def test_a_child_is_reported_once_its_controller_has_seen_its_generation() -> None:
    """A Deployment controller's first word is a Progressing condition, its observedGeneration
    the next; a Job's status never says one, so a status of its own is its word."""
    rules = DEPLOYMENT.fold_rules
    assert rules is not None and JOB.fold_rules is not None
    meta = {"name": "web", "namespace": "demo", "generation": 2}
    fresh: Obj = {"metadata": meta}
    progressing: Obj = {"metadata": meta, "status": {"conditions": [{"type": "Progressing"}]}}
    behind: Obj = {"metadata": meta, "status": {"observedGeneration": 1}}
    seen: Obj = {"metadata": meta, "status": {"observedGeneration": 2}}
    one = {"us-east": 1}
    assert not reported(rules, {"us-east": None}, one)
    assert not reported(rules, {"us-east": fresh}, one)
    assert not reported(rules, {"us-east": progressing}, one)
    assert not reported(rules, {"us-east": behind}, one)
    assert reported(rules, {"us-east": seen}, one)
    assert not reported(rules, {"us-east": seen}, {"us-east": 1, "eu-west": 1})
    started: Obj = {"metadata": meta, "status": {"active": 1}}
    assert reported(JOB.fold_rules, {"us-east": started}, one)
    assert not reported(JOB.fold_rules, {"us-east": fresh}, one)


def test_each_write_is_counted_by_why_it_went() -> None:
    """`kmc_status_writes_total{why}`: what a benchmark reads to see which writes to cut."""
    assert _why(None, {}, status(3, 0), HUB) == "first"
    assert _why(1.0, status(3, 0), status(3, 1), HUB) == "partway"
    assert _why(1.0, status(3, 1), status(3, 2, "True"), HUB) == "flipped"
    assert _why(1.0, status(3, 2), status(3, 3, "True"), HUB) == "settled"
    replica_set = {k: v for k, v in status(3, 3, "True").items() if k != "updatedReplicas"}
    assert _why(1.0, status(3, 2), replica_set, HUB) == "settled"
    not_ready = {k: v for k, v in status(3, 0).items() if k not in ("readyReplicas",)}
    assert _why(1.0, status(3, 0, generation=0), not_ready, HUB) == "flipped"
    assert _why(1.0, {"active": 1}, {"active": 2}, {"spec": {}}) == "settled"


async def test_a_zero_the_hub_leaves_out_is_not_written_again() -> None:
    """The hub answers a settled Deployment status without `unavailableReplicas: 0` (the
    field is `omitempty`); the next look, with nothing new in the children, writes nothing.
    A benchmark of 300 creates counted this second "settled" write for 185 of them."""
    bed = Folding(5.0)
    await bed.fold(child(3))
    assert len(bed.hub.writes) == 1
    assert bed.obj["status"]["unavailableReplicas"] == 0
    bed.obj["status"] = {k: v for k, v in bed.obj["status"].items() if v != 0}  # as the hub
    await bed.fold(child(3))
    assert len(bed.hub.writes) == 1 and bed.later == []
