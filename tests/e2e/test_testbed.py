"""Smoke tests of the test bed itself: every later e2e test trusts what these show.

Real kube-apiservers, real controllers and scheduler, kwok nodes; driven with the real kubectl.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from pathlib import Path
from typing import Any

from bench import objects
from kmc_testbed import bed, config

from .conftest import CHILDREN, TESTBED, Kubectl, run_testbed


def deployment(name: str, replicas: int) -> dict[str, Any]:
    """The e2e tests' Deployment: a container named "web" asking for a little room."""
    return objects.deployment(
        name,
        replicas,
        {"cpu": "100m", "memory": "64Mi"},
        container_name="web",
        image="registry.example/web:1",
    )


def job(name: str, parallelism: int, completions: int) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name},
        "spec": {
            "parallelism": parallelism,
            "completions": completions,
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [{"name": "c", "image": f"registry.example/{name}:1"}],
                }
            },
        },
    }


def test_each_child_runs_a_deployment_on_kwok_nodes(
    kubectl: dict[str, Kubectl], namespace_everywhere: str
) -> None:
    namespace = namespace_everywhere
    for child in CHILDREN:
        kubectl[child].apply(deployment("web", 3), namespace)
    for child in CHILDREN:
        k = kubectl[child]
        k.run(
            "wait", "-n", namespace, "--for=condition=Available", "deployment/web", "--timeout=120s"
        )
        pods = k.json("get", "pods", "-n", namespace, "-l", "app=web")["items"]
        assert len(pods) == 3
        for pod in pods:
            assert pod["status"]["phase"] == "Running", pod["status"]
            assert pod["spec"]["nodeName"].startswith(f"{child}-node-")


def test_nodes_are_ready_with_known_capacity_and_topology(kubectl: dict[str, Kubectl]) -> None:
    for child in CHILDREN:
        nodes = kubectl[child].json("get", "nodes")["items"]
        assert len(nodes) == bed.NODES_PER_CHILD
        labels = bed.DEFAULT_CHILDREN[child]
        for node in nodes:
            ready = [c for c in node["status"]["conditions"] if c["type"] == "Ready"]
            assert ready and ready[0]["status"] == "True"
            assert node["status"]["allocatable"]["cpu"] == bed.NODE_CAPACITY["cpu"]
            for key, value in labels.items():
                assert node["metadata"]["labels"][key] == value


def test_hub_runs_no_workload_controllers(kubectl: dict[str, Kubectl], namespace: str) -> None:
    hub = kubectl["hub"]
    hub.apply(deployment("web", 2), namespace)
    # The hub's controller-manager is alive (it makes the namespace's default ServiceAccount)…
    deadline = time.monotonic() + 60
    while hub.run("get", "sa", "default", "-n", namespace, check=False).returncode != 0:
        assert time.monotonic() < deadline, "the hub's controller-manager is not running"
        time.sleep(0.5)
    time.sleep(3)
    # …yet the Deployment got no ReplicaSet, no pods and no status from it.
    assert hub.json("get", "replicasets", "-n", namespace)["items"] == []
    assert hub.json("get", "pods", "-n", namespace)["items"] == []
    # Whatever status it has was written by kubectl-mc (once installed), never by a
    # controller of the hub.
    obj = hub.json("get", "deployment", "web", "-n", namespace, "--show-managed-fields")
    status_writers = {
        m["manager"]
        for m in obj["metadata"].get("managedFields", [])
        if m.get("subresource") == "status"
    }
    assert status_writers <= {"kmc-sync", "kmc-placement"}, status_writers


def test_hub_reports_a_stamped_version(kubectl: dict[str, Kubectl]) -> None:
    version = kubectl["hub"].json("version")["serverVersion"]
    assert version["gitVersion"] == config.KUBERNETES_VERSION
    assert version["gitTreeState"] == "clean"


def test_hub_is_ready_for_aggregated_apiservers(kubectl: dict[str, Kubectl]) -> None:
    cm = kubectl["hub"].json(
        "get", "configmap", "-n", "kube-system", "extension-apiserver-authentication"
    )
    data = cm["data"]
    assert "BEGIN CERTIFICATE" in data["requestheader-client-ca-file"]
    assert data["requestheader-allowed-names"] == '["front-proxy-client"]'
    assert data["requestheader-username-headers"] == '["X-Remote-User"]'


