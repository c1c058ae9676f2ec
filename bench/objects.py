"""What the benchmarks create on the test bed: Deployments, and extra kwok nodes for room.

One builder each, so every benchmark measures the same kind of object.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from kmc_testbed import bed


def deployment(
    name: str,
    replicas: int,
    requests: dict[str, str] | None = None,
    *,
    container_name: str = "c",
    image: str = "registry.example/bench:1",
) -> dict[str, Any]:
    """A Deployment of fake pods (kwok runs them) with one container; `requests` as its."""
    labels = {"app": name}
    container: dict[str, Any] = {"name": container_name, "image": image}
    if requests:
        container["resources"] = {"requests": requests}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "labels": labels},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": labels},
            "template": {"metadata": {"labels": labels}, "spec": {"containers": [container]}},
        },
    }


def kwok_nodes(
    create: bool,
    per_child: int,
    tag: str,
    children: Iterable[str] = (),
    capacity: dict[str, str] | None = None,
) -> None:
    """Add (or delete) `per_child` fake nodes in each child (every child when none named), of
    the bed's usual size unless `capacity` says otherwise."""
    state = bed.load()
    assert state is not None, "the test bed is not up"
    size = capacity or bed.NODE_CAPACITY
    names = set(children) or {c.name for c in state.clusters if c.role != bed.HUB}
    for cluster in state.clusters:
        if cluster.name not in names:
            continue
        client = bed.admin_client(cluster)
        for i in range(per_child):
            name = f"{cluster.name}-{tag}-node-{i}"
            if not create:
                client.request("DELETE", f"/api/v1/nodes/{name}")
                continue
            node = {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {
                    "name": name,
                    "annotations": {"kwok.x-k8s.io/node": "fake"},
                    "labels": {"type": "kwok", "kubernetes.io/hostname": name},
                },
                "status": {"capacity": size, "allocatable": size},
            }
            client.request("POST", "/api/v1/nodes", node)
