"""Discovery documents: what `kubectl api-resources` and the hub's aggregator read from us."""

from __future__ import annotations

import json
from typing import Any

import pytest

from apiserver.api import discovery
from apiserver.api.registry import Resource, Subresource, find, group_versions
from apiserver.api.table import Wanted, negotiate
from apiserver.app import RESOURCES
from apiserver.contract import MC_GROUP as MC
from apiserver.contract import REMOTE_GROUP as REMOTE
from apiserver.contract import VERSION

WORKLOADS = ("deployments", "statefulsets", "replicasets", "jobs", "daemonsets")
REMOTE_PLURALS = (
    "pods",
    "replicasets",
    "deployments",
    "statefulsets",
    "daemonsets",
    "jobs",
    "services",
    "endpointslices",
    "configmaps",
    "events",
)


def entries(group: str) -> dict[str, dict[str, Any]]:
    listed = discovery.resource_list(RESOURCES, group, VERSION)
    assert listed is not None
    return {entry["name"]: entry for entry in listed["resources"]}


def test_group_list_names_both_groups_with_their_preferred_version() -> None:
    listed = discovery.group_list(RESOURCES)
    assert (listed["kind"], listed["apiVersion"]) == ("APIGroupList", "v1")
    assert listed["groups"] == [
        {
            "name": group,
            "versions": [{"groupVersion": f"{group}/{VERSION}", "version": VERSION}],
            "preferredVersion": {"groupVersion": f"{group}/{VERSION}", "version": VERSION},
        }
        for group in (MC, REMOTE)
    ]


def test_api_group_is_one_group_or_none() -> None:
    group = discovery.api_group(RESOURCES, MC)
    assert group is not None
    assert (group["kind"], group["apiVersion"], group["name"]) == ("APIGroup", "v1", MC)
    assert group["preferredVersion"] == {"groupVersion": f"{MC}/{VERSION}", "version": VERSION}
    assert discovery.api_group(RESOURCES, "apps") is None


def test_resource_list_of_the_placement_views() -> None:
    listed = discovery.resource_list(RESOURCES, MC, VERSION)
    assert listed is not None
    assert (listed["kind"], listed["apiVersion"]) == ("APIResourceList", "v1")
    assert listed["groupVersion"] == f"{MC}/{VERSION}"
    found = entries(MC)
    kinds = dict(
        zip(WORKLOADS, ("Deployment", "StatefulSet", "ReplicaSet", "Job", "DaemonSet"), strict=True)
    )
    for plural, kind in kinds.items():
        entry = found[plural]
        assert entry == {
            "name": plural,
            "singularName": plural.removesuffix("s"),
            "namespaced": True,
            "kind": kind,
            "verbs": ["get", "list", "watch"],
            "categories": ["kmc"],
            **({"shortNames": ["mcdeploy"]} if plural == "deployments" else {}),
        }


def test_the_work_feed_is_a_cluster_scoped_resource_listed_and_watched_only() -> None:
    """A resource of its own, so a watch of it is the hub's `watch` verb (long-running), and
    out of the `kmc` category: `kubectl get kmc` does not read every location's feed."""
    found = entries(MC)
    assert found["workfeeds"] == {
        "name": "workfeeds",
        "singularName": "workfeed",
        "namespaced": False,
        "kind": "WorkFeed",
        "verbs": ["list", "watch"],
    }
    assert not [name for name in found if name.startswith("workfeeds/")]
    (mc,) = [i for i in discovery.aggregated(RESOURCES)["items"] if i["metadata"]["name"] == MC]
    (feed,) = [r for r in mc["versions"][0]["resources"] if r["resource"] == "workfeeds"]
    assert (feed["scope"], feed["responseKind"]["kind"]) == ("Cluster", "WorkFeed")


@pytest.mark.parametrize("plural", WORKLOADS)
def test_every_view_lists_its_sub_resources_with_their_own_kind_and_verbs(plural: str) -> None:
    found = entries(MC)
    assert found[f"{plural}/locations"] == {
        "name": f"{plural}/locations",
        "singularName": "",
        "namespaced": True,
        "group": MC,
        "version": VERSION,
        "kind": "Placement",
        "verbs": ["get"],
    }
    assert found[f"{plural}/strategy"] == {
        "name": f"{plural}/strategy",
        "singularName": "",
        "namespaced": True,
        "group": MC,
        "version": VERSION,
        "kind": "Strategy",
        "verbs": ["get", "patch", "update"],
    }


