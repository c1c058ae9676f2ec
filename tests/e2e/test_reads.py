"""Reads of `mc.kmc.dev` answered from the hub cache keep kube-apiserver's semantics: a read
without resourceVersion sees every write made before it, `0` answers at once, paging and
selectors work as on the hub, and what the cache cannot answer is still answered."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import aiohttp

from apiserver.kube import config as kubeconfig
from apiserver.kube.client import Kube
from kmc_testbed import bed, config

from .conftest import Kubectl
from .test_testbed import deployment

MC = "/apis/mc.kmc.dev/v1alpha1"


async def _create_then_read(namespace: str, count: int) -> list[str]:
    """Create on the hub and, the moment the hub says yes, read through mc.kmc.dev: a list
    and a get. Returns what was missing."""
    creds = await kubeconfig.from_file(str(config.kubeconfig_path()), "hub")
    missing: list[str] = []
    async with aiohttp.ClientSession() as session:
        hub = Kube(session, creds, "hub")
        for i in range(count):
            name = f"w{i}"
            await hub.create(
                f"/apis/apps/v1/namespaces/{namespace}/deployments", deployment(name, 1)
            )
            listing = await hub.get(f"{MC}/namespaces/{namespace}/deployments")
            names = {item["metadata"]["name"] for item in listing["items"]}
            if name not in names:
                missing.append(f"list after creating {name}: {sorted(names)}")
            got = await hub.get(f"{MC}/namespaces/{namespace}/deployments/{name}")
            if got["metadata"]["name"] != name:
                missing.append(f"get {name}")
            # And a change: the view shows the hub's new spec at once.
            await hub.merge_patch(
                f"/apis/apps/v1/namespaces/{namespace}/deployments/{name}",
                {"spec": {"replicas": 2}},
            )
            seen = await hub.get(f"{MC}/namespaces/{namespace}/deployments/{name}")
            if seen["spec"]["replicas"] != 2:
                missing.append(f"scale of {name}: view says {seen['spec']['replicas']}")
    return missing


def test_a_read_right_after_a_write_sees_it(
    installed: bed.State, kubectl: dict[str, Kubectl], namespace: str
) -> None:
    assert asyncio.run(_create_then_read(namespace, 15)) == []


def test_paging_selectors_and_resource_versions(
    installed: bed.State, kubectl: dict[str, Kubectl], namespace: str
) -> None:
    hub = kubectl["hub"]
    for i in range(5):
        manifest = deployment(f"p{i}", 1)
        manifest["metadata"]["labels"] = {"tier": "front" if i % 2 else "back"}
        hub.apply(manifest, namespace)
    paged = hub.run(
        "get", "deployments.mc.kmc.dev", "-n", namespace, "--chunk-size=2", "-o", "name"
    )
    assert paged.stdout.split() == [f"deployment.mc.kmc.dev/p{i}" for i in range(5)]
    front = hub.run(
        "get", "deployments.mc.kmc.dev", "-n", namespace, "-l", "tier=front", "-o", "name"
    )
    assert front.stdout.split() == ["deployment.mc.kmc.dev/p1", "deployment.mc.kmc.dev/p3"]
    by_name = hub.json(
        "get", "deployments.mc.kmc.dev", "-n", namespace, "--field-selector", "metadata.name=p2"
    )
    assert [item["metadata"]["name"] for item in by_name["items"]] == ["p2"]
    bad = hub.run(
        "get",
        "deployments.mc.kmc.dev",
        "-n",
        namespace,
        "--field-selector",
        "spec.x=1",
        check=False,
    )
    assert bad.returncode != 0 and "not a known field selector" in bad.stderr  # the hub says

    def raw(query: str) -> Any:
        path = f"{MC}/namespaces/{namespace}/deployments?{query}"
        return json.loads(hub.run("get", "--raw", path).stdout)

    listing = raw("limit=2")
    version = listing["metadata"]["resourceVersion"]
    assert len(listing["items"]) == 2 and listing["metadata"]["remainingItemCount"] == 3
    rest = raw(f"limit=10&continue={listing['metadata']['continue']}")
    assert [i["metadata"]["name"] for i in rest["items"]] == ["p2", "p3", "p4"]
    assert len(raw("resourceVersion=0")["items"]) == 5
    assert len(raw(f"resourceVersion={version}")["items"]) == 5
    # An exact resourceVersion is the hub's to answer (the cache holds only the latest).
    exact = raw(f"resourceVersion={version}&resourceVersionMatch=Exact")
    assert len(exact["items"]) == 5 and exact["metadata"]["resourceVersion"] == version
    # The list's resourceVersion is one a watch can start from.
    events = hub.run(
        "get",
        "--raw",
        f"{MC}/namespaces/{namespace}/deployments?watch=true"
        f"&resourceVersion={version}&timeoutSeconds=1",
    ).stdout
    assert all(json.loads(line)["type"] != "ERROR" for line in events.splitlines() if line)
