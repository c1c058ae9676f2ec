"""A move shows as one Moving Event when it starts and one Moved when it ends, also when it
starts or ends while its placement is still on its way to the hub (no status is folded then),
and when the hub's status is written late or not at all."""

from __future__ import annotations

from typing import Any, cast

import aiohttp

from apiserver.kinds import Key
from apiserver.kube import events
from apiserver.kube.client import Credentials, Kube
from apiserver.loops.sync.fold import Folder, Hold
from apiserver.loops.sync.records import Records
from apiserver.objects import Obj

KEY = Key("Deployment", "demo", "web")
WAITING = ("eu-west 2/6 available",)


class Posted:
    def __init__(self) -> None:
        self.reasons: list[str] = []

    def post(self, obj: Obj, event_type: str, reason: str, message: str) -> None:
        self.reasons.append(reason)


def loop() -> tuple[Folder, Records, Posted]:
    hub = Kube(cast(aiohttp.ClientSession, None), Credentials("https://hub", False), "hub")
    posted = Posted()
    records = Records()
    folder = Folder(hub, records, cast(events.Recorder, posted), lambda _, __: None, Hold(1.0))
    return folder, records, posted


def hub(reason: str | None) -> Obj:
    obj: Obj = {"metadata": {"name": "web", "namespace": "demo", "annotations": {}}}
    if reason is not None:
        condition = {"type": "kmc.dev/Synced", "status": "False", "reason": reason}
        obj["status"] = {"conditions": [condition]}
    return obj


def test_a_move_begun_and_ended_before_the_hub_has_its_placement_is_shown() -> None:
    folder, records, posted = loop()
    before = hub("Synced")
    folder.show_move(KEY, before, None, WAITING)
    folder.show_move(KEY, before, None, WAITING)
    assert posted.reasons == ["Moving"]
    folder.show_move(KEY, before, None, ())
    folder.show_move(KEY, before, None, ())
    assert posted.reasons == ["Moving", "Moved"]
    assert records.of(KEY).moving is None  # the hub's status agrees: nothing left to remember


def test_a_status_written_late_brings_no_second_event() -> None:
    folder, _, posted = loop()
    status: dict[str, Any] = {"conditions": [{"type": "kmc.dev/Synced", "status": "True"}]}
    folder.show_move(KEY, hub("Synced"), status, WAITING)
    assert status["conditions"][0]["reason"] == "Moving"
    folder.show_move(KEY, hub("Synced"), None, WAITING)  # the write was held
    folder.show_move(KEY, hub("Moving"), None, WAITING)  # now the hub has it
    assert posted.reasons == ["Moving"]
    folder.show_move(KEY, hub("Moving"), None, ())
    folder.show_move(KEY, hub("Moving"), None, ())  # its end not written yet
    assert posted.reasons == ["Moving", "Moved"]


def test_a_move_the_hub_says_is_going_on_ends_once_after_a_restart() -> None:
    folder, _, posted = loop()
    folder.show_move(KEY, hub("Moving"), None, WAITING)
    assert posted.reasons == []
    folder.show_move(KEY, hub("Moving"), None, ())
    folder.show_move(KEY, hub("Moving"), None, ())
    assert posted.reasons == ["Moved"]
