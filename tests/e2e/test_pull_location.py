"""A pull location on the real bed (docs/pull.md): a spare cluster joined as a Location with
`spec.mode: Pull` and no Secret, the real `kmc-agent` beside it with a hub identity that may
read its own feed and renew its own Lease and nothing else (hand-made RBAC, as the join will
make). The Location turns Ready from the agent's Lease; a Deployment placed there reaches the
spare cluster through the agent only (the hub holds no credential for it, so kmc-apiserver
cannot have dialled it), and its child's status comes back in the agent's report and is
folded into the hub's (4/4 ready, the `mc.kmc.dev` row, the Location's `status.objects`),
the agent's identity may report for its own location only; punch-through says the location
is not available; and when the
agent dies the lease lapses, the Location goes not Ready saying so, and the grace period
later its replicas are evacuated to the push location beside it, as for a pushed child
that stops answering. Bad `spec.mode`s are refused by the hub with a clear message."""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kmc_testbed import bed, config

from .conftest import VENV_BIN, Kubectl, run_testbed
from .test_agent import stop, wait_until
from .test_testbed import deployment

NAME = "pull-edge"  # the spare cluster, and its Location
PUSHED = "us-east"  # the push location beside it
LEASE_SECONDS = 12  # the agent's --lease-duration: short, so the test sees it lapse
ACCOUNT = f"kmc-agent-{NAME}"  # the agent's hub identity (a ServiceAccount, for the test)
USER = f"system:serviceaccount:kmc-system:{ACCOUNT}"


def ready(hub: Kubectl, location: str) -> dict[str, Any]:
    """The Location's Ready condition; none while it is not there."""
    found = hub.run("get", "location", location, "-o", "json", check=False)
    if found.returncode != 0:
        return {}
    conditions = (json.loads(found.stdout).get("status") or {}).get("conditions") or []
    return next((c for c in conditions if c["type"] == "Ready"), {})


def ready_is(hub: Kubectl, location: str, status: str, reason: str) -> Any:
    """A `wait_until` check: the Location's Ready condition has this status and reason."""

    def check() -> tuple[Any, str | None]:
        now = ready(hub, location)
        if (now.get("status"), now.get("reason")) == (status, reason):
            return now, None
        return now, f"Ready is {now}, waiting for {status} ({reason})"

    return check


