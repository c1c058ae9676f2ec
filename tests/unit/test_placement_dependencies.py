"""Dependencies: the ConfigMaps, Secrets, ServiceAccounts, claims and priority classes a pod
template needs, and where."""

from __future__ import annotations

from typing import Any

import pytest

from apiserver.kinds import ALL, CONFIGMAP, DEPLOYMENT, POD
from apiserver.placement.dependencies import follow, pod_spec_at, references

POD_SPEC: dict[str, Any] = {
    "serviceAccountName": "web-sa",
    "priorityClassName": "high",
    "imagePullSecrets": [{"name": "registry"}],
    "initContainers": [
        {"name": "init", "envFrom": [{"configMapRef": {"name": "init-env"}}]},
    ],
    "containers": [
        {
            "name": "web",
            "env": [
                {"name": "PLAIN", "value": "x"},
                {"name": "A", "valueFrom": {"configMapKeyRef": {"name": "settings", "key": "a"}}},
                {"name": "B", "valueFrom": {"secretKeyRef": {"name": "db", "key": "password"}}},
                {"name": "C", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
            ],
            "envFrom": [{"secretRef": {"name": "api-keys"}, "prefix": "K_"}],
        }
    ],
    "ephemeralContainers": [
        {"name": "debug", "env": [{"name": "D", "valueFrom": {"secretKeyRef": {"name": "dbg"}}}]}
    ],
    "volumes": [
        {"name": "conf", "configMap": {"name": "web-conf"}},
        {"name": "tls", "secret": {"secretName": "web-tls"}},
        {"name": "scratch", "emptyDir": {}},
        {"name": "data", "persistentVolumeClaim": {"claimName": "data"}},
        {
            "name": "all",
            "projected": {
                "sources": [
                    {"configMap": {"name": "proj-conf"}},
                    {"secret": {"name": "proj-secret"}},
                    {"serviceAccountToken": {"path": "token"}},
                    {"downwardAPI": {"items": []}},
                ]
            },
        },
        {"name": "csi", "csi": {"driver": "x", "nodePublishSecretRef": {"name": "csi-creds"}}},
        {"name": "ceph", "cephfs": {"monitors": ["m"], "secretRef": {"name": "ceph-key"}}},
        {"name": "az", "azureFile": {"secretName": "az-creds", "shareName": "s"}},
    ],
}


def test_every_kind_of_reference_is_found() -> None:
    assert references(POD_SPEC) == {
        ("ServiceAccount", "web-sa"),
        ("Secret", "registry"),
        ("ConfigMap", "init-env"),
        ("ConfigMap", "settings"),
        ("Secret", "db"),
        ("Secret", "api-keys"),
        ("Secret", "dbg"),
        ("ConfigMap", "web-conf"),
        ("Secret", "web-tls"),
        ("ConfigMap", "proj-conf"),
        ("Secret", "proj-secret"),
        ("Secret", "csi-creds"),
        ("Secret", "ceph-key"),
        ("Secret", "az-creds"),
        ("PersistentVolumeClaim", "data"),
        ("PriorityClass", "high"),
    }


def test_a_bare_pod_spec_refers_to_nothing() -> None:
    assert references({"containers": [{"name": "c", "image": "busybox"}]}) == frozenset()


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ({"serviceAccountName": "default"}, frozenset()),
        ({}, frozenset()),
        ({"serviceAccount": "legacy"}, {("ServiceAccount", "legacy")}),
        ({"serviceAccountName": "new", "serviceAccount": "legacy"}, {("ServiceAccount", "new")}),
        ({"serviceAccountName": ""}, frozenset()),
    ],
)
def test_service_account(spec: dict[str, Any], expected: frozenset[tuple[str, str]]) -> None:
    assert references(spec) == expected


def test_malformed_entries_are_skipped_not_fatal() -> None:
    spec: dict[str, Any] = {
        "containers": [None, {"env": [{"valueFrom": None}], "envFrom": "oops"}],
        "volumes": [{"configMap": {}}, {"secret": {"secretName": None}}, "x"],
        "imagePullSecrets": [{}],
    }
    assert references(spec) == frozenset()


def _template(kind: str, pod_spec: dict[str, Any]) -> dict[str, Any]:
    return {"kind": kind, "spec": {"replicas": 1, "template": {"spec": pod_spec}}}


@pytest.mark.parametrize("kind", ["Deployment", "StatefulSet", "ReplicaSet", "DaemonSet", "Job"])
def test_pod_spec_of_workloads(kind: str) -> None:
    entry = next(k for k in ALL if k.kind == kind)
    assert entry.pod_spec(_template(kind, POD_SPEC)) is POD_SPEC


def test_pod_spec_of_a_pod_and_others() -> None:
    assert POD.pod_spec({"kind": "Pod", "spec": POD_SPEC}) is POD_SPEC
    assert CONFIGMAP.pod_spec({"kind": "ConfigMap", "data": {"spec": "x"}}) is None
    assert DEPLOYMENT.pod_spec({"kind": "Deployment", "spec": {}}) is None
    assert DEPLOYMENT.pod_spec({"kind": "Deployment", "spec": {"template": "nonsense"}}) is None
    assert pod_spec_at({"spec": POD_SPEC}, ("spec", "template", "spec")) is None


def test_follow_is_the_sorted_union_of_the_users_locations() -> None:
    placement = follow([{"us-west": 2, "eu-west": 1}, {"us-east": None}, {"us-west": 0}])
    assert placement == {"eu-west": None, "us-east": None, "us-west": None}
    assert list(placement) == ["eu-west", "us-east", "us-west"]


def test_no_users_no_placement() -> None:
    assert follow([]) == {}
    assert follow(iter([{}])) == {}
