"""The placement loop hands its decision to the sync loop in process, before the hub has it.

The annotation stays the durable record: a handed-over placement counts only while the hub
object still carries the annotation it replaces, and is taken back when its write fails, so
the children converge to whatever the hub holds. A write that keeps failing hands nothing
over again until one succeeds: children must not come and go with every retry.
"""

from __future__ import annotations

import asyncio
from typing import Any, cast

import aiohttp
import pytest

from apiserver.contract import PLACEMENT
from apiserver.hubcache import HubCache
from apiserver.kinds import DEPLOYMENT, Key
from apiserver.kube.client import ApiError, Credentials, Kube
from apiserver.loops.handoff import Handoff
from apiserver.loops.placement.records import Records
from apiserver.loops.placement.writes import Writer
from apiserver.objects import Obj

KEY = Key("Deployment", "demo", "web")


class FlakyHub(Kube):
    """A hub whose object writes fail while `failing` is set; nothing else is called."""

    def __init__(self) -> None:
        super().__init__(
            cast(aiohttp.ClientSession, None), Credentials("https://hub", False), "hub"
        )
        self.failing = False
        self.hanging = False
        self.writes: list[Obj] = []

    async def strategic_patch(self, path: str, patch: Obj) -> Obj:
        if self.hanging:
            await asyncio.Event().wait()  # until cancelled
        if self.failing:
            raise ApiError.of(403, "Forbidden", "denied by a policy")
        self.writes.append(patch)
        return {"metadata": {}}


def hub_object(placement: str | None = None) -> Obj:
    annotations = {PLACEMENT: placement} if placement is not None else {}
    return {
        "kind": "Deployment",
        "apiVersion": "apps/v1",
        "metadata": {
            "name": "web",
            "namespace": "demo",
            "uid": "u1",
            "resourceVersion": "7",
            "annotations": annotations,
        },
        "spec": {"replicas": 3},
    }


def loops() -> tuple[FlakyHub, Writer, Handoff]:
    """The hand-off between the placement loop's writer and the sync loop's reads."""
    hub = FlakyHub()
    handoff = Handoff()
    return hub, Writer(HubCache(hub), handoff, Records(lambda _: None)), handoff


async def test_a_handed_placement_counts_until_the_hub_has_it() -> None:
    _, _, handoff = loops()
    handoff.give(KEY, "", {"us-east": 3})
    assert handoff.placement_of(KEY, hub_object()) == ({"us-east": 3}, True)
    # Our write landed: the hub's record says it from now on, and the hand-over is gone.
    landed = hub_object('{"us-east":3}')
    assert handoff.placement_of(KEY, landed) == ({"us-east": 3}, False)
    assert handoff.placement_of(KEY, hub_object()) == ({}, False)


async def test_another_placement_on_the_hub_wins_over_a_handed_one() -> None:
    _, _, handoff = loops()
    handoff.give(KEY, '{"us-east":3}', {"eu-west": 3})
    assert handoff.placement_of(KEY, hub_object('{"us-west":3}')) == ({"us-west": 3}, False)


async def test_a_failed_write_takes_the_hand_over_back_and_hands_nothing_until_one_succeeds() -> (
    None
):
    hub, writer, handoff = loops()
    # What the sync loop would read each time it is told of the key.
    handed: list[tuple[Key, Any]] = []
    handoff.handed.connect(lambda key: handed.append((key, handoff.placement_of(key, seen))))
    seen = hub_object()
    hub.failing = True
    with pytest.raises(ApiError):
        await writer.placement(DEPLOYMENT, KEY, hub_object(), {"us-east": 3})
    assert handed == [(KEY, ({"us-east": 3}, True)), (KEY, ({}, False))]
    # The sync loop follows the hub's record again: nothing placed.
    assert handoff.placement_of(KEY, hub_object()) == ({}, False)
    with pytest.raises(ApiError):
        await writer.placement(DEPLOYMENT, KEY, hub_object(), {"us-east": 3})
    assert len(handed) == 2  # a retry of a failing write hands nothing over
    hub.failing = False
    await writer.placement(DEPLOYMENT, KEY, hub_object(), {"us-east": 3})
    assert len(handed) == 2 and len(hub.writes) == 1
    seen = hub_object('{"us-east":3}')
    await writer.placement(DEPLOYMENT, KEY, seen, {"eu-west": 3})
    assert handed[-1] == (KEY, ({"eu-west": 3}, True))  # handing over again


async def test_a_write_cancelled_on_its_way_takes_the_hand_over_back() -> None:
    """Leadership ended mid-write (the reconcile is cancelled): the hub may not have the
    placement, so the sync loop must follow the hub's record again, not the hand-over."""
    hub, writer, handoff = loops()
    hub.hanging = True
    writing = asyncio.ensure_future(writer.placement(DEPLOYMENT, KEY, hub_object(), {"us-east": 3}))
    await asyncio.sleep(0.05)  # the hand-over is made before the write is sent
    assert handoff.placement_of(KEY, hub_object()) == ({"us-east": 3}, True)
    writing.cancel()
    with pytest.raises(asyncio.CancelledError):
        await writing
    assert handoff.placement_of(KEY, hub_object()) == ({}, False)


async def test_the_first_placement_brings_the_finalizer_in_the_same_write() -> None:
    hub, writer, _ = loops()
    await writer.placement(DEPLOYMENT, KEY, hub_object(), {"us-east": 3})
    assert hub.writes == [
        {
            "metadata": {
                "annotations": {PLACEMENT: '{"us-east":3}'},
                "finalizers": ["kmc.dev/cleanup"],
            }
        }
    ]