POD_STREAMS = {
    "pods/log": ("PodLogOptions", ["get"]),
    "pods/exec": ("PodExecOptions", ["create", "get"]),
    "pods/attach": ("PodAttachOptions", ["create", "get"]),
    "pods/portforward": ("PodPortForwardOptions", ["create", "get"]),
}


def test_resource_list_of_the_punch_through_group() -> None:
    found = entries(REMOTE)
    assert sorted(found) == sorted([*REMOTE_PLURALS, *POD_STREAMS])
    for name, (kind, verbs) in POD_STREAMS.items():
        # As Kubernetes lists them: the kind of the options, get (and create to connect).
        assert (found[name]["kind"], found[name]["verbs"]) == (kind, verbs)
        assert found.pop(name)["singularName"] == ""
    for entry in found.values():
        assert entry["verbs"] == ["get", "list", "watch"]
        assert entry["namespaced"] is True
        assert entry["categories"] == ["kmc-remote"]
        # Core short names (po, svc, cm...) already mean the real kinds; ours would be ambiguous.
        assert "shortNames" not in entry
    assert found["endpointslices"]["kind"] == "EndpointSlice"
    assert found["pods"]["singularName"] == "pod"


def test_secrets_are_never_served() -> None:
    assert all(r.plural != "secrets" and r.kind != "Secret" for r in RESOURCES)
    for group in (MC, REMOTE):
        assert not any(name.split("/")[0] == "secrets" for name in entries(group))
    assert "ecret" not in json.dumps(discovery.aggregated(RESOURCES))


def test_resource_list_of_an_unknown_group_version_is_none() -> None:
    assert discovery.resource_list(RESOURCES, MC, "v1") is None
    assert discovery.resource_list(RESOURCES, "apps", "v1") is None


@pytest.mark.parametrize("version", ["v2", "v2beta1"])
def test_aggregated_discovery_shape(version: str) -> None:
    document = discovery.aggregated(RESOURCES, version)
    assert document["kind"] == "APIGroupDiscoveryList"
    assert document["apiVersion"] == f"apidiscovery.k8s.io/{version}"
    assert [item["metadata"] for item in document["items"]] == [{"name": MC}, {"name": REMOTE}]
    for item in document["items"]:
        (served,) = item["versions"]
        assert (served["version"], served["freshness"]) == (VERSION, "Current")
        for resource in served["resources"]:
            assert set(resource) >= {
                "resource",
                "responseKind",
                "scope",
                "singularResource",
                "verbs",
            }
            cluster_scoped = resource["resource"] == "workfeeds"  # one per Location
            assert resource["scope"] == ("Cluster" if cluster_scoped else "Namespaced")
            assert set(resource["responseKind"]) == {"group", "version", "kind"}
    views = {r["resource"]: r for r in document["items"][0]["versions"][0]["resources"]}
    assert views["deployments"]["responseKind"] == {
        "group": "",
        "version": "",
        "kind": "Deployment",
    }
    assert views["deployments"]["shortNames"] == ["mcdeploy"]
    assert views["jobs"]["subresources"] == [
        {
            "subresource": "locations",
            "responseKind": {"group": MC, "version": VERSION, "kind": "Placement"},
            "verbs": ["get"],
        },
        {
            "subresource": "strategy",
            "responseKind": {"group": MC, "version": VERSION, "kind": "Strategy"},
            "verbs": ["get", "patch", "update"],
        },
        {
            "subresource": "children",
            "responseKind": {"group": MC, "version": VERSION, "kind": "Children"},
            "verbs": ["get"],
        },
    ]


