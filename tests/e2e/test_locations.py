"""Locations on the real test bed: joining, probing, outages, bad credentials.

Everything a user would type goes through the real kubectl (and `kubectl mc` through
kubectl's plugin mechanism).
"""

from __future__ import annotations

import base64
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from kmc_testbed import bed, config

from .conftest import CHILDREN, Kubectl, run_testbed


def wait_until(what: str, check: Callable[[], Any], timeout: float = 30.0) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        result = check()
        if result:
            return result
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.5)


def ready(location: dict[str, Any]) -> dict[str, Any]:
    conditions = location.get("status", {}).get("conditions", [])
    return next((c for c in conditions if c["type"] == "Ready"), {})


def wait_children_ready(hub: Kubectl) -> None:
    """An earlier test may have just restarted a child: its apiserver answers a few seconds
    before its /readyz does, and the next probe after that says Ready. Or it has just
    uncordoned a child's nodes: the next probe after that counts them again."""

    def settled(loc: dict[str, Any]) -> bool:
        status = loc.get("status") or {}
        return (
            ready(loc).get("status") == "True"
            and status.get("schedulableNodes") == bed.NODES_PER_CHILD
        )

    wait_until(
        "every child Ready with every node open",
        lambda: all(settled(hub.json("get", "location", child)) for child in CHILDREN),
        timeout=60,
    )


def test_joined_children_are_ready_with_what_they_have(
    installed: bed.State, kubectl: dict[str, Kubectl]
) -> None:
    hub = kubectl["hub"]
    wait_children_ready(hub)
    for child in CHILDREN:
        loc = hub.json("get", "location", child)
        assert ready(loc)["status"] == "True", loc.get("status")
        status = loc["status"]
        assert status["kubernetesVersion"] == config.KUBERNETES_VERSION
        assert status["nodes"] == status["readyNodes"] == bed.NODES_PER_CHILD
        assert status["allocatable"] == {"cpu": "24", "memory": "96Gi", "pods": "330"}
        assert "apps/v1/Deployment" in status["resources"]
        assert "v1/ConfigMap" in status["resources"]
        assert loc["metadata"]["labels"] == bed.DEFAULT_CHILDREN[child]
        assert loc["spec"]["secretRef"]["namespace"] == "kmc-system"
    table = hub.run("get", "locations").stdout.splitlines()
    assert table[0].split() == [
        "NAME",
        "READY",
        "VERSION",
        "REGION",
        "ZONE",
        "NODES",
        "CPU",
        "MEMORY",
        "AGE",
    ]
    rows = {line.split()[0]: line.split() for line in table[1:]}
    assert rows["eu-west"][1:8] == ["True", "v1.34.4", "eu", "eu-west-1", "3", "24", "96Gi"]


def test_an_outage_shows_within_seconds_and_heals(
    installed: bed.State, kubectl: dict[str, Kubectl]
) -> None:
    hub = kubectl["hub"]
    wait_children_ready(hub)
    run_testbed("stop", "us-west")
    try:
        # The first failed probe may catch the server going down ("Connection reset by
        # peer"); the message follows each probe, so it settles on what a stopped server says.
        loc = wait_until(
            "us-west Unreachable: connection refused",
            lambda: (
                (loc := hub.json("get", "location", "us-west"))
                and ready(loc).get("status") == "False"
                and ready(loc).get("reason") == "Unreachable"
                and "connection refused" in ready(loc).get("message", "")
                and loc
            ),
            timeout=30,
        )
        # Last known facts stay while it is away.
        assert loc["status"]["kubernetesVersion"] == config.KUBERNETES_VERSION
        # The others are not held up.
        assert ready(hub.json("get", "location", "eu-west"))["status"] == "True"
    finally:
        run_testbed("start", "us-west")
    wait_until(
        "us-west Ready again",
        lambda: ready(hub.json("get", "location", "us-west")).get("status") == "True",
        timeout=20,
    )


