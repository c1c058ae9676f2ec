"""Per-location overrides, the object form (`Override`, `ClusterOverride`), on the real bed with
plain kubectl: each location's child gets the rules of the overrides that select it, a
ClusterOverride's before a namespace's (whatever its priority), then by priority and name, the
object's own annotation last; an Override's change reaches the children; deleting the
overrides returns the children to the plain object; a malformed Override is refused at the
door with the field named; a ClusterOverride reaches a cluster-scoped object placed by its
strategy, and `kubectl mc diff -f` shows it before it is applied."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from kmc_testbed import bed

from .conftest import CHILDREN, Kubectl
from .test_cluster_scoped import US, cluster_role, fresh
from .test_ingress_volumes import in_children
from .test_overrides import (
    OVERRIDES,
    TIMEOUT,
    container,
    env,
    headers,
    wait_for,
    wait_overridden,
    web,
)
from .test_placement import wait_placement
from .test_services import wait_for as wait_for_it
from .test_sync import child_deployments

DEPLOYMENT = {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}


def override(name: str, rules: list[Any], priority: int = 0, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "kmc.dev/v1alpha1",
        "kind": "Override",
        "metadata": {"name": name},
        "spec": {"targets": [DEPLOYMENT], "priority": priority, "rules": rules, **spec},
    }


def wait_status(
    hub: Kubectl, what: list[str], ok: Callable[[dict[str, Any]], bool]
) -> dict[str, Any]:
    """An override's status once `ok` holds for it."""
    deadline = time.monotonic() + TIMEOUT
    while True:
        status = hub.json("get", *what).get("status") or {}
        if ok(status):
            return status
        assert time.monotonic() < deadline, f"{' '.join(what)}: status stayed {status}"
        time.sleep(0.5)


def counts(status: dict[str, Any]) -> dict[str, int]:
    return {row["name"]: row["objects"] for row in status.get("locations") or []}


def site(value: str, **more: str) -> list[Any]:
    return [{"env": {"set": {"SITE": value, **more}}}]


@pytest.fixture
def cluster_override(kubectl: dict[str, Kubectl], namespace: str) -> Iterator[str]:
    """The name of a ClusterOverride this test may make (for its namespace only), deleted
    after it."""
    name = f"e2e-{namespace}"[:63]
    yield name
    kubectl["hub"].run("delete", "clusteroverride", name, "--ignore-not-found", check=False)


