"""One location's work (what a pull location's feed serves): the push loop's own child per
hub object, its namespace first, and the events from one state to the next."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from apiserver.contract import HUB_GENERATION, ORIGIN, OVERRIDES
from apiserver.kinds import CONFIGMAP, DEPLOYMENT
from apiserver.models.child_inputs import ChildInputs
from apiserver.objects import Obj
from apiserver.sync.desired import child_namespace, location_child
from apiserver.sync.work import (
    Entry,
    Kept,
    Sent,
    WorkKey,
    changes,
    entry_for,
    kept_refs,
    namespace_key,
    ordered,
    taken,
    with_namespaces,
)

from .hub_fakes import conf, placed, web_deployment

PLAIN = ChildInputs()  # no labels, no policy, no override objects


def deployment(placement: dict[str, int] | None, **annotations: str) -> dict[str, Any]:
    notes = dict(annotations)
    if placement is not None:
        notes |= placed(placement)
    hub = web_deployment(notes, 5, resourceVersion="7")
    hub["status"] = {"replicas": 5}
    return hub


def test_an_object_placed_there_is_the_child_the_push_loop_applies() -> None:
    hub = deployment({"east": 3, "west": 2})
    hub["metadata"]["generation"] = 4
    got = entry_for(hub, DEPLOYMENT, "east", ChildInputs(lambda _: {"region": "us"}))
    want = location_child(hub, DEPLOYMENT, "east", {"east": 3, "west": 2}, {"region": "us"})
    # ... and the hub generation it was made from, which the agent's report carries back.
    want["metadata"]["annotations"] = {HUB_GENERATION: "4"}
    assert got == want
    assert isinstance(got, dict)
    assert got["spec"]["replicas"] == 3
    assert got["metadata"]["labels"] == {ORIGIN: "u-web"}
    assert "status" not in got


def test_nothing_where_it_is_not_placed_nor_while_it_goes() -> None:
    assert entry_for(deployment({"west": 5}), DEPLOYMENT, "east", PLAIN) is None
    assert entry_for(deployment(None), DEPLOYMENT, "east", PLAIN) is None
    going = deployment({"east": 5})
    going["metadata"]["deletionTimestamp"] = "2026-12-06T00:00:00Z"
    assert entry_for(going, DEPLOYMENT, "east", PLAIN) is None


def test_an_autoscaled_child_is_sent_without_its_size() -> None:
    got = entry_for(deployment({"east": 5}), DEPLOYMENT, "east", PLAIN, held=True)
    assert isinstance(got, dict)
    assert "replicas" not in got["spec"]


def test_overrides_that_do_not_apply_keep_the_child_as_it_was() -> None:
    got = entry_for(deployment({"east": 5}, **{OVERRIDES: "not json"}), DEPLOYMENT, "east", PLAIN)
    assert isinstance(got, Kept)
    assert "east" in got.reason


def test_the_namespace_of_every_namespaced_object_comes_first() -> None:
    child = entry_for(deployment({"east": 5}), DEPLOYMENT, "east", PLAIN)
    assert isinstance(child, dict)
    hub_ns = {"metadata": {"name": "shop", "uid": "u-shop", "labels": {"team": "a"}}}
    entries = with_namespaces({WorkKey.of(child): child}, {"shop": hub_ns})
    assert list(entries) == [namespace_key("shop"), WorkKey.of(child)]
    assert entries[namespace_key("shop")] == child_namespace(hub_ns)


def test_ordered_puts_namespaces_then_cluster_scoped_then_the_rest() -> None:
    keys = [
        WorkKey("apps/v1", "Deployment", "a", "x"),
        WorkKey("scheduling.k8s.io/v1", "PriorityClass", "", "high"),
        WorkKey("v1", "Namespace", "", "a"),
        WorkKey("v1", "ConfigMap", "a", "x"),
    ]
    assert [k.kind for k in ordered(keys)] == [
        "Namespace",
        "PriorityClass",
        "ConfigMap",
        "Deployment",
    ]


def config_map(name: str, value: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": "shop", "labels": {ORIGIN: name}},
        "data": {"k": value},
    }


def test_changes_add_modify_and_delete_and_leave_the_unchanged_alone() -> None:
    ns = child_namespace({"metadata": {"name": "shop", "uid": "u-shop"}})
    same, edited, gone = config_map("same", "1"), config_map("edited", "1"), config_map("gone", "1")
    sent = {WorkKey.of(o): o for o in (ns, same, edited, gone)}
    new_cm = config_map("new", "1")
    now = {WorkKey.of(o): o for o in (ns, same, config_map("edited", "2"), new_cm)}
    events = changes(sent, now)
    assert [(e.type, e.object["metadata"]["name"]) for e in events] == [
        ("MODIFIED", "edited"),  # by name within a kind
        ("ADDED", "new"),
        ("DELETED", "gone"),
    ]
    assert taken(sent, now) == now


def test_a_namespace_comes_before_its_objects_and_goes_after_them() -> None:
    ns = child_namespace({"metadata": {"name": "shop", "uid": "u-shop"}})
    cm = config_map("cm", "1")
    both = {WorkKey.of(ns): ns, WorkKey.of(cm): cm}
    assert [e.object["kind"] for e in changes({}, both)] == ["Namespace", "ConfigMap"]
    assert [e.object["kind"] for e in changes(both, {})] == ["ConfigMap", "Namespace"]


def test_a_kept_entry_sends_nothing_and_keeps_what_was_sent() -> None:
    cm = config_map("cm", "1")
    key = WorkKey.of(cm)
    kept = {key: Kept("overrides do not apply in east: bad")}
    assert changes({key: cm}, kept) == []
    assert taken({key: cm}, kept) == {key: cm}
    assert taken({}, kept) == {}
    assert changes({}, kept) == []
    assert kept_refs(kept) == [
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "namespace": "shop",
            "name": "cm",
            "reason": "overrides do not apply in east: bad",
        }
    ]


def test_a_dependency_goes_as_written_with_the_origin_label() -> None:
    got = entry_for(conf({"east": None}), CONFIGMAP, "east", PLAIN)
    assert got == {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": "conf",
            "namespace": "shop",
            "labels": {ORIGIN: "u-conf"},
            "annotations": {HUB_GENERATION: "0"},
        },
        "data": {"a": "b"},
    }


# -- one watcher's state, updated a few objects at a time -------------------------------------

_KEYS = [
    WorkKey("v1", "ConfigMap", namespace, name) for namespace in ("a", "b") for name in ("x", "y")
] + [WorkKey("scheduling.k8s.io/v1", "PriorityClass", "", "high")]
_ENTRIES = st.one_of(
    st.none(), st.just(Kept("bad overrides")), st.integers(min_value=0, max_value=2)
)


def _entry(key: WorkKey, value: int | Kept | None) -> Entry | None:
    if value is None or isinstance(value, Kept):
        return value
    meta = {"name": key.name, **({"namespace": key.namespace} if key.namespace else {})}
    return {"apiVersion": key.api_version, "kind": key.kind, "metadata": meta, "data": value}


@given(st.lists(st.dictionaries(st.sampled_from(_KEYS), _ENTRIES, max_size=4), max_size=8))
def test_updating_a_few_objects_leaves_what_recomputing_all_of_them_would(
    steps: list[dict[WorkKey, int | Kept | None]],
) -> None:
    hub_namespaces = {"a": {"metadata": {"name": "a", "uid": "u-a"}}}
    few, every = Sent(), Sent()
    entries: dict[WorkKey, Entry] = {}
    client: dict[WorkKey, Obj] = {}  # what a watcher that applies every event holds
    for step in steps:
        changed = {key: _entry(key, value) for key, value in step.items()}
        for key, entry in changed.items():
            if entry is None:
                entries.pop(key, None)
            else:
                entries[key] = entry
        events = few.update(changed, hub_namespaces)
        every.whole(entries, hub_namespaces)
        assert few.objects == every.objects
        assert few.present == every.present and few.counts == every.counts
        for event in events:
            key = WorkKey.of(event.object)
            if event.type == "DELETED":
                assert key in client
                del client[key]
            else:
                if key.namespace:
                    assert namespace_key(key.namespace) in client  # its namespace came first
                client[key] = event.object
        assert client == few.objects
        # Nothing left in a namespace that went.
        assert all(not k.namespace or namespace_key(k.namespace) in client for k in client)