def test_cordoned_and_tainted_nodes_are_not_room(
    installed: bed.State, kubectl: dict[str, Kubectl]
) -> None:
    """`kubectl cordon` (and a NoSchedule taint) in a child takes those nodes out of the
    Location's room; the child stays Ready (it still runs what it has), its message says so."""
    hub, child = kubectl["hub"], kubectl["eu-west"]
    wait_children_ready(hub)
    nodes = [n["metadata"]["name"] for n in child.json("get", "nodes")["items"]]
    try:
        child.run("cordon", *nodes[:-1])
        child.run("taint", "nodes", nodes[-1], "dedicated=gpu:NoSchedule")
        loc = wait_until(
            "eu-west with no room",
            lambda: (
                (loc := hub.json("get", "location", "eu-west"))
                and loc["status"].get("schedulableNodes") == 0
                and loc
            ),
        )
        status = loc["status"]
        assert status["allocatable"] == {"cpu": "0", "memory": "0", "pods": "0"}
        assert status["requested"]["pods"] == "0"
        assert status["readyNodes"] == bed.NODES_PER_CHILD
        assert ready(loc)["status"] == "True"
        assert ready(loc)["message"].endswith("0 of them take new pods")
        child.run("uncordon", nodes[0])
        wait_until(
            "one eu-west node back as room",
            lambda: (
                hub.json("get", "location", "eu-west")["status"]["allocatable"]
                == {"cpu": "8", "memory": "32Gi", "pods": "110"}
            ),
        )
    finally:
        child.run("uncordon", *nodes)
        child.run("taint", "nodes", nodes[-1], "dedicated-", check=False)
    wait_until(
        "eu-west's room back",
        lambda: (
            hub.json("get", "location", "eu-west")["status"]["allocatable"]
            == {"cpu": "24", "memory": "96Gi", "pods": "330"}
        ),
    )


def test_join_unjoin_round_trip(installed: bed.State, kubectl: dict[str, Kubectl]) -> None:
    hub = kubectl["hub"]
    run_testbed("add", "ap-west")  # a cluster of its own, not joined yet
    join = [
        "join",
        "ap-west",
        "--cluster-kubeconfig",
        str(config.kubeconfig_path()),
        "--cluster-context",
        "ap-west",
    ]
    try:
        out = hub.mc(*join, "--labels", "kmc.dev/cloud=testbed")
        assert out.stdout.strip() == "location.kmc.dev/ap-west joined"
        wait_until(
            "the new Location Ready",
            lambda: ready(hub.json("get", "location", "ap-west")).get("status") == "True",
        )
        secret = hub.json("get", "secret", "-n", "kmc-system", "location-ap-west")
        stored = yaml.safe_load(base64.b64decode(secret["data"]["kubeconfig"]))
        # Self-contained: one context, credentials inline, nothing else from the source file.
        assert [c["name"] for c in stored["contexts"]] == ["ap-west"]
        assert "client-key-data" in stored["users"][0]["user"]
        assert hub.mc(*join).stdout.strip() == "location.kmc.dev/ap-west configured"
        out = hub.mc("unjoin", "ap-west", "--timeout=60s")
        assert out.stdout.splitlines()[-1] == "location.kmc.dev/ap-west unjoined"
        assert hub.run("get", "location", "ap-west", check=False).returncode == 1
        gone = hub.run("get", "secret", "-n", "kmc-system", "location-ap-west", check=False)
        assert gone.returncode == 1
    finally:
        run_testbed("remove", "ap-west")


