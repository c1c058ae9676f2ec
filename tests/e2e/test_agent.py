"""kmc-agent on the real bed (docs/pull.md): the real `kmc-agent` command, given the hub and a
cluster of its own, follows a location's work feed and makes that cluster hold it.

Pull Locations (`spec.mode: Pull`, the lease, the join) are not built yet, so the agent
follows the feed of an existing push location, `us-east`, into a spare cluster added to the
bed for the test (not joined: kmc-apiserver never writes it): that cluster must come to hold
exactly us-east's share of the test's application, its overrides applied; follow a hub edit;
put back what is edited or deleted by hand there; keep everything while the agent is down;
and when it returns, catch up and delete what left the feed meanwhile (an orphan), without
making anything twice."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Iterator
from typing import Any

import pytest

from kmc_testbed import bed, config

from .conftest import VENV_BIN, Kubectl, run_testbed
from .test_work_feed import app, feed, within

SPARE = "pull-spare"  # the agent's own cluster
FOLLOWED = "us-east"  # whose feed it follows
TIMEOUT = 180.0  # CI shares two cores with fifteen control-plane processes


@pytest.fixture
def spare(installed: bed.State) -> Iterator[Kubectl]:
    run_testbed("add", SPARE)
    try:
        yield Kubectl(SPARE)
    finally:
        run_testbed("remove", SPARE)


def start_agent() -> subprocess.Popen[bytes]:
    kubeconfig = str(config.kubeconfig_path())
    log = (config.REPO_ROOT / ".testbed" / "logs" / "kmc-agent.log").open("ab")
    return subprocess.Popen(
        [
            str(VENV_BIN / "kmc-agent"),
            "--location",
            FOLLOWED,
            "--hub-kubeconfig",
            kubeconfig,
            "--hub-context",
            "hub",
            "--kubeconfig",
            kubeconfig,
            "--context",
            SPARE,
            "--retry",
            "1",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )


def stop(agent: subprocess.Popen[bytes]) -> None:
    if agent.poll() is None:
        agent.send_signal(signal.SIGKILL)  # an agent that dies, not one that shuts down
    agent.wait(timeout=30)


def ours(cluster: Kubectl, namespace: str) -> dict[tuple[str, str], Any]:
    found = cluster.json(
        "get", "deployments,configmaps,services", "-n", namespace, "-l", "kmc.dev/origin-uid"
    )["items"]
    return {(o["kind"], o["metadata"]["name"]): o for o in found}


def wait_until(what: str, check: Any, timeout: float = TIMEOUT) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        result, why = check()
        if why is None:
            return result
        assert time.monotonic() < deadline, f"{what}: {why}"
        time.sleep(1)


def holds_the_feed(hub: Kubectl, cluster: Kubectl, namespace: str) -> Any:
    def check() -> tuple[Any, str | None]:
        fed = {k: v for k, v in feed(hub, FOLLOWED, namespace).items() if k[0] != "Namespace"}
        there = ours(cluster, namespace)
        if set(fed) != set(there):
            return there, f"the feed has {sorted(fed)}, the cluster {sorted(there)}"
        for key, obj in fed.items():
            why = within(obj, there[key])
            if why:
                return there, f"{key}: {why}"
        return there, None

    return check


def test_the_agent_makes_its_cluster_hold_the_feed_and_follows_it(
    spare: Kubectl, kubectl: dict[str, Kubectl], namespace: str
) -> None:
    hub = kubectl["hub"]
    for obj in app(namespace):
        hub.apply(obj, namespace)
    agent = start_agent()
    try:
        there = wait_until("the agent's cluster", holds_the_feed(hub, spare, namespace))
        assert set(there) == {("ConfigMap", "conf"), ("Deployment", "web"), ("Service", "web")}
        env = there[("Deployment", "web")]["spec"]["template"]["spec"]["containers"][0]["env"]
        assert {"name": "SITE", "value": FOLLOWED} in env  # that location's overrides
        labels = spare.json("get", "namespace", namespace)["metadata"]["labels"]
        assert "kmc.dev/origin-uid" in labels  # the namespace is ours, made by the agent

        # SIGHUP asks for a renewal; with --hub-kubeconfig there is none to make, and the
        # agent goes on (the signal's default would end it).
        agent.send_signal(signal.SIGHUP)
        hub.run("patch", "configmap", "conf", "-n", namespace, "-p", '{"data":{"greeting":"hi"}}')
        wait_until("a hub edit", holds_the_feed(hub, spare, namespace))
        assert ours(spare, namespace)[("ConfigMap", "conf")]["data"] == {"greeting": "hi"}
        assert agent.poll() is None, "the agent ended on SIGHUP"

        # Drift: edited or deleted by hand in the agent's cluster, put back. (A key someone
        # else adds stays theirs, as in push mode: server-side apply owns only what we send.)
        tampered = '{"data":{"greeting":"tampered"}}'
        spare.run("patch", "configmap", "conf", "-n", namespace, "-p", tampered)
        spare.run("delete", "service", "web", "-n", namespace)
        wait_until("drift put back", holds_the_feed(hub, spare, namespace))
        assert ours(spare, namespace)[("ConfigMap", "conf")]["data"] == {"greeting": "hi"}
        uids = {k: v["metadata"]["uid"] for k, v in ours(spare, namespace).items()}

        stop(agent)  # down: the cluster keeps what it holds
        hub.run("patch", "configmap", "conf", "-n", namespace, "-p", '{"data":{"greeting":"yo"}}')
        hub.run("delete", "service", "web", "-n", namespace)
        assert set(ours(spare, namespace)) == set(uids)
        # Back (a new process, knowing nothing): it catches up, and what left the feed while
        # it was away goes (an orphan), once the feed's whole state has arrived.
        agent = start_agent()
        there = wait_until("catching up", holds_the_feed(hub, spare, namespace))
        assert there[("ConfigMap", "conf")]["data"] == {"greeting": "yo"}
        assert ("Service", "web") not in there
        # Nothing made twice by the restart: the same objects as before it.
        assert {k: v["metadata"]["uid"] for k, v in there.items()} == {
            k: v for k, v in uids.items() if k != ("Service", "web")
        }
        # Its heartbeat (docs/pull.md): the Lease a Pull location's Ready is read from.
        lease = hub.json("get", "lease", f"kmc-agent-{FOLLOWED}", "-n", "kmc-system")
        assert lease["spec"]["holderIdentity"]
    finally:
        stop(agent)
        lease_name = f"kmc-agent-{FOLLOWED}"
        hub.run("delete", "lease", lease_name, "-n", "kmc-system", "--ignore-not-found")


def test_the_agents_manifests_apply_cleanly_to_a_location(
    installed: bed.State, kubectl: dict[str, Kubectl]
) -> None:
    """`kubectl apply -k manifests/agent/` on a location: the agent's Deployment and the
    location RBAC it runs with (its ConfigMap and join Secret are made from what the join
    printed), accepted by a real kube-apiserver (a
    server dry run: nothing is made)."""
    child = kubectl["eu-west"]
    made = child.run("get", "namespace", "kmc-system", check=False).returncode != 0
    if made:
        child.run("create", "namespace", "kmc-system")
    try:
        out = child.run(
            "apply", "-k", str(config.REPO_ROOT / "manifests" / "agent"), "--dry-run=server"
        ).stdout
        names = {line.split(" ")[0] for line in out.splitlines() if line.strip()}
        assert {
            "deployment.apps/kmc-agent",
            "serviceaccount/kmc-location",
            "clusterrolebinding.rbac.authorization.k8s.io/kmc:location",
        } <= names, out
        built = child.run("kustomize", str(config.REPO_ROOT / "manifests" / "agent")).stdout
        assert "image: kmc-apiserver:dev" in built and "- kmc-agent" in built
    finally:
        if made:
            child.run("delete", "namespace", "kmc-system", "--wait=false", "--ignore-not-found")