def test_override_objects_in_order_changed_and_deleted(
    installed: bed.State, kubectl: dict[str, Kubectl], namespace: str, cluster_override: str
) -> None:
    hub = kubectl["hub"]
    hub.apply(web({"eu-west": [{"env": {"set": {"SITE": "annotation"}}}]}), namespace)
    wait_placement(hub, "deployment", "web", namespace, lambda p: len(p) == 3)

    # A ClusterOverride for this namespace alone, at a priority above every Override: it still
    # applies first, so the namespace's own word comes last.
    admin = override(
        cluster_override,
        site("cluster", TIER="cluster"),
        priority=100,
        namespaceSelector={"matchLabels": {"kubernetes.io/metadata.name": namespace}},
    )
    admin["kind"] = "ClusterOverride"
    hub.run("apply", "-f", "-", stdin=json.dumps(admin))
    us = {"locationSelector": {"matchLabels": {"topology.kubernetes.io/region": "us"}}}
    hub.apply(override("region-us", site("${location.name}"), locations=us), namespace)
    # Same priority in us-west: by name, so "west" has the last word over "a-west".
    west = {"names": ["us-west"]}
    hub.apply(override("west", site("west"), priority=5, locations=west), namespace)
    hub.apply(override("a-west", site("a-west"), priority=5, locations=west), namespace)
    expected = {
        "eu-west": {"SITE": "annotation", "TIER": "cluster"},  # the annotation is last
        "us-east": {"SITE": "us-east", "TIER": "cluster"},
        "us-west": {"SITE": "west", "TIER": "cluster"},
    }
    wait_for(
        kubectl,
        namespace,
        lambda cs: {loc: env(c) for loc, c in cs.items()} == expected,
        "the overrides in order",
    )
    wait_overridden(hub, namespace, lambda c: c["status"] == "True" and c["reason"] == "Applied")
    # The locations sub-resource names them per location, in the order they apply.
    sub = ["deployments.mc.kmc.dev", "web", "-n", namespace, "--subresource", "locations"]
    placement = hub.json("get", *sub)
    applied = {row["location"]: row["overrides"] for row in placement["locations"]}
    admin_name = f"ClusterOverride {cluster_override}"
    assert applied == {
        "eu-west": [admin_name, OVERRIDES],
        "us-east": [admin_name, f"Override {namespace}/region-us"],
        "us-west": [
            admin_name,
            f"Override {namespace}/region-us",
            f"Override {namespace}/a-west",
            f"Override {namespace}/west",
        ],
    }
    printed = hub.run("get", *sub).stdout
    assert "OVERRIDES" in printed.splitlines()[0]
    assert f"{admin_name}, {OVERRIDES}" in printed

    # Status: per location the objects it applies to; two at one priority setting one path.
    wait_status(
        hub, ["override", "region-us", "-n", namespace],
        lambda st: counts(st) == {"us-east": 1, "us-west": 1} and st.get("observedGeneration") == 1,
    )  # fmt: skip
    wait_status(
        hub, ["clusteroverride", cluster_override],
        lambda st: counts(st) == {"eu-west": 1, "us-east": 1, "us-west": 1},
    )  # fmt: skip
    conflict = {
        "object": f"Deployment {namespace}/web",
        "location": "us-west",
        "path": "containers/*/env/SITE",
        "other": f"Override {namespace}/a-west",
    }
    wait_status(
        hub, ["override", "west", "-n", namespace], lambda st: st.get("conflicts") == [conflict]
    )
    shown = hub.json("get", "overrides", "-n", namespace)["items"]
    assert sorted(o["metadata"]["name"] for o in shown) == ["a-west", "region-us", "west"]
    assert hub.run("get", "ovr", "-n", namespace).returncode == 0  # the short name

    # A change reaches the children it targets.
    changed = override("region-us", site("v2-${location.name}"), locations=us)
    hub.apply(changed, namespace)
    wait_for(
        kubectl,
        namespace,
        lambda cs: (
            env(cs["us-east"]) == {"SITE": "v2-us-east", "TIER": "cluster"}
            and env(cs["us-west"])["SITE"] == "west"
        ),
        "after region-us changed",
    )

    # A rule that cannot apply in eu-west: listed in its status, that child kept as it was.
    broken = [{"patch": [{"op": "replace", "path": "/spec/nope", "value": 1}]}]
    hub.apply(override("broken", broken, locations={"names": ["eu-west"]}), namespace)
    status = wait_status(
        hub, ["override", "broken", "-n", namespace], lambda st: bool(st.get("failures"))
    )
    (failure,) = status["failures"]
    assert failure["object"] == f"Deployment {namespace}/web" and failure["location"] == "eu-west"
    assert failure["rule"] == "spec.rules[0] (patch)"
    assert "replace /spec/nope: no such path" in failure["error"]
    wait_overridden(hub, namespace, lambda c: c["status"] == "False")

    # Deleted, one by one: each child gets what is left, and then the plain object.
    hub.run("delete", "override", "west", "-n", namespace)
    wait_for(
        kubectl,
        namespace,
        lambda cs: env(cs["us-west"]) == {"SITE": "a-west", "TIER": "cluster"},
        "after west was deleted",
    )
    hub.run("delete", "overrides", "--all", "-n", namespace)
    hub.run("delete", "clusteroverride", cluster_override)
    hub.run("annotate", "deployment/web", "-n", namespace, f"{OVERRIDES}-")
    wait_for(
        kubectl,
        namespace,
        lambda cs: all(env(c) == {} for c in cs.values()),
        "after every override was deleted",
    )
    wait_overridden(hub, namespace, lambda c: c["reason"] == "NoOverrides")


def test_a_malformed_override_is_refused_with_the_field_named(
    installed: bed.State, kubectl: dict[str, Kubectl], namespace: str
) -> None:
    hub = kubectl["hub"]
    cases = {
        "unknown-rule": (
            override("bad", [{"imagee": {"tag": "2"}}]),
            'Override NS/bad: spec.rules[0]: unknown rule "imagee": write one of image,',
        ),
        "replicas": (
            override("bad", [{"patch": [{"op": "replace", "path": "/spec/replicas", "value": 1}]}]),
            "spec.rules[0].patch[0]: /spec/replicas is the placement's",
        ),
        "bad-selector": (
            override(
                "bad",
                site("x"),
                locations={
                    "locationSelector": {"matchExpressions": [{"key": "a", "operator": "In"}]}
                },
            ),
            "spec.locations.locationSelector.matchExpressions[0]",
        ),
    }
    for what, (manifest, expected) in cases.items():
        refused = hub.run(
            "apply", "-n", namespace, "-f", "-", stdin=json.dumps(manifest), check=False
        )
        assert refused.returncode == 1, f"{what}: {refused.stdout}"
        assert 'admission webhook "override-objects.kmc.dev" denied the request' in refused.stderr
        assert expected.replace("NS", namespace) in refused.stderr, refused.stderr
    assert hub.json("get", "overrides", "-n", namespace)["items"] == []  # nothing changed


