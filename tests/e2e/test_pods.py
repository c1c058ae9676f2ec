"""Bare Pods on the hub (`kubectl run`): placed whole in one location, gated from the hub's own
scheduler, their status the child's, so `kubectl wait` works on the hub; a move makes the
Pod anew where it goes, and deleting the hub Pod deletes the child's."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

from kmc_testbed import bed

from .conftest import CHILDREN, Kubectl
from .test_streams import plugin


def children_of(kubectl: dict[str, Kubectl], name: str, namespace: str) -> dict[str, Any]:
    found = {}
    for child in CHILDREN:
        proc = kubectl[child].run("get", "pod", name, "-n", namespace, "-o", "json", check=False)
        if proc.returncode == 0:
            found[child] = json.loads(proc.stdout)
    return found


def wait_for(what: Callable[[], Any], timeout: float = 180) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        found = what()
        if found:
            return found
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.5)


def test_kubectl_run_on_the_hub_runs_in_one_location_and_kubectl_wait_works(
    installed: bed.State, kubectl: dict[str, Kubectl], namespace: str
) -> None:
    hub = kubectl["hub"]
    hub.run("run", "debug", "-n", namespace, "--image=registry.example/busybox:1")
    hub.run("wait", "--for=condition=Ready", "pod/debug", "-n", namespace, "--timeout=180s")
    pod = hub.json("get", "pod", "debug", "-n", namespace)
    gates = [g["name"] for g in pod["spec"].get("schedulingGates") or []]
    assert gates == ["kmc.dev/placed-elsewhere"]  # the hub's scheduler would never bind it
    placement = json.loads(pod["metadata"]["annotations"]["kmc.dev/placement"])
    (location,) = placement
    children = wait_for(lambda: children_of(kubectl, "debug", namespace))
    assert list(children) == [location]
    child = children[location]
    assert "schedulingGates" not in child["spec"] and child["spec"]["nodeName"]
    assert pod["status"]["phase"] == "Running"
    assert pod["status"]["podIP"] == child["status"]["podIP"]
    # Found by its hub name for logs and exec through the hub.
    logs = plugin("logs", "debug", "-n", namespace)
    assert f"a fake pod of {location}, simulated by kwok" in logs.stdout, logs.stderr
    done = plugin("exec", "debug", "-n", namespace, "--", "sh", "-c", "echo hi; exit 4")
    assert (done.returncode, done.stdout) == (4, "hi\n"), done.stderr
    # A move makes it anew in the new location, and the old one goes.
    elsewhere = next(c for c in CHILDREN if c != location)
    strategy = json.dumps({"type": "Single", "pin": [elsewhere]})
    hub.run("annotate", "pod", "debug", "-n", namespace, f"kmc.dev/strategy={strategy}")
    wait_for(lambda: list(children_of(kubectl, "debug", namespace)) == [elsewhere])
    wait_for(
        lambda: (
            hub.json("get", "pod", "debug", "-n", namespace)["status"].get("podIP")
            == children_of(kubectl, "debug", namespace)[elsewhere]["status"].get("podIP")
        )
    )
    hub.run("wait", "--for=condition=Ready", "pod/debug", "-n", namespace, "--timeout=180s")
    said = hub.json("get", "events", "-n", namespace, "--field-selector=involvedObject.name=debug")
    assert any(
        e["reason"] == "SpilledOver" and "made anew where it goes" in e["message"]
        for e in said["items"]
    ), [e["message"] for e in said["items"]]
    # Deleting the hub Pod deletes the child's.
    hub.run("delete", "pod", "debug", "-n", namespace, "--wait=false")
    wait_for(lambda: not children_of(kubectl, "debug", namespace))
    hub.run("wait", "--for=delete", "pod/debug", "-n", namespace, "--timeout=180s")


def test_a_pod_that_runs_once_ends_succeeded_on_the_hub(
    installed: bed.State, kubectl: dict[str, Kubectl], namespace: str
) -> None:
    hub = kubectl["hub"]
    hub.run("run", "once", "-n", namespace, "--restart=Never", "--image=registry.example/busybox:1")
    hub.run(
        "wait",
        "--for=jsonpath={.status.phase}=Succeeded",
        "pod/once",
        "-n",
        namespace,
        "--timeout=180s",
    )
    (child,) = children_of(kubectl, "once", namespace).values()
    assert child["status"]["phase"] == "Succeeded"  # it stays as it ended


def test_a_pod_a_controller_owns_stays_the_hubs(
    installed: bed.State, kubectl: dict[str, Kubectl], namespace: str
) -> None:
    """A Pod with a controller owner is the hub's own business: no gate, never placed."""
    hub = kubectl["hub"]
    owner = hub.json("create", "configmap", "owner", "-n", namespace)
    owned = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "owned",
            "ownerReferences": [
                {
                    "apiVersion": "v1",
                    "kind": "ConfigMap",
                    "name": "owner",
                    "uid": owner["metadata"]["uid"],
                    "controller": True,
                }
            ],
        },
        "spec": {"containers": [{"name": "c", "image": "registry.example/busybox:1"}]},
    }
    hub.apply(owned, namespace)
    hub.run("run", "bare", "-n", namespace, "--image=registry.example/busybox:1")
    hub.run("wait", "--for=condition=Ready", "pod/bare", "-n", namespace, "--timeout=180s")
    pod = hub.json("get", "pod", "owned", "-n", namespace)
    assert "schedulingGates" not in pod["spec"]
    assert "kmc.dev/placement" not in (pod["metadata"].get("annotations") or {})
    assert not children_of(kubectl, "owned", namespace)
