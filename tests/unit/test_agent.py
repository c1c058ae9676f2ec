"""kmc-agent on fakes: the feed's whole state before any deletion, nothing deleted while the
hub is away, only the latest step of an object retried, and only our objects written over
or deleted in its cluster."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Mapping
from typing import Any, cast

import aiohttp
import pytest

from apiserver.agent.apply import Writer, path_of
from apiserver.agent.drift import after_change, version_of
from apiserver.agent.follow import FEED_PATH, Agent
from apiserver.agent.main import parse
from apiserver.agent.state import INITIAL_EVENTS_END, KEPT, KINDS, Apply, Delete, Desired
from apiserver.contract import ORIGIN
from apiserver.feed.handlers import imported_refs
from apiserver.kinds import CONFIGMAP, DEPLOYMENT, HTTPROUTE, Key, of_crd
from apiserver.kube.client import ApiError, Credentials, Kube
from apiserver.kube.informer import Backoff
from apiserver.loops.sync.children import ChildWatch
from apiserver.objects import Obj
from apiserver.sync.work import WorkKey


def cm(name: str, value: str = "1") -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": "shop", "labels": {ORIGIN: f"u-{name}"}},
        "data": {"k": value},
    }


def ns(name: str = "shop") -> Obj:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}


def added(obj: Obj) -> Obj:
    return {"type": "ADDED", "object": obj}


def end(kept: list[Obj] | None = None) -> Obj:
    notes = {INITIAL_EVENTS_END: "true", KEPT: json.dumps(kept or [])}
    return {"type": "BOOKMARK", "object": {"kind": "Work", "metadata": {"annotations": notes}}}


def test_nothing_is_deleted_before_a_whole_state_has_arrived() -> None:
    desired = Desired()
    desired.connected()
    assert desired.take(added(ns())) == [Apply(ns())]
    assert desired.take(added(cm("a"))) == [Apply(cm("a"))]
    assert desired.take(end()) == []
    assert desired.whole
    # Connected again: the new whole state lacks `a`; it goes only once that state is whole.
    desired.connected()
    assert desired.take(added(ns())) == []  # unchanged: not applied again
    assert desired.take(added(cm("b"))) == [Apply(cm("b"))]
    steps = desired.take(end())
    assert steps == [Delete(WorkKey.of(cm("a")), cm("a"))]
    assert set(desired.objects) == {WorkKey.of(ns()), WorkKey.of(cm("b"))}


def test_a_broken_initial_state_deletes_nothing() -> None:
    desired = Desired()
    desired.connected()
    for event in (added(ns()), added(cm("a")), end()):
        desired.take(event)
    desired.connected()
    desired.take(added(ns()))  # … and the connection breaks before the bookmark
    desired.connected()
    assert desired.take(added(ns())) == []
    assert desired.take(added(cm("a"))) == []
    assert desired.take(end()) == []


def test_changes_after_the_whole_state_apply_and_delete() -> None:
    desired = Desired()
    desired.connected()
    desired.take(end())
    assert desired.take({"type": "ADDED", "object": cm("a")}) == [Apply(cm("a"))]
    assert desired.take({"type": "MODIFIED", "object": cm("a", "2")}) == [Apply(cm("a", "2"))]
    assert desired.take({"type": "MODIFIED", "object": cm("a", "2")}) == []
    assert desired.take({"type": "DELETED", "object": cm("a", "2")}) == [
        Delete(WorkKey.of(cm("a")), cm("a", "2"))
    ]
    assert desired.take({"type": "BOOKMARK", "object": {"metadata": {}}}) == []
    assert desired.take({"type": "ERROR"}) == []


def test_a_kept_object_is_never_deleted_by_a_new_whole_state() -> None:
    desired = Desired()
    desired.connected()
    for event in (added(ns()), added(cm("a")), end()):
        desired.take(event)
    desired.connected()
    desired.take(added(ns()))
    ref = {"apiVersion": "v1", "kind": "ConfigMap", "namespace": "shop", "name": "a"}
    assert desired.take(end([{**ref, "reason": "overrides do not apply"}])) == []
    assert WorkKey.of(cm("a")) in desired.kept


class FakeCluster:
    """A cluster's API: objects by path; every call recorded."""

    def __init__(self, objects: Mapping[str, Obj] | None = None, failing: int = 0) -> None:
        self.objects: dict[str, Obj] = dict(objects or {})
        self.calls: list[tuple[str, str]] = []
        self.failing = failing  # this many writes fail first

    def _fail(self) -> None:
        if self.failing:
            self.failing -= 1
            raise ApiError.of(503, "ServiceUnavailable", "busy")

    async def get(self, path: str, **params: str) -> Obj:
        self.calls.append(("get", path))
        if path not in self.objects:
            raise ApiError.of(404, "NotFound", f"{path} not found")
        return self.objects[path]

    async def create(self, path: str, body: Obj) -> Obj:
        self.calls.append(("create", path))
        self._fail()
        self.objects[f"{path}/{body['metadata']['name']}"] = body
        return body

    async def apply(
        self, path: str, body: Obj, manager: str, force: bool = True, dry_run: bool = False
    ) -> Obj:
        assert manager == "kmc-sync" and force
        self.calls.append(("apply", path))
        self._fail()
        self.objects[path] = body
        return body

    async def delete(self, path: str) -> Obj:
        self.calls.append(("delete", path))
        self._fail()
        self.objects.pop(path, None)
        return {}


