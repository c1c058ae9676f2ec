"""A Gateway API HTTPRoute follows the Services its backends name (issue #31, item 4), with
plain kubectl on the hub: the children serve the Gateway API's CRDs, the hub serves
HTTPRoutes once the import loop has imported them, and a route goes to exactly the locations
its Service is in, moves with it, folds its children's `status.parents`, stays on the hub
(saying why) while it names nothing placed, and leaves the children when deleted."""

from __future__ import annotations

import json
from typing import Any

from kmc_testbed import bed

from .conftest import CHILDREN, Kubectl
from .test_ingress_volumes import events, in_children, ours_left, pinned
from .test_placement import placement_of, wait_locations_settled
from .test_services import wait_for

CRD = "httproutes.gateway.networking.k8s.io"
GROUP = "gateway.networking.k8s.io"


def http_route(name: str, *services: str) -> dict[str, Any]:
    return {
        "apiVersion": f"{GROUP}/v1",
        "kind": "HTTPRoute",
        "metadata": {"name": name},
        "spec": {
            "parentRefs": [{"name": "gw"}],
            "hostnames": [f"{name}.example"],
            "rules": [
                {
                    "matches": [{"path": {"type": "PathPrefix", "value": "/"}}],
                    "backendRefs": [{"name": service, "port": 80} for service in services],
                }
            ],
        },
    }


def served(hub: Kubectl) -> bool:
    """Does the hub serve HTTPRoutes (the import loop made its CRD, and it is established)?"""
    proc = hub.run("get", "crd", CRD, "-o", "json", check=False)
    if proc.returncode != 0:
        return False
    conditions = (json.loads(proc.stdout).get("status") or {}).get("conditions") or []
    return any(c["type"] == "Established" and c["status"] == "True" for c in conditions)


def accepted(controller: str, when: str, status: str = "True") -> dict[str, Any]:
    """A route's status as a gateway controller in a child writes it."""
    return {
        "status": {
            "parents": [
                {
                    "parentRef": {"group": GROUP, "kind": "Gateway", "name": "gw"},
                    "controllerName": controller,
                    "conditions": [
                        {
                            "type": "Accepted",
                            "status": status,
                            "reason": "Accepted" if status == "True" else "NoMatchingParent",
                            "message": "",
                            "lastTransitionTime": when,
                        }
                    ],
                }
            ]
        }
    }


def test_an_http_route_goes_where_its_service_is_moves_with_it_and_leaves(
    installed: bed.State, kubectl: dict[str, Kubectl], namespace: str
) -> None:
    hub = kubectl["hub"]
    for child in CHILDREN:  # the bed's children serve the Gateway API, as their users install it
        assert kubectl[child].run("get", "crd", CRD, check=False).returncode == 0, child
    wait_for(lambda: served(hub), say="the hub serving HTTPRoutes (imported from the children)")
    wait_locations_settled(hub)
    hub.apply(pinned("web", 2, ["us-east"]), namespace)
    hub.run("expose", "deployment", "web", "-n", namespace, "--port=80", "--target-port=8080")
    hub.apply(http_route("web", "web"), namespace)
    hub.apply(http_route("lonely", "nope"), namespace)
    hub.run("rollout", "status", "deployment/web", "-n", namespace, "--timeout=180s")
    wait_for(
        lambda: in_children(kubectl, "httproute", "web", namespace).keys() == {"us-east"},
        say="the route in its Service's location, us-east, only",
    )
    assert placement_of(hub, "httproute", "web", namespace) == {"us-east": None}

    # A route whose Service is placed nowhere (there is none) stays on the hub, and says so.
    event = wait_for(lambda: events(hub, namespace, "HTTPRoute", "lonely", "NothingPlaced"))[0]
    assert event["type"] == "Warning" and "services/nope" in event["message"]
    assert not in_children(kubectl, "httproute", "lonely", namespace)

    # What a gateway controller in the child says of the route shows on the hub.
    kubectl["us-east"].run(
        "patch", "httproute", "web", "-n", namespace, "--subresource=status", "--type=merge",
        "-p", json.dumps(accepted("example.net/gateway", "2026-01-01T00:00:00Z")),
    )  # fmt: skip

    def parents() -> list[Any]:
        route = hub.json("get", "httproute", "web", "-n", namespace)
        found: list[Any] = (route.get("status") or {}).get("parents") or []
        return found

    (parent,) = wait_for(parents, say="the child's status.parents on the hub")
    assert parent["controllerName"] == "example.net/gateway"
    (condition,) = parent["conditions"]
    assert (condition["type"], condition["status"]) == ("Accepted", "True")
    assert condition["message"] == "True in us-east"

    # The workload moves: its Service, and the route with it, go to us-west and leave us-east.
    hub.mc("move", "deployment/web", "--to", "us-west", "--wait", "-n", namespace)
    wait_for(
        lambda: in_children(kubectl, "httproute", "web", namespace).keys() == {"us-west"},
        say="the route moved with its Service to us-west",
    )
    assert in_children(kubectl, "service", "web", namespace).keys() == {"us-west"}
    wait_for(lambda: not parents(), say="us-east's parents gone from the hub with its copy")

    # Deleted on the hub: nothing of ours is left in any child.
    hub.run("delete", "httproute,service,deployment", "--all", "-n", namespace)
    wait_for(
        lambda: not ours_left(kubectl, f"httproutes.{GROUP},services,deployments", namespace),
        say="nothing left in any child",
    )


