"""Events the way client-go's recorder writes them, on the real hub and as kmc-apiserver's
own ServiceAccount (`apiserver/kube/events.py`): a burst of the same Event is one Event with
its count, not one object per occurrence."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import aiohttp

from apiserver.kube import config as kubeconfig
from apiserver.kube.client import Kube
from apiserver.kube.events import Recorder
from kmc_testbed import bed

from .conftest import Kubectl
from .test_testbed import deployment

BURST = 40


async def _burst(obj: dict[str, Any], reason: str) -> None:
    async with aiohttp.ClientSession() as session:
        creds = await kubeconfig.from_file(bed.kmc_kubeconfig(), "hub")
        recorder = Recorder(Kube(session, creds, "hub"), "kmc-e2e")
        for i in range(BURST):
            recorder.post(obj, "Normal", reason, "the same thing happened again")
            if i % 10 == 0:
                await asyncio.sleep(0)  # let a write leave now and then, mid-burst
        await recorder.flush()
        # Later, once more: the same Event on the hub, counted on.
        recorder.post(obj, "Normal", reason, "the same thing happened again")
        await recorder.flush()


def test_a_burst_of_the_same_event_is_one_event_counted(
    installed: bed.State, kubectl: dict[str, Kubectl], namespace: str
) -> None:
    hub = kubectl["hub"]
    hub.apply(deployment("web", 1), namespace)
    obj = hub.json("get", "deployment", "web", "-n", namespace)
    log = bed.audit_log()
    start = log.stat().st_size
    asyncio.run(_burst(obj, "BurstTest"))
    events = [
        e for e in hub.json("get", "events", "-n", namespace)["items"] if e["reason"] == "BurstTest"
    ]
    assert len(events) == 1, events
    (event,) = events
    assert event["count"] == BURST + 1
    assert event["involvedObject"]["uid"] == obj["metadata"]["uid"]
    assert event["source"]["component"] == "kmc-e2e"
    assert event["firstTimestamp"] <= event["lastTimestamp"]
    # Written by kmc-apiserver's account, in far fewer writes than occurrences.
    writes = []
    with log.open() as lines:
        lines.seek(start)
        for line in lines:
            entry = json.loads(line)
            if (entry.get("objectRef") or {}).get("name") == event["metadata"]["name"]:
                writes.append((entry["verb"], entry["user"]["username"]))
    assert writes[0] == ("create", bed.KMC_USER), writes
    assert all(user == bed.KMC_USER for _, user in writes)
    assert 2 <= len(writes) <= 1 + BURST // 10 + 1, writes
