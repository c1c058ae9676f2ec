"""An application's routes, volumes and priorities follow its workloads (issue #31, items 4, 7
and 8), with plain kubectl on the hub: an Ingress goes where the Services it names are (and
stays on the hub, saying why, while none is placed); a claim a pod template mounts goes where
the workload runs, its hub phase Bound once bound everywhere, and says when a ReadWriteOnce
claim is one volume per location; a StatefulSet's claim templates stay each child's; a
PriorityClass a pod template names goes with it; and deleting them leaves nothing behind."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from kmc_testbed import bed

from .conftest import CHILDREN, Kubectl
from .test_placement import with_strategy
from .test_services import wait_for
from .test_testbed import deployment

ORIGIN = "kmc.dev/origin-uid"


def in_children(
    kubectl: dict[str, Kubectl], resource: str, name: str, namespace: str | None = None
) -> dict[str, Any]:
    """Our copy of a hub object in each child that has one (origin label set), by location."""
    ns = ["-n", namespace] if namespace else []
    found = {}
    for child in CHILDREN:
        proc = kubectl[child].run("get", resource, name, *ns, "-o", "json", check=False)
        if proc.returncode == 0:
            obj = json.loads(proc.stdout)
            if ORIGIN in (obj["metadata"].get("labels") or {}):
                found[child] = obj
    return found


def found(kubectl: Kubectl, resource: str, name: str, namespace: str) -> dict[str, Any] | None:
    proc = kubectl.run("get", resource, name, "-n", namespace, "-o", "json", check=False)
    return json.loads(proc.stdout) if proc.returncode == 0 else None


def ours_left(kubectl: dict[str, Kubectl], resources: str, namespace: str) -> dict[str, str]:
    """What of ours is still in any child's namespace, by location."""
    left = {}
    for child in CHILDREN:
        proc = kubectl[child].run(
            "get", resources, "-n", namespace, "-l", ORIGIN, "-o", "name", check=False
        )
        if proc.stdout.strip():
            left[child] = proc.stdout.strip()
    return left


def events(hub: Kubectl, namespace: str, kind: str, name: str, reason: str) -> list[Any]:
    selector = f"involvedObject.kind={kind},involvedObject.name={name},reason={reason}"
    items: list[Any] = hub.json("get", "events", "-n", namespace, "--field-selector", selector)[
        "items"
    ]
    return items


def pinned(name: str, replicas: int, where: list[str], **pod_spec: Any) -> dict[str, Any]:
    obj = with_strategy(deployment(name, replicas), {"type": "Split", "pin": where})
    obj["spec"]["template"]["spec"].update(pod_spec)
    return obj


def ingress(name: str, service: str, tls_secret: str | None = None) -> dict[str, Any]:
    backend = {"service": {"name": service, "port": {"number": 80}}}
    spec: dict[str, Any] = {
        "rules": [
            {
                "host": f"{name}.example",
                "http": {"paths": [{"path": "/", "pathType": "Prefix", "backend": backend}]},
            }
        ]
    }
    if tls_secret:
        spec["tls"] = [{"hosts": [f"{name}.example"], "secretName": tls_secret}]
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "Ingress",
        "metadata": {"name": name},
        "spec": spec,
    }


