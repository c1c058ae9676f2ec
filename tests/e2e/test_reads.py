"""Reads of `mc.kmc.dev` answered from the hub cache keep kube-apiserver's semantics: a read
without resourceVersion sees every write made before it, `0` answers at once, paging and
selectors work as on the hub, and what the cache cannot answer is still answered."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import time
from typing import Any

import aiohttp

from apiserver.api import paging
from apiserver.kube import config as kubeconfig
from apiserver.kube.client import ApiError, Kube
from kmc_testbed import bed, config

from .conftest import CHILDREN, Kubectl, run_testbed
from .test_locations import wait_until as wait_for
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
            # A small namespace is listed at the hub; every namespace from the hub cache,
            # once it has caught up.
            for path in (f"{MC}/namespaces/{namespace}/deployments", f"{MC}/deployments"):
                listing = await hub.get(path)
                names = {
                    item["metadata"]["name"]
                    for item in listing["items"]
                    if item["metadata"]["namespace"] == namespace
                }
                if name not in names:
                    missing.append(f"{path} after creating {name}: {sorted(names)}")
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
            every = await hub.get(f"{MC}/deployments", fieldSelector=f"metadata.name={name}")
            scaled = [
                i["spec"]["replicas"]
                for i in every["items"]
                if i["metadata"]["namespace"] == namespace
            ]
            if scaled != [2]:
                missing.append(f"scale of {name}: the list of every namespace says {scaled}")
    return missing


def test_a_read_right_after_a_write_sees_it(
    installed: bed.State, kubectl: dict[str, Kubectl], namespace: str
) -> None:
    assert asyncio.run(_create_then_read(namespace, 15)) == []


async def _fill(namespace: str, count: int) -> None:
    """`count` Deployments of no replicas: a namespace too big for one hub list of it."""
    creds = await kubeconfig.from_file(str(config.kubeconfig_path()), "hub")
    async with aiohttp.ClientSession() as session:
        hub = Kube(session, creds, "hub")
        gate = asyncio.Semaphore(8)
        path = f"/apis/apps/v1/namespaces/{namespace}/deployments"

        async def one(i: int) -> None:
            async with gate:
                await hub.create(path, deployment(f"bulk{i}", 0))

        await asyncio.gather(*(one(i) for i in range(count)))


def test_a_read_right_after_a_write_sees_it_in_a_big_namespace(
    installed: bed.State, kubectl: dict[str, Kubectl], namespace: str
) -> None:
    """Past 100 objects a consistent list asks the hub for the version only, and the cache
    catches up with it before it answers."""
    asyncio.run(_fill(namespace, 110))
    assert asyncio.run(_create_then_read(namespace, 5)) == []


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


def _remote_rows(hub: Kubectl, namespace: str, *extra: str) -> tuple[set[str], str]:
    out = hub.run("get", "pods.remote.kmc.dev", "-n", namespace, "--no-headers", *extra)
    return {line.split()[0] for line in out.stdout.splitlines() if line.strip()}, out.stderr


def _pod_everywhere(hub: Kubectl, namespace: str) -> None:
    wait_for(
        "a pod in every location", lambda: _remote_rows(hub, namespace)[0] == set(CHILDREN), 120
    )


def _rbac(
    name: str, user: str, group: str, resource: str, scope: str = "", kind: str = "User"
) -> list[Any]:
    role = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": {"name": name},
        "rules": [
            {"apiGroups": [group], "resources": [resource], "verbs": ["get", "list", "watch"]}
        ],
    }
    binding = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding" if scope else "ClusterRoleBinding",
        "metadata": {"name": name, **({"namespace": scope} if scope else {})},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": kind, "name": user}],
    }
    return [role, binding]


def test_a_grant_revoked_in_one_child_hides_its_rows_within_the_ttl(
    installed: bed.State, kubectl: dict[str, Kubectl], namespace: str
) -> None:
    """The hub lets the user list pods.remote.kmc.dev (a cluster-wide grant, which does not
    follow namespaces to the children); each child lets them list its pods in the namespace.
    Revoked in one child, that child's rows go within the allow TTL (10 s)."""
    hub = kubectl["hub"]
    user = f"reader-{namespace}"
    hub.apply(deployment("web", 3), namespace)
    wait_for(
        "a pod in every location", lambda: _remote_rows(hub, namespace)[0] == set(CHILDREN), 120
    )
    granted = [*_rbac(namespace, user, "remote.kmc.dev", "pods")]
    for obj in granted:
        hub.apply(obj)
    try:
        for child in CHILDREN:
            for obj in _rbac(namespace, user, "", "pods", scope=namespace):
                kubectl[child].apply(obj)
        as_user = ("--as", user)
        wait_for(
            "the user to see every location",
            lambda: _remote_rows(hub, namespace, *as_user)[0] == set(CHILDREN),
            60,
        )
        kubectl["us-east"].run("delete", "rolebinding", namespace, "-n", namespace)
        revoked = time.monotonic()
        wait_for(
            "us-east's rows to go",
            lambda: "us-east" not in _remote_rows(hub, namespace, *as_user)[0],
            60,
        )
        took = time.monotonic() - revoked
        assert took <= 10 + 5, f"rows of a revoked child were shown for {took:.1f}s"
        seen, warned = _remote_rows(hub, namespace, *as_user)
        assert seen == set(CHILDREN) - {"us-east"}
        assert "us-east" in warned and "forbidden" in warned
        # The admin still sees every child: the cache is the same, the caller is not.
        assert _remote_rows(hub, namespace)[0] == set(CHILDREN)
    finally:
        for obj in granted:
            hub.run("delete", obj["kind"].lower(), obj["metadata"]["name"], "--ignore-not-found")
        for child in CHILDREN:
            kubectl[child].run("delete", "clusterrole", namespace, "--ignore-not-found")


