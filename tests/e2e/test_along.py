"""What went with a workload shows where people look (issue #31, item 10): its `locations`
sub-resource and `kubectl mc describe` list, per location, the ConfigMap its pods read and the
Service that selects them; describing either says which workload it goes with and where; and
when the workload moves, they follow it and say so in Events on the hub objects."""

from __future__ import annotations

import json
from typing import Any

from kmc_testbed import bed

from .conftest import Kubectl
from .test_placement import wait_locations_settled, with_strategy
from .test_services import wait_for
from .test_testbed import deployment

TWO = ("eu-west", "us-east")


def _app(hub: Kubectl, namespace: str) -> None:
    hub.apply(
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "web-config"},
            "data": {"greeting": "hello"},
        },
        namespace,
    )
    web = with_strategy(deployment("web", 2), {"type": "Split", "pin": list(TWO)})
    container = web["spec"]["template"]["spec"]["containers"][0]
    container["envFrom"] = [{"configMapRef": {"name": "web-config"}}]
    hub.apply(web, namespace)
    hub.run("expose", "deployment", "web", "-n", namespace, "--port=80", "--target-port=8080")


def _along(hub: Kubectl, namespace: str) -> dict[str, set[tuple[str, str, bool]]]:
    """The locations sub-resource as plain kubectl reads it: per location, what went there."""
    out = hub.run(
        "get",
        "deployments.mc.kmc.dev",
        "web",
        "-n",
        namespace,
        "--subresource",
        "locations",
        "-o",
        "json",
    ).stdout
    placement: dict[str, Any] = json.loads(out)
    return {
        row["location"]: {(a["kind"], a["name"], a["present"]) for a in row.get("along", [])}
        for row in placement["locations"]
    }


def _went_along(described: str) -> set[tuple[str, str]]:
    """(location, object) rows of the describe's "Went Along:" section."""
    return _section(described, "Went Along:")


def _section(described: str, title: str) -> set[tuple[str, str]]:
    """The first two columns of a describe's section's rows."""
    lines = described.splitlines()
    found = set()
    for line in lines[lines.index(title) + 3 :]:
        if not line.startswith("  "):
            break
        first, second = line.split()[:2]
        found.add((first, second))
    return found


def _events(hub: Kubectl, namespace: str, name: str, kind: str) -> dict[str, list[str]]:
    """The hub's Events on one object: reason -> messages."""
    items = hub.json(
        "get",
        "events",
        "-n",
        namespace,
        "--field-selector",
        f"involvedObject.name={name},involvedObject.kind={kind}",
    )["items"]
    found: dict[str, list[str]] = {}
    for event in items:
        found.setdefault(event["reason"], []).append(event["message"])
    return found


def test_describe_and_locations_list_what_went_with_a_workload_and_followers_say_they_moved(
    installed: bed.State, kubectl: dict[str, Kubectl], namespace: str
) -> None:
    hub = kubectl["hub"]
    _app(hub, namespace)
    hub.run("rollout", "status", "deployment/web", "-n", namespace, "--timeout=300s")
    wanted = {("ConfigMap", "web-config", True), ("Service", "web", True)}

    def everything_there() -> dict[str, set[tuple[str, str, bool]]]:
        along = _along(hub, namespace)
        ok = set(along) == set(TWO) and all(wanted <= went for went in along.values())
        return along if ok else {}

    along = wait_for(everything_there, timeout=240, say="ConfigMap and Service in both")
    assert all(kind in ("ConfigMap", "Service") for went in along.values() for kind, *_ in went)
    described = hub.mc("describe", "deployment/web", "-n", namespace).stdout
    assert _went_along(described) == {
        (location, obj) for location in TWO for obj in ("configmap/web-config", "service/web")
    }, described
    for kind, name in (("ConfigMap", "web-config"), ("Service", "web")):
        assert _events(hub, namespace, name, kind) == {}  # a first placement says nothing
    # Each follower, described, says which workload it goes with, and where.
    for typed in ("service/web", "configmap/web-config"):
        described = hub.mc("describe", typed, "-n", namespace).stdout
        assert _section(described, "Goes With:") == {
            ("deployments/web", location) for location in TWO
        }, described

    # Moved: what went with it follows, and says so on the hub objects.
    wait_locations_settled(hub)  # a location that joined moments ago cools down first
    hub.mc("move", "deployment/web", "--to", "us-west", "--wait", "-n", namespace)

    def followed() -> dict[str, set[tuple[str, str, bool]]]:
        along = _along(hub, namespace)
        return along if set(along) == {"us-west"} and wanted <= along["us-west"] else {}

    wait_for(followed, timeout=240, say="ConfigMap and Service followed to us-west")
    described = hub.mc("describe", "deployment/web", "-n", namespace).stdout
    assert _went_along(described) == {
        ("us-west", "configmap/web-config"),
        ("us-west", "service/web"),
    }, described
    for kind, name in (("ConfigMap", "web-config"), ("Service", "web")):

        def both_said(kind: str = kind, name: str = name) -> dict[str, list[str]]:
            said = _events(hub, namespace, name, kind)
            return said if said.keys() >= {"Followed", "Left"} else {}

        said = wait_for(both_said, timeout=120, say=f"{kind} {name}: Followed and Left")
        assert "went to us-west with deployments/web" in said["Followed"], said
        left = {
            location.strip()
            for message in said["Left"]
            for location in message.removeprefix("left ").split(":")[0].split(",")
        }
        assert left == {"eu-west", "us-east"}, said
    described = hub.mc("describe", "configmap/web-config", "-n", namespace).stdout
    assert _section(described, "Goes With:") == {("deployments/web", "us-west")}, described
    assert "Followed" in described.split("Events:", 1)[1], described
