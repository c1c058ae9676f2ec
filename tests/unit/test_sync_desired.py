"""The object applied into a child: the author's object, our share, nothing of the hub's or ours."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from apiserver.contract import ORIGIN as ORIGIN_LABEL
from apiserver.kinds import ALL, DAEMONSET, REPLICASET, Kind
from apiserver.quantity import parse_quantity
from apiserver.sync.desired import child_object, replicas_share

HUB_UID = "0f7c8a52-5d0e-4a3e-9c1b-2f6f3b1e9a10"
REPLICA_KINDS = sorted(k.kind for k in ALL if k.share is replicas_share)


def entry(kind: str) -> Kind:
    """The kinds' entry of that name, as the sync loop passes it."""
    return next(k for k in ALL if k.kind == kind)


def hub_metadata(name: str = "web", **extra: Any) -> dict[str, Any]:
    """Metadata as the hub's apiserver returns it, with everything it and we add."""
    return {
        "name": name,
        "namespace": "shop",
        "uid": HUB_UID,
        "resourceVersion": "48213",
        "generation": 4,
        "creationTimestamp": "2026-12-01T09:00:00Z",
        "managedFields": [{"manager": "kubectl-client-side-apply", "operation": "Update"}],
        "finalizers": ["kmc.dev/cleanup"],
        "ownerReferences": [{"apiVersion": "v1", "kind": "ConfigMap", "name": "x", "uid": "1"}],
        "selfLink": f"/apis/apps/v1/namespaces/shop/deployments/{name}",
        "generateName": "web-",
        "deletionGracePeriodSeconds": 30,
        "deletionTimestamp": "2026-12-02T09:00:00Z",
        "labels": {"app": "web", "kmc.dev/exclude": "false", ORIGIN_LABEL: "forged"},
        "annotations": {
            "kmc.dev/strategy": '{"type": "Split"}',
            "kmc.dev/placement": '{"us-east": 2, "us-west": 1}',
            "kubectl.kubernetes.io/last-applied-configuration": "{}",
            "team": "storefront",
        },
        **extra,
    }


def deployment(replicas: int = 3, **spec: Any) -> dict[str, Any]:
    return {
        "metadata": hub_metadata(),
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "web", "image": "nginx:1.27"}]},
            },
            **spec,
        },
        "status": {"replicas": 3, "readyReplicas": 3, "observedGeneration": 4},
    }


def job(**spec: Any) -> dict[str, Any]:
    generated = {
        "batch.kubernetes.io/controller-uid": HUB_UID,
        "controller-uid": HUB_UID,
        "batch.kubernetes.io/job-name": "crunch",
        "job-name": "crunch",
    }
    return {
        "metadata": hub_metadata("crunch"),
        "spec": {
            "parallelism": 4,
            "completions": 10,
            "selector": {"matchLabels": {"batch.kubernetes.io/controller-uid": HUB_UID}},
            "template": {
                "metadata": {"labels": {"app": "crunch", **generated}},
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [{"name": "crunch", "image": "busybox"}],
                },
            },
            **spec,
        },
    }


def test_metadata_keeps_the_authors_fields_and_nothing_else() -> None:
    child = child_object(deployment(), entry("Deployment"), "us-east", {"us-east": 2})
    assert child["apiVersion"] == "apps/v1"
    assert child["kind"] == "Deployment"
    assert child["metadata"] == {
        "name": "web",
        "namespace": "shop",
        "labels": {"app": "web", ORIGIN_LABEL: HUB_UID},
        "annotations": {"team": "storefront"},
    }
    assert "status" not in child


def test_nothing_under_kmc_dev_reaches_a_child_but_the_origin_label() -> None:
    for kind, hub in [("Deployment", deployment()), ("Job", job())]:
        child = child_object(hub, entry(kind), "us-east", {"us-east": 2, "us-west": 1})
        metadata = child["metadata"]
        ours = [
            key
            for key in [*metadata["labels"], *metadata.get("annotations", {})]
            if "kmc.dev/" in key
        ]
        assert ours == [ORIGIN_LABEL]
        assert "last-applied" not in json.dumps(metadata)


def test_empty_annotations_are_omitted_and_labels_hold_only_the_origin() -> None:
    hub = {
        "metadata": {
            "name": "settings",
            "namespace": "shop",
            "uid": HUB_UID,
            "labels": {},
            "annotations": {"kmc.dev/placement": '{"us-east": null}'},
        },
        "data": {"mode": "prod"},
    }
    child = child_object(hub, entry("ConfigMap"), "us-east", {"us-east": None})
    assert child == {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "settings", "namespace": "shop", "labels": {ORIGIN_LABEL: HUB_UID}},
        "data": {"mode": "prod"},
    }