def test_a_child_outage_restarts_its_cache_with_nothing_missed_or_doubled(
    installed: bed.State, kubectl: dict[str, Kubectl], namespace: str
) -> None:
    hub = kubectl["hub"]
    hub.apply(deployment("web", 3), namespace)

    def listed() -> list[tuple[str, str]]:
        out = hub.run("get", "pods.remote.kmc.dev", "-n", namespace, "--no-headers")
        return sorted((r.split()[0], r.split()[1]) for r in out.stdout.splitlines() if r.strip())

    def direct() -> list[tuple[str, str]]:
        names = []
        for child in CHILDREN:
            out = kubectl[child].run("get", "pods", "-n", namespace, "--no-headers", "-o", "name")
            names += [(child, n.split("/", 1)[1]) for n in out.stdout.split() if n]
        return sorted(names)

    wait_for("three pods listed", lambda: len(listed()) == 3 and listed() == direct(), 120)
    run_testbed("stop", "us-east")
    try:
        # While us-east is away the others change: their caches must follow.
        hub.run("scale", "deployment", "web", "-n", namespace, "--replicas=6")
        wait_for(
            "the others' new pods",
            lambda: len([p for p in listed() if p[0] != "us-east"]) >= 4,
            120,
        )
    finally:
        run_testbed("start", "us-east")
    wait_for(
        "the hub's list to be the children's again",
        lambda: listed() == direct() and len(direct()) == 6,
        180,
    )
    rows = listed()
    assert len(rows) == len(set(rows)) == 6


async def _watch_after_list(namespace: str) -> tuple[set[str], set[str], int]:
    """List pods.remote.kmc.dev, scale up, and watch from the list's version: the names the
    watch says ADDED, the names the list had, and the code of a watch from a version so old
    no cache remembers it."""
    creds = await kubeconfig.from_file(str(config.kubeconfig_path()), "hub")
    path = f"/apis/remote.kmc.dev/v1alpha1/namespaces/{namespace}/pods"
    async with aiohttp.ClientSession() as session:
        hub = Kube(session, creds, "hub")
        listing = await hub.get(path)
        listed = {item["metadata"]["name"] for item in listing["items"]}
        version = listing["metadata"]["resourceVersion"]
        await hub.merge_patch(
            f"/apis/apps/v1/namespaces/{namespace}/deployments/web", {"spec": {"replicas": 6}}
        )
        added: set[str] = set()
        async with asyncio.timeout(120):
            async for event in hub.watch(path, version, timeout_seconds=120):
                if event["type"] == "ADDED":
                    added.add(event["object"]["metadata"]["name"])
                if len(added - listed) >= 3:
                    break
        old = paging.composite_version({child: "1" for child in CHILDREN})
        try:
            async for _ in hub.watch(path, old, timeout_seconds=5):
                pass
            code = 200
        except ApiError as err:
            code = err.code
    return added, listed, code


def test_a_watch_resumes_from_the_lists_version_and_an_old_one_is_gone(
    installed: bed.State, kubectl: dict[str, Kubectl], namespace: str
) -> None:
    hub = kubectl["hub"]
    hub.apply(deployment("web", 3), namespace)
    wait_for(
        "a pod in every location", lambda: _remote_rows(hub, namespace)[0] == set(CHILDREN), 120
    )
    added, listed, code = asyncio.run(_watch_after_list(namespace))
    assert len(listed) == 3
    assert not added & listed, "the watch replayed objects the list had"
    assert len(added - listed) >= 3
    assert code == 410


def test_a_child_that_cannot_review_the_caller_is_left_out_not_served_from_cache(
    installed: bed.State, kubectl: dict[str, Kubectl], namespace: str
) -> None:
    """us-east's apiserver is paused: it answers nothing, reviews included. A caller it has
    not reviewed yet gets the others' rows and a Warning naming us-east, never us-east's rows
    from the cache (which still holds them). Whether the review times out first or the probes
    find us-east not Ready first, the list leaves it out."""
    hub = kubectl["hub"]
    group = f"readers-{namespace}"
    hub.apply(deployment("web", 3), namespace)
    _pod_everywhere(hub, namespace)
    granted = _rbac(namespace, group, "remote.kmc.dev", "pods", kind="Group")
    for obj in granted:
        hub.apply(obj)
    state = bed.load()  # now: earlier tests may have restarted us-east
    assert state is not None
    pid = state.pids["us-east-apiserver"]
    try:
        for name in CHILDREN:
            for obj in _rbac(namespace, group, "", "pods", scope=namespace, kind="Group"):
                kubectl[name].apply(obj)
        first = ("--as", f"first-{namespace}", "--as-group", group)
        wait_for(
            "a reader to see every location",
            lambda: _remote_rows(hub, namespace, *first)[0] == set(CHILDREN),
            60,
        )
        os.kill(pid, signal.SIGSTOP)
        started = time.monotonic()
        seen, warned = _remote_rows(hub, namespace, "--as", f"new-{namespace}", "--as-group", group)
        took = time.monotonic() - started
        assert seen == set(CHILDREN) - {"us-east"}
        assert "location us-east left out" in warned
        assert took < 30, f"the list took {took:.0f}s"
    finally:
        os.kill(pid, signal.SIGCONT)
        for obj in granted:
            hub.run("delete", obj["kind"].lower(), obj["metadata"]["name"], "--ignore-not-found")
        for name in CHILDREN:
            kubectl[name].run("delete", "clusterrole", namespace, "--ignore-not-found")
