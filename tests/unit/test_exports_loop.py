"""The exports loop writes only what differs (issue #35 counts our writes): a second look
writes nothing, a change in one location's endpoints rewrites only the slices derived from
it, and an export that goes takes everything it made."""

from __future__ import annotations

import asyncio
import copy
import itertools
from typing import Any, cast

import aiohttp

from apiserver.contract import PLACEMENT
from apiserver.hubcache import HubCache
from apiserver.kinds import SERVICE
from apiserver.kube.client import Credentials, Kube
from apiserver.kube.informer import Informer
from apiserver.leader import Leadership
from apiserver.loops.exports import EXPORT, SLICES, Exported, ExportsLoop, _Location
from apiserver.objects import Obj

from .test_clusterset import mirror, service

LOCATIONS = ("eu-west", "us-east", "us-west")
VERSIONS = itertools.count(100)


class Recording(Kube):
    """A cluster that answers writes as a server would and remembers them."""

    def __init__(self, name: str) -> None:
        session = cast(aiohttp.ClientSession, None)
        super().__init__(session, Credentials(f"https://{name}.invalid", False), name)
        self.writes: list[tuple[str, str]] = []

    async def apply(
        self, path: str, body: Obj, manager: str, force: bool = True, dry_run: bool = False
    ) -> Obj:
        self.writes.append(("apply", path))
        answer = copy.deepcopy(body)
        answer["metadata"].setdefault("uid", f"uid-{path}")
        answer["metadata"]["resourceVersion"] = str(next(VERSIONS))
        return answer

    async def delete(self, path: str) -> Obj:
        self.writes.append(("delete", path))
        return {}


def settle_deletes(loop: ExportsLoop, location: str, done: list[tuple[str, str]]) -> None:
    """What the location's watch would bring: the deleted objects leave its caches."""
    watched = loop._locations[location]
    for verb, path in done:
        if verb == "delete":
            ns, name = path.split("/namespaces/")[1].split("/")[0], path.rsplit("/", 1)[1]
            watched.imports.cache.pop(f"{ns}/{name}", None)
            watched.slices.cache.pop(f"{ns}/{name}", None)


def hub_with(hub: Recording, mirrors: list[Obj], exported: bool = True) -> HubCache:
    cache = HubCache(hub)
    placed = service()
    placed["metadata"]["annotations"] = {
        PLACEMENT: '{"eu-west":null,"us-east":null,"us-west":null}'
    }
    cache.objects[SERVICE.key].cache["shop/web"] = placed
    cache.objects[EXPORT] = Informer(hub, "/apis/multicluster.x-k8s.io/v1alpha1/serviceexports")
    if exported:
        cache.objects[EXPORT].cache["shop/web"] = export()
    for m in mirrors:
        cache.slices.cache[f"shop/{m['metadata']['name']}"] = m
    return cache


def export() -> Obj:
    return {
        "apiVersion": "multicluster.x-k8s.io/v1alpha1",
        "kind": "ServiceExport",
        "metadata": {"name": "web", "namespace": "shop", "generation": 1, "resourceVersion": "1"},
    }


def watching(loop: ExportsLoop, children: dict[str, Recording]) -> None:
    for name, kube in children.items():
        imports = Informer(kube, "/apis/multicluster.x-k8s.io/v1alpha1/serviceimports")
        slices = Informer(kube, SLICES)
        imports.synced.set()
        slices.synced.set()
        loop._locations[name] = _Location(kube, imports, slices, ())


def writes(children: dict[str, Recording]) -> dict[str, list[tuple[str, str]]]:
    out = {name: list(kube.writes) for name, kube in children.items() if kube.writes}
    for kube in children.values():
        kube.writes.clear()
    return out