def test_the_hub_object_is_never_modified_and_the_child_shares_nothing_with_it() -> None:
    hub = job()
    before = copy.deepcopy(hub)
    child = child_object(hub, entry("Job"), "us-east", {"us-east": 6, "us-west": 4})
    assert hub == before
    child["spec"]["template"]["spec"]["containers"][0]["image"] = "changed"
    assert hub == before


@pytest.mark.parametrize("kind", REPLICA_KINDS)
def test_replica_kinds_get_their_locations_share(kind: str) -> None:
    placement = {"eu-west": 1, "us-east": 3, "us-west": 2}
    shares = {
        loc: child_object(deployment(6), entry(kind), loc, placement)["spec"]["replicas"]
        for loc in placement
    }
    assert shares == placement


def test_a_replica_kind_placed_whole_keeps_its_replicas() -> None:
    child = child_object(deployment(5), entry("Deployment"), "us-east", {"us-east": None})
    assert child["spec"]["replicas"] == 5


def test_a_job_gets_its_share_of_parallelism_and_completions() -> None:
    placement = {"us-east": 6, "us-west": 4}
    specs = {loc: child_object(job(), entry("Job"), loc, placement)["spec"] for loc in placement}
    assert {loc: spec["completions"] for loc, spec in specs.items()} == {"us-east": 6, "us-west": 4}
    assert {loc: spec["parallelism"] for loc, spec in specs.items()} == {"us-east": 2, "us-west": 2}


def test_a_job_without_completions_gets_none() -> None:
    hub = job(parallelism=3)
    del hub["spec"]["completions"]
    child = child_object(hub, entry("Job"), "us-west", {"us-east": 2, "us-west": 1})
    assert child["spec"]["parallelism"] == 1
    assert "completions" not in child["spec"]


def test_a_job_leaves_its_selector_and_generated_labels_to_the_child() -> None:
    child = child_object(job(), entry("Job"), "us-east", {"us-east": 10})
    assert "selector" not in child["spec"]
    assert child["spec"]["template"]["metadata"]["labels"] == {"app": "crunch"}
    assert HUB_UID not in json.dumps(child["spec"])


def test_a_job_with_only_generated_template_labels_has_no_template_labels() -> None:
    hub = job()
    del hub["spec"]["template"]["metadata"]["labels"]["app"]
    child = child_object(hub, entry("Job"), "us-east", {"us-east": 10})
    assert child["spec"]["template"]["metadata"] == {}


def test_a_manual_selector_job_keeps_its_selector_and_labels() -> None:
    hub = job(manualSelector=True, selector={"matchLabels": {"app": "crunch"}})
    hub["spec"]["template"]["metadata"]["labels"] = {"app": "crunch", "job-name": "crunch"}
    child = child_object(hub, entry("Job"), "us-east", {"us-east": 10})
    assert child["spec"]["selector"] == {"matchLabels": {"app": "crunch"}}
    assert child["spec"]["template"]["metadata"]["labels"] == {
        "app": "crunch",
        "job-name": "crunch",
    }


def quota() -> dict[str, Any]:
    return {
        "metadata": hub_metadata("compute"),
        "spec": {
            "hard": {
                "requests.cpu": "10",
                "requests.memory": "64Gi",
                "pods": "20",
                "limits.cpu": "1",
            },
            "scopes": ["NotBestEffort"],
        },
        "status": {"hard": {"pods": "20"}, "used": {"pods": "3"}},
    }


def test_a_resource_quota_is_divided_exactly_by_the_placement() -> None:
    placement = {"eu-west": 1, "us-east": 3, "us-west": 2}
    hards = {
        loc: child_object(quota(), entry("ResourceQuota"), loc, placement)["spec"]["hard"]
        for loc in placement
    }
    assert hards["us-east"]["pods"] == "10"
    assert hards["us-west"]["pods"] == "7"
    assert hards["eu-west"]["pods"] == "3"
    for resource, amount in quota()["spec"]["hard"].items():
        total = sum(parse_quantity(hard[resource]) for hard in hards.values())
        assert total == parse_quantity(amount), resource


