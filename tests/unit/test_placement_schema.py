"""Schema compatibility: which fields a location's API server would silently drop."""

from __future__ import annotations

import copy
import functools
import gzip
import json
from pathlib import Path
from typing import Any

import pytest

from apiserver.placement.schema import SchemaIndex, field_paths

DATA = Path(__file__).parent / "data"


@functools.cache
def _load(name: str) -> dict[str, Any]:
    with gzip.open(DATA / f"openapi-v3-{name}.json.gz", "rt", encoding="utf-8") as f:
        doc: dict[str, Any] = json.load(f)
    return doc


def openapi(name: str) -> dict[str, Any]:
    """A fresh copy of a stored document (tests may mutate it)."""
    return copy.deepcopy(_load(name))


def index(name: str, api_version: str, kind: str, doc: dict[str, Any] | None = None) -> SchemaIndex:
    built = SchemaIndex.from_openapi(doc if doc is not None else _load(name), api_version, kind)
    assert built is not None
    return built


def deployment(**pod_spec: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "containers": [
            {
                "name": "web",
                "image": "nginx:1.27",
                "ports": [{"containerPort": 80, "protocol": "TCP"}],
                "env": [
                    {"name": "MODE", "value": "prod"},
                    {"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": "t", "key": "k"}}},
                ],
                "resources": {
                    "requests": {"cpu": "250m", "memory": "64Mi", "example.com/gpu": "1"},
                    "limits": {"memory": "128Mi"},
                },
                "readinessProbe": {"httpGet": {"path": "/", "port": "http"}},
                "volumeMounts": [{"name": "config", "mountPath": "/etc/web"}],
            }
        ],
        "volumes": [
            {"name": "config", "configMap": {"name": "web"}},
            {"name": "t", "emptyDir": {}},
        ],
        "nodeSelector": {"disk": "ssd", "kubernetes.io/os": "linux"},
        "tolerations": [{"key": "spot", "operator": "Exists", "effect": "NoSchedule"}],
    }
    spec.update(pod_spec)
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "shop", "labels": {"app": "web"}},
        "spec": {
            "replicas": 3,
            "selector": {"matchLabels": {"app": "web"}},
            "strategy": {"rollingUpdate": {"maxSurge": "25%", "maxUnavailable": 1}},
            "template": {
                "metadata": {
                    "labels": {"app": "web", "tier": "front"},
                    "annotations": {"kmc.dev/x": "y"},
                    "creationTimestamp": None,
                },
                "spec": spec,
            },
        },
        "status": {"replicas": 3, "whateverWeWrite": True},
    }


INIT = [{"name": "migrate", "image": "migrate:1", "command": ["sh", "-c", "migrate up"]}]


def test_a_normal_deployment_misses_nothing() -> None:
    assert index("apps-v1", "apps/v1", "Deployment").missing(deployment(initContainers=INIT)) == []


def test_an_unknown_field_in_the_pod_spec_is_reported_with_its_path() -> None:
    obj = deployment(hostPidNamespace=True)
    obj["spec"]["template"]["spec"]["containers"][0]["bogus"] = {"a": 1}
    assert index("apps-v1", "apps/v1", "Deployment").missing(obj) == [
        "spec.template.spec.containers[].bogus",
        "spec.template.spec.hostPidNamespace",
    ]


def test_a_location_without_init_containers_is_caught_only_for_objects_that_use_them() -> None:
    doc = openapi("apps-v1")
    del doc["components"]["schemas"]["io.k8s.api.core.v1.PodSpec"]["properties"]["initContainers"]
    old = index("apps-v1", "apps/v1", "Deployment", doc)
    assert old.missing(deployment(initContainers=INIT)) == ["spec.template.spec.initContainers"]
    assert old.missing(deployment()) == []


def test_unknown_fields_are_reported_at_the_shallowest_level_only() -> None:
    obj = deployment(futureFeature={"deep": {"deeper": [{"x": 1}, {"y": 2}]}}, other=[1, 2])
    assert index("apps-v1", "apps/v1", "Deployment").missing(obj) == [
        "spec.template.spec.futureFeature",
        "spec.template.spec.other",
    ]


def test_unknown_top_level_fields_count_but_metadata_and_status_never_do() -> None:
    apps = index("apps-v1", "apps/v1", "Deployment")
    obj = deployment()
    obj["metadata"]["madeUp"] = 1
    obj["status"]["madeUp"] = 1
    assert apps.missing(obj) == []
    obj["extra"] = {"x": 1}
    assert apps.missing(obj) == ["extra"]


def test_null_sets_nothing() -> None:
    assert index("apps-v1", "apps/v1", "Deployment").missing(deployment(madeUp=None)) == []