async def test_writes_only_what_differs_and_removes_what_the_export_made() -> None:
    hub = Recording("hub")
    children = {name: Recording(name) for name in LOCATIONS}
    mirrors = [mirror("web-a", "us-east", True), mirror("web-b", "us-west", True)]
    cache = hub_with(hub, mirrors)
    loop = ExportsLoop(cache, lambda n: children.get(n), Leadership.solo())
    watching(loop, children)
    key = Exported("shop", "web")

    await loop.reconcile(key)
    first = writes(children)
    assert sorted(first) == list(LOCATIONS)
    base = "/apis/discovery.k8s.io/v1/namespaces/shop/endpointslices"
    imports = "/apis/multicluster.x-k8s.io/v1alpha1/namespaces/shop/serviceimports"
    assert first["eu-west"] == [
        ("apply", f"{imports}/web"),
        ("apply", f"{base}/web-a-us-east"),
        ("apply", f"{base}/web-b-us-west"),
    ]
    assert first["us-east"] == [("apply", f"{imports}/web"), ("apply", f"{base}/web-b-us-west")]
    status: list[Any] = [w for w in hub.writes if w[1].endswith("/status")]
    assert len(status) == 1
    ready = cache.objects[EXPORT].cache["shop/web"]["status"]["conditions"]
    assert [(c["type"], c["status"]) for c in ready] == [("Valid", "True"), ("Ready", "True")]

    # Nothing changed: no write anywhere, the hub's export included.
    hub.writes.clear()
    await loop.reconcile(key)
    assert writes(children) == {}
    assert hub.writes == []

    # us-east's endpoints change: only the slices derived from it are rewritten.
    cache.slices.cache["shop/web-a-us-east"] = mirror("web-a", "us-east", True, True)
    await loop.reconcile(key)
    assert writes(children) == {
        "eu-west": [("apply", f"{base}/web-a-us-east")],
        "us-west": [("apply", f"{base}/web-a-us-east")],
    }
    assert hub.writes == []

    # us-west leaves the Service's placement: its import and slices there go.
    service_ = cache.objects[SERVICE.key].cache["shop/web"]
    service_["metadata"]["annotations"] = {PLACEMENT: '{"eu-west":null,"us-east":null}'}
    await loop.reconcile(key)
    left = writes(children)
    assert left == {"us-west": [("delete", f"{base}/web-a-us-east"), ("delete", f"{imports}/web")]}
    settle_deletes(loop, "us-west", left["us-west"])

    # Unexported: everything it made goes, and a second look deletes nothing more.
    del cache.objects[EXPORT].cache["shop/web"]
    await loop.reconcile(key)
    gone = writes(children)
    assert gone == {
        "eu-west": [
            ("delete", f"{base}/web-a-us-east"),
            ("delete", f"{base}/web-b-us-west"),
            ("delete", f"{imports}/web"),
        ],
        "us-east": [("delete", f"{base}/web-b-us-west"), ("delete", f"{imports}/web")],
    }
    for name, done in gone.items():
        settle_deletes(loop, name, done)
    await loop.reconcile(key)
    assert writes(children) == {}
    await asyncio.sleep(0)


async def test_an_export_without_its_service_says_so_and_writes_nowhere() -> None:
    hub = Recording("hub")
    children = {name: Recording(name) for name in LOCATIONS}
    cache = hub_with(hub, [mirror("web-a", "us-east", True)])
    del cache.objects[SERVICE.key].cache["shop/web"]
    loop = ExportsLoop(cache, lambda n: children.get(n), Leadership.solo())
    watching(loop, children)
    await loop.reconcile(Exported("shop", "web"))
    assert writes(children) == {}
    conditions = cache.objects[EXPORT].cache["shop/web"]["status"]["conditions"]
    assert [(c["type"], c["status"], c["reason"]) for c in conditions] == [
        ("Valid", "False", "ServiceNotFound"),
        ("Ready", "False", "ServiceNotFound"),
    ]


async def test_a_cluster_scoped_objects_change_is_nothing_to_it() -> None:
    """The hub cache tells every loop of every kind's changes, cluster-scoped ones too: a
    ClusterRole has no namespace, and must not stop the handlers after this one."""
    hub = Recording("hub")
    loop = ExportsLoop(hub_with(hub, []), lambda n: None, Leadership.solo())
    role = {"metadata": {"name": "reader"}}
    await loop._on_hub_object("ClusterRole.rbac.authorization.k8s.io", "ADDED", role, None)
    assert len(loop.queue) == 0