def test_a_resource_quota_placed_without_replicas_is_divided_evenly() -> None:
    placement: dict[str, int | None] = {"us-east": None, "us-west": None}
    child = child_object(quota(), entry("ResourceQuota"), "us-east", placement)
    assert child["spec"]["hard"]["pods"] == "10"
    assert child["spec"]["hard"]["limits.cpu"] == "500m"
    assert child["spec"]["scopes"] == ["NotBestEffort"]
    assert "status" not in child


def test_a_service_account_leaves_its_token_secrets_behind() -> None:
    hub = {
        "metadata": hub_metadata("builder"),
        "secrets": [{"name": "builder-token-x7k2p"}],
        "imagePullSecrets": [{"name": "registry"}],
    }
    child = child_object(hub, entry("ServiceAccount"), "us-east", {"us-east": None})
    assert "secrets" not in child
    assert child["imagePullSecrets"] == [{"name": "registry"}]


def test_a_service_leaves_addresses_and_node_ports_to_the_child() -> None:
    hub = {
        "metadata": hub_metadata("web"),
        "spec": {
            "type": "LoadBalancer",
            "clusterIP": "10.0.0.117",
            "clusterIPs": ["10.0.0.117"],
            "healthCheckNodePort": 31200,
            "externalTrafficPolicy": "Local",
            "ports": [{"port": 80, "targetPort": 8080, "nodePort": 30412}],
            "selector": {"app": "web"},
        },
    }
    spec = child_object(hub, entry("Service"), "us-east", {"us-east": None})["spec"]
    assert spec == {
        "type": "LoadBalancer",
        "externalTrafficPolicy": "Local",
        "ports": [{"port": 80, "targetPort": 8080}],
        "selector": {"app": "web"},
    }


def test_a_headless_service_stays_headless() -> None:
    hub = {
        "metadata": hub_metadata("db"),
        "spec": {"clusterIP": "None", "clusterIPs": ["None"], "ports": [{"port": 5432}]},
    }
    spec = child_object(hub, entry("Service"), "us-east", {"us-east": None})["spec"]
    assert spec["clusterIP"] == "None"
    assert spec["clusterIPs"] == ["None"]


def test_other_kinds_are_copied_as_is() -> None:
    hub = {
        "metadata": hub_metadata("agent"),
        "spec": {"selector": {"matchLabels": {"app": "agent"}}, "template": {"spec": {}}},
        "status": {"numberReady": 3},
    }
    child = child_object(hub, entry("DaemonSet"), "us-west", {"us-west": None})
    assert child["spec"] == hub["spec"]
    assert "status" not in child


def test_a_location_outside_the_placement_is_refused() -> None:
    with pytest.raises(ValueError, match="eu-west"):
        child_object(deployment(), entry("Deployment"), "eu-west", {"us-east": 3})


def test_a_hub_object_without_uid_is_refused() -> None:
    hub = deployment()
    del hub["metadata"]["uid"]
    with pytest.raises(ValueError, match="uid"):
        child_object(hub, entry("Deployment"), "us-east", {"us-east": 3})


@pytest.mark.parametrize(
    ("kind", "hub", "expected"),
    [
        (
            "Secret",
            {
                "metadata": {"name": "default-token-abc"},
                "type": "kubernetes.io/service-account-token",
            },
            False,
        ),
        ("Secret", {"metadata": {"name": "db"}, "type": "Opaque"}, True),
        ("Secret", {"metadata": {"name": "db"}}, True),
        ("ConfigMap", {"metadata": {"name": "kube-root-ca.crt"}}, False),
        ("ConfigMap", {"metadata": {"name": "settings"}}, True),
        ("Deployment", {"metadata": {"name": "kube-root-ca.crt"}}, True),
    ],
)
def test_syncable(kind: str, hub: dict[str, Any], expected: bool) -> None:
    assert entry(kind).syncable(hub) is expected


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ({"replicas": 10}, 2),  # 25% of 10 rounded down
        ({"replicas": 3}, 0),  # 25% of 3 rounds down to 0, maxSurge 25% rounds up to 1
        ({"replicas": 10, "strategy": {"rollingUpdate": {"maxUnavailable": 3}}}, 3),
        ({"replicas": 10, "strategy": {"rollingUpdate": {"maxUnavailable": "35%"}}}, 3),
        ({"replicas": 10, "strategy": {"rollingUpdate": {"maxUnavailable": "100%"}}}, 10),
        ({"replicas": 2, "strategy": {"rollingUpdate": {"maxUnavailable": 5}}}, 2),  # capped
        (
            {
                "replicas": 3,
                "strategy": {"rollingUpdate": {"maxSurge": 0, "maxUnavailable": "25%"}},
            },
            1,
        ),
        (
            {"replicas": 4, "strategy": {"rollingUpdate": {"maxSurge": "0%", "maxUnavailable": 0}}},
            1,
        ),
        ({"replicas": 6, "strategy": {"type": "Recreate"}}, 6),
        ({}, 0),  # 1 replica: 25% rounds down to 0
        ({"replicas": 0}, 0),
    ],
)
def test_deployment_max_unavailable(spec: dict[str, Any], expected: int) -> None:
    assert max_unavailable({"spec": spec}, "Deployment") == expected


