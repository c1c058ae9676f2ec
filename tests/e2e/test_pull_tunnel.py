"""Punch-through to a pull location over its agent's reverse tunnel (issue #34 item 4).

On the real bed, with one pull child added through the bed (`hack/testbed add NAME --pull`,
here `install.add`), whose agent dials kmc-apiserver at `locations/NAME/proxy` and carries
the hub's reads to its cluster (docs/pull.md, "The reverse tunnel"):

- `kubectl get` of `remote.kmc.dev` (and `kubectl mc get`) lists pods and deployments of the
  push and the pull locations alike, each row naming its location;
- the caller is impersonated in the pull child: a reader the hub lets read everywhere sees,
  of the pull child, only the namespace the child's own RBAC gives them;
- `kubectl mc logs` reads a pod's log in the pull location; exec there is refused, saying
  exec is not available for pull locations;
- with the agent stopped the pull location's rows are left out with a Warning that its
  tunnel is not connected, never an empty success; started again, they come back;
- the tunnel outlasts the aggregator's one-minute cut of requests that are not long-running.
"""

from __future__ import annotations

import json
import re
import sys
import time
from collections.abc import Iterator
from typing import Any

import pytest

from kmc_testbed import bed, install

from .conftest import Kubectl, run_testbed
from .test_agent import wait_until
from .test_aggregated import rows
from .test_pull_location import ready_is
from .test_streams import plugin
from .test_testbed import deployment

NAME = "pull-tunnel"
AGENT = f"{bed.AGENT}-{NAME}"
TIMEOUT = 240.0  # two cores shared by four clusters, kmc-apiserver, an agent and pytest
NOT_CONNECTED = f"location {NAME} left out: its agent's tunnel is not connected"


def log(message: str) -> None:
    print(f"testbed: {message}", file=sys.stderr, flush=True)


def present() -> bool:
    state = bed.load()
    return state is not None and any(c.name == NAME for c in state.clusters)


@pytest.fixture(scope="module")
def pull_child(installed: bed.State, kubectl: dict[str, Kubectl]) -> Iterator[Kubectl]:
    """The pull child, Ready from its agent's lease (removed after, however the tests end)."""
    if not present():
        install.add(NAME, {"topology.kubernetes.io/region": "edge"}, log, pull=True)
    try:
        wait_until("Ready", ready_is(kubectl["hub"], NAME, "True", "AgentLease"), TIMEOUT)
        yield Kubectl(NAME)
    finally:
        if present():
            install.remove(NAME, log)


def pinned(name: str, replicas: int, location: str) -> dict[str, Any]:
    obj = deployment(name, replicas)
    obj["metadata"]["annotations"] = {
        "kmc.dev/strategy": json.dumps({"type": "Split", "pin": [location]})
    }
    return obj


def located(output: str) -> set[tuple[str, str]]:
    """(location, name) of each row of a remote.kmc.dev table (LOCATION first)."""
    return {(r[0], r[1]) for r in rows(output)}


def running_pods(hub: Kubectl, namespace: str) -> tuple[Any, str | None]:
    """location → the running pod there, once `web` (pull) and `api` (us-east) run."""
    out = hub.run("get", "pods.remote.kmc.dev", "-n", namespace, "-o", "json", check=False)
    if out.returncode != 0:
        return None, out.stderr
    found = {
        p["metadata"]["annotations"]["kmc.dev/location"]: p["metadata"]["name"]
        for p in json.loads(out.stdout)["items"]
        if p["status"].get("phase") == "Running"
    }
    if set(found) != {NAME, "us-east"}:
        return found, f"running pods by location: {found}; stderr: {out.stderr.strip()}"
    return found, None


def running_in_pull_and_push(hub: Kubectl, namespace: str) -> Any:
    """`web` pinned to the pull location, `api` to us-east; location → its running pod."""
    hub.apply(pinned("web", 1, NAME), namespace)
    hub.apply(pinned("api", 1, "us-east"), namespace)
    return wait_until(
        "a running pod in the pull and a push location",
        lambda: running_pods(hub, namespace),
        TIMEOUT,
    )