def test_aggregated_and_per_version_discovery_say_the_same() -> None:
    """Converted back as client-go does, the aggregated document is the APIResourceLists."""
    for item in discovery.aggregated(RESOURCES)["items"]:
        group = item["metadata"]["name"]
        converted: dict[str, dict[str, Any]] = {}
        for resource in item["versions"][0]["resources"]:
            kind = resource["responseKind"]
            converted[resource["resource"]] = {
                "name": resource["resource"],
                "singularName": resource["singularResource"],
                "namespaced": resource["scope"] == "Namespaced",
                **{key: kind[key] for key in ("group", "version") if kind[key]},
                "kind": kind["kind"],
                "verbs": resource["verbs"],
                **{key: resource[key] for key in ("shortNames", "categories") if key in resource},
            }
            for sub in resource.get("subresources", []):
                name = f"{resource['resource']}/{sub['subresource']}"
                converted[name] = {
                    "name": name,
                    "singularName": "",
                    "namespaced": resource["scope"] == "Namespaced",
                    **sub["responseKind"],
                    "verbs": sub["verbs"],
                }
        assert converted == entries(group)


def test_aggregated_content_type_is_what_the_aggregator_and_clients_look_for() -> None:
    assert (
        discovery.content_type_for_aggregated("v2")
        == "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
    )
    assert discovery.content_type_for_aggregated() == discovery.content_type_for_aggregated("v2")
    assert (
        discovery.content_type_for_aggregated("v2beta1")
        == "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList"
    )
    for version in ("v2", "v2beta1"):
        asked = negotiate(discovery.content_type_for_aggregated(version))
        assert asked == Wanted("discovery", version)


def test_unknown_aggregated_versions_are_refused() -> None:
    with pytest.raises(ValueError, match="v1"):
        discovery.aggregated(RESOURCES, "v1")
    with pytest.raises(ValueError):
        discovery.content_type_for_aggregated("v3")


def test_documents_are_json_and_deterministic() -> None:
    documents = [
        discovery.group_list(RESOURCES),
        discovery.api_group(RESOURCES, REMOTE),
        discovery.resource_list(RESOURCES, MC, VERSION),
        discovery.aggregated(RESOURCES),
    ]
    again = [
        discovery.group_list(RESOURCES),
        discovery.api_group(RESOURCES, REMOTE),
        discovery.resource_list(RESOURCES, MC, VERSION),
        discovery.aggregated(RESOURCES),
    ]
    assert json.dumps(documents) == json.dumps(again)
    assert json.loads(json.dumps(documents)) == documents


def test_names_follow_kubernetes_rules() -> None:
    seen: set[tuple[str, str]] = set()
    short_names: set[str] = set()
    for r in RESOURCES:
        assert (r.group, r.plural) not in seen
        seen.add((r.group, r.plural))
        assert r.plural.islower() and r.singular.islower() and r.kind[0].isupper()
        assert not short_names & set(r.short_names)
        short_names |= set(r.short_names)


def test_registry_helpers() -> None:
    assert group_versions(RESOURCES) == [(MC, VERSION), (REMOTE, VERSION)]
    found = find(RESOURCES, REMOTE, VERSION, "pods")
    assert found is not None and found.kind == "Pod"
    assert find(RESOURCES, REMOTE, VERSION, "secrets") is None
    assert find(RESOURCES, MC, VERSION, "pods") is None
    # Resources stay hashable although they carry schemas.
    assert len(set(RESOURCES)) == len(RESOURCES)


def test_cluster_scoped_resources_and_several_versions() -> None:
    """Not used today, but the documents must stay right if such resources are added."""
    sub = Subresource("status", "Thing", ("get",))
    things = (
        Resource(
            "x.example", "v2", "things", "thing", "Thing", False, ("get",), subresources=(sub,)
        ),
        Resource("x.example", "v1", "things", "thing", "Thing", False, ("get", "list")),
    )
    group = discovery.api_group(things, "x.example")
    assert group is not None
    assert [v["version"] for v in group["versions"]] == ["v2", "v1"]
    assert group["preferredVersion"]["version"] == "v2"
    listed = discovery.resource_list(things, "x.example", "v2")
    assert listed is not None
    # Same kind as its parent: no group or version of its own, as Kubernetes writes status.
    assert listed["resources"][1] == {
        "name": "things/status",
        "singularName": "",
        "namespaced": False,
        "kind": "Thing",
        "verbs": ["get"],
    }
    (item,) = discovery.aggregated(things)["items"]
    assert [v["version"] for v in item["versions"]] == ["v2", "v1"]
    assert item["versions"][0]["resources"][0]["scope"] == "Cluster"