def serves_routes(hub: Kubectl, location: str) -> bool:
    """Does the Location's probe say it serves HTTPRoute?"""
    status = hub.json("get", "location", location).get("status") or {}
    return f"{GROUP}/v1/HTTPRoute" in (status.get("resources") or [])


def test_an_http_route_is_not_sent_where_its_kind_is_not_served(
    installed: bed.State, kubectl: dict[str, Kubectl], namespace: str
) -> None:
    """Its Service goes to both of the workload's locations; the route only where HTTPRoute
    is served, and follows once it is (the CRD installed there again)."""
    hub = kubectl["hub"]
    wait_for(lambda: served(hub), say="the hub serving HTTPRoutes (imported from the children)")
    wait_locations_settled(hub)
    lacking = "eu-west"
    kubectl[lacking].run("delete", "crd", CRD, "--timeout=120s")
    try:
        wait_for(lambda: not serves_routes(hub, lacking), say=f"{lacking} not serving HTTPRoute")
        hub.apply(pinned("web", 2, ["us-east", lacking]), namespace)
        hub.run("expose", "deployment", "web", "-n", namespace, "--port=80", "--target-port=8080")
        hub.apply(http_route("web", "web"), namespace)
        wait_for(
            lambda: (
                in_children(kubectl, "service", "web", namespace).keys() == {"us-east", lacking}
            ),
            say="the Service in both of its workload's locations",
        )
        wait_for(
            lambda: in_children(kubectl, "httproute", "web", namespace).keys() == {"us-east"},
            say="the route in us-east only",
        )
        assert placement_of(hub, "httproute", "web", namespace) == {"us-east": None}
        event = wait_for(lambda: events(hub, namespace, "HTTPRoute", "web", "NotServed"))[0]
        assert event["type"] == "Warning", event
        assert f"not sent to {lacking}: HTTPRoute is not served there" in event["message"]
    finally:
        bed.ensure_gateway_api_crds(installed.cluster(lacking))
    wait_for(lambda: serves_routes(hub, lacking), say=f"{lacking} serving HTTPRoute again")
    wait_for(
        lambda: in_children(kubectl, "httproute", "web", namespace).keys() == {"us-east", lacking},
        say=f"the route following its Service to {lacking} once HTTPRoute is served there",
    )
    hub.run("delete", "httproute,service,deployment", "--all", "-n", namespace)
    wait_for(
        lambda: not ours_left(kubectl, f"httproutes.{GROUP},services,deployments", namespace),
        say="nothing left in any child",
    )