def max_unavailable(hub: dict[str, Any], kind: str) -> int:
    rule = entry(kind).max_unavailable
    assert rule is not None
    return rule(hub)


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ({"replicas": 10}, 1),
        ({"replicas": 10, "updateStrategy": {"type": "RollingUpdate"}}, 1),
        ({"replicas": 10, "updateStrategy": {"rollingUpdate": {"maxUnavailable": 3}}}, 3),
        ({"replicas": 10, "updateStrategy": {"rollingUpdate": {"maxUnavailable": "25%"}}}, 2),
        ({"replicas": 3, "updateStrategy": {"rollingUpdate": {"maxUnavailable": "10%"}}}, 1),
    ],
)
def test_statefulset_max_unavailable(spec: dict[str, Any], expected: int) -> None:
    assert max_unavailable({"spec": spec}, "StatefulSet") == expected


def test_other_kinds_take_one_at_a_time() -> None:
    assert REPLICASET.max_unavailable is not None
    assert REPLICASET.max_unavailable({"spec": {"replicas": 8}}) == 1
    # A DaemonSet runs whole wherever it is placed: nothing is handed over by replicas.
    assert DAEMONSET.max_unavailable is None


def test_a_role_about_remote_kmc_dev_becomes_one_about_the_real_groups() -> None:
    role = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "Role",
        "metadata": hub_metadata("reader"),
        "rules": [
            {
                "apiGroups": ["remote.kmc.dev", "batch"],
                "resources": ["pods", "deployments", "secrets"],
                "verbs": ["get", "list", "watch"],
            },
            {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"]},
        ],
    }
    child = child_object(role, entry("Role"), "us-east", {"us-east": None})
    assert child["rules"] == [
        {
            "apiGroups": ["batch"],
            "resources": ["pods", "deployments", "secrets"],
            "verbs": ["get", "list", "watch"],
        },
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]},
        {"apiGroups": ["apps"], "resources": ["deployments"], "verbs": ["get", "list", "watch"]},
        {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"]},
    ]
    everything = {
        **role,
        "rules": [{"apiGroups": ["remote.kmc.dev"], "resources": ["*"], "verbs": ["list"]}],
    }
    rules = child_object(everything, entry("Role"), "a", {"a": None})["rules"]
    granted = {(r["apiGroups"][0], res) for r in rules for res in r["resources"]}
    assert ("", "pods") in granted and ("discovery.k8s.io", "endpointslices") in granted
    assert ("", "pods/exec") in granted  # "*" is every sub-resource too, as RBAC reads it
    assert not any(res == "secrets" for _, res in granted)


def test_a_role_about_pod_streams_becomes_one_about_the_childrens_pods() -> None:
    """The streams impersonate the caller in the child, whose RBAC must say what the hub's
    says: `pods/log` on the hub is `pods/log` in the child, never more."""
    role = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "Role",
        "metadata": hub_metadata("debugger"),
        "rules": [
            {
                "apiGroups": ["remote.kmc.dev"],
                "resources": ["pods", "pods/log"],
                "verbs": ["get", "list"],
            },
            {"apiGroups": ["remote.kmc.dev"], "resources": ["*/exec"], "verbs": ["create"]},
            # RBAC has no `pods/*`: it grants nothing on the hub, so nothing in the child.
            {"apiGroups": ["remote.kmc.dev"], "resources": ["pods/*"], "verbs": ["get"]},
        ],
    }
    child = child_object(role, entry("Role"), "a", {"a": None})
    assert child["rules"] == [
        {"apiGroups": [""], "resources": ["pods", "pods/log"], "verbs": ["get", "list"]},
        {"apiGroups": [""], "resources": ["pods/exec"], "verbs": ["create"]},
    ]