def test_paths_come_from_the_kinds_table() -> None:
    assert path_of(WorkKey.of(cm("a"))) == "/api/v1/namespaces/shop/configmaps/a"
    assert path_of(WorkKey.of(ns())) == "/api/v1/namespaces/shop"
    deploy = WorkKey("apps/v1", "Deployment", "shop", "web")
    assert path_of(deploy) == "/apis/apps/v1/namespaces/shop/deployments/web"
    with pytest.raises(ApiError) as err:
        path_of(WorkKey("example.com/v1", "Widget", "shop", "w"))
    assert err.value.code == 400 and "Widget" in str(err.value)


async def test_a_kind_the_table_does_not_know_is_found_in_the_clusters_discovery() -> None:
    widgets = {
        "resources": [
            {"name": "widgets/status", "kind": "Widget", "namespaced": True},
            {"name": "widgets", "kind": "Widget", "namespaced": True},
        ]
    }
    cluster = FakeCluster({"/apis/example.com/v1": widgets})
    writer = Writer(cluster)
    widget = WorkKey("example.com/v1", "Widget", "shop", "w")
    assert await writer.path(widget) == "/apis/example.com/v1/namespaces/shop/widgets/w"
    assert await writer.path(widget) == "/apis/example.com/v1/namespaces/shop/widgets/w"
    assert [c for c in cluster.calls if c[0] == "get"] == [("get", "/apis/example.com/v1")]
    with pytest.raises(ApiError) as err:
        await writer.path(WorkKey("example.com/v1", "Gadget", "shop", "g"))
    assert err.value.code == 404 and "does not serve" in str(err.value)
    with pytest.raises(ApiError):
        await writer.path(WorkKey("other.example/v1", "Thing", "", "t"))  # group not served
    assert await writer.path(WorkKey.of(cm("a"))) == "/api/v1/namespaces/shop/configmaps/a"


async def test_a_namespace_is_made_when_missing_and_one_not_ours_is_left_alone() -> None:
    cluster = FakeCluster()
    writer = Writer(cluster)
    ours = {**ns(), "metadata": {"name": "shop", "labels": {ORIGIN: "u-shop"}}}
    assert await writer.apply(ours) == ours
    assert cluster.calls[:2] == [
        ("get", "/api/v1/namespaces/shop"),
        ("create", "/api/v1/namespaces"),
    ]
    foreign = FakeCluster({"/api/v1/namespaces/theirs": {"metadata": {"name": "theirs"}}})
    theirs = {**ns("theirs"), "metadata": {"name": "theirs", "labels": {ORIGIN: "u"}}}
    assert await Writer(foreign).apply(theirs) is None
    assert [c[0] for c in foreign.calls] == ["get"]


async def test_only_our_objects_are_deleted() -> None:
    path = "/api/v1/namespaces/shop/configmaps/a"
    cluster = FakeCluster({path: {"metadata": {"name": "a", "labels": {}}}})
    assert not await Writer(cluster).delete(WorkKey.of(cm("a")))
    assert path in cluster.objects
    cluster.objects[path] = cm("a")
    assert await Writer(cluster).delete(WorkKey.of(cm("a")))
    assert path not in cluster.objects
    assert await Writer(cluster).delete(WorkKey.of(cm("a")))  # gone already: done


HANG: Obj = {"type": "HANG"}