def test_an_ingress_goes_where_its_services_are_and_waits_on_the_hub_for_them(
    installed: bed.State, kubectl: dict[str, Kubectl], namespace: str
) -> None:
    hub = kubectl["hub"]
    hub.apply(pinned("web", 2, ["us-east", "eu-west"]), namespace)
    hub.run("expose", "deployment", "web", "-n", namespace, "--port=80", "--target-port=8080")
    hub.run("create", "secret", "generic", "web-tls", "-n", namespace, "--from-literal=tls.crt=x")
    hub.apply(ingress("web", "web", tls_secret="web-tls"), namespace)
    hub.apply(ingress("lonely", "nope"), namespace)
    wait_for(
        lambda: in_children(kubectl, "ingress", "web", namespace).keys() == {"us-east", "eu-west"},
        say="the Ingress in the Service's locations, us-east and eu-west",
    )
    wait_for(
        lambda: (
            in_children(kubectl, "secret", "web-tls", namespace).keys() == {"us-east", "eu-west"}
        ),
        say="its TLS Secret with it",
    )
    placement = json.loads(
        hub.json("get", "ingress", "web", "-n", namespace)["metadata"]["annotations"][
            "kmc.dev/placement"
        ]
    )
    assert placement == {"eu-west": None, "us-east": None}
    # An Ingress whose Service is placed nowhere (there is none) stays on the hub, and says
    # so (an Ingress's status has no conditions: a Warning Event, as `kubectl describe` shows).
    event = wait_for(lambda: events(hub, namespace, "Ingress", "lonely", "NothingPlaced"))[0]
    assert event["type"] == "Warning" and "services/nope" in event["message"]
    assert not in_children(kubectl, "ingress", "lonely", namespace)
    # Its Service comes (selecting web's pods): it follows at once.
    hub.run("expose", "deployment", "web", "--name=nope", "-n", namespace, "--port=80")
    wait_for(
        lambda: (
            in_children(kubectl, "ingress", "lonely", namespace).keys() == {"us-east", "eu-west"}
        ),
        say="the lonely Ingress placed with its new Service",
    )
    # Everything deleted: nothing of ours is left in any child.
    hub.run("delete", "ingress,service,deployment,secret", "--all", "-n", namespace)
    wait_for(
        lambda: not ours_left(kubectl, "ingresses,services,deployments,secrets", namespace),
        say="nothing left in any child",
    )


def persistent_volume(name: str, namespace: str, claim: str) -> dict[str, Any]:
    """A volume made by hand in a child (kwok's have no provisioner), kept for one claim."""
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": name},
        "spec": {
            "capacity": {"storage": "1Gi"},
            "accessModes": ["ReadWriteOnce"],
            "persistentVolumeReclaimPolicy": "Retain",
            "storageClassName": "",
            "hostPath": {"path": f"/tmp/{name}"},
            "claimRef": {"namespace": namespace, "name": claim},
        },
    }


@pytest.fixture
def volumes(kubectl: dict[str, Kubectl], namespace: str) -> Iterator[str]:
    """A volume for the claim `data` in us-east and us-west; gone afterwards."""
    name = f"{namespace}-data"[:63]
    for child in ("us-east", "us-west"):
        kubectl[child].apply(persistent_volume(name, namespace, "data"))
    yield name
    for child in ("us-east", "us-west"):
        kubectl[child].run("delete", "pv", name, "--wait=false", "--ignore-not-found")


def test_a_claim_goes_where_its_workload_runs_is_bound_there_and_says_it_is_two_volumes(
    installed: bed.State, kubectl: dict[str, Kubectl], namespace: str, volumes: str
) -> None:
    hub = kubectl["hub"]
    claim = {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": "data"},
        "spec": {
            "accessModes": ["ReadWriteOnce"],
            "storageClassName": "",
            "resources": {"requests": {"storage": "1Gi"}},
        },
    }
    hub.apply(claim, namespace)
    mounts = {
        "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "data"}}],
    }
    db = pinned("db", 2, ["us-east", "us-west"], **mounts)
    db["spec"]["template"]["spec"]["containers"][0]["volumeMounts"] = [
        {"name": "data", "mountPath": "/data"}
    ]
    hub.apply(db, namespace)
    wait_for(
        lambda: in_children(kubectl, "pvc", "data", namespace).keys() == {"us-east", "us-west"},
        say="the claim in the workload's locations, us-east and us-west",
    )
    hub.run(
        "wait",
        "pvc/data",
        "-n",
        namespace,
        "--for=jsonpath={.status.phase}=Bound",
        "--timeout=180s",
    )
    hub.run("rollout", "status", "deployment/db", "-n", namespace, "--timeout=180s")
    status = hub.json("get", "pvc", "data", "-n", namespace)["status"]
    assert status["capacity"] == {"storage": "1Gi"} and status["accessModes"] == ["ReadWriteOnce"]
    events_seen = wait_for(
        lambda: events(hub, namespace, "PersistentVolumeClaim", "data", "VolumePerLocation"),
        say="a VolumePerLocation Event on the hub claim",
    )
    assert events_seen[0]["type"] == "Warning"
    message = events_seen[0]["message"]
    assert "ReadWriteOnce claim used in 2 locations (us-east, us-west)" in message
    # The workload leaves us-west: its claim there goes once the last of its pods has.
    db["metadata"]["annotations"]["kmc.dev/strategy"] = json.dumps(
        {"type": "Split", "pin": ["us-east"]}
    )
    hub.apply(db, namespace)
    wait_for(
        lambda: in_children(kubectl, "pvc", "data", namespace).keys() == {"us-east"},
        say="the claim in us-east only, after the move",
    )
    hub.run("rollout", "status", "deployment/db", "-n", namespace, "--timeout=180s")
    # Everything deleted: the children's claims go too.
    hub.run("delete", "deployment", "db", "-n", namespace)
    hub.run("delete", "pvc", "data", "-n", namespace, "--timeout=180s")
    wait_for(
        lambda: not ours_left(kubectl, "persistentvolumeclaims,deployments", namespace),
        say="no claim or Deployment of ours left in any child",
    )