def test_punch_through_reads_a_pull_location_through_its_agents_tunnel(
    pull_child: Kubectl, kubectl: dict[str, Kubectl], namespace: str
) -> None:
    hub = kubectl["hub"]
    pods = running_in_pull_and_push(hub, namespace)

    # Lists of both, the location first; no Warning about the pull location.
    listed = hub.run("get", "deployments.remote.kmc.dev", "-n", namespace)
    assert located(listed.stdout) == {(NAME, "web"), ("us-east", "api")}, listed.stdout
    assert NAME not in listed.stderr, listed.stderr
    got = hub.mc("get", "pods.remote.kmc.dev", "-n", namespace)
    assert located(got.stdout) == {(NAME, pods[NAME]), ("us-east", pods["us-east"])}, got.stdout
    # A watch lists it too (the live path: a pull location is never read from the caches).
    watched = hub.run(
        "get", "--raw",
        f"/apis/remote.kmc.dev/v1alpha1/namespaces/{namespace}/deployments?watch=true&timeoutSeconds=3",
    )  # fmt: skip
    events = [json.loads(line) for line in watched.stdout.splitlines() if line.strip()]
    named = {
        (
            e["object"]["metadata"]["annotations"]["kmc.dev/location"],
            e["object"]["metadata"]["name"],
        )
        for e in events
        if e["type"] == "ADDED"
    }
    assert named == {(NAME, "web"), ("us-east", "api")}, events
    # One object, by name and at the location.
    one = hub.json("get", "pods.remote.kmc.dev", f"{pods[NAME]}@{NAME}", "-n", namespace)
    assert one["metadata"]["annotations"]["kmc.dev/location"] == NAME

    # Its log, through the tunnel.
    logs = plugin("logs", "deploy/web", "-n", namespace)
    assert logs.returncode == 0, logs.stderr
    assert re.search(
        rf"^\[{NAME}/{pods[NAME]}/\S+\] a fake pod of {NAME}, simulated by kwok", logs.stdout, re.M
    ), logs.stdout

    # Exec: refused by name, for both ways of naming the pod.
    for asked in (pods[NAME], f"{pods[NAME]}@{NAME}"):
        done = plugin("exec", asked, "-n", namespace, "--", "true")
        assert done.returncode != 0
        assert f"location {NAME}: exec is not available for pull locations" in done.stderr, (
            done.stderr
        )


def test_the_caller_is_impersonated_in_the_pull_child(
    pull_child: Kubectl, kubectl: dict[str, Kubectl], namespace: str
) -> None:
    """The hub lets the reader list remote pods everywhere; the pull child's own RBAC lets
    them read its `namespace` only: so that is all of the pull child they see."""
    hub = kubectl["hub"]
    hub.apply(pinned("web", 1, NAME), namespace)
    wait_until(
        "web running in the pull location",
        lambda: (None, None) if running_pods_in(hub, namespace) else (None, "not yet"),
        TIMEOUT,
    )
    # A pod of the pull child's own, in a namespace the reader is not given there.
    other = f"{namespace}-own"
    pull_child.run("create", "namespace", other)
    reader = f"system:serviceaccount:{namespace}:reader"
    role = f"remote-pod-reader-{namespace}"
    try:
        pull_child.apply(deployment("own", 1), other)
        hub.run("create", "serviceaccount", "reader", "-n", namespace)
        hub.run(
            "create", "clusterrole", role, "--verb=get,list,watch", "--resource=pods.remote.kmc.dev"
        )
        hub.run("create", "clusterrolebinding", role, f"--clusterrole={role}", f"--user={reader}")
        pull_child.let_read(namespace, "pods", f"--user={reader}")

        def own_listed() -> tuple[Any, str | None]:
            out = hub.run("get", "pods.remote.kmc.dev", "-n", other, check=False)
            names = {loc for loc, _ in located(out.stdout)}
            return names, None if names == {
                NAME
            } else f"{other} as the admin: {out.stdout}{out.stderr}"

        wait_until("the pull child's own pod listed for the admin", own_listed, TIMEOUT)

        def as_reader(where: str) -> Any:
            return hub.run("get", "pods.remote.kmc.dev", "-n", where, "--as", reader, check=False)

        def reader_sees_web() -> tuple[Any, str | None]:
            out = as_reader(namespace)
            seen = located(out.stdout)
            return seen, None if {loc for loc, _ in seen} == {NAME} else f"{out.stdout}{out.stderr}"

        wait_until(
            "the reader to see the pull child's pod in their namespace", reader_sees_web, TIMEOUT
        )
        denied = as_reader(other)
        assert located(denied.stdout) == set(), denied.stdout
        assert f"location {NAME} left out" in denied.stderr, denied.stderr
        assert "forbidden" in denied.stderr.lower(), denied.stderr
    finally:
        hub.run("delete", "clusterrolebinding", role, "--ignore-not-found")
        hub.run("delete", "clusterrole", role, "--ignore-not-found")
        pull_child.run("delete", "namespace", other, "--wait=false", "--ignore-not-found")


