"""Events recorded like client-go's recorder (`apiserver/kube/events.py`): counted as a series,
aggregated by reason, spam-filtered per object, and folded while a write waits."""

from __future__ import annotations

import asyncio
from typing import Any, cast

import pytest

from apiserver.kube.client import ApiError, Kube
from apiserver.kube.events import COMBINED, Correlator, Recorder
from apiserver.objects import Obj


class Clock:
    def __init__(self) -> None:
        self.now = 1_800_000_000.0

    def __call__(self) -> float:
        return self.now


class FakeHub:
    """The hub's Events, and every write that reached it. While `hold` is set, writes wait."""

    def __init__(self) -> None:
        self.events: dict[str, Obj] = {}
        self.writes: list[tuple[str, str]] = []  # (verb, name)
        self.hold: asyncio.Event | None = None
        self.refuse = 0  # refuse this many writes with a 500

    async def _wait(self) -> None:
        if self.hold is not None:
            await self.hold.wait()
        if self.refuse:
            self.refuse -= 1
            raise ApiError.of(500, "InternalError", "no")

    async def create(self, path: str, body: Obj) -> Obj:
        await self._wait()
        name = body["metadata"]["name"]
        self.writes.append(("create", name))
        if name in self.events:
            raise ApiError.of(409, "AlreadyExists", name)
        self.events[name] = dict(body)
        return self.events[name]

    async def strategic_patch(self, path: str, patch: Obj) -> Obj:
        await self._wait()
        name = path.rsplit("/", 1)[1]
        self.writes.append(("patch", name))
        if name not in self.events:
            raise ApiError.of(404, "NotFound", name)
        self.events[name].update(patch)
        return self.events[name]


def deployment(name: str = "web") -> Obj:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": "demo", "uid": f"uid-{name}"},
    }


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def hub() -> FakeHub:
    return FakeHub()


@pytest.fixture
def recorder(hub: FakeHub, clock: Clock) -> Recorder:
    return Recorder(cast(Kube, hub), "kmc-test", correlator=Correlator(clock))


def only(hub: FakeHub) -> Obj:
    assert len(hub.events) == 1, hub.events
    return next(iter(hub.events.values()))


async def test_the_same_event_again_is_one_event_counted(
    recorder: Recorder, hub: FakeHub, clock: Clock
) -> None:
    for _ in range(3):
        recorder.post(deployment(), "Normal", "Moved", "moved to us-east")
        await recorder.flush()
        clock.now += 60
    event = only(hub)
    assert event["count"] == 3
    assert event["firstTimestamp"] == "2027-01-15T08:00:00Z"
    assert event["lastTimestamp"] == "2027-01-15T08:02:00Z"  # the third, 120 s after the first
    assert (
        hub.writes
        == [("create", event["metadata"]["name"])] + [("patch", event["metadata"]["name"])] * 2
    )


async def test_a_burst_while_the_hub_is_slow_is_two_writes(
    recorder: Recorder, hub: FakeHub
) -> None:
    hub.hold = asyncio.Event()
    for _ in range(20):
        recorder.post(deployment(), "Normal", "Moved", "moved to us-east")
        await asyncio.sleep(0)  # the first write is on its way; the rest wait behind it
    hub.hold.set()
    await recorder.flush()
    assert [verb for verb, _ in hub.writes] == ["create", "patch"]
    assert only(hub)["count"] == 20


async def test_a_burst_before_the_first_write_leaves_is_one_create(
    recorder: Recorder, hub: FakeHub
) -> None:
    for _ in range(5):
        recorder.post(deployment(), "Normal", "Moved", "moved to us-east")
    await recorder.flush()
    assert [verb for verb, _ in hub.writes] == ["create"]
    assert only(hub)["count"] == 5


async def test_different_objects_reasons_and_messages_are_different_events(
    recorder: Recorder, hub: FakeHub
) -> None:
    recorder.post(deployment("a"), "Normal", "Placed", "placed on us-east")
    recorder.post(deployment("b"), "Normal", "Placed", "placed on us-east")
    recorder.post(deployment("a"), "Normal", "Moved", "placed on us-east")
    recorder.post(deployment("a"), "Normal", "Placed", "placed on us-west")
    recorder.post(deployment("a"), "Warning", "Placed", "placed on us-west")
    await recorder.flush()
    assert len(hub.events) == 5
    assert all(e["count"] == 1 for e in hub.events.values())