def agent_identity(hub: Kubectl, folder: Path) -> Path:
    """A hub kubeconfig for the agent: a ServiceAccount token, with a role for its own
    location's feed and its own Lease only."""
    hub.apply(
        {
            "apiVersion": "v1",
            "kind": "ServiceAccount",
            "metadata": {"name": ACCOUNT, "namespace": "kmc-system"},
        }
    )
    user = f"system:serviceaccount:kmc-system:{ACCOUNT}"
    subject = {"kind": "ServiceAccount", "name": ACCOUNT, "namespace": "kmc-system"}
    rbac = "rbac.authorization.k8s.io"
    hub.apply(
        {
            "apiVersion": f"{rbac}/v1",
            "kind": "ClusterRole",
            "metadata": {"name": ACCOUNT},
            "rules": [
                {
                    "apiGroups": ["mc.kmc.dev"],
                    "resources": ["workfeeds"],
                    "resourceNames": [NAME],
                    "verbs": ["list", "watch"],
                },
                {
                    "apiGroups": ["mc.kmc.dev"],
                    "resources": ["locations/report", "locations/crds"],
                    "resourceNames": [NAME],
                    "verbs": ["update"],
                },
            ],
        }
    )
    hub.apply(
        {
            "apiVersion": f"{rbac}/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": ACCOUNT},
            "roleRef": {"apiGroup": rbac, "kind": "ClusterRole", "name": ACCOUNT},
            "subjects": [subject],
        }
    )
    hub.apply(
        {
            "apiVersion": f"{rbac}/v1",
            "kind": "Role",
            "metadata": {"name": ACCOUNT, "namespace": "kmc-system"},
            "rules": [
                {
                    "apiGroups": ["coordination.k8s.io"],
                    "resources": ["leases"],
                    "resourceNames": [f"kmc-agent-{NAME}"],
                    "verbs": ["get", "update"],
                },
                # RBAC cannot name what a create makes: the join will make the Lease itself.
                {
                    "apiGroups": ["coordination.k8s.io"],
                    "resources": ["leases"],
                    "verbs": ["create"],
                },
            ],
        }
    )
    hub.apply(
        {
            "apiVersion": f"{rbac}/v1",
            "kind": "RoleBinding",
            "metadata": {"name": ACCOUNT, "namespace": "kmc-system"},
            "roleRef": {"apiGroup": rbac, "kind": "Role", "name": ACCOUNT},
            "subjects": [subject],
        }
    )
    for verb, what, wanted in [
        ("update", f"leases.coordination.k8s.io/kmc-agent-{NAME}", "yes"),
        ("update", f"leases.coordination.k8s.io/kmc-agent-{PUSHED}", "no"),
    ]:
        asked = ("auth", "can-i", verb, what, "-n", "kmc-system", "--as", user)

        def can(asked: tuple[str, ...] = asked, wanted: str = wanted) -> tuple[Any, str | None]:
            said = hub.run(*asked, check=False).stdout.strip()
            return said, None if said == wanted else f"{' '.join(asked)}: {said}"

        wait_until("the hub's RBAC", can)
    token = hub.run("create", "token", ACCOUNT, "-n", "kmc-system", "--duration=1h").stdout
    kubeconfig = json.loads(hub.run("config", "view", "--raw", "--minify", "-o", "json").stdout)
    kubeconfig["users"] = [{"name": ACCOUNT, "user": {"token": token.strip()}}]
    for context in kubeconfig["contexts"]:
        context["context"]["user"] = ACCOUNT
    path = folder / "agent-hub.kubeconfig"
    path.write_text(json.dumps(kubeconfig))
    path.chmod(0o600)
    return path


def forget_identity(hub: Kubectl) -> None:
    for what in (f"clusterrolebinding/{ACCOUNT}", f"clusterrole/{ACCOUNT}"):
        hub.run("delete", what, "--ignore-not-found")
    for what in (f"rolebinding/{ACCOUNT}", f"role/{ACCOUNT}", f"serviceaccount/{ACCOUNT}"):
        hub.run("delete", what, "-n", "kmc-system", "--ignore-not-found")
    hub.run("delete", "lease", f"kmc-agent-{NAME}", "-n", "kmc-system", "--ignore-not-found")


@pytest.fixture
def spare(installed: bed.State, kubectl: dict[str, Kubectl], tmp_path: Path) -> Iterator[Path]:
    """The spare cluster, its Pull Location and the agent's hub identity; all gone after."""
    hub = kubectl["hub"]
    run_testbed("add", NAME)
    try:
        yield agent_identity(hub, tmp_path)
    finally:
        # Gone before `remove` unjoins: the agent is stopped by then, so nothing would remove
        # what `kubectl mc unjoin`'s drain waits for.
        hub.run("delete", "location", NAME, "--ignore-not-found")
        forget_identity(hub)
        run_testbed("remove", NAME)