def test_map_keys_are_data_not_fields() -> None:
    apps = index("apps-v1", "apps/v1", "Deployment")
    obj = deployment(nodeSelector={"never.a.field/anywhere": "x"}, overhead={"weird": "1"})
    obj["spec"]["template"]["metadata"]["labels"]["not-a-field"] = "x"
    obj["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]["unheard.of/res"] = "2"
    assert apps.missing(obj) == []
    paths = apps.field_paths(obj)
    assert {
        "spec.selector.matchLabels",
        "spec.template.metadata.labels",
        "spec.template.spec.nodeSelector",
        "spec.template.spec.containers[].resources.limits",
    } <= paths
    assert not any("not-a-field" in p or "never.a.field" in p or "unheard" in p for p in paths)


def test_field_paths_are_leaves_with_list_items_marked() -> None:
    paths = field_paths(deployment(initContainers=INIT), index("apps-v1", "apps/v1", "Deployment"))
    assert {
        "spec.replicas",
        "spec.strategy.rollingUpdate.maxSurge",
        "spec.template.spec.initContainers[].image",
        "spec.template.spec.initContainers[].command[]",
        "spec.template.spec.volumes[].emptyDir",
        "spec.template.spec.containers[].readinessProbe.httpGet.port",
    } <= paths
    assert not any(p.split(".")[0] in {"apiVersion", "kind", "metadata", "status"} for p in paths)
    assert "spec.template.spec.initContainers" not in paths  # not a leaf


def test_field_paths_without_a_schema_cannot_tell_maps_from_objects() -> None:
    paths = field_paths(deployment())
    assert "spec.template.metadata.labels.tier" in paths
    assert "spec.template.spec.containers[].image" in paths
    assert "metadata.name" not in paths


@pytest.mark.parametrize(
    ("doc", "obj"),
    [
        (
            "apps-v1",
            {
                "apiVersion": "apps/v1",
                "kind": "StatefulSet",
                "spec": {
                    "serviceName": "db",
                    "replicas": 2,
                    "template": {"spec": {"containers": [{"name": "db", "image": "pg"}]}},
                    "volumeClaimTemplates": [
                        {
                            "metadata": {"name": "data"},
                            "spec": {
                                "accessModes": ["ReadWriteOnce"],
                                "resources": {"requests": {"storage": "1Gi"}},
                            },
                        }
                    ],
                },
            },
        ),
        (
            "batch-v1",
            {
                "apiVersion": "batch/v1",
                "kind": "CronJob",
                "spec": {
                    "schedule": "*/5 * * * *",
                    "jobTemplate": {
                        "spec": {
                            "completions": 4,
                            "parallelism": 2,
                            "template": {
                                "spec": {
                                    "restartPolicy": "Never",
                                    "containers": [{"name": "c", "image": "busybox"}],
                                }
                            },
                        }
                    },
                },
            },
        ),
        (
            "core-v1",
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "spec": {
                    "containers": [
                        {"name": "c", "image": "busybox", "securityContext": {"runAsUser": 1}}
                    ],
                    "affinity": {
                        "nodeAffinity": {
                            "requiredDuringSchedulingIgnoredDuringExecution": {
                                "nodeSelectorTerms": [
                                    {
                                        "matchExpressions": [
                                            {"key": "zone", "operator": "In", "values": ["a"]}
                                        ]
                                    }
                                ]
                            }
                        }
                    },
                },
            },
        ),
    ],
)
def test_other_real_kinds_miss_nothing(doc: str, obj: dict[str, Any]) -> None:
    assert index(doc, obj["apiVersion"], obj["kind"]).missing(obj) == []
    obj["spec"]["unknown"] = 1
    assert index(doc, obj["apiVersion"], obj["kind"]).missing(obj) == ["spec.unknown"]


def test_a_real_crd_schema_written_inline() -> None:
    location = index("kmc.dev-v1alpha1", "kmc.dev/v1alpha1", "Location")
    obj: dict[str, Any] = {
        "apiVersion": "kmc.dev/v1alpha1",
        "kind": "Location",
        "metadata": {"name": "us-east"},
        "spec": {
            "secretRef": {"name": "us-east"},
            "taints": [{"key": "spot", "effect": "NoSchedule"}],
        },
    }
    assert location.missing(obj) == []
    obj["spec"]["taints"][0]["tolerationSeconds"] = 5
    assert location.missing(obj) == ["spec.taints[].tolerationSeconds"]


def test_unknown_kind_or_version_has_no_index() -> None:
    assert SchemaIndex.from_openapi(_load("apps-v1"), "apps/v1", "Job") is None
    assert SchemaIndex.from_openapi(_load("apps-v1"), "apps/v1beta2", "Deployment") is None
    assert SchemaIndex.from_openapi(_load("core-v1"), "v1", "Deployment") is None
    assert SchemaIndex.from_openapi({}, "v1", "Pod") is None


def test_the_core_group_is_the_empty_group() -> None:
    assert SchemaIndex.from_openapi(_load("core-v1"), "v1", "ConfigMap") is not None
    assert SchemaIndex.from_openapi(_load("core-v1"), "core/v1", "ConfigMap") is None