class FakeHub:
    """A hub whose feed answers each watch with the next script: a list of events, ended by
    an exception to break the connection."""

    def __init__(self, scripts: list[list[Obj | BaseException]]) -> None:
        self.scripts = scripts
        self.asked: list[tuple[str, dict[str, str]]] = []  # (path, query) of each watch

    async def watch(
        self,
        path: str,
        resource_version: str,
        timeout_seconds: int = 300,
        params: Mapping[str, str] | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> AsyncIterator[Obj]:
        self.asked.append((path, dict(params or {})))
        for item in self.scripts.pop(0):
            if isinstance(item, BaseException):
                raise item
            if item == HANG:
                await asyncio.sleep(3600)  # a connection dropped on the way: silence
            yield item


def agent(hub: FakeHub, cluster: FakeCluster) -> Agent:
    return Agent(hub, Writer(cluster), "edge", retry=0.01, backoff=Backoff(first=0.001, cap=0.01))


async def test_the_agent_keeps_the_cluster_while_the_hub_is_away_and_catches_up() -> None:
    ours = {**ns(), "metadata": {"name": "shop", "labels": {ORIGIN: "u-shop"}}}
    hub = FakeHub(
        [
            [added(ours), added(cm("a")), added(cm("b")), end()],
            [added(ours), ConnectionResetError("the hub went away")],
            [added(ours), added(cm("b", "2")), end()],
        ]
    )
    cluster = FakeCluster()
    edge = agent(hub, cluster)
    assert await edge.follow_once()
    a, b = "/api/v1/namespaces/shop/configmaps/a", "/api/v1/namespaces/shop/configmaps/b"
    assert {a, b} <= set(cluster.objects)
    assert not await edge.follow_once()  # broke: nothing deleted
    assert {a, b} <= set(cluster.objects)
    assert await edge.follow_once()  # whole again: `a` is no longer wanted, `b` changed
    assert a not in cluster.objects and cluster.objects[b]["data"] == {"k": "2"}
    # A watch of `workfeeds` pinned to its own name (the hub's `watch` verb: long-running).
    assert FEED_PATH == "/apis/mc.kmc.dev/v1alpha1/workfeeds"
    assert hub.asked == [(FEED_PATH, {"fieldSelector": "metadata.name=edge"})] * 3


async def test_a_feed_silent_for_longer_than_its_bookmarks_allow_counts_as_dropped() -> None:
    hub = FakeHub([[added(cm("a")), end(), HANG], [added(cm("a")), end()]])
    cluster = FakeCluster()
    edge = Agent(hub, Writer(cluster), "edge", backoff=Backoff(first=0.001, cap=0.01), silence=0.05)
    assert not await asyncio.wait_for(edge.follow_once(), 5)  # dropped, not waited on for ever
    assert "/api/v1/namespaces/shop/configmaps/a" in cluster.objects  # and nothing deleted
    assert await edge.follow_once()


async def test_a_failed_write_is_tried_again_and_only_its_latest_step() -> None:
    cluster = FakeCluster(failing=1)
    edge = agent(FakeHub([]), cluster)
    await edge.do(Apply(cm("a", "1")))
    assert WorkKey.of(cm("a")) in edge.failing
    await edge.do(Apply(cm("a", "2")))  # a newer step: it wins, and succeeds
    assert edge.failing == {}
    assert cluster.objects["/api/v1/namespaces/shop/configmaps/a"]["data"] == {"k": "2"}


def test_the_command_line_refuses_a_bad_location_name(capsys: Any) -> None:
    args = parse(["--location", "edge-1", "--hub-kubeconfig", "/h"])
    assert args.location == "edge-1" and args.kubeconfig is None
    with pytest.raises(SystemExit):
        parse(["--location", "Not_A_Name", "--hub-kubeconfig", "/h"])
    assert "not a valid Location name" in capsys.readouterr().err


# -- its own cluster: drift and orphans ---------------------------------------------------


def live(
    obj: Obj, generation: int | None = None, rv: str = "5", labels: dict[str, str] | None = None
) -> Obj:
    meta = {**obj["metadata"], "resourceVersion": rv}
    if generation is not None:
        meta["generation"] = generation
    if labels:
        meta["labels"] = {**meta.get("labels", {}), **labels}
    return {**obj, "metadata": meta}


def test_a_child_as_we_left_it_is_left_alone_and_one_edited_is_put_back() -> None:
    want, key = cm("a"), WorkKey.of(cm("a"))
    assert after_change(key, want, False, True, live(want, rv="5"), "rv5") is None
    assert after_change(key, want, False, True, live(want, rv="6"), "rv5") == Apply(want)
    relabelled = live(want, rv="5", labels={ORIGIN: "someone-else"})
    assert after_change(key, want, False, True, relabelled, "rv5") == Apply(want)
    assert after_change(key, want, False, True, None, "rv5") == Apply(want)  # deleted by hand
    assert after_change(key, want, False, True, live(want), None) == Apply(want)  # not ours yet
    assert version_of(live(want, generation=3)) == "g3"


def test_an_orphan_goes_only_once_a_whole_state_says_so_and_never_a_kept_one() -> None:
    there, key = live(cm("old")), WorkKey.of(cm("old"))
    assert after_change(key, None, False, True, there, None) == Delete(key, there)
    assert after_change(key, None, False, False, there, None) is None  # not known yet
    assert after_change(key, None, True, True, there, None) is None  # the feed keeps it
    going = live(cm("old"))
    going["metadata"]["deletionTimestamp"] = "2026-12-06T00:00:00Z"
    assert after_change(key, None, False, True, going, None) is None


def test_while_a_whole_state_arrives_its_objects_are_wanted_and_nothing_is_settled() -> None:
    desired = Desired()
    desired.connected()
    desired.take(end())
    assert desired.settled
    desired.connected()
    desired.take(added(cm("new")))
    assert not desired.settled
    assert desired.wanted(WorkKey.of(cm("new"))) == cm("new")
    desired.take(end())
    assert desired.settled and desired.wholes == 2


async def test_the_agent_puts_back_what_changed_in_its_cluster() -> None:
    session = cast(aiohttp.ClientSession, None)
    kube = Kube(session, Credentials("https://edge.invalid", False), "edge")
    cluster = FakeCluster()
    edge = Agent(FakeHub([]), Writer(cluster), "edge", cluster=kube)
    edge.watch = ChildWatch("edge", kube, edge._changed)
    try:
        edge.watch.ensure(CONFIGMAP)
        edge.desired.connected()
        edge.desired.take(added(cm("a")))
        edge.desired.take(end())
        cache = edge.watch.informers[CONFIGMAP.key].cache
        cache["shop/a"] = live(cm("a"), rv="9")
        cache["shop/orphan"] = live(cm("orphan"))
        cluster.objects["/api/v1/namespaces/shop/configmaps/orphan"] = cm("orphan")
        assert edge.step_for(Key(CONFIGMAP.key, "shop", "a")) == Apply(cm("a"))
        edge.written[WorkKey.of(cm("a"))] = "rv9"
        assert edge.step_for(Key(CONFIGMAP.key, "shop", "a")) is None
        orphan = edge.step_for(Key(CONFIGMAP.key, "shop", "orphan"))
        assert isinstance(orphan, Delete)
        await edge.do(orphan)
        assert "/api/v1/namespaces/shop/configmaps/orphan" not in cluster.objects
        assert edge.step_for(Key("NoSuchKind", "shop", "x")) is None
    finally:
        edge.watch.stop()
        await asyncio.sleep(0)


async def test_an_imported_kind_is_watched_from_its_first_write_and_put_back_when_edited() -> None:
    """A kind the kinds table does not place (an imported CRD's) gets an entry as the hub
    makes one from its CRD, and a watch, once the agent has written one of its objects: an
    edit in the cluster is then put back, and one the feed no longer has goes."""
    session = cast(aiohttp.ClientSession, None)
    kube = Kube(session, Credentials("https://edge.invalid", False), "edge")
    widgets = {"resources": [{"name": "widgets", "kind": "Widget", "namespaced": True}]}
    cluster = FakeCluster({"/apis/example.org/v1": widgets})
    edge = Agent(FakeHub([]), Writer(cluster), "edge", cluster=kube)
    edge.watch = ChildWatch("edge", kube, edge._changed)
    widget: Obj = {
        "apiVersion": "example.org/v1",
        "kind": "Widget",
        "metadata": {"name": "w", "namespace": "shop", "labels": {ORIGIN: "u-w"}},
        "spec": {"size": 3},
    }
    try:
        key = Key("Widget.example.org", "shop", "w")
        assert edge.step_for(key) is None  # not watched, not known
        edge.desired.connected()
        edge.desired.take(added(widget))
        edge.desired.take(end())
        await edge.do(Apply(widget))
        kind = edge.watch.kinds["Widget.example.org"]
        assert (kind.api_version, kind.plural, kind.namespaced, kind.crd) == (
            "example.org/v1",
            "widgets",
            True,
            True,
        )
        assert "Widget.example.org" in edge.watch.informers  # watched from now on
        cache = edge.watch.informers["Widget.example.org"].cache
        written = edge.written[WorkKey.of(widget)]
        cache["shop/w"] = live(widget, rv=written.removeprefix("rv"))
        assert edge.step_for(key) is None  # as we left it
        edited = live({**widget, "spec": {"size": 7}}, generation=2)
        cache["shop/w"] = edited
        assert edge.step_for(key) == Apply(widget)  # put back
        edge.desired.take({"type": "DELETED", "object": widget})
        cluster.objects["/apis/example.org/v1/namespaces/shop/widgets/w"] = edited
        gone = edge.step_for(key)
        assert isinstance(gone, Delete)  # the feed no longer has it: an orphan
        await edge.do(gone)
        assert "/apis/example.org/v1/namespaces/shop/widgets/w" not in cluster.objects
    finally:
        edge.watch.stop()
        await asyncio.sleep(0)


def test_the_feed_names_the_imported_kinds_it_places_and_the_agent_reads_them() -> None:
    crd = {
        "spec": {
            "group": "example.org",
            "scope": "Namespaced",
            "names": {"kind": "Widget", "plural": "widgets"},
            "versions": [{"name": "v1", "served": True, "storage": True}],
        }
    }
    widget = of_crd(crd)
    assert widget is not None
    # A Deployment the agent's kinds table places; an HTTPRoute's CRD kind joins at run
    # time, as an imported one does: both of those are named.
    refs = imported_refs([DEPLOYMENT, HTTPROUTE, widget])
    assert refs == [
        {
            "apiVersion": HTTPROUTE.api_version,
            "kind": "HTTPRoute",
            "plural": "httproutes",
            "namespaced": True,
        },
        {"apiVersion": "example.org/v1", "kind": "Widget", "plural": "widgets", "namespaced": True},
    ]
    desired = Desired()
    desired.connected()
    notes = {INITIAL_EVENTS_END: "true", KEPT: "[]", KINDS: json.dumps([*refs, {"kind": 3}])}
    desired.take({"type": "BOOKMARK", "object": {"metadata": {"annotations": notes}}})
    assert desired.kinds == refs  # what is not a kind reference is left out
    desired.connected()
    desired.take(
        {"type": "BOOKMARK", "object": {"metadata": {"annotations": {**notes, KINDS: "{"}}}}
    )
    assert desired.kinds == []


async def test_an_imported_kind_the_feed_names_is_watched_from_the_start_for_orphans() -> None:
    """After a restart the agent has written nothing: the whole state's imported kinds are
    watched anyway, so an object of ours whose hub object went while it was away goes."""
    session = cast(aiohttp.ClientSession, None)
    kube = Kube(session, Credentials("https://edge.invalid", False), "edge")
    cluster = FakeCluster()
    ref = {
        "apiVersion": "example.org/v1",
        "kind": "Widget",
        "plural": "widgets",
        "namespaced": True,
    }
    notes = {INITIAL_EVENTS_END: "true", KEPT: "[]", KINDS: json.dumps([ref])}
    bookmark = {"type": "BOOKMARK", "object": {"kind": "Work", "metadata": {"annotations": notes}}}
    edge = Agent(FakeHub([[bookmark]]), Writer(cluster), "edge", cluster=kube)
    edge.watch = ChildWatch("edge", kube, edge._changed)
    try:
        assert await edge.follow_once()
        assert "Widget.example.org" in edge.watch.informers
        orphan: Obj = {
            "apiVersion": "example.org/v1",
            "kind": "Widget",
            "metadata": {"name": "old", "namespace": "shop", "labels": {ORIGIN: "u-old"}},
        }
        edge.watch.informers["Widget.example.org"].cache["shop/old"] = live(orphan, generation=1)
        cluster.objects["/apis/example.org/v1/namespaces/shop/widgets/old"] = orphan
        step = edge.step_for(Key("Widget.example.org", "shop", "old"))
        assert isinstance(step, Delete)
        await edge.do(step)  # its path from the feed's plural: no discovery asked
        assert "/apis/example.org/v1/namespaces/shop/widgets/old" not in cluster.objects
        assert ("get", "/apis/example.org/v1") not in cluster.calls
    finally:
        edge.watch.stop()
        await asyncio.sleep(0)