def start_agent(hub_kubeconfig: Path) -> subprocess.Popen[bytes]:
    log = (config.REPO_ROOT / ".testbed" / "logs" / f"kmc-agent-{NAME}.log").open("ab")
    return subprocess.Popen(
        [
            str(VENV_BIN / "kmc-agent"),
            "--location",
            NAME,
            "--hub-kubeconfig",
            str(hub_kubeconfig),
            "--kubeconfig",
            str(config.kubeconfig_path()),
            "--context",
            NAME,
            "--retry",
            "1",
            "--lease-duration",
            str(LEASE_SECONDS),
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )


def report_path(location: str) -> str:
    return f"/apis/mc.kmc.dev/v1alpha1/locations/{location}/report"


def put_report(
    hub: Kubectl, location: str, body: dict[str, Any], folder: Path, *as_user: str
) -> subprocess.CompletedProcess[str]:
    path = folder / "report.json"
    path.write_text(json.dumps(body))
    return hub.run(
        "replace", "--raw", report_path(location), "-f", str(path), *as_user, check=False
    )


def rows(hub: Kubectl, namespace: str) -> dict[str, dict[str, Any]]:
    sub = ("deployments.mc.kmc.dev", "web", "-n", namespace, "--subresource", "locations")
    return {row["location"]: row for row in hub.json("get", *sub)["locations"]}


def placement(hub: Kubectl, namespace: str) -> dict[str, int]:
    web = hub.json("get", "deployment", "web", "-n", namespace)
    text = (web["metadata"].get("annotations") or {}).get("kmc.dev/placement") or "{}"
    return {k: v for k, v in json.loads(text).items() if v}


def replicas_in(cluster: Kubectl, namespace: str) -> int | None:
    found = cluster.run("get", "deployment", "web", "-n", namespace, "-o", "json", check=False)
    if found.returncode != 0:
        return None
    return int(json.loads(found.stdout)["spec"]["replicas"])


def split_across(
    hub: Kubectl, pull: tuple[str, Kubectl], push: tuple[str, Kubectl], namespace: str
) -> None:
    """Apply a Deployment of 4 pinned to a pull and a push location, and wait until each
    runs 2 of them."""
    (pull_name, pull_cluster), (push_name, push_cluster) = pull, push
    web = deployment("web", 4)
    web["metadata"]["annotations"] = {
        "kmc.dev/strategy": json.dumps({"type": "Split", "pin": [pull_name, push_name]})
    }
    hub.apply(web, namespace)

    def split() -> tuple[Any, str | None]:
        where = placement(hub, namespace)
        there = (replicas_in(pull_cluster, namespace), replicas_in(push_cluster, namespace))
        if where == {pull_name: 2, push_name: 2} and there == (2, 2):
            return there, None
        return there, f"placement {where}, replicas in {pull_name} and {push_name}: {there}"

    wait_until("split across pull and push", split)


def test_bad_modes_are_refused_with_a_clear_message(
    installed: bed.State, kubectl: dict[str, Kubectl]
) -> None:
    hub = kubectl["hub"]
    for spec, says in [
        ({"mode": "Sideways"}, 'Unsupported value: "Sideways"'),
        ({"mode": "Push"}, "a Push location needs spec.secretRef"),
        ({}, "a Push location needs spec.secretRef"),
    ]:
        location = {
            "apiVersion": "kmc.dev/v1alpha1",
            "kind": "Location",
            "metadata": {"name": "refused-mode"},
            "spec": spec,
        }
        proc = hub.run("apply", "-f", "-", stdin=json.dumps(location), check=False)
        assert proc.returncode != 0 and says in proc.stderr, (spec, proc.stderr)
        gone = hub.run("get", "location", "refused-mode", check=False)
        assert gone.returncode != 0 and "NotFound" in gone.stderr


def test_a_pull_location_is_ready_from_its_agents_lease_and_gets_its_work_through_it(
    spare: Path, kubectl: dict[str, Kubectl], namespace: str
) -> None:
    hub, cluster, pushed = kubectl["hub"], Kubectl(NAME), kubectl[PUSHED]
    hub.apply(
        {
            "apiVersion": "kmc.dev/v1alpha1",
            "kind": "Location",
            "metadata": {"name": NAME, "labels": {"topology.kubernetes.io/zone": NAME}},
            "spec": {"mode": "Pull"},
        }
    )
    # No agent yet: not Ready, saying why.
    now = wait_until("no lease yet", ready_is(hub, NAME, "False", "NoAgentLease"))
    assert now["message"].startswith("no lease from its agent"), now
    # The hub holds no credential for it: no Secret, no secretRef — nothing could dial it.
    location = hub.json("get", "location", NAME)
    assert location["spec"] == {"mode": "Pull"}, location["spec"]
    secrets = hub.json("get", "secrets", "-A")["items"]
    assert not [s["metadata"]["name"] for s in secrets if NAME in s["metadata"]["name"]]

    agent = start_agent(spare)
    try:
        now = wait_until("Ready from the lease", ready_is(hub, NAME, "True", "AgentLease"))
        assert "renews its" in now["message"], now
        lease = hub.json("get", "lease", f"kmc-agent-{NAME}", "-n", "kmc-system")
        assert lease["spec"]["leaseDurationSeconds"] == LEASE_SECONDS

        # Placed there like anywhere else, and written there by the agent only.
        split_across(hub, (NAME, cluster), (PUSHED, pushed), namespace)

        # Its child's status comes back in the agent's report and is folded like a pushed
        # child's: the hub Deployment says 4 of 4 ready, and the pull location's row says
        # what its child holds, synced to the hub's generation.
        def folded() -> tuple[Any, str | None]:
            web = hub.json("get", "deployment", "web", "-n", namespace)
            row = rows(hub, namespace).get(NAME) or {}
            ready = (web.get("status") or {}).get("readyReplicas")
            seen = (ready, row.get("ready"), row.get("state"))
            if (
                seen == (4, 2, "Synced")
                and row.get("syncedGeneration") == web["metadata"]["generation"]
            ):
                return row, None
            return seen, f"hub readyReplicas, {NAME} row's ready and state: {seen}, {row}"

        wait_until("the pull location's child folded into the hub's status", folded)

        # Its Location counts what it holds of ours, from the same report (`unjoin` waits on it).
        def counted() -> tuple[Any, str | None]:
            objects = (hub.json("get", "location", NAME).get("status") or {}).get("objects")
            return objects, None if objects == 1 else f"status.objects is {objects}"

        wait_until("the pull location's status.objects", counted)

        # Its agent's probe came in the same report: its nodes, room and served kinds are in
        # its Location's status, as a pushed location's probe writes them.
        def probed() -> tuple[Any, str | None]:
            status = hub.json("get", "location", NAME).get("status") or {}
            seen = {k: status.get(k) for k in ("kubernetesVersion", "readyNodes", "allocatable")}
            served = "apps/v1/Deployment" in (status.get("resources") or [])
            if seen["kubernetesVersion"] and seen["readyNodes"] and seen["allocatable"] and served:
                return status, None
            return seen, f"the probe in {NAME}'s status: {seen}, serves Deployments: {served}"

        wait_until("the agent's probe in the Location's status", probed)
        waited = hub.run(
            "wait",
            "deployment/web",
            "-n",
            namespace,
            "--for=condition=Available",
            "--timeout=120s",
        )
        assert waited.returncode == 0, waited.stderr
        table = hub.run("get", "deployment", "web", "-n", namespace).stdout
        assert "4/4" in table, table
        shown = ("get", "deployment", "web", "-n", namespace, "-o", "json")
        child = json.loads(cluster.run(*shown, "--show-managed-fields").stdout)
        assert "kmc.dev/origin-uid" in child["metadata"]["labels"]
        managers = {m["manager"] for m in child["metadata"].get("managedFields") or []}
        assert "kmc-sync" in managers, managers  # the agent applies as the push loop does

        # The agent's identity may report for its own location only: another's is 403.
        report = {"apiVersion": "mc.kmc.dev/v1alpha1", "kind": "LocationReport"}
        other = put_report(hub, PUSHED, report, spare.parent, "--as", USER)
        assert other.returncode != 0 and "Forbidden" in other.stderr, other.stderr
        assert 'cannot update resource "locations/report"' in other.stderr, other.stderr
        # Reports are for pull locations; a bad one says what is wrong and changes nothing.
        pushed_report = put_report(hub, PUSHED, report, spare.parent)
        assert pushed_report.returncode != 0, pushed_report.stderr
        assert "reports are for pull locations" in pushed_report.stderr, pushed_report.stderr
        bad = {**report, "children": [{"kind": "Deployment", "metadata": {}}]}
        refused = put_report(hub, NAME, bad, spare.parent)
        assert refused.returncode != 0, refused.stderr
        for field in ("children[0].apiVersion", "children[0].metadata.name"):
            assert field in refused.stderr, refused.stderr
        assert (rows(hub, namespace).get(NAME) or {}).get("ready") == 2

        # Reports are kept in memory only: a new kmc-apiserver knows nothing of the pull
        # location's children until the agent's next report, which its feed reconnecting
        # brings at once; then the row is back as it was, read from that report.
        run_testbed("stop", bed.KMC)
        run_testbed("start", bed.KMC)
        said: set[str] = set()

        def back() -> tuple[Any, str | None]:
            sub = ("deployments.mc.kmc.dev", "web", "-n", namespace, "--subresource")
            got = hub.run("get", *sub, "locations", "-o", "json", check=False)
            if got.returncode != 0:
                return None, f"no answer yet: {got.stderr.strip()}"
            row = {r["location"]: r for r in json.loads(got.stdout)["locations"]}.get(NAME, {})
            said.add(str(row.get("message")))
            if (row.get("state"), row.get("ready")) == ("Synced", 2):
                return row, None
            return row, f"{NAME}'s row after the restart: {row}"

        wait_until("the pull location's row from the agent's next report", back)
        assert not any("unreachable" in message for message in said), said

        # The row is computed when asked; the hub's status is folded after the report, a
        # moment later (on a loaded machine, more than a moment).
        def four_ready() -> tuple[Any, str | None]:
            ready = hub.json("get", "deployment", "web", "-n", namespace)["status"].get(
                "readyReplicas"
            )
            return ready, None if ready == 4 else f"hub readyReplicas {ready}"

        wait_until("the hub's status folded from the report again", four_ready)

        # Punch-through does not reach it, and says so rather than answering empty: its
        # agent's hand-made hub identity is not the location's agent (`kmc:location:NAME`)
        # and may not open its reverse tunnel (test_pull_tunnel.py has one that may).
        not_connected = "its agent's tunnel is not connected"
        listed = hub.run("get", "deployments.remote.kmc.dev", "-n", namespace, check=False)
        assert listed.returncode == 0, listed.stderr
        assert f"location {NAME} left out: {not_connected}" in listed.stderr
        assert PUSHED in listed.stdout, listed.stdout
        named = hub.run(
            "get", "deployments.remote.kmc.dev", f"web@{NAME}", "-n", namespace, check=False
        )
        assert named.returncode != 0 and not_connected in named.stderr

        # The agent dies: the lease lapses, the Location says so, and the grace period later
        # its replicas are evacuated to the push location; its cluster keeps what it holds.
        stop(agent)
        died = time.monotonic()
        now = wait_until("the lease lapsed", ready_is(hub, NAME, "False", "AgentLeaseExpired"))
        assert now["message"].startswith("its agent's lease expired at "), now
        assert time.monotonic() - died >= LEASE_SECONDS / 2  # not before the lease ran out

        def evacuated() -> tuple[Any, str | None]:
            where = placement(hub, namespace)
            if where == {PUSHED: 4} and replicas_in(pushed, namespace) == 4:
                return where, None
            return where, f"placement {where}, {PUSHED} has {replicas_in(pushed, namespace)}"

        wait_until("evacuated", evacuated)
        assert replicas_in(cluster, namespace) == 2  # nobody there to remove it: kept
    finally:
        stop(agent)
