"""A whole application written to the hub in one `kubectl apply -f`, as a chart or a
kustomization would install it: a Deployment with its ServiceAccount and ConfigMap, a
Service, an HPA, a PDB, an Ingress and a NetworkPolicy. Everything reaches the locations
the Deployment runs in, the children's endpoints show on the hub, a child's size is its own
HPA's, a move keeps ready endpoints somewhere all the way, and `kubectl delete -f` leaves
nothing behind in any child."""

from __future__ import annotations

import json
import subprocess
from functools import partial
from pathlib import Path
from typing import Any

import yaml

from kmc_testbed import bed, config

from .conftest import CHILDREN, Kubectl
from .test_autoscaling import hpa, in_children, nowhere, pdb, released
from .test_placement import placement_of, wait_locations_settled, with_strategy
from .test_services import OURS, hub_addresses, hub_slices, wait_for
from .test_testbed import deployment

# What the children must each hold, as `kubectl get` names it.
OBJECTS = (
    ("deployment", "web"),
    ("service", "web"),
    ("serviceaccount", "web"),
    ("configmap", "web-config"),
    ("hpa", "web"),
    ("pdb", "web"),
    ("ingress", "web"),
    ("networkpolicy", "web"),
)


def application() -> list[dict[str, Any]]:
    web = with_strategy(deployment("web", 6), {"type": "Split"})
    pod = web["spec"]["template"]["spec"]
    pod["serviceAccountName"] = "web"
    pod["containers"][0]["envFrom"] = [{"configMapRef": {"name": "web-config"}}]
    return [
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "web"}},
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "web-config"},
            "data": {"MODE": "production"},
        },
        web,
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": "web"},
            "spec": {"selector": {"app": "web"}, "ports": [{"port": 80, "targetPort": 8080}]},
        },
        hpa("web", "web", 3, 9),
        pdb("web", maxUnavailable=1),
        {
            "apiVersion": "networking.k8s.io/v1",
            "kind": "Ingress",
            "metadata": {"name": "web"},
            "spec": {
                "rules": [
                    {
                        "host": "web.example",
                        "http": {
                            "paths": [
                                {
                                    "path": "/",
                                    "pathType": "Prefix",
                                    "backend": {"service": {"name": "web", "port": {"number": 80}}},
                                }
                            ]
                        },
                    }
                ]
            },
        },
        {
            "apiVersion": "networking.k8s.io/v1",
            "kind": "NetworkPolicy",
            "metadata": {"name": "web"},
            "spec": {
                "podSelector": {"matchLabels": {"app": "web"}},
                "ingress": [{"ports": [{"port": 8080}]}],
            },
        },
    ]


def missing(kubectl: dict[str, Kubectl], namespace: str, where: tuple[str, ...]) -> list[str]:
    """`location: resource/name` for each object a location should hold and does not."""
    gone = []
    for resource, name in OBJECTS:
        found = in_children(kubectl, resource, name, namespace)
        gone += [f"{loc}: {resource}/{name}" for loc in where if loc not in found]
    return gone


def ready_on_hub(hub: Kubectl, namespace: str) -> dict[str, int]:
    """Ready endpoints of `web` on the hub, by the location they come from."""
    return {
        location: len(hub_addresses(slices, ready=True))
        for location, slices in hub_slices(hub, namespace).items()
    }