def running_pods_in(hub: Kubectl, namespace: str) -> bool:
    out = hub.run("get", "pods.remote.kmc.dev", "-n", namespace, "-o", "json", check=False)
    return out.returncode == 0 and any(
        p["metadata"]["annotations"]["kmc.dev/location"] == NAME
        and p["status"].get("phase") == "Running"
        for p in json.loads(out.stdout)["items"]
    )


def test_with_its_agent_stopped_a_pull_locations_rows_say_its_tunnel_is_not_connected(
    pull_child: Kubectl, kubectl: dict[str, Kubectl], namespace: str
) -> None:
    hub = kubectl["hub"]
    pods = running_in_pull_and_push(hub, namespace)

    run_testbed("stop", AGENT)
    try:

        def left_out() -> tuple[Any, str | None]:
            out = hub.run("get", "pods.remote.kmc.dev", "-n", namespace, check=False)
            ok = out.returncode == 0 and NOT_CONNECTED in out.stderr
            return out, None if ok else f"{out.stdout}{out.stderr}"

        out = wait_until("the pull location left out, its tunnel not connected", left_out, TIMEOUT)
        assert located(out.stdout) == {("us-east", pods["us-east"])}, out.stdout
        # Named, it is a 503 that says so; the log too.
        named = hub.run(
            "get", "pods.remote.kmc.dev", f"{pods[NAME]}@{NAME}", "-n", namespace, check=False
        )
        assert named.returncode != 0
        assert f"location {NAME}: its agent's tunnel is not connected" in named.stderr, named.stderr
    finally:
        run_testbed("start", AGENT)

    def back() -> tuple[Any, str | None]:
        out = hub.run("get", "pods.remote.kmc.dev", "-n", namespace, check=False)
        seen = located(out.stdout)
        ok = seen == {(NAME, pods[NAME]), ("us-east", pods["us-east"])} and NAME not in out.stderr
        return seen, None if ok else f"{out.stdout}{out.stderr}"

    wait_until("the pull location's rows back once its agent is started", back, TIMEOUT)


def test_the_tunnel_outlasts_the_aggregators_minute(
    pull_child: Kubectl, kubectl: dict[str, Kubectl], namespace: str
) -> None:
    """The aggregator cuts a request that is not long-running after 60 s; `locations/proxy`
    is long-running (kube-apiserver counts `proxy` sub-resources so), so the agent's one
    connection serves reads for longer than that without being dialled again."""
    hub = kubectl["hub"]
    hub.apply(pinned("web", 1, NAME), namespace)
    wait_until(
        "web running in the pull location",
        lambda: (None, None) if running_pods_in(hub, namespace) else (None, "not yet"),
        TIMEOUT,
    )
    agent_log = bed.log_path(AGENT)
    dialled = agent_log.read_text().count("tunnel: connected to the hub")
    started = time.monotonic()
    while time.monotonic() - started < 75:  # reads through the same tunnel past the minute
        out = hub.run("get", "deployments.remote.kmc.dev", "-n", namespace)
        assert (NAME, "web") in located(out.stdout), f"{out.stdout}{out.stderr}"
        assert NAME not in out.stderr, out.stderr
        time.sleep(5)
    assert agent_log.read_text().count("tunnel: connected to the hub") == dialled
