"""A location's room counts only nodes a new pod can go to: a cordoned node, one with a
NoSchedule or NoExecute taint, or one not Ready adds nothing, and neither do the pods on it.
A child whose nodes all refuse new pods has room 0 — known to be nothing, not unknown (an
unknown room would let a stuck share move there)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any, cast

from apiserver.kube.client import Kube
from apiserver.locations.probe import Watched, room, schedulable
from apiserver.loops.placement.deciding import _free
from apiserver.objects import Obj
from apiserver.placement.engine import Resources


def node(
    name: str,
    ready: bool = True,
    cordoned: bool = False,
    taints: list[dict[str, str]] | None = None,
) -> dict[str, Any]:
    resources = {"cpu": "8", "memory": "32Gi", "pods": "110"}
    spec: dict[str, Any] = {"taints": taints} if taints else {}
    if cordoned:
        spec["unschedulable"] = True
    return {
        "metadata": {"name": name},
        "spec": spec,
        "status": {
            "capacity": resources,
            "allocatable": resources,
            "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
        },
    }


def pod(node_name: str, cpu: str = "500m") -> dict[str, Any]:
    return {
        "metadata": {"name": f"p-{node_name}"},
        "spec": {
            "nodeName": node_name,
            "containers": [{"resources": {"requests": {"cpu": cpu, "memory": "1Gi"}}}],
        },
    }


def free(nodes: list[dict[str, Any]], pods: list[dict[str, Any]]) -> Resources | None:
    fields = room(nodes, pods)
    return _free(fields["allocatable"], fields["requested"])


def test_every_open_node_counts_with_the_pods_on_it() -> None:
    fields = room([node("a"), node("b")], [pod("a"), pod("b")])
    assert fields["schedulableNodes"] == fields["readyNodes"] == fields["nodes"] == 2
    assert fields["allocatable"] == {"cpu": "16", "memory": "64Gi", "pods": "220"}
    assert fields["requested"] == {"cpu": "1", "memory": "2Gi", "pods": "2"}


def test_a_cordoned_node_is_not_room() -> None:
    fields = room([node("a"), node("b", cordoned=True)], [pod("a"), pod("b")])
    assert fields["schedulableNodes"] == 1 and fields["readyNodes"] == 2
    assert fields["capacity"] == {"cpu": "16", "memory": "64Gi", "pods": "220"}
    assert fields["allocatable"] == {"cpu": "8", "memory": "32Gi", "pods": "110"}
    assert fields["requested"] == {"cpu": "500m", "memory": "1Gi", "pods": "1"}


def test_taints_that_keep_pods_off_are_not_room() -> None:
    def tainted(effect: str) -> dict[str, Any]:
        return node(effect, taints=[{"key": "dedicated", "value": "gpu", "effect": effect}])

    assert not schedulable(tainted("NoSchedule"))
    assert not schedulable(tainted("NoExecute"))
    assert schedulable(tainted("PreferNoSchedule"))
    fields = room([tainted("NoSchedule"), tainted("NoExecute"), tainted("PreferNoSchedule")], [])
    assert fields["schedulableNodes"] == 1
    assert fields["allocatable"]["pods"] == "110"


def test_a_node_not_ready_is_not_room() -> None:
    fields = room([node("a"), node("b", ready=False)], [pod("a"), pod("b")])
    assert fields["readyNodes"] == fields["schedulableNodes"] == 1
    assert fields["allocatable"]["cpu"] == "8" and fields["requested"]["pods"] == "1"


def test_a_child_with_every_node_cordoned_has_no_room_rather_than_unknown_room() -> None:
    nodes = [node("a", cordoned=True), node("b", cordoned=True), node("c", cordoned=True)]
    fields = room(nodes, [pod("a")])
    assert fields["schedulableNodes"] == 0 and fields["readyNodes"] == 3
    assert free(nodes, [pod("a")]) == Resources(cpu_milli=0, memory=0, pods=0)


def test_nothing_running_is_said_as_zero() -> None:
    """Location status is merged into: a resource left out would keep its last value (a
    child emptied of pods still showed the CPU they had asked for)."""
    assert room([node("a")], [])["requested"] == {"cpu": "0", "memory": "0", "pods": "0"}


def test_room_is_what_the_open_nodes_have_left() -> None:
    nodes = [node("a"), node("b", cordoned=True)]
    pods = [pod("a", cpu="2"), pod("b", cpu="7")]
    assert free(nodes, pods) == Resources(cpu_milli=6000, memory=31 << 30, pods=109)


class Child:
    """Lists of nodes and pods, then a pod watch fed from a queue; other watches stay quiet."""

    name = "child"

    def __init__(self, nodes: list[Obj], pods: list[Obj]) -> None:
        self.lists = {"/api/v1/nodes": nodes, "/api/v1/pods": pods}
        self.pod_events: asyncio.Queue[Obj] = asyncio.Queue()

    async def get(self, path: str, **params: str) -> Obj:
        return {"metadata": {"resourceVersion": "1"}, "items": self.lists.get(path, [])}

    async def watch(
        self, path: str, resource_version: str, params: Any = None
    ) -> AsyncIterator[Obj]:
        while True:
            if path != "/api/v1/pods":
                await asyncio.Event().wait()
            yield await self.pod_events.get()


def named(name: str, version: str, on: str, cpu: str = "500m") -> Obj:
    return {
        **pod(on, cpu),
        "metadata": {"name": name, "namespace": "ns", "resourceVersion": version},
    }


async def test_room_kept_as_pods_change_is_room_summed_afresh() -> None:
    """A probe every few seconds must not sum tens of thousands of pods (the scale
    benchmark's idle CPU was mostly that): each pod's requests are added and taken off as it
    comes, changes, moves and goes, and what is kept is always what summing afresh gives."""
    nodes = [node("a"), node("b"), node("c", cordoned=True)]
    first = named("p1", "1", "a")
    child = Child(nodes, [first])
    woken = asyncio.Event()
    watched = Watched(cast(Kube, child), woken.set)
    events = [
        ("ADDED", named("p2", "2", "b", "250m")),
        ("ADDED", named("p3", "3", "c", "2")),  # on the cordoned node: not room
        ("MODIFIED", named("p1", "4", "a", "1500m")),  # its requests changed
        ("MODIFIED", named("p2", "5", "a", "250m")),  # moved (a new pod of the same name)
        ("DELETED", named("p1", "6", "a", "1500m")),
        ("DELETED", named("p3", "7", "c", "2")),
    ]
    pods = {"p1": first}
    try:
        await asyncio.wait_for(watched.nodes.synced.wait(), 10)
        await asyncio.wait_for(watched.pods.synced.wait(), 10)
        assert watched.room() == room(nodes, list(pods.values()))
        for kind, changed in events:
            woken.clear()
            await child.pod_events.put({"type": kind, "object": changed})
            await asyncio.wait_for(woken.wait(), 10)
            if kind == "DELETED":
                del pods[changed["metadata"]["name"]]
            else:
                pods[changed["metadata"]["name"]] = changed
            assert watched.room() == room(nodes, list(pods.values())), (kind, changed)
        last = watched.room()
        assert last is not None and last["requested"] == {
            "cpu": "250m",
            "memory": "1Gi",
            "pods": "1",
        }
    finally:
        watched.stop()
