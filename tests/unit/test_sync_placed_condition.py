"""One writer of a hub object's status: the `kmc.dev/Placed` condition the placement loop
decides goes with the sync loop's fold, in the same write, or alone when there is nothing to
fold; once a fold has carried it, every later fold carries it too (server-side apply takes
away what a manager stops sending); and nothing is written that the hub already has.
"""

from __future__ import annotations

from typing import Any, cast

from apiserver.contract import PLACED, PLACEMENT_MANAGER, SYNC_MANAGER
from apiserver.hubcache import HubCache
from apiserver.kinds import DEPLOYMENT, JOB, Key
from apiserver.kube import events
from apiserver.loops.handoff import Handoff
from apiserver.loops.placement.records import Records as PlacementRecords
from apiserver.loops.placement.writes import Writer
from apiserver.loops.sync.fold import Folder, Hold
from apiserver.loops.sync.records import Records
from apiserver.objects import Obj

from .fold_fakes import KEY, Hub, child


def hub_object(status: Obj | None = None, kind: str = "Deployment") -> Obj:
    obj: Obj = {
        "kind": kind,
        "apiVersion": "apps/v1" if kind == "Deployment" else "batch/v1",
        "metadata": {
            "name": "web",
            "namespace": "demo",
            "uid": "u1",
            "generation": 1,
            "resourceVersion": "5",
        },
        "spec": {"replicas": 3},
    }
    if status is not None:
        obj["status"] = status
    return obj


def placed(status: str = "True", reason: str = "Placed", message: str = "us-east=3") -> Obj:
    return {
        "type": PLACED,
        "status": status,
        "reason": reason,
        "message": message,
        "lastTransitionTime": "2026-12-06T00:00:00Z",
    }


class Loops:
    """The placement loop's writer and the sync loop's folder, joined by one hand-off."""

    def __init__(self, hold: float = 60.0) -> None:
        self.hub = Hub()
        self.handoff = Handoff()
        self.woken: list[Key] = []
        self.handoff.handed.connect(self.woken.append)
        self.later: list[float] = []
        self.observed: list[Obj] = []
        self.writer = Writer(HubCache(self.hub), self.handoff, PlacementRecords(lambda _: None))
        self.records = Records()
        self.folder = Folder(
            self.hub,
            self.records,
            events.Recorder(self.hub, "test"),
            lambda _, delay: self.later.append(delay),
            Hold(hold),
            self.handoff,
            self.observe,
        )

    async def observe(self, _: str, answer: Obj) -> None:
        self.observed.append(answer)

    async def fold(self, obj: Obj, ready: int) -> None:
        self.records.of(KEY).applied["us-east"] = (1, 1)
        await self.folder.fold(
            KEY, DEPLOYMENT, obj, {"us-east": child(ready)}, {"us-east": 3}, {}, ()
        )

    def written(self) -> Obj:
        """The status of the last apply."""
        return cast(Obj, self.hub.applies[-1][1]["status"])


def types(status: Obj) -> dict[str, Any]:
    return {c["type"]: c["status"] for c in status.get("conditions", [])}


async def test_the_placed_condition_goes_with_the_first_fold_in_one_write() -> None:
    loops = Loops()
    obj = hub_object()
    loops.writer.condition(DEPLOYMENT, KEY, obj, "True", "Placed", "us-east=3")
    assert loops.hub.applies == []  # the placement loop writes no status
    assert loops.woken == [KEY]  # the sync loop is told
    await loops.fold(obj, 3)
    assert len(loops.hub.applies) == 1
    manager, body = loops.hub.applies[0]
    assert manager == SYNC_MANAGER
    assert types(body["status"])[PLACED] == "True" and "Available" in types(body["status"])
    assert loops.handoff.condition_of(KEY) is None  # written: nothing pending any more
    assert loops.observed == [body]  # the answer is in the cache at once


async def test_a_first_fold_waits_for_the_children_unless_the_placement_is_not_all_well() -> None:
    """A new object's first status waits for its children to settle, as one write instead
    of two; a placement that could not place it all is news to say at once (as is any
    condition of ours that is not True)."""
    loops = Loops()
    obj = hub_object()
    loops.writer.condition(DEPLOYMENT, KEY, obj, "True", "Placed", "us-east=3")
    await loops.fold(obj, 1)
    assert loops.hub.applies == [] and loops.later
    loops.writer.condition(DEPLOYMENT, KEY, obj, "False", "Unschedulable", "1 of 3 not placed")
    await loops.fold(obj, 1)
    assert len(loops.hub.applies) == 1 and types(loops.written())[PLACED] == "False"