def test_an_application_applied_to_the_hub_runs_whole_and_leaves_nothing_behind(
    installed: bed.State, kubectl: dict[str, Kubectl], namespace: str, tmp_path: Path
) -> None:
    hub = kubectl["hub"]
    wait_locations_settled(hub)
    manifest = tmp_path / "app.yaml"
    manifest.write_text(yaml.safe_dump_all(application()))
    hub.run("apply", "-f", str(manifest), "-n", namespace)
    hub.run("rollout", "status", "deployment/web", "-n", namespace, "--timeout=240s")
    hub.run(
        "wait",
        "--for=condition=kmc.dev/Placed",
        "service/web",
        "hpa/web",
        "pdb/web",
        "-n",
        namespace,
        "--timeout=180s",
    )
    placed = placement_of(hub, "deployment", "web", namespace)
    assert placed == dict.fromkeys(CHILDREN, 2), placed
    wait_for(lambda: not missing(kubectl, namespace, CHILDREN), say="every object everywhere")

    # Every location's endpoints on the hub, all ready: 6 pods, 2 in each location.
    wait_for(
        lambda: ready_on_hub(hub, namespace) == dict.fromkeys(CHILDREN, 2),
        say="the hub's EndpointSlices hold every ready endpoint",
    )

    # A child's size is its HPA's: scaled the way it would, it is left alone and counted.
    wait_for(partial(released, kubectl["us-east"], namespace), say="us-east's size released")
    kubectl["us-east"].run("scale", "deployment", "web", "-n", namespace, "--replicas=3")
    wait_for(
        lambda: (
            hub.json("get", "deployment", "web", "-n", namespace)["status"].get("availableReplicas")
            == 7
        ),
        say="the hub counts 3+2+2 available",
    )
    child = kubectl["us-east"].json("get", "deployment", "web", "-n", namespace)
    assert child["spec"]["replicas"] == 3

    hub.run("delete", "-f", str(manifest), "-n", namespace, "--wait=false")
    for resource, name in OBJECTS:
        wait_for(
            partial(nowhere, kubectl, resource, name, namespace),
            say=f"{resource}/{name} gone from every child",
        )
    wait_for(lambda: not hub_slices(hub, namespace), say="the hub's slices of web gone")


def ready_through(events: str) -> list[int]:
    """Ready endpoints on the hub after each watch event, from `kubectl get --watch
    --output-watch-events -o json` output (one JSON document per event), once any was."""
    decoder, at = json.JSONDecoder(), 0
    slices: dict[str, int] = {}
    totals: list[int] = []
    while True:
        while at < len(events) and events[at].isspace():
            at += 1
        if at >= len(events):
            return totals
        try:
            event, at = decoder.raw_decode(events, at)
        except json.JSONDecodeError:
            return totals  # the last one still being written
        obj = event["object"]
        name = obj["metadata"]["name"]
        if event["type"] == "DELETED":
            slices.pop(name, None)
        else:
            slices[name] = len(hub_addresses([obj], ready=True))
        if totals or sum(slices.values()):
            totals.append(sum(slices.values()))


def test_a_move_keeps_ready_endpoints_somewhere_all_the_way(
    installed: bed.State, kubectl: dict[str, Kubectl], namespace: str, tmp_path: Path
) -> None:
    """Every change to the hub's slices of the Service, as a watch sees them one by one while
    the workload moves: the ready endpoints never drop to none."""
    hub = kubectl["hub"]
    wait_locations_settled(hub)
    strategy = {"type": "Split", "pin": ["us-east"]}
    hub.apply(with_strategy(deployment("web", 2), strategy), namespace)
    hub.run("expose", "deployment", "web", "--port=80", "-n", namespace)
    hub.run("rollout", "status", "deployment/web", "-n", namespace, "--timeout=180s")
    wait_for(lambda: ready_on_hub(hub, namespace) == {"us-east": 2}, say="us-east's endpoints")

    selector = f"kubernetes.io/service-name=web,{OURS}"
    out = tmp_path / "watch.json"
    kubeconfig = hub.kubeconfig or str(config.kubeconfig_path())
    command = [hub.binary, "get", "endpointslices", "-n", namespace, "-l", selector, "--watch"]
    command += ["--output-watch-events", "-o", "json", "--kubeconfig", kubeconfig]
    with out.open("w") as sink:
        watch = subprocess.Popen(
            [*command, "--context", hub.context], stdout=sink, stderr=subprocess.DEVNULL
        )
        try:
            wait_for(lambda: ready_through(out.read_text()), say="the watch's first events")
            hub.mc("move", "deployment/web", "--to", "eu-west", "--wait", "-n", namespace)
            wait_for(lambda: ready_on_hub(hub, namespace) == {"eu-west": 2}, say="eu-west's only")
            wait_for(lambda: ready_through(out.read_text())[-1:] == [2], say="the watch caught up")
        finally:
            watch.terminate()
            watch.wait(timeout=30)
    totals = ready_through(out.read_text())
    assert len(totals) > 2 and min(totals) > 0, f"ready endpoints after each change: {totals}"