def test_stop_and_start_a_child_keeps_its_objects(
    kubectl: dict[str, Kubectl], namespace_everywhere: str
) -> None:
    namespace = namespace_everywhere
    k = kubectl["us-west"]
    k.run("create", "configmap", "survivor", "-n", namespace, "--from-literal=k=v")
    run_testbed("stop", "us-west")
    try:
        down = k.run(
            "get", "configmap", "survivor", "-n", namespace, "--request-timeout=5s", check=False
        )
        assert down.returncode != 0
        assert "was refused" in down.stderr, down.stderr
        # The other children do not notice.
        kubectl["eu-west"].run("get", "namespace", namespace)
    finally:
        run_testbed("start", "us-west")
    cm = k.json("get", "configmap", "survivor", "-n", namespace)
    assert cm["data"] == {"k": "v"}


def test_up_twice_is_harmless() -> None:
    before = bed.load()
    assert before is not None
    run_testbed("up")
    after = bed.load()
    assert after is not None
    assert after.pids == before.pids
    assert [c.ports for c in after.clusters] == [c.ports for c in before.clusters]


def test_bad_arguments_get_one_line_errors(testbed_up: bed.State) -> None:
    for args, expected in [
        (("stop", "nowhere"), "no component or cluster named 'nowhere'"),
        (("start", "nowhere"), "no component or cluster named 'nowhere'"),
        (("add", "us-east"), "cluster 'us-east' is already in the test bed"),
        (("add", "Bad_Name"), "cannot name a cluster"),
        (("add", "ap-south", "--labels", "novalue"), "--labels takes k=v pairs"),
    ]:
        proc = run_testbed(*args, check=False)
        assert proc.returncode == 1, (args, proc.stderr)
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1 and expected in lines[0], (args, proc.stderr)


def test_add_and_remove_a_child(kubectl: dict[str, Kubectl]) -> None:
    name = "ap-south"
    run_testbed("add", name, "--labels", "topology.kubernetes.io/region=ap,tier=edge")
    try:
        state = bed.load()
        assert state is not None
        assert state.cluster(name).labels == {
            "topology.kubernetes.io/region": "ap",
            "topology.kubernetes.io/zone": name,
            "tier": "edge",
        }
        nodes = Kubectl(name).json("get", "nodes")["items"]
        assert len(nodes) == bed.NODES_PER_CHILD
        assert {n["metadata"]["labels"]["topology.kubernetes.io/region"] for n in nodes} == {"ap"}
        pids = [state.pids[f"{name}-{kind}"] for kind in bed.CHILD_KINDS]
    finally:
        run_testbed("remove", name)
    gone = Kubectl(name).run("get", "nodes", check=False)
    assert gone.returncode != 0
    assert f"context was not found for specified context: {name}" in gone.stderr
    assert not any(bed.pid_running(pid) for pid in pids)
    # The rest of the bed did not notice.
    kubectl["us-east"].run("get", "nodes")


def test_a_taken_port_is_a_one_line_error(testbed_up: bed.State) -> None:
    component = "eu-west-scheduler"
    run_testbed("stop", component)
    state = bed.load()
    assert state is not None
    port = state.cluster("eu-west").ports["scheduler"]
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", port))
        squatter.listen()
        proc = run_testbed("start", component, check=False)
    assert proc.returncode == 1
    assert proc.stderr.strip() == (
        f"testbed: error: port {port} for {component} is taken by another process; free it, "
        "or run `hack/testbed down` and `up` again to pick new ports"
    )
    run_testbed("start", component)


def test_building_without_go_says_what_is_needed(tmp_path: Path) -> None:
    go = shutil.which("go")
    assert go is not None
    path = os.pathsep.join(
        d for d in os.environ["PATH"].split(os.pathsep) if not (Path(d) / "go").exists()
    )
    env = {**os.environ, "PATH": path, "KMC_CACHE_DIR": str(tmp_path)}
    proc = subprocess.run([TESTBED, "build"], capture_output=True, text=True, env=env)
    assert proc.returncode == 1
    assert proc.stderr.strip() == (
        "testbed: error: the test bed needs Go >= 1.26 on PATH and the Go module proxy to build "
        "kube-apiserver, etcd and kwok (once; they are cached afterwards)"
    )
