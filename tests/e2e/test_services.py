"""Services follow the workloads their selector matches (`kubectl expose` on the hub), each
child allocates its own address, and the children's endpoints show on the hub as
EndpointSlices labelled with the location they come from."""

from __future__ import annotations

import json
from collections.abc import Callable
from functools import partial
from typing import Any

from kmc_testbed import bed

from .conftest import CHILDREN, Kubectl, run_testbed
from .test_locations import wait_until
from .test_placement import (
    placed_condition,
    wait_locations_settled,
    wait_placed_condition,
    with_strategy,
)
from .test_testbed import deployment

OURS = "endpointslice.kubernetes.io/managed-by=kmc.dev"


def wait_for(what: Callable[[], Any], timeout: float = 180, say: str = "") -> Any:
    """`wait_until`, with this file's generous default."""
    return wait_until(say or "a condition", what, timeout)


def child_services(kubectl: dict[str, Kubectl], namespace: str) -> dict[str, Any]:
    found = {}
    for child in CHILDREN:
        proc = kubectl[child].run(
            "get", "svc", "web", "-n", namespace, "-o", "json", "--show-managed-fields", check=False
        )
        if proc.returncode == 0:
            found[child] = json.loads(proc.stdout)
    return found


def sent_by_us(child: Any) -> list[Any]:
    """The fields kmc-apiserver's applies own in a child object."""
    return [
        entry.get("fieldsV1", {})
        for entry in child["metadata"].get("managedFields") or []
        if entry["manager"] == "kmc-sync"
    ]


def hub_slices(hub: Kubectl, namespace: str) -> dict[str, list[Any]]:
    """The hub's slices of `web`, by the location they come from."""
    items = hub.json(
        "get", "endpointslices", "-n", namespace, "-l", f"kubernetes.io/service-name=web,{OURS}"
    )["items"]
    by_location: dict[str, list[Any]] = {}
    for item in items:
        location = item["metadata"]["labels"]["multicluster.kubernetes.io/source-cluster"]
        by_location.setdefault(location, []).append(item)
    return by_location


def child_addresses(kubectl: Kubectl, namespace: str) -> set[str]:
    items = kubectl.json(
        "get", "endpointslices", "-n", namespace, "-l", "kubernetes.io/service-name=web"
    )["items"]
    return {a for item in items for e in item.get("endpoints") or [] for a in e["addresses"]}


def hub_addresses(slices: list[Any], ready: bool | None = None) -> set[str]:
    return {
        address
        for item in slices
        for endpoint in item.get("endpoints") or []
        if ready is None or endpoint["conditions"].get("ready") is ready
        for address in endpoint["addresses"]
    }


def test_a_service_goes_where_its_pods_run_and_their_endpoints_show_on_the_hub(
    installed: bed.State, kubectl: dict[str, Kubectl], namespace: str
) -> None:
    hub = kubectl["hub"]
    pinned = {"type": "Split", "pin": ["us-east", "eu-west"]}
    hub.apply(with_strategy(deployment("web", 2), pinned), namespace)
    hub.run("expose", "deployment", "web", "-n", namespace, "--port=80", "--target-port=8080")
    services = wait_for(
        lambda: (
            (found := child_services(kubectl, namespace)).keys() == {"us-east", "eu-west"} and found
        ),
        say="the Service in us-east and eu-west only",
    )
    # Each child allocated its own address: we never send one (the bed's /24 service ranges
    # can give a child the hub's address by chance, so compare owners, not values).
    for child, service in services.items():
        assert service["spec"]["clusterIP"] not in ("", "None"), child
        ours = sent_by_us(service)
        assert ours and "f:clusterIP" not in str(ours), (child, ours)
    # Decided when the Service went down, but written with its next status: until then the
    # hub may still say it selected nothing (it was created before web was placed).
    wait_placed_condition(
        hub,
        "service",
        "web",
        namespace,
        lambda c: c.get("status") == "True" and "deployments/web" in c["message"],
        timeout=180,
    )
    hub.run("rollout", "status", "deployment/web", "-n", namespace, "--timeout=180s")

    def mirrored(where: set[str]) -> dict[str, list[Any]]:
        slices = hub_slices(hub, namespace)
        if slices.keys() != where:
            return {}
        for location in where:
            want = child_addresses(kubectl[location], namespace)
            if not want or hub_addresses(slices[location], ready=True) != want:
                return {}
        return slices

    slices = wait_for(lambda: mirrored({"us-east", "eu-west"}), say="the hub's slices")
    assert all("nodeName" not in e for s in slices.values() for i in s for e in i["endpoints"])
    # web moves from eu-west to us-west: the Service and its endpoints follow.
    moved = {"type": "Split", "pin": ["us-east", "us-west"]}
    hub.apply(with_strategy(deployment("web", 2), moved), namespace)
    wait_for(
        lambda: child_services(kubectl, namespace).keys() == {"us-east", "us-west"},
        say="the Service in us-east and us-west only",
    )
    wait_for(lambda: mirrored({"us-east", "us-west"}), say="the hub's slices after the move")
    # Deleting the Service takes its children and the hub's slices.
    hub.run("delete", "svc", "web", "-n", namespace)
    wait_for(lambda: not child_services(kubectl, namespace), say="no child Service left")
    wait_for(lambda: not hub_slices(hub, namespace), say="no hub slice left")