def crd_doc(spec_schema: dict[str, Any], **schemas: Any) -> dict[str, Any]:
    """A small OpenAPI document in the shape the apiserver publishes for a CRD."""
    return {
        "components": {
            "schemas": {
                "com.example.v1.Widget": {
                    "type": "object",
                    "properties": {
                        "apiVersion": {"type": "string"},
                        "kind": {"type": "string"},
                        "metadata": {"type": "object"},
                        "spec": spec_schema,
                    },
                    "x-kubernetes-group-version-kind": [
                        {"group": "example.com", "version": "v1", "kind": "Widget"}
                    ],
                },
                **schemas,
            }
        }
    }


def widget(spec: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "example.com/v1",
        "kind": "Widget",
        "metadata": {"name": "w"},
        "spec": spec,
    }


def widget_index(spec_schema: dict[str, Any], **schemas: Any) -> SchemaIndex:
    built = SchemaIndex.from_openapi(crd_doc(spec_schema, **schemas), "example.com/v1", "Widget")
    assert built is not None
    return built


def test_preserve_unknown_fields_accepts_anything_below() -> None:
    free = widget_index({"type": "object", "x-kubernetes-preserve-unknown-fields": True})
    assert free.missing(widget({"anything": {"at": [{"all": 1}]}, "x": 2})) == []


def test_preserve_unknown_fields_beside_properties_still_checks_the_known_ones() -> None:
    schema = {
        "type": "object",
        "x-kubernetes-preserve-unknown-fields": True,
        "properties": {"size": {"type": "object", "properties": {"cpu": {"type": "string"}}}},
    }
    mixed = widget_index(schema)
    assert mixed.missing(widget({"free": {"a": 1}, "size": {"cpu": "1"}})) == []
    assert mixed.missing(widget({"size": {"gpu": "1"}})) == ["spec.size.gpu"]


def test_int_or_string_and_free_form_objects_are_leaves() -> None:
    schema = {
        "type": "object",
        "properties": {
            "port": {"x-kubernetes-int-or-string": True, "anyOf": [{"type": "integer"}]},
            "raw": {"type": "object"},
            "quantity": {"oneOf": [{"type": "string"}, {"type": "number"}]},
        },
    }
    leaves = widget_index(schema)
    obj = widget({"port": {"odd": 1}, "raw": {"a": {"b": 1}}, "quantity": "1Gi"})
    assert leaves.missing(obj) == []
    assert leaves.field_paths(obj) == {"spec.port", "spec.raw", "spec.quantity"}


def test_maps_of_objects_check_their_values() -> None:
    schema = {
        "type": "object",
        "properties": {
            "pools": {
                "type": "object",
                "additionalProperties": {
                    "type": "object",
                    "properties": {"size": {"type": "integer"}},
                },
            }
        },
    }
    pools = widget_index(schema)
    assert pools.missing(widget({"pools": {"a": {"size": 1}, "b": {"size": 2}}})) == []
    assert pools.missing(widget({"pools": {"a": {"size": 1, "zone": "x"}}})) == [
        "spec.pools{}.zone"
    ]


def test_recursive_refs_and_multi_part_all_of() -> None:
    node = {
        "type": "object",
        "properties": {
            "name": {"type": "string"},
            "children": {"type": "array", "items": {"$ref": "#/components/schemas/Node"}},
        },
    }
    extra = {"type": "object", "properties": {"weight": {"type": "integer"}}}
    spec = {
        "allOf": [
            {"$ref": "#/components/schemas/Node"},
            {"$ref": "#/components/schemas/Extra"},
        ]
    }
    tree = widget_index(spec, Node=node, Extra=extra)
    obj = widget({"name": "a", "weight": 1, "children": [{"name": "b", "children": [{}]}]})
    assert tree.missing(obj) == []
    obj["spec"]["children"][0]["children"] = [{"name": "c", "colour": "red"}]
    assert tree.missing(obj) == ["spec.children[].children[].colour"]


def test_unresolvable_refs_accept_rather_than_evacuate() -> None:
    dangling = widget_index({"$ref": "#/components/schemas/Gone"})
    assert dangling.missing(widget({"x": {"y": 1}})) == []


def test_embedded_resources_always_have_identity_and_metadata() -> None:
    schema = {
        "type": "object",
        "properties": {
            "template": {
                "type": "object",
                "x-kubernetes-embedded-resource": True,
                "properties": {
                    "spec": {"type": "object", "properties": {"n": {"type": "integer"}}}
                },
            }
        },
    }
    embedded = widget_index(schema)
    template = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {"n": 1}}
    assert embedded.missing(widget({"template": template})) == []
    template["spec"] = {"m": 1}
    assert embedded.missing(widget({"template": template})) == ["spec.template.spec.m"]
