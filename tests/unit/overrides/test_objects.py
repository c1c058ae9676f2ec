"""The object form: Overrides and ClusterOverrides read, filed by what they target, and
applied in their order (cluster before namespace, priority, name; the annotation last)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from apiserver.contract import OVERRIDES
from apiserver.kinds import ALL, Kind
from apiserver.models.override_index import Index, location_rules, read, rules_of
from apiserver.overrides.rules import RuleError
from apiserver.subresources.locations import overrides_by_location, rows
from apiserver.sync.desired import location_child
from tests.unit.hub_fakes import web_deployment

DEPLOYMENT = ("apps", "Deployment")
EU = {"region": "eu"}


def override(
    name: str,
    rules: list[Any],
    namespace: str = "shop",
    priority: int = 0,
    target: dict[str, Any] | None = None,
    **spec: Any,
) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if namespace:
        meta["namespace"] = namespace
    return {
        "metadata": meta,
        "spec": {
            "targets": [target or {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}],
            "priority": priority,
            "rules": rules,
            **spec,
        },
    }


def env(value: str) -> list[Any]:
    return [{"env": {"set": {"SITE": value}}}]


def applying(index: Index, name: str = "web", labels: Any = None, ns: Any = None) -> list[str]:
    found = index.applying(DEPLOYMENT, "shop", name, labels or {}, ns or {})
    return [source.label for source in found]


def test_cluster_before_namespace_then_priority_then_name() -> None:
    index = Index()
    for raw in (
        override("b", env("b")),
        override("a", env("a")),
        override("high", env("high"), priority=10),
        override("low", env("low"), priority=-1),
        override("admin", env("admin"), namespace="", priority=100),
    ):
        index.put(raw)
    assert applying(index) == [
        "ClusterOverride admin",
        "Override shop/low",
        "Override shop/a",
        "Override shop/b",
        "Override shop/high",
    ]
    rules = rules_of(index.applying(DEPLOYMENT, "shop", "web", {}, {}), "eu-west", EU)
    assert [r.source for r in rules][-1] == "Override shop/high: spec.rules[0]"


def test_targets_by_name_label_kind_and_namespace() -> None:
    index = Index()
    selector = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "labelSelector": {"matchLabels": {"tier": "front"}},
    }
    index.put(override("by-label", env("x"), target=selector))
    index.put(override("other-ns", env("x"), namespace="other"))
    index.put(
        override("job", env("x"), target={"apiVersion": "batch/v1", "kind": "Job", "name": "web"})
    )
    assert applying(index, labels={"tier": "front"}) == ["Override shop/by-label"]
    assert applying(index, labels={"tier": "back"}) == []
    assert applying(index, name="api") == []


def test_a_cluster_override_selects_namespaces_by_label() -> None:
    index = Index()
    index.put(
        override("prod", env("x"), namespace="", namespaceSelector={"matchLabels": {"env": "prod"}})
    )
    assert applying(index, ns={"env": "prod"}) == ["ClusterOverride prod"]
    assert applying(index, ns={"env": "dev"}) == []
    # A cluster-scoped object is in no namespace: only an unselective ClusterOverride reaches it.
    assert index.applying(DEPLOYMENT, "", "web", {}, {}) == []


def test_locations_by_names_and_selector() -> None:
    source = read(
        override(
            "eu",
            env("x"),
            locations={"names": ["eu-west", "us-west"], "locationSelector": {"matchLabels": EU}},
        )
    )
    assert source is not None
    assert source.selects("eu-west", EU)
    assert not source.selects("us-west", {"region": "us"})
    assert not source.selects("eu-north", EU)


def test_a_change_or_deletion_refiles_it() -> None:
    index = Index()
    index.put(override("a", env("x")))
    before, now = index.put(
        override(
            "a", env("x"), target={"apiVersion": "apps/v1", "kind": "Deployment", "name": "api"}
        )
    )
    assert before is not None and now is not None
    assert applying(index) == [] and applying(index, name="api") == ["Override shop/a"]
    index.drop(override("a", env("x")))
    assert applying(index, name="api") == [] and len(index) == 0


def test_malformed_rules_fail_where_they_apply_naming_the_override() -> None:
    index = Index()
    index.put(override("bad", [{"nope": {}}]))
    found = index.applying(DEPLOYMENT, "shop", "web", {}, {})
    with pytest.raises(RuleError, match=r"Override shop/bad: spec.rules\[0\]: unknown rule"):
        rules_of(found, "eu-west", EU)
    assert read({"metadata": {"name": "x", "namespace": "shop"}, "spec": {"targets": []}}) is None


def deployment() -> dict[str, Any]:
    annotations = {OVERRIDES: json.dumps({"*": env("annotation")})}
    return web_deployment(annotations, 3, uid="u-1", container="app", image="web:1")


def test_the_annotation_has_the_last_word() -> None:
    kind: Kind = next(k for k in ALL if k.kind == "Deployment")
    index = Index()
    index.put(override("ns", env("namespace")))
    index.put(override("admin", [{"env": {"set": {"SITE": "admin", "TEAM": "ops"}}}], namespace=""))
    hub = deployment()
    objects = index.applying(DEPLOYMENT, "shop", "web", {}, {})
    names = [r.source for r in location_rules(hub, objects, "eu-west", EU)]
    assert names == [
        "ClusterOverride admin: spec.rules[0]",
        "Override shop/ns: spec.rules[0]",
        'kmc.dev/overrides["*"][0]',
    ]
    child = location_child(
        hub, kind, "eu-west", {"eu-west": 2}, EU, None, rules_of(objects, "eu-west", EU)
    )
    found = {
        e["name"]: e["value"] for e in child["spec"]["template"]["spec"]["containers"][0]["env"]
    }
    assert found == {"SITE": "annotation", "TEAM": "ops"}
    assert child["spec"]["replicas"] == 2


def test_the_locations_rows_name_the_overrides_that_apply_there() -> None:
    index = Index()
    eu = {"locationSelector": {"matchLabels": EU}}
    index.put(override("eu", env("eu"), locations=eu))
    index.put(override("admin", env("admin"), namespace=""))
    hub = deployment()
    hub["metadata"]["annotations"][OVERRIDES] = json.dumps({"us-west": env("annotation")})
    objects = index.applying(DEPLOYMENT, "shop", "web", {}, {})
    found = overrides_by_location(hub, objects, {"eu-west": EU, "us-west": {"region": "us"}})
    assert found == {
        "eu-west": ["ClusterOverride admin", "Override shop/eu"],
        "us-west": ["ClusterOverride admin", OVERRIDES],
    }
    row = {
        "location": "us-west",
        "desired": 1,
        "ready": 1,
        "available": 1,
        "syncedGeneration": 1,
        "state": "Synced",
        "message": "",
    }
    assert rows([row], None, found)[0][7] == f"ClusterOverride admin, {OVERRIDES}"  # type: ignore[list-item]