def test_a_service_that_selects_nothing_placed_stays_on_the_hub_and_says_why(
    installed: bed.State, kubectl: dict[str, Kubectl], namespace: str
) -> None:
    hub = kubectl["hub"]
    hub.run("create", "service", "clusterip", "web", "-n", namespace, "--tcp=80:8080")
    condition = wait_for(lambda: placed_condition(hub, "service", "web", namespace))
    assert (condition["status"], condition["reason"]) == ("False", "NothingSelected")
    assert "stays on the hub" in condition["message"], condition["message"]
    # Nothing changed: no child has it, the hub mirrors no endpoints of it, and its spec
    # (its selector, its own clusterIP) is as it was made.
    assert not child_services(kubectl, namespace)
    assert not hub_slices(hub, namespace)
    assert hub.json("get", "service", "web", "-n", namespace)["spec"]["selector"] == {"app": "web"}


def test_an_unreachable_locations_endpoints_turn_not_ready_and_come_back(
    installed: bed.State, kubectl: dict[str, Kubectl], namespace: str
) -> None:
    hub = kubectl["hub"]
    wait_locations_settled(hub)
    hub.apply(with_strategy(deployment("web", 3), {"type": "Split"}), namespace)
    hub.run("expose", "deployment", "web", "-n", namespace, "--port=80", "--target-port=8080")
    hub.run("rollout", "status", "deployment/web", "-n", namespace, "--timeout=180s")

    def ready_in(location: str) -> set[str]:
        return hub_addresses(hub_slices(hub, namespace).get(location, []), ready=True)

    before = wait_for(lambda: ready_in("us-west"), say="us-west's endpoints ready on the hub")
    run_testbed("stop", "us-west")
    try:
        wait_for(
            lambda: (
                not ready_in("us-west")
                and hub_addresses(hub_slices(hub, namespace).get("us-west", []), ready=False)
                == before
            ),
            say="us-west's endpoints kept, not ready, after its grace",
        )
        assert ready_in("us-east") and ready_in("eu-west")  # the others are untouched
    finally:
        run_testbed("start", "us-west")
    wait_for(lambda: ready_in("us-west"), timeout=300, say="us-west's endpoints ready again")


def service(name: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name}, "spec": spec}


def test_headless_selectorless_and_load_balancer_services_each_keep_their_nature(
    installed: bed.State, kubectl: dict[str, Kubectl], namespace: str
) -> None:
    """Item 1's kinds of Service: headless stays headless; one without a selector (and an
    ExternalName) goes where the namespace's workloads run; a LoadBalancer's hub status lists
    every location's ingress points."""
    hub = kubectl["hub"]
    where = {"us-east", "eu-west"}
    hub.apply(
        with_strategy(deployment("web", 2), {"type": "Split", "pin": sorted(where)}), namespace
    )
    port = [{"port": 80, "targetPort": 8080}]
    hub.apply(service("heads", selector={"app": "web"}, clusterIP="None", ports=port), namespace)
    hub.apply(service("manual", ports=port), namespace)
    hub.apply(service("far", type="ExternalName", externalName="web.example"), namespace)
    hub.apply(service("lb", selector={"app": "web"}, type="LoadBalancer", ports=port), namespace)

    def copies(name: str) -> dict[str, Any]:
        found = {}
        for child in CHILDREN:
            proc = kubectl[child].run(
                "get", "svc", name, "-n", namespace, "-o", "json", check=False
            )
            if proc.returncode == 0:
                found[child] = json.loads(proc.stdout)
        return found

    for name in ("heads", "manual", "far", "lb"):
        wait_for(
            partial(lambda n: copies(n).keys() == where, name), say=f"service {name} in {where}"
        )
    assert all(s["spec"]["clusterIP"] == "None" for s in copies("heads").values())
    assert all(s["spec"]["externalName"] == "web.example" for s in copies("far").values())
    # What each location's load balancer gives (no cloud controller here: set as one would).
    points = {"us-east": "192.0.2.1", "eu-west": "192.0.2.2"}
    for child, ip in points.items():
        kubectl[child].run(
            "patch", "svc", "lb", "-n", namespace, "--subresource=status", "--type=merge",
            "-p", json.dumps({"status": {"loadBalancer": {"ingress": [{"ip": ip}]}}}),
        )  # fmt: skip

    def hub_points() -> set[str]:
        status = hub.json("get", "svc", "lb", "-n", namespace).get("status") or {}
        return {p["ip"] for p in (status.get("loadBalancer") or {}).get("ingress") or []}

    wait_for(lambda: hub_points() == set(points.values()), say="every location's ingress point")
