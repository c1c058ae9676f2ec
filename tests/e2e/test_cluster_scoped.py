"""Cluster-scoped objects placed by their strategy, and namespaces' own labels in the children
(issue #31, item 9), with plain kubectl on the hub: a ClusterRole or a StorageClass that
carries `kmc.dev/strategy` reaches the locations it names and leaves them when it is deleted
or loses its strategy; one without stays the hub's; a strategy naming a location that does
not exist is refused at apply, one that leaves none eligible says so in a Warning Event, and
neither sends anything; a label put on a hub Namespace appears on the children's copies, and
goes when it goes.

Cluster-scoped objects outlive the test namespaces: each test deletes what it made and checks
that the children lost it."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from kmc_testbed import bed

from .conftest import CHILDREN, Kubectl
from .test_ingress_volumes import in_children
from .test_placement import with_strategy
from .test_services import wait_for

US = {"matchLabels": {"topology.kubernetes.io/region": "us"}}


@pytest.fixture
def names(kubectl: dict[str, Kubectl]) -> Iterator[list[tuple[str, str]]]:
    """(resource, name) of cluster-scoped hub objects a test made, deleted afterwards. An
    imported kind whose CRDs the test removed from the children is no longer served by the
    hub once API import has caught up, and its objects went with it: nothing to delete."""
    made: list[tuple[str, str]] = []
    yield made
    for resource, name in made:
        args = ("delete", resource, name, "--ignore-not-found", "--wait=false")
        gone = kubectl["hub"].run(*args, check=False)
        assert gone.returncode == 0 or "doesn't have a resource type" in gone.stderr, gone.stderr


def fresh(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:6]}"


def cluster_role(name: str, strategy: dict[str, Any] | None = None) -> dict[str, Any]:
    obj: dict[str, Any] = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": {"name": name, "labels": {"team": "a"}},
        "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list"]}],
    }
    return with_strategy(obj, strategy) if strategy is not None else obj


def storage_class(name: str, strategy: dict[str, Any]) -> dict[str, Any]:
    obj = {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": {"name": name},
        "provisioner": "example.com/none",
        "reclaimPolicy": "Delete",
    }
    return with_strategy(obj, strategy)


def made(
    kubectl: dict[str, Kubectl], names: list[tuple[str, str]], resource: str, obj: dict[str, Any]
) -> str:
    names.append((resource, obj["metadata"]["name"]))
    kubectl["hub"].apply(obj)
    return str(obj["metadata"]["name"])


def gone_everywhere(kubectl: dict[str, Kubectl], resource: str, name: str) -> bool:
    on_hub = kubectl["hub"].run("get", resource, name, check=False).returncode == 0
    return not on_hub and not in_children(kubectl, resource, name)


def test_a_cluster_role_and_a_storage_class_with_a_strategy_reach_every_child_and_leave(
    installed: bed.State, kubectl: dict[str, Kubectl], names: list[tuple[str, str]]
) -> None:
    hub = kubectl["hub"]
    role = made(
        kubectl, names, "clusterroles", cluster_role(fresh("reader"), {"type": "Replicate"})
    )
    sc = made(kubectl, names, "storageclasses", storage_class(fresh("slow"), {"type": "Replicate"}))
    copies = wait_for(
        lambda: (
            (found := in_children(kubectl, "clusterroles", role)).keys() == set(CHILDREN) and found
        ),
        say=f"clusterrole {role} in every child",
    )
    for child in copies.values():
        assert child["rules"] == cluster_role(role)["rules"]
        assert child["metadata"]["labels"]["team"] == "a"
        assert not any(k.startswith("kmc.dev/") for k in child["metadata"].get("annotations", {}))
    wait_for(
        lambda: in_children(kubectl, "storageclasses", sc).keys() == set(CHILDREN),
        say=f"storageclass {sc} in every child",
    )
    # A change on the hub follows.
    hub.run("label", "clusterrole", role, "team=b", "--overwrite")
    wait_for(
        lambda: (
            all(
                c["metadata"]["labels"].get("team") == "b"
                for c in in_children(kubectl, "clusterroles", role).values()
            )
            and len(in_children(kubectl, "clusterroles", role)) == len(CHILDREN)
        ),
        say="the new label in every child",
    )
    # Deleted on the hub: gone everywhere (our finalizer holds the hub object until then).
    hub.run("delete", "clusterrole", role, "--wait=false")
    hub.run("delete", "storageclass", sc, "--wait=false")
    wait_for(lambda: gone_everywhere(kubectl, "clusterroles", role), 240, "clusterrole gone")
    wait_for(lambda: gone_everywhere(kubectl, "storageclasses", sc), 240, "storageclass gone")


def test_a_location_selector_picks_the_children_and_no_strategy_keeps_it_home(
    installed: bed.State, kubectl: dict[str, Kubectl], names: list[tuple[str, str]]
) -> None:
    hub = kubectl["hub"]
    home = made(kubectl, names, "clusterroles", cluster_role(fresh("home")))
    us = made(
        kubectl,
        names,
        "clusterroles",
        cluster_role(fresh("us"), {"type": "Replicate", "locationSelector": US}),
    )
    wait_for(
        lambda: in_children(kubectl, "clusterroles", us).keys() == {"us-east", "us-west"},
        say=f"clusterrole {us} in the us locations",
    )
    # Made before the selected one was placed: it would be there by now if it were placed.
    assert in_children(kubectl, "clusterroles", home) == {}
    assert in_children(kubectl, "clusterroles", us).keys() == {"us-east", "us-west"}
    # Given a strategy, it goes; losing it, it comes back home.
    strategy = json.dumps({"type": "Replicate", "pin": ["eu-west"]})
    hub.run("annotate", "clusterrole", home, f"kmc.dev/strategy={strategy}")
    wait_for(
        lambda: in_children(kubectl, "clusterroles", home).keys() == {"eu-west"},
        say=f"clusterrole {home} in eu-west",
    )
    hub.run("annotate", "clusterrole", home, "kmc.dev/strategy-")
    wait_for(
        lambda: in_children(kubectl, "clusterroles", home) == {},
        say=f"clusterrole {home} out of the children once its strategy is gone",
    )
    hub.run("delete", "clusterrole", us, "--wait=false")
    wait_for(lambda: gone_everywhere(kubectl, "clusterroles", us), 240, "clusterrole gone")


def test_a_strategy_naming_no_real_location_sends_nothing_and_says_why(
    installed: bed.State, kubectl: dict[str, Kubectl], names: list[tuple[str, str]]
) -> None:
    hub = kubectl["hub"]
    mars = cluster_role(fresh("mars"), {"type": "Replicate", "pin": ["mars"]})
    names.append(("clusterroles", mars["metadata"]["name"]))
    refused = hub.run("apply", "-f", "-", stdin=json.dumps(mars), check=False)
    assert refused.returncode != 0
    assert "no location named mars" in refused.stderr, refused.stderr
    assert hub.run("get", "clusterrole", mars["metadata"]["name"], check=False).returncode != 0

    # One that names only real labels but matches no location: applied, placed nowhere.
    nowhere = {"matchLabels": {"topology.kubernetes.io/region": "antarctica"}}
    name = made(
        kubectl,
        names,
        "clusterroles",
        cluster_role(fresh("nowhere"), {"type": "Replicate", "locationSelector": nowhere}),
    )

    def warned() -> list[Any]:
        selector = f"involvedObject.kind=ClusterRole,involvedObject.name={name}"
        items: list[Any] = hub.json("get", "events", "-A", "--field-selector", selector)["items"]
        return [e for e in items if e["type"] == "Warning" and e["reason"] == "Unplaceable"]

    event = wait_for(warned, say=f"a Warning Event on clusterrole {name}")[0]
    assert "no eligible location" in event["message"], event["message"]
    assert in_children(kubectl, "clusterroles", name) == {}
    annotations = hub.json("get", "clusterrole", name)["metadata"].get("annotations") or {}
    assert json.loads(annotations.get("kmc.dev/placement") or "{}") == {}


def test_a_hub_namespaces_labels_and_annotations_reach_the_childrens_copies(
    installed: bed.State, kubectl: dict[str, Kubectl], namespace: str
) -> None:
    hub = kubectl["hub"]
    hub.run("label", "namespace", namespace, "team=a", "kmc.dev/exclude=false")
    config = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "settings"},
        "data": {"a": "1"},
    }
    hub.apply(with_strategy(config, {"type": "Replicate"}), namespace)

    def child_namespaces() -> dict[str, Any]:
        return {c: kubectl[c].json("get", "namespace", namespace) for c in CHILDREN}

    def everywhere(test: Any) -> Any:
        copies = {
            c: kubectl[c].run("get", "namespace", namespace, "-o", "json", check=False)
            for c in CHILDREN
        }
        if any(p.returncode != 0 for p in copies.values()):
            return False
        return all(test(json.loads(p.stdout)["metadata"]) for p in copies.values())

    wait_for(
        lambda: everywhere(lambda m: m.get("labels", {}).get("team") == "a"),
        say="the namespace's label made with it in every child",
    )
    for meta in (ns["metadata"] for ns in child_namespaces().values()):
        assert "kmc.dev/exclude" not in meta["labels"]  # nothing of ours but the origin
        assert "kmc.dev/origin-uid" in meta["labels"]
    hub.run("label", "namespace", namespace, "team=b", "--overwrite")
    hub.run("annotate", "namespace", namespace, "owner=shop")
    wait_for(
        lambda: everywhere(
            lambda m: (
                m.get("labels", {}).get("team") == "b"
                and m.get("annotations", {}).get("owner") == "shop"
            )
        ),
        say="the changed label and a new annotation in every child",
    )
    hub.run("label", "namespace", namespace, "team-")
    wait_for(
        lambda: everywhere(lambda m: "team" not in m.get("labels", {})),
        say="the label removed on the hub gone from every child",
    )


def test_only_the_policies_for_every_namespace_hold_a_cluster_scoped_object(
    installed: bed.State, kubectl: dict[str, Kubectl], names: list[tuple[str, str]]
) -> None:
    hub = kubectl["hub"]
    everywhere, some = fresh("e2e-all"), fresh("e2e-some")
    names += [("placementpolicies", everywhere), ("placementpolicies", some)]
    for name, selector, where in (
        (everywhere, {}, ["eu-west", "us-west"]),
        # Selects namespaces by a label: says nothing of objects in no namespace.
        (some, {"matchLabels": {"tier": some}}, ["us-east"]),
    ):
        hub.apply(
            {
                "apiVersion": "kmc.dev/v1alpha1",
                "kind": "PlacementPolicy",
                "metadata": {"name": name},
                "spec": {"namespaceSelector": selector, "locations": where},
            }
        )
    role = made(kubectl, names, "clusterroles", cluster_role(fresh("held"), {"type": "Replicate"}))
    wait_for(
        lambda: in_children(kubectl, "clusterroles", role).keys() == {"eu-west", "us-west"},
        say=f"clusterrole {role} only where the policy for every namespace allows",
    )
    wider = json.dumps({"type": "Replicate", "pin": ["us-east"]})
    refused = hub.run(
        "annotate", "clusterrole", role, f"kmc.dev/strategy={wider}", "--overwrite", check=False
    )
    assert refused.returncode != 0
    assert f"us-east: policy {everywhere}" in refused.stderr, refused.stderr
    hub.run("delete", "placementpolicy", everywhere)
    wait_for(
        lambda: in_children(kubectl, "clusterroles", role).keys() == set(CHILDREN),
        say=f"clusterrole {role} everywhere once the policy is gone",
    )
    hub.run("delete", "clusterrole", role, "--wait=false")
    wait_for(lambda: gone_everywhere(kubectl, "clusterroles", role), 240, "clusterrole gone")


def test_a_users_crd_with_a_strategy_is_served_by_the_children_and_its_objects_follow(
    installed: bed.State, kubectl: dict[str, Kubectl], names: list[tuple[str, str]]
) -> None:
    hub = kubectl["hub"]
    group = f"{uuid.uuid4().hex[:6]}.e2e.example.com"
    crd_name = f"gizmos.{group}"
    crd = {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": crd_name},
        "spec": {
            "group": group,
            "scope": "Cluster",
            "names": {"kind": "Gizmo", "plural": "gizmos", "singular": "gizmo"},
            "versions": [
                {
                    "name": "v1",
                    "served": True,
                    "storage": True,
                    "schema": {
                        "openAPIV3Schema": {
                            "type": "object",
                            "properties": {
                                "spec": {
                                    "type": "object",
                                    "properties": {"size": {"type": "integer"}},
                                }
                            },
                        }
                    },
                }
            ],
        },
    }
    made(kubectl, names, "customresourcedefinitions", with_strategy(crd, {"type": "Replicate"}))
    wait_for(
        lambda: in_children(kubectl, "customresourcedefinitions", crd_name).keys() == set(CHILDREN),
        240,
        f"crd {crd_name} in every child",
    )
    gizmo = {
        "apiVersion": f"{group}/v1",
        "kind": "Gizmo",
        "metadata": {"name": "small"},
        "spec": {"size": 1},
    }
    hub.run("wait", "--for=condition=Established", f"crd/{crd_name}", "--timeout=60s")
    hub.apply(with_strategy(gizmo, {"type": "Replicate", "locationSelector": US}))
    wait_for(
        lambda: in_children(kubectl, f"gizmos.{group}", "small").keys() == {"us-east", "us-west"},
        300,
        "the cluster-scoped Gizmo in the us locations",
    )
    hub.run("delete", f"gizmos.{group}", "small", "--wait=false")
    wait_for(lambda: gone_everywhere(kubectl, f"gizmos.{group}", "small"), 240, "gizmo gone")
    hub.run("delete", "crd", crd_name, "--wait=false")
    wait_for(
        lambda: gone_everywhere(kubectl, "customresourcedefinitions", crd_name), 240, "crd gone"
    )


def gizmo_crd(group: str) -> dict[str, Any]:
    schema = {
        "type": "object",
        "properties": {"spec": {"type": "object", "properties": {"size": {"type": "integer"}}}},
    }
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"gizmos.{group}"},
        "spec": {
            "group": group,
            "scope": "Cluster",
            "names": {"kind": "Gizmo", "plural": "gizmos", "singular": "gizmo"},
            "versions": [
                {
                    "name": "v1",
                    "served": True,
                    "storage": True,
                    "schema": {"openAPIV3Schema": schema},
                }
            ],
        },
    }


def test_an_imported_cluster_scoped_crd_is_never_sent_down_but_its_objects_are(
    installed: bed.State, kubectl: dict[str, Kubectl], names: list[tuple[str, str]]
) -> None:
    hub = kubectl["hub"]
    imported_group = f"{uuid.uuid4().hex[:6]}.imported.example.com"
    imported = f"gizmos.{imported_group}"
    for child in ("us-east", "us-west"):  # served by two children only
        kubectl[child].apply(gizmo_crd(imported_group))
    try:
        crd = wait_for(
            lambda: (
                (p := hub.run("get", "crd", imported, "-o", "json", check=False)).returncode == 0
                and json.loads(p.stdout)
            ),
            240,
            f"the cluster-scoped {imported} imported on the hub",
        )
        assert crd["metadata"]["labels"].get("kmc.dev/imported") == "true"
        # Asked to, it still does not go down; a user's CRD asked the same way does.
        strategy = json.dumps({"type": "Replicate"})
        hub.run("annotate", "crd", imported, f"kmc.dev/strategy={strategy}")
        users_group = f"{uuid.uuid4().hex[:6]}.users.example.com"
        users = made(
            kubectl,
            names,
            "customresourcedefinitions",
            with_strategy(gizmo_crd(users_group), {"type": "Replicate"}),
        )
        wait_for(
            lambda: (
                in_children(kubectl, "customresourcedefinitions", users).keys() == set(CHILDREN)
            ),
            240,
            f"the user's crd {users} in every child",
        )
        assert in_children(kubectl, "customresourcedefinitions", imported) == {}
        assert kubectl["eu-west"].run("get", "crd", imported, check=False).returncode != 0
        # Its objects with a strategy go where the kind is served.
        gizmo = {"apiVersion": f"{imported_group}/v1", "kind": "Gizmo", "metadata": {"name": "g"}}
        names.append((f"gizmos.{imported_group}", "g"))
        hub.apply(with_strategy(gizmo, {"type": "Replicate"}))
        wait_for(
            lambda: (
                in_children(kubectl, f"gizmos.{imported_group}", "g").keys()
                == {"us-east", "us-west"}
            ),
            240,
            "the imported kind's object where the kind is served",
        )
        hub.run("delete", f"gizmos.{imported_group}", "g", "--wait=false")
        wait_for(
            lambda: gone_everywhere(kubectl, f"gizmos.{imported_group}", "g"), 240, "gizmo gone"
        )
        hub.run("delete", "crd", users, "--wait=false")
        wait_for(
            lambda: gone_everywhere(kubectl, "customresourcedefinitions", users), 240, "crd gone"
        )
    finally:
        for child in ("us-east", "us-west"):
            kubectl[child].run("delete", "crd", imported, "--ignore-not-found", "--wait=false")
