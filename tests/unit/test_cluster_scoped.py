"""Cluster-scoped objects placed by their strategy, and namespaces' own labels in the
children: the pure parts (entries, policies, the child objects)."""

from __future__ import annotations

from typing import Any, cast

import pytest

from apiserver.contract import IMPORTED, ORIGIN, STRATEGY
from apiserver.kinds import (
    ALL,
    CLUSTERROLE,
    CLUSTERROLEBINDING,
    CUSTOMRESOURCEDEFINITION,
    INGRESSCLASS,
    PLACED,
    PRIORITYCLASS,
    STORAGECLASS,
    Change,
    Role,
)
from apiserver.kinds.cluster import storage_class_change
from apiserver.loops.placement.deciding import Decider, unplaceable_message
from apiserver.placement import engine
from apiserver.placement.policy import applying_everywhere, read_policy
from apiserver.placement.strategy import Strategy, StrategyError
from apiserver.sync.desired import child_namespace, child_object

from .test_placement_engine import loc

CLUSTER_KINDS = (CLUSTERROLE, CLUSTERROLEBINDING, STORAGECLASS, INGRESSCLASS)


@pytest.mark.parametrize("kind", [*CLUSTER_KINDS, CUSTOMRESOURCEDEFINITION])
def test_cluster_scoped_kinds_are_placed_only_when_asked_and_whole(kind: Any) -> None:
    assert kind.role is Role.ASKED and not kind.namespaced and not kind.custom
    assert kind.default_type == "Replicate"
    assert kind.key in PLACED
    assert kind.path(None, "x") == f"/apis/{kind.api_version}/{kind.plural}/x"


def test_a_priority_class_stays_a_dependency() -> None:
    assert PRIORITYCLASS.role is Role.DEPENDENCY and not PRIORITYCLASS.namespaced
    assert len({k.key for k in ALL}) == len(ALL)  # no kind twice


def test_an_imported_crd_is_never_sent_but_a_users_is() -> None:
    users = {"metadata": {"name": "widgets.example.org"}}
    imported = {"metadata": {"name": "gadgets.example.org", "labels": {IMPORTED: "true"}}}
    assert CUSTOMRESOURCEDEFINITION.syncable(users)
    assert not CUSTOMRESOURCEDEFINITION.syncable(imported)


def test_a_storage_class_is_made_anew_when_a_fixed_field_changes() -> None:
    current = {"provisioner": "a", "parameters": {"type": "ssd"}, "allowVolumeExpansion": False}
    assert storage_class_change(current, {**current, "allowVolumeExpansion": True}) is Change.APPLY
    assert storage_class_change(current, {**current, "provisioner": "b"}) is Change.REPLACE
    assert storage_class_change(current, {**current, "parameters": {}}) is Change.REPLACE
    assert STORAGECLASS.change(current, current) is Change.APPLY


def test_a_cluster_role_child_has_no_namespace_and_reads_remote_as_the_kinds() -> None:
    hub = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": {
            "name": "reader",
            "uid": "u1",
            "resourceVersion": "7",
            "annotations": {STRATEGY: '{"type":"Replicate"}', "team": "a"},
            "finalizers": ["kmc.dev/cleanup"],
        },
        "rules": [{"apiGroups": ["remote.kmc.dev"], "resources": ["pods"], "verbs": ["get"]}],
    }
    child = child_object(hub, CLUSTERROLE, "us-east", {"us-east": None})
    assert child["metadata"] == {
        "name": "reader",
        "labels": {ORIGIN: "u1"},
        "annotations": {"team": "a"},
    }
    assert child["rules"] == [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}]


def cluster_policy(name: str, selector: Any) -> Any:
    return read_policy(
        {"metadata": {"name": name}, "spec": {"namespaceSelector": selector, "locations": ["a"]}}
    )


def test_cluster_scoped_objects_are_held_by_the_policies_for_every_namespace() -> None:
    everywhere = cluster_policy("all", {})
    some = cluster_policy("some", {"matchLabels": {"tier": "restricted"}})
    others = cluster_policy("others", {"matchExpressions": [{"key": "t", "operator": "Exists"}]})
    broken = read_policy({"metadata": {"name": "broken"}, "spec": {"locations": 3}})
    assert applying_everywhere([some, everywhere, others, broken]) == [everywhere, broken]


def test_a_namespace_copy_carries_the_hub_namespaces_own_labels_and_annotations() -> None:
    hub = {
        "metadata": {
            "name": "shop",
            "uid": "ns-uid",
            "resourceVersion": "3",
            "labels": {
                "kubernetes.io/metadata.name": "shop",
                "pod-security.kubernetes.io/enforce": "baseline",
                "kmc.dev/exclude": "false",
            },
            "annotations": {
                STRATEGY: '{"type":"Split"}',
                "owner": "team-a",
                "kubectl.kubernetes.io/last-applied-configuration": "{}",
            },
        },
        "spec": {"finalizers": ["kubernetes"]},
        "status": {"phase": "Active"},
    }
    assert child_namespace(hub) == {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {
            "name": "shop",
            "labels": {"pod-security.kubernetes.io/enforce": "baseline", ORIGIN: "ns-uid"},
            "annotations": {"owner": "team-a"},
        },
    }
    bare = child_namespace({"metadata": {"name": "shop", "uid": "ns-uid"}})
    assert bare["metadata"] == {"name": "shop", "labels": {ORIGIN: "ns-uid"}}


def test_a_cluster_scoped_strategy_error_names_the_object() -> None:
    decider = Decider(cast(Any, None), cast(Any, None), engine.Settings())
    role = {"metadata": {"name": "reader", "annotations": {STRATEGY: '{"type":"Everywhere"}'}}}
    with pytest.raises(StrategyError, match=r"^kmc.dev/strategy on clusterroles reader: "):
        decider.strategy(CLUSTERROLE, role, {"metadata": {"name": ""}})
    role["metadata"]["annotations"] = {STRATEGY: '{"type":"Replicate","pin":["us-east"]}'}
    strategy, source = decider.strategy(CLUSTERROLE, role, {"metadata": {"name": ""}})
    assert (strategy.type, strategy.pin, source) == ("Replicate", ("us-east",), "object")


def test_an_unplaceable_strategy_names_the_locations_that_do_not_exist() -> None:
    candidates = [loc("us-east"), loc("eu-west")]
    pinned = Strategy(type="Replicate", pin=("mars", "us-east"))
    assert unplaceable_message(pinned, candidates, "no eligible location: x") == (
        "no location named mars (locations: eu-west, us-east); no eligible location: x"
    )
    fine = Strategy(type="Replicate", pin=("us-east",))
    assert unplaceable_message(fine, candidates, "no eligible location: x") == (
        "no eligible location: x"
    )