def test_a_statefulsets_claim_templates_stay_each_childs_business(
    installed: bed.State, kubectl: dict[str, Kubectl], namespace: str
) -> None:
    hub = kubectl["hub"]
    labels = {"app": "cache"}
    template = {
        "metadata": {"name": "scratch"},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}},
    }
    sts = {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {"name": "cache", "labels": labels},
        "spec": {
            "replicas": 1,
            "serviceName": "cache",
            "selector": {"matchLabels": labels},
            "persistentVolumeClaimRetentionPolicy": {"whenDeleted": "Delete"},
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "containers": [
                        {
                            "name": "c",
                            "image": "registry.example/cache:1",
                            "volumeMounts": [{"name": "scratch", "mountPath": "/scratch"}],
                        }
                    ]
                },
            },
            "volumeClaimTemplates": [template],
        },
    }
    hub.apply(with_strategy(sts, {"type": "Split", "pin": ["eu-west"]}), namespace)
    child = wait_for(
        lambda: in_children(kubectl, "statefulset", "cache", namespace).get("eu-west"),
        say="the StatefulSet in eu-west",
    )
    assert [t["metadata"]["name"] for t in child["spec"]["volumeClaimTemplates"]] == ["scratch"]
    # The child's StatefulSet controller makes the claim there; it is not ours, nor the hub's.
    made = wait_for(
        lambda: found(kubectl["eu-west"], "pvc", "scratch-cache-0", namespace),
        say="the child's own claim scratch-cache-0 in eu-west",
    )
    assert ORIGIN not in (made["metadata"].get("labels") or {})
    proc = hub.run("get", "pvc", "-n", namespace, "-o", "name")
    assert not proc.stdout.strip()  # the hub holds no claim of it
    hub.run("delete", "statefulset", "cache", "-n", namespace)
    wait_for(
        lambda: not ours_left(kubectl, "statefulsets", namespace),
        say="the child StatefulSet gone",
    )


def test_a_priority_class_goes_with_the_pod_templates_that_name_it(
    installed: bed.State, kubectl: dict[str, Kubectl], namespace: str
) -> None:
    hub = kubectl["hub"]
    name = f"{namespace}-high"[:63]
    high = {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": name},
        "value": 1000,
        "description": "e2e: follows the workloads that name it",
    }
    hub.apply(high)
    try:
        hub.apply(pinned("web", 2, ["us-west", "eu-west"], priorityClassName=name), namespace)
        copies = wait_for(
            lambda: (
                (found := in_children(kubectl, "priorityclass", name)).keys()
                == {"us-west", "eu-west"}
                and found
            ),
            say="the PriorityClass in the workload's locations, us-west and eu-west",
        )
        assert {c["value"] for c in copies.values()} == {1000}
        hub.run("rollout", "status", "deployment/web", "-n", namespace, "--timeout=180s")
        for location in ("us-west", "eu-west"):
            pods = kubectl[location].json("get", "pods", "-n", namespace, "-l", "app=web")
            assert pods["items"] and {p["spec"].get("priority") for p in pods["items"]} == {1000}
        # Everything deleted: the class leaves every child with its last workload, and the hub.
        hub.run("delete", "deployment", "web", "-n", namespace)
        wait_for(
            lambda: not in_children(kubectl, "priorityclass", name),
            say="the PriorityClass gone from every child",
        )
        hub.run("delete", "priorityclass", name, "--timeout=120s")
        assert not ours_left(kubectl, "deployments", namespace)
    finally:
        hub.run("delete", "priorityclass", name, "--ignore-not-found", "--wait=false")
