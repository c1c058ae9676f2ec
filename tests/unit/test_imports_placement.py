"""The API import's Incompatible verdicts reach the placement engine: the kind counts as not
served at that location, and a change of verdicts re-decides the kind's objects."""

from __future__ import annotations

from typing import cast

import aiohttp

from apiserver.hubcache import HubCache
from apiserver.kube.client import Credentials, Kube
from apiserver.leader import Leadership
from apiserver.locations.fleet import Fleet
from apiserver.loops.handoff import Handoff
from apiserver.loops.placement.loop import PlacementLoop
from apiserver.objects import Obj

GVK = "example.org/v1/Widget"


def location() -> Obj:
    return {
        "apiVersion": "kmc.dev/v1alpha1",
        "kind": "Location",
        "metadata": {"name": "us-west", "resourceVersion": "5"},
        "spec": {"secretRef": {"name": "us-west"}},
        "status": {"resources": [GVK, "apps/v1/Deployment"]},
    }


async def test_an_incompatible_location_does_not_serve_the_kind() -> None:
    hub = Kube(cast(aiohttp.ClientSession, None), Credentials("https://hub", False), "hub")
    fleet = Fleet(hub, cast(aiohttp.ClientSession, None))
    loop = PlacementLoop(HubCache(hub), fleet, Handoff(), Leadership.solo())
    widget: Obj = {"apiVersion": "example.org/v1", "kind": "Widget", "metadata": {}}
    assert GVK in (await loop.decider._candidate(location(), widget)).served
    loop.exclude({"us-west": frozenset({GVK})}, {"Widget.example.org"})
    served = (await loop.decider._candidate(location(), widget)).served
    assert GVK not in served and "apps/v1/Deployment" in served
    loop.exclude({}, {"Widget.example.org"})
    assert GVK in (await loop.decider._candidate(location(), widget)).served