def test_a_move_carries_the_destinations_override_objects_and_diff_shows_them(
    installed: bed.State, kubectl: dict[str, Kubectl], namespace: str
) -> None:
    hub = kubectl["hub"]
    hub.apply(override("east", site("east"), locations={"names": ["us-east"]}), namespace)
    mirror = [{"image": {"registry": "mirror.eu.example"}}]
    hub.apply(override("eu", mirror, locations={"names": ["eu-west"]}), namespace)
    obj = web(None)
    obj["metadata"]["annotations"] = {
        "kmc.dev/strategy": json.dumps({"type": "Split", "pin": ["us-east"]})
    }
    hub.apply(obj, namespace)
    wait_placement(hub, "deployment", "web", namespace, lambda p: set(p) == {"us-east"})
    deadline = time.monotonic() + TIMEOUT
    while True:
        east = child_deployments(kubectl, "web", namespace).get("us-east")
        if east is not None and env(east) == {"SITE": "east"}:
            break
        assert time.monotonic() < deadline, "us-east never got its Override"
        time.sleep(0.5)
    hub.mc(
        "move", "deployment/web", "--to", "eu-west", "--wait", "--timeout", "5m", "-n", namespace
    )
    children = child_deployments(kubectl, "web", namespace)
    assert set(children) == {"eu-west"}
    moved = container(children["eu-west"])
    assert moved["image"] == "mirror.eu.example/web:1"
    assert "env" not in moved  # us-east's Override stayed with us-east
    # kubectl mc diff shows what eu-west gets from the Override, as the child holds it.
    diff = hub.mc("diff", "web", "-n", namespace, "--location", "eu-west", check=False)
    assert diff.returncode == 1, diff.stderr
    added = [line for line in diff.stdout.splitlines() if line.startswith("+")]
    assert any("image: mirror.eu.example/web:1" in line for line in added), diff.stdout


def test_a_cluster_override_reaches_a_cluster_role_placed_by_its_strategy(
    installed: bed.State, kubectl: dict[str, Kubectl], cluster_override: str, tmp_path: Path
) -> None:
    """A ClusterOverride targets a cluster-scoped object placed by its strategy: `diff -f`
    shows what it would change before it is applied, the selected locations' copies get its
    rules once it is, and deleting it returns them to the plain object."""
    hub = kubectl["hub"]
    role = fresh("e2e-covr")
    try:
        hub.apply(cluster_role(role, {"type": "Replicate"}))
        wait_for_it(
            lambda: in_children(kubectl, "clusterroles", role).keys() == set(CHILDREN),
            say=f"clusterrole {role} in every child",
        )
        target = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole"}
        covr = {
            "apiVersion": "kmc.dev/v1alpha1",
            "kind": "ClusterOverride",
            "metadata": {"name": cluster_override},
            "spec": {
                "targets": [{**target, "name": role}],
                "locations": {"locationSelector": US},
                "rules": [
                    {"labels": {"set": {"site": "${location.name}"}}},
                    {"patch": [{"op": "add", "path": "/rules/0/verbs/-", "value": "watch"}]},
                ],
            },
        }
        path = tmp_path / "covr.yaml"
        path.write_text(yaml.safe_dump(covr))
        preview = hub.mc("diff", "-f", str(path), check=False)
        assert preview.returncode == 1, preview.stderr
        assert headers(preview.stdout) == {"us-east", "us-west"}, preview.stdout
        assert "+    site: us-east\n" in preview.stdout and "+  - watch\n" in preview.stdout
        assert hub.run("get", "clusteroverride", cluster_override, check=False).returncode != 0

        hub.apply(covr)

        def overridden() -> bool:
            copies = in_children(kubectl, "clusterroles", role)
            sites = {
                loc: (c["metadata"].get("labels") or {}).get("site") for loc, c in copies.items()
            }
            verbs = {loc: c["rules"][0]["verbs"] for loc, c in copies.items()}
            return sites == {"us-east": "us-east", "us-west": "us-west", "eu-west": None} and (
                verbs
                == {
                    "us-east": ["get", "list", "watch"],
                    "us-west": ["get", "list", "watch"],
                    "eu-west": ["get", "list"],
                }
            )

        wait_for_it(overridden, say="the ClusterOverride in the US copies only")
        same = hub.mc("diff", "-f", str(path), check=False)
        assert (same.returncode, same.stdout) == (0, ""), same.stderr

        hub.run("delete", "clusteroverride", cluster_override)
        wait_for_it(
            lambda: all(
                "site" not in (c["metadata"].get("labels") or {})
                and c["rules"][0]["verbs"] == ["get", "list"]
                for c in in_children(kubectl, "clusterroles", role).values()
            ),
            say="the copies back to the plain ClusterRole",
        )
    finally:
        hub.run("delete", "clusterrole", role, "--ignore-not-found", "--wait=false", check=False)
