"""Multi-Cluster Services API: a ServiceExport of a hub Service gives every location the Service
is in a ServiceImport and the other locations' ready endpoints, and takes them away again."""

from __future__ import annotations

import json
from typing import Any

from kmc_testbed import bed

from .conftest import CHILDREN, Kubectl
from .test_placement import wait_locations_settled, with_strategy
from .test_services import child_addresses, wait_for
from .test_testbed import deployment

MCS_NAME = "multicluster.kubernetes.io/service-name"
SOURCE = "multicluster.kubernetes.io/source-cluster"
DERIVED = f"{MCS_NAME}=web,endpointslice.kubernetes.io/managed-by=kmc.dev"


def export(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "multicluster.x-k8s.io/v1alpha1",
        "kind": "ServiceExport",
        "metadata": {"name": name},
    }


def condition(hub: Kubectl, name: str, namespace: str, type_: str) -> dict[str, Any]:
    obj = hub.json("get", "serviceexports.multicluster.x-k8s.io", name, "-n", namespace)
    conditions = (obj.get("status") or {}).get("conditions") or []
    return next((c for c in conditions if c["type"] == type_), {})


def imported(child: Kubectl, namespace: str) -> dict[str, Any] | None:
    proc = child.run(
        "get", "serviceimports.multicluster.x-k8s.io", "web", "-n", namespace, "-o", "json",
        check=False,
    )  # fmt: skip
    if proc.returncode != 0:
        assert "NotFound" in proc.stderr, proc.stderr
        return None
    found: dict[str, Any] = json.loads(proc.stdout)
    return found


def derived(child: Kubectl, namespace: str) -> dict[str, set[str]]:
    """The derived slices of web in a location: ready addresses by the location they name."""
    items = child.json("get", "endpointslices", "-n", namespace, "-l", DERIVED)["items"]
    by_source: dict[str, set[str]] = {}
    for item in items:
        assert "kubernetes.io/service-name" not in item["metadata"]["labels"]
        addresses = by_source.setdefault(item["metadata"]["labels"][SOURCE], set())
        for endpoint in item.get("endpoints") or []:
            assert endpoint.get("conditions", {}).get("ready") is not False
            addresses |= set(endpoint["addresses"])
    return by_source


def test_an_exported_service_is_imported_everywhere_with_the_other_locations_endpoints(
    installed: bed.State, kubectl: dict[str, Kubectl], namespace: str
) -> None:
    hub = kubectl["hub"]
    # An export of a Service that does not exist says so, and puts nothing anywhere.
    hub.apply(export("ghost"), namespace)
    missing = wait_for(
        lambda: condition(hub, "ghost", namespace, "Valid") or None,
        say="the ghost export's Valid condition",
    )
    assert (missing["status"], missing["reason"]) == ("False", "ServiceNotFound")
    assert "does not exist" in missing["message"]

    wait_locations_settled(hub)
    hub.apply(with_strategy(deployment("web", 3), {"type": "Split"}), namespace)
    hub.run("expose", "deployment", "web", "-n", namespace, "--port=80", "--target-port=8080")
    hub.run("rollout", "status", "deployment/web", "-n", namespace, "--timeout=300s")
    hub.apply(export("web"), namespace)
    hub.run(
        "wait", "--for=condition=Ready", "serviceexports.multicluster.x-k8s.io/web",
        "-n", namespace, "--timeout=300s",
    )  # fmt: skip
    ready = condition(hub, "web", namespace, "Ready")
    assert ready["message"] == f"imported in {', '.join(sorted(CHILDREN))}"

    def everywhere() -> bool:
        own = {child: child_addresses(kubectl[child], namespace) for child in CHILDREN}
        if not all(own.values()):
            return False
        for child in CHILDREN:
            others = {other: own[other] for other in CHILDREN if other != child}
            if (
                imported(kubectl[child], namespace) is None
                or derived(kubectl[child], namespace) != others
            ):
                return False
        return True

    wait_for(everywhere, timeout=300, say="each location's import and the others' endpoints")
    for child in CHILDREN:
        found = imported(kubectl[child], namespace)
        assert found is not None
        assert found["spec"]["type"] == "ClusterSetIP"
        assert found["spec"]["ports"] == [{"port": 80, "protocol": "TCP"}]
    # The export is not placed itself: it carries none of our placement marks.
    annotations = (
        hub.json("get", "serviceexports.multicluster.x-k8s.io", "web", "-n", namespace)[
            "metadata"
        ].get("annotations")
        or {}
    )
    assert not [k for k in annotations if k.startswith("kmc.dev/")]

    # Unexported: every location's import and derived slices go; the Service stays.
    hub.run("delete", "serviceexports.multicluster.x-k8s.io", "web", "-n", namespace)
    wait_for(
        lambda: all(
            imported(kubectl[c], namespace) is None and not derived(kubectl[c], namespace)
            for c in CHILDREN
        ),
        timeout=300,
        say="no import and no derived slice left in any location",
    )
    assert all(child_addresses(kubectl[c], namespace) for c in CHILDREN)

    # Everything gone: nothing of the export is left in any child.
    hub.run("delete", "serviceexports.multicluster.x-k8s.io", "ghost", "-n", namespace)
    hub.run("delete", "service", "web", "-n", namespace)
    hub.run("delete", "deployment", "web", "-n", namespace)
    for child in CHILDREN:
        left = kubectl[child].run(
            "get", "serviceimports.multicluster.x-k8s.io,endpointslices", "-n", namespace,
            "-l", "endpointslice.kubernetes.io/managed-by=kmc.dev", "-o", "name", check=False,
        )  # fmt: skip
        assert left.stdout.strip() == "", f"{child}: {left.stdout}"
        assert imported(kubectl[child], namespace) is None