def test_join_refuses_bad_input_and_writes_nothing(
    installed: bed.State, kubectl: dict[str, Kubectl], tmp_path: Path
) -> None:
    hub = kubectl["hub"]
    closed = bed.free_ports(1)[0]
    source = yaml.safe_load(config.kubeconfig_path().read_text())
    for cluster in source["clusters"]:
        cluster["cluster"]["server"] = f"https://127.0.0.1:{closed}"
    dead = tmp_path / "dead.yaml"
    dead.write_text(yaml.safe_dump(source))
    cases = [
        (
            ["join", "nowhere", "--cluster-kubeconfig", str(dead), "--cluster-context", "us-east"],
            f"error: cannot join nowhere: the cluster at https://127.0.0.1:{closed} (context "
            f"us-east) did not answer: The connection to the server 127.0.0.1:{closed} was "
            "refused - did you specify the right host or port?",
        ),
        (
            [
                "join",
                "nowhere",
                "--cluster-kubeconfig",
                str(config.kubeconfig_path()),
                "--cluster-context",
                "mars",
            ],
            f"error: --cluster-kubeconfig {config.kubeconfig_path()}: context was not found for "
            "specified context: mars",
        ),
        (
            ["join", "Not_A_Name", "--cluster-kubeconfig", str(config.kubeconfig_path())],
            'error: invalid location name "Not_A_Name": a lowercase RFC 1123 label (letters, '
            "digits and '-', at most 63 characters)",
        ),
        (
            [
                "join",
                "us-east-again",
                "--cluster-kubeconfig",
                str(config.kubeconfig_path()),
                "--cluster-context",
                "us-east",
            ],
            f"error: the cluster at {installed.cluster('us-east').server} is already joined as "
            "us-east: one cluster can be one location only (two would fight over the same "
            "objects); `kubectl mc unjoin us-east` first to join it under another name",
        ),
        (
            ["unjoin", "nowhere"],
            'Error from server (NotFound): locations.kmc.dev "nowhere" not found',
        ),
    ]
    for args, message in cases:
        proc = hub.mc(*args, check=False)
        assert proc.returncode == 1, (args, proc.stdout)
        assert proc.stderr.strip() == message
    assert hub.run("get", "location", "nowhere", check=False).returncode == 1
    assert hub.run("get", "location", "us-east-again", check=False).returncode == 1
    no_secret = hub.run("get", "secret", "-n", "kmc-system", "location-nowhere", check=False)
    assert no_secret.returncode == 1


def test_unusable_credentials_are_reported_without_leaking_them(
    installed: bed.State, kubectl: dict[str, Kubectl]
) -> None:
    hub = kubectl["hub"]
    secret_text = "this-is-not-a-kubeconfig-but-a-secret-value"
    hub.apply(
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": "location-broken", "namespace": "kmc-system"},
            "stringData": {"kubeconfig": secret_text},
        },
    )
    hub.apply(
        {
            "apiVersion": "kmc.dev/v1alpha1",
            "kind": "Location",
            "metadata": {"name": "broken"},
            "spec": {"secretRef": {"name": "location-broken"}},
        },
    )
    try:
        loc = wait_until(
            "broken reported",
            lambda: (loc := hub.json("get", "location", "broken")) and ready(loc) and loc,
        )
        condition = ready(loc)
        assert condition["status"] == "False"
        assert condition["reason"] == "NoCredentials"
        assert condition["message"].startswith(
            "secret kmc-system/location-broken key 'kubeconfig': not a kubeconfig"
        )
        assert secret_text not in str(loc)
        log = bed.log_path(bed.KMC).read_text()
        assert secret_text not in log
    finally:
        hub.run("delete", "location", "broken", "--ignore-not-found")
        hub.run("delete", "secret", "-n", "kmc-system", "location-broken", "--ignore-not-found")


def test_kmc_apiserver_restart_picks_up_where_it_was(
    installed: bed.State, kubectl: dict[str, Kubectl]
) -> None:
    hub = kubectl["hub"]
    before = hub.json("get", "location", "eu-west")["status"]["lastProbeTime"]
    run_testbed("stop", bed.KMC)
    time.sleep(1.1)  # lastProbeTime has a resolution of one second
    run_testbed("start", bed.KMC)
    # A fresh process probes at once and writes (its first write is never skipped).
    wait_until(
        "a probe by the new process",
        lambda: hub.json("get", "location", "eu-west")["status"]["lastProbeTime"] != before,
        timeout=20,
    )
    assert ready(hub.json("get", "location", "eu-west"))["status"] == "True"