async def test_a_later_fold_sends_the_hubs_placed_condition_again() -> None:
    """Applied once by `kmc-sync`, Placed would be removed by a fold that left it out."""
    loops = Loops(hold=0.0)
    obj = hub_object()
    loops.writer.condition(DEPLOYMENT, KEY, obj, "True", "Placed", "us-east=3")
    await loops.fold(obj, 3)
    obj["status"] = loops.written()
    await loops.fold(obj, 2)
    assert len(loops.hub.applies) == 2
    assert types(loops.written())[PLACED] == "True"


async def test_an_unchanged_decision_hands_nothing_over_and_a_pending_one_is_compared() -> None:
    loops = Loops()
    obj = hub_object({"conditions": [placed()]})
    loops.writer.condition(DEPLOYMENT, KEY, obj, "True", "Placed", "us-east=3")
    assert loops.woken == [] and loops.handoff.condition_of(KEY) is None
    # A new decision, not written yet; a look from a cache that does not have it yet
    # decides the same again: nothing new.
    loops.writer.condition(DEPLOYMENT, KEY, obj, "True", "Placed", "eu-west=3")
    pending = loops.handoff.condition_of(KEY)
    assert pending is not None and pending["message"] == "eu-west=3"
    assert pending["lastTransitionTime"] == "2026-12-06T00:00:00Z"  # same status: kept
    loops.writer.condition(DEPLOYMENT, KEY, obj, "True", "Placed", "eu-west=3")
    assert loops.woken == [KEY] and loops.handoff.condition_of(KEY) is pending


async def test_a_condition_that_changes_where_is_written_at_once_not_held() -> None:
    loops = Loops(hold=60.0)
    obj = hub_object()
    await loops.fold(obj, 0)
    first_look = loops.records.of(KEY).first_look
    assert loops.hub.applies == [] and first_look is not None  # a first status waits…
    loops.records.of(KEY).first_look = first_look - loops.folder.hold.first_most  # …a while at most
    await loops.fold(obj, 0)
    obj["status"] = loops.written()
    loops.writer.condition(DEPLOYMENT, KEY, obj, "True", "Placed", "us-east=3")
    await loops.fold(obj, 1)  # counters partway, but the condition is new
    assert len(loops.hub.applies) == 2 and types(loops.written())[PLACED] == "True"
    obj["status"] = loops.written()
    await loops.fold(obj, 2)  # counters partway only: held
    assert len(loops.hub.applies) == 2 and loops.later


async def test_nothing_to_fold_writes_the_condition_alone_under_the_placement_manager() -> None:
    loops = Loops()
    obj = hub_object()
    loops.writer.condition(DEPLOYMENT, KEY, obj, "False", "Gated", "waiting for placement gates")
    await loops.folder.placed_alone(KEY, DEPLOYMENT, obj)
    manager, body = loops.hub.applies[0]
    assert manager == PLACEMENT_MANAGER
    assert [c["reason"] for c in body["status"]["conditions"]] == ["Gated"]
    # Nothing pending any more: a second look writes nothing.
    await loops.folder.placed_alone(KEY, DEPLOYMENT, obj)
    assert len(loops.hub.applies) == 1


async def test_a_jobs_condition_goes_back_whole_under_the_version_it_was_read_at() -> None:
    loops = Loops()
    read = {"conditions": [{"type": "SuccessCriteriaMet", "status": "True"}]}
    obj = hub_object(read, kind="Job")
    key = Key("Job", "demo", "web")
    loops.writer.condition(JOB, key, obj, "True", "Placed", "us-east=3")
    await loops.folder.placed_alone(key, JOB, obj)
    _, body = loops.hub.applies[0]
    assert body["metadata"]["resourceVersion"] == "5"
    assert [c["type"] for c in body["status"]["conditions"]] == ["SuccessCriteriaMet", PLACED]


async def test_a_failed_placement_write_takes_its_condition_back() -> None:
    loops = Loops()
    obj = hub_object()
    loops.writer.condition(DEPLOYMENT, KEY, obj, "True", "Placed", "us-east=3")
    loops.handoff.failed(KEY, handed=False)
    assert loops.handoff.condition_of(KEY) is None