async def test_ten_messages_of_one_reason_are_combined(
    recorder: Recorder, hub: FakeHub, clock: Clock
) -> None:
    for i in range(14):
        recorder.post(deployment(), "Warning", "Unplaceable", f"short of {i} replicas")
        await recorder.flush()
        clock.now += 1
    singles = [e for e in hub.events.values() if not e["message"].startswith(COMBINED)]
    combined = [e for e in hub.events.values() if e["message"].startswith(COMBINED)]
    assert len(singles) == 9
    assert len(combined) == 1
    assert combined[0]["count"] == 5
    assert combined[0]["message"] == COMBINED + "short of 13 replicas"


async def test_the_combination_starts_afresh_after_ten_quiet_minutes(
    recorder: Recorder, hub: FakeHub, clock: Clock
) -> None:
    for i in range(9):
        recorder.post(deployment(), "Warning", "Unplaceable", f"short of {i} replicas")
    clock.now += 601
    recorder.post(deployment(), "Warning", "Unplaceable", "short of 9 replicas")
    await recorder.flush()
    assert not any(e["message"].startswith(COMBINED) for e in hub.events.values())


async def test_the_spam_filter_lets_25_writes_through_then_one_in_five_minutes(
    recorder: Recorder, hub: FakeHub, clock: Clock
) -> None:
    for _ in range(30):
        recorder.post(deployment(), "Normal", "Moved", "moved to us-east")
        await recorder.flush()
    assert len(hub.writes) == 25
    assert only(hub)["count"] == 25
    clock.now += 300
    recorder.post(deployment(), "Normal", "Moved", "moved to us-east")
    await recorder.flush()
    assert len(hub.writes) == 26
    # What was left out was still counted, and reaches the hub with the next write.
    assert only(hub)["count"] == 31
    # Another object has a bucket of its own.
    recorder.post(deployment("other"), "Normal", "Moved", "moved to us-east")
    await recorder.flush()
    assert len(hub.writes) == 27


async def test_an_event_gone_from_the_hub_is_made_again_with_its_count(
    recorder: Recorder, hub: FakeHub
) -> None:
    recorder.post(deployment(), "Normal", "Moved", "moved to us-east")
    await recorder.flush()
    hub.events.clear()  # expired (the hub's --event-ttl)
    recorder.post(deployment(), "Normal", "Moved", "moved to us-east")
    await recorder.flush()
    assert [verb for verb, _ in hub.writes] == ["create", "patch", "create"]
    assert only(hub)["count"] == 2


async def test_a_create_that_failed_is_tried_again_by_the_next_occurrence(
    recorder: Recorder, hub: FakeHub
) -> None:
    hub.refuse = 1
    recorder.post(deployment(), "Normal", "Moved", "moved to us-east")
    await recorder.flush()
    assert not hub.events
    recorder.post(deployment(), "Normal", "Moved", "moved to us-east")
    await recorder.flush()
    assert only(hub)["count"] == 2
    assert [verb for verb, _ in hub.writes] == ["create"]


async def test_beyond_the_backlog_new_series_are_dropped(hub: FakeHub, clock: Clock) -> None:
    recorder = Recorder(cast(Kube, hub), "kmc-test", backlog=3, correlator=Correlator(clock))
    hub.hold = asyncio.Event()
    for name in "abcde":
        recorder.post(deployment(name), "Normal", "Placed", "placed on us-east")
    # A series already waiting still takes its occurrences.
    recorder.post(deployment("a"), "Normal", "Placed", "placed on us-east")
    hub.hold.set()
    await recorder.flush()
    counts: dict[str, Any] = {e["involvedObject"]["name"]: e["count"] for e in hub.events.values()}
    assert counts == {"a": 2, "b": 1, "c": 1}


def test_the_correlator_names_the_series_after_the_hubs_answer(clock: Clock) -> None:
    correlator = Correlator(clock)
    event = {
        "metadata": {"name": "web.1", "namespace": "demo"},
        "involvedObject": {"kind": "Deployment", "name": "web", "namespace": "demo"},
        "type": "Normal",
        "reason": "Moved",
        "message": "m",
        "source": {"component": "c"},
    }
    first = correlator.correlate(event)
    assert not correlator.on_hub(first.key) and first.event["count"] == 1
    correlator.written(first.key, {"metadata": {"name": "web.from-the-hub"}})
    again = correlator.correlate({**event, "metadata": {"name": "web.2", "namespace": "demo"}})
    assert correlator.on_hub(again.key) and again.event["metadata"]["name"] == "web.from-the-hub"
    assert again.patch() == {"count": 2, "lastTimestamp": "2027-01-15T08:00:00Z", "message": "m"}
