"""Joining a pull location with a bootstrap token (docs/pull.md, "Joining"), on the real bed.

`kubectl mc join NAME --mode pull` makes the Location, a one-use token and the agent's hub
RBAC; the real `kmc-agent`, given only the spare cluster's kubeconfig, the hub's URL and CA
and the token, trades the token for a client certificate (a hub CSR kmc-apiserver approves
under its own ServiceAccount and the manifests' RBAC), and the location turns Ready and gets
its work. The hub holds no credential for the cluster; the token cannot be used twice; the
agent's identity may do nothing but its own feed, report, Lease and certificate requests;
it reuses its certificate after a restart; `kubectl mc revoke` takes its rights away while
the Location and what runs there stay, and a new join brings it back (the old certificate
opening nothing); `kubectl mc unjoin` takes its rights away, and its next feed request is
refused."""

from __future__ import annotations

import base64
import datetime
import json
import os
import re
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from apiserver.agent import identity
from kmc_testbed import bed, config

from .conftest import VENV_BIN, Kubectl, run_testbed
from .test_agent import stop, wait_until
from .test_pull_location import ready_is, replicas_in, split_across

NAME = "pull-join"  # the spare cluster, and its Location
PUSHED = "us-east"
USER = f"kmc:location:{NAME}"
KMC_SYSTEM = {"namespace": "kmc-system"}
WORK = "/apis/mc.kmc.dev/v1alpha1/workfeeds?fieldSelector=metadata.name%3D{}"
TOKEN = re.compile(r"bootstrap token \(one use, expires [^)]+\): (\S+)")


@pytest.fixture
def spare(installed: bed.State, kubectl: dict[str, Kubectl], tmp_path: Path) -> Iterator[Path]:
    """The spare cluster, and a kubeconfig naming it only (all the agent is given of it)."""
    hub = kubectl["hub"]
    run_testbed("add", NAME)
    for left in csrs(hub):  # an earlier run's
        hub.run("delete", "csr", left)
    try:
        own = Kubectl(NAME).run("config", "view", "--raw", "--minify", "--flatten").stdout
        path = tmp_path / "own.kubeconfig"
        path.write_text(own)
        path.chmod(0o600)
        yield path
    finally:
        if hub.run("get", "location", NAME, check=False).returncode == 0:
            hub.mc("unjoin", NAME, "--force", check=False)
        run_testbed("remove", NAME)


def agent_command(own: Path, token: str | None, *extra: str) -> list[str]:
    state = bed.load()
    assert state is not None
    hub = state.cluster("hub")
    return [
        str(VENV_BIN / "kmc-agent"),
        "--location",
        NAME,
        "--hub-url",
        hub.server,
        "--hub-ca",
        str(hub.folder / "pki" / "ca.crt"),
        "--kubeconfig",
        str(own),
        "--retry",
        "1",
        "--lease-duration",
        "12",
        *(["--bootstrap-token", token] if token else []),
        *extra,
    ]


def start_agent(own: Path, token: str | None) -> subprocess.Popen[bytes]:
    log = (config.REPO_ROOT / ".testbed" / "logs" / f"kmc-agent-{NAME}.log").open("ab")
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    return subprocess.Popen(
        agent_command(own, token), stdout=log, stderr=subprocess.STDOUT, env=env
    )


def can(hub: Kubectl, join: str, verb: str, resource: str, name: str = "", **more: str) -> str:
    """A SubjectAccessReview for the agent's identity of join `join`: "yes" or "no"."""
    head, _, subresource = resource.partition("/")
    plural, _, group = head.partition(".")
    attributes = {"verb": verb, "resource": plural, "group": group, **more}
    if subresource:
        attributes["subresource"] = subresource
    if name:
        attributes["name"] = name
    review = {
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SubjectAccessReview",
        "spec": {
            "user": USER,
            "groups": ["kmc:locations", f"kmc:join:{join}"],
            "resourceAttributes": attributes,
        },
    }
    answer = hub.run("create", "-f", "-", "-o", "json", stdin=json.dumps(review))
    return "yes" if json.loads(answer.stdout)["status"].get("allowed") else "no"


def renewed_by(hub: Kubectl, agent: subprocess.Popen[bytes]) -> Any:
    """A `wait_until` check: the Lease was renewed by that agent process (a Ready from an
    earlier one's lease still running says nothing of this one)."""

    def check() -> tuple[Any, str | None]:
        found = hub.run("get", "lease", f"kmc-agent-{NAME}", "-n", "kmc-system", "-o", "json")
        holder = str((json.loads(found.stdout).get("spec") or {}).get("holderIdentity"))
        if holder.endswith(f"_{agent.pid}"):
            return holder, None
        return holder, f"the lease is held by {holder}, not agent process {agent.pid}"

    return check


SWITCHED = "switched to the renewed certificate"


def lease_renewed_at(hub: Kubectl) -> str:
    found = hub.json("get", "lease", f"kmc-agent-{NAME}", "-n", "kmc-system")
    return str((found.get("spec") or {}).get("renewTime"))


def renewed_since(hub: Kubectl, before: str) -> Any:
    """A `wait_until` check: the Lease was renewed again after `before`."""

    def check() -> tuple[Any, str | None]:
        now = lease_renewed_at(hub)
        return now, None if now != before else f"the lease was last renewed at {before}"

    return check


def csrs(hub: Kubectl) -> dict[str, Any]:
    items = hub.json("get", "csr")["items"]
    return {
        c["metadata"]["name"]: c
        for c in items
        if c["metadata"]["name"].startswith(f"kmc-agent-{NAME}-")
    }


def certificate_kubeconfig(hub: Kubectl, cluster: Kubectl, folder: Path) -> Kubectl:
    """A hub kubeconfig with the agent's certificate, read from where it keeps it now."""
    folder.mkdir(parents=True, exist_ok=True)
    kept = cluster.json("get", "secret", "kmc-agent-identity", "-n", "kmc-system")["data"]
    config_ = json.loads(hub.run("config", "view", "--raw", "--minify", "-o", "json").stdout)
    config_["users"] = [
        {
            "name": USER,
            "user": {
                "client-certificate-data": kept["tls.crt"],
                "client-key-data": kept["tls.key"],
            },
        }
    ]
    for context in config_["contexts"]:
        context["context"]["user"] = USER
    path = folder / "as-agent.kubeconfig"
    path.write_text(json.dumps(config_))
    path.chmod(0o600)
    return Kubectl("hub", kubeconfig=str(path))


def test_bad_pull_joins_are_refused_and_change_nothing(
    installed: bed.State, kubectl: dict[str, Kubectl]
) -> None:
    hub = kubectl["hub"]
    before = hub.json("get", "location", PUSHED)["spec"]
    proc = hub.mc("join", PUSHED, "--mode", "pull", check=False)
    assert proc.returncode != 0, proc.stdout
    assert f"location {PUSHED} already exists as a push location" in proc.stderr, proc.stderr
    assert hub.json("get", "location", PUSHED)["spec"] == before
    tokens = hub.json("get", "secrets", "-n", "kube-system", "-l", f"kmc.dev/location={PUSHED}")
    assert tokens["items"] == []
    bad = hub.mc("join", "Not_A_Name", "--mode", "pull", check=False)
    assert bad.returncode != 0 and 'invalid location name "Not_A_Name"' in bad.stderr
    both = hub.mc("join", "x", "--mode", "pull", "--cluster-kubeconfig", "x.yaml", check=False)
    assert both.returncode != 0 and "are for --mode push" in both.stderr, both.stderr
    for name in ("Not_A_Name", "x"):
        assert hub.run("get", "location", name.lower(), check=False).returncode != 0
    revoked = hub.mc("revoke", PUSHED, check=False)
    assert revoked.returncode != 0 and f"location {PUSHED} is a push location" in revoked.stderr
    nowhere = hub.mc("revoke", "nowhere", check=False)
    assert nowhere.returncode != 0 and 'no location "nowhere" on the hub' in nowhere.stderr
    annotations = hub.json("get", "location", PUSHED)["metadata"].get("annotations") or {}
    assert "kmc.dev/join-revoked" not in annotations


def test_an_expired_bootstrap_token_is_refused_and_nothing_is_made(
    installed: bed.State, kubectl: dict[str, Kubectl], tmp_path: Path
) -> None:
    """A token past its `expiration` (as an hour after join, made so at once here): the
    agent says so and exits 1; no CSR, no identity kept, the join not marked used."""
    hub, where, name = kubectl["hub"], kubectl[PUSHED], "pull-expired"
    joined = hub.mc("join", name, "--mode", "pull")
    try:
        found = TOKEN.search(joined.stdout)
        assert found, joined.stdout
        token = found.group(1)
        past = datetime.datetime.now(datetime.UTC) - datetime.timedelta(hours=1)
        expired = {"stringData": {"expiration": past.strftime("%Y-%m-%dT%H:%M:%SZ")}}
        secret = f"bootstrap-token-{token.split('.')[0]}"
        hub.run("patch", "secret", secret, "-n", "kube-system", "-p", json.dumps(expired))
        own = tmp_path / "own.kubeconfig"  # any cluster will do: it is refused before it
        own.write_text(where.run("config", "view", "--raw", "--minify", "--flatten").stdout)
        before = {c["metadata"]["name"] for c in hub.json("get", "csr")["items"]}
        command = agent_command(own, token, "--identity-secret", "kmc-agent-expired")
        command[command.index("--location") + 1] = name
        proc = subprocess.run(command, capture_output=True, text=True, timeout=180)
        assert proc.returncode == 1, proc.stderr[-3000:]
        assert "the hub refused the bootstrap token (401 Unauthorized)" in proc.stderr
        assert f"kubectl mc join {name} --mode pull" in proc.stderr
        assert {c["metadata"]["name"] for c in hub.json("get", "csr")["items"]} == before
        kept = where.run("get", "secret", "kmc-agent-expired", "-n", "kmc-system", check=False)
        assert kept.returncode != 0 and "NotFound" in kept.stderr
        annotations = hub.json("get", "location", name)["metadata"]["annotations"]
        assert "kmc.dev/join-used" not in annotations, annotations
    finally:
        hub.mc("unjoin", name, "--force", check=False)


def test_a_pull_location_joins_with_a_token_and_the_hub_keeps_no_credential_for_it(
    spare: Path, kubectl: dict[str, Kubectl], namespace: str, tmp_path: Path
) -> None:
    hub, cluster, pushed = kubectl["hub"], Kubectl(NAME), kubectl[PUSHED]
    joined = hub.mc(
        "join", NAME, "--mode", "pull", "--labels", f"topology.kubernetes.io/zone={NAME}"
    )
    assert f"location.kmc.dev/{NAME} joined (pull)" in joined.stdout, joined.stdout
    found = TOKEN.search(joined.stdout)
    assert found, joined.stdout
    token = found.group(1)
    assert "kubectl apply -k manifests/agent/" in joined.stdout
    location = hub.json("get", "location", NAME)
    assert location["spec"] == {"mode": "Pull"}, location["spec"]
    token_id = token.split(".")[0]
    assert location["metadata"]["annotations"]["kmc.dev/join-token-id"] == token_id
    wait_until("no lease yet", ready_is(hub, NAME, "False", "NoAgentLease"))

    # What the agent's identity may do on the hub: its own feed, report, Lease and
    # certificate requests; nothing else.
    rights: list[tuple[tuple[str, ...], dict[str, str], str]] = [
        (("list", "workfeeds.mc.kmc.dev", NAME), {}, "yes"),
        (("watch", "workfeeds.mc.kmc.dev", NAME), {}, "yes"),
        (("list", "workfeeds.mc.kmc.dev", PUSHED), {}, "no"),
        (("watch", "workfeeds.mc.kmc.dev", PUSHED), {}, "no"),
        (("watch", "workfeeds.mc.kmc.dev"), {}, "no"),  # every location's: no
        (("get", "workfeeds.mc.kmc.dev", NAME), {}, "no"),
        (("get", "locations.mc.kmc.dev/proxy", NAME), {}, "yes"),  # its reverse tunnel
        (("get", "locations.mc.kmc.dev/proxy", PUSHED), {}, "no"),
        (("update", "locations.mc.kmc.dev/report", NAME), {}, "yes"),
        (("update", "locations.mc.kmc.dev/report", PUSHED), {}, "no"),
        (("update", "locations.mc.kmc.dev/crds", NAME), {}, "yes"),
        (("update", "locations.mc.kmc.dev/crds", PUSHED), {}, "no"),
        (("update", "leases.coordination.k8s.io", f"kmc-agent-{NAME}"), KMC_SYSTEM, "yes"),
        (("update", "leases.coordination.k8s.io", f"kmc-agent-{PUSHED}"), KMC_SYSTEM, "no"),
        (("create", "leases.coordination.k8s.io"), KMC_SYSTEM, "no"),
        (("create", "certificatesigningrequests.certificates.k8s.io"), {}, "yes"),
        (
            ("approve", "signers.certificates.k8s.io", "kubernetes.io/kube-apiserver-client"),
            {},
            "no",
        ),
        (("get", "locations.kmc.dev", NAME), {}, "no"),
        (("update", "locations.kmc.dev", NAME), {}, "no"),
        (("list", "secrets"), {}, "no"),
        (("get", "secrets", "kmc-agent-identity"), KMC_SYSTEM, "no"),
        (("list", "deployments.apps"), {}, "no"),
        (("create", "deployments.apps"), {"namespace": "default"}, "no"),
    ]

    def matrix() -> tuple[Any, str | None]:
        answers = [
            (asked, can(hub, token_id, *asked, **more), want) for asked, more, want in rights
        ]
        wrong = [(asked, said, want) for asked, said, want in answers if said != want]
        return wrong, None if not wrong else f"can-i answers {wrong}"

    wait_until("the agent's rights on the hub", matrix)

    # The agent: the cluster's kubeconfig, the hub's URL and CA, the token.
    running = start_agent(spare, token)
    try:
        wait_until("Ready from the lease", ready_is(hub, NAME, "True", "AgentLease"))
        issued = csrs(hub)
        assert len(issued) == 1, issued
        (request,) = issued.values()
        approved = [c for c in request["status"]["conditions"] if c["type"] == "Approved"]
        assert approved and approved[0]["reason"] == "KmcLocationJoin", request["status"]
        assert request["spec"]["username"] == f"system:bootstrap:{token_id}"
        annotations = hub.json("get", "location", NAME)["metadata"]["annotations"]
        used = f"{token_id}:{request['metadata']['name']}"
        assert annotations["kmc.dev/join-used"] == used, annotations
        kept = cluster.json("get", "secret", "kmc-agent-identity", "-n", "kmc-system")
        assert kept["type"] == "kubernetes.io/tls"

        # The hub holds no credential for the cluster: no Secret names it for kmc-apiserver,
        # and none holds its server's address or the agent's key.
        server = bed.load().cluster(NAME).server  # type: ignore[union-attr]
        key = base64.b64decode(kept["data"]["tls.key"]).decode()
        for secret in hub.json("get", "secrets", "-A")["items"]:
            meta = secret["metadata"]
            assert not (
                meta["namespace"] == "kmc-system"
                and (meta.get("labels") or {}).get("kmc.dev/location") == NAME
            ), meta
            for value in (secret.get("data") or {}).values():
                text = base64.b64decode(value).decode(errors="replace")
                assert not re.search(re.escape(server) + r"(?!\d)", text), meta
                assert key not in text, meta
        assert "secretRef" not in hub.json("get", "location", NAME)["spec"]

        # Its work arrives through it.
        split_across(hub, (NAME, cluster), (PUSHED, pushed), namespace)

        # The token again (an agent with nowhere kept): refused by the hub, nothing made. The
        # hub's kube-apiserver takes a token it accepted in the last 10 s as good without
        # looking again, so that long after the first agent last used it.
        approved_at = datetime.datetime.fromisoformat(
            approved[0]["lastUpdateTime"].replace("Z", "+00:00")
        )

        def spent() -> tuple[Any, str | None]:
            now = datetime.datetime.now(datetime.UTC)
            tokens = hub.json(
                "get", "secrets", "-n", "kube-system", "-l", f"kmc.dev/location={NAME}"
            )
            live = [
                t["metadata"]["name"]
                for t in tokens["items"]
                if base64.b64decode(t["data"].get("usage-bootstrap-authentication", "")) == b"true"
            ]
            if not live and now > approved_at + datetime.timedelta(seconds=12):
                return now, None
            return live, f"tokens still usable: {live}, approved at {approved_at}"

        wait_until("the token spent", spent)
        before = set(csrs(hub))
        again = subprocess.run(
            agent_command(spare, token, "--identity-secret", "kmc-agent-identity-again"),
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert again.returncode == 1, again.stderr
        assert "the hub refused the bootstrap token (401 Unauthorized)" in again.stderr, (
            again.stderr[-3000:]
        )
        assert set(csrs(hub)) == before, {
            n: (c["spec"]["username"], c.get("status")) for n, c in csrs(hub).items()
        }
        gone = cluster.run(
            "get", "secret", "kmc-agent-identity-again", "-n", "kmc-system", check=False
        )
        assert gone.returncode != 0 and "NotFound" in gone.stderr

        # With its certificate: its own feed is served, another location's is 403.
        as_agent = certificate_kubeconfig(hub, cluster, tmp_path)
        own = as_agent.run("get", "--raw", WORK.format(NAME), check=False)
        assert own.returncode == 0 and '"kind":"WorkFeedList"' in own.stdout.replace(" ", "")
        other = as_agent.run("get", "--raw", WORK.format(PUSHED), check=False)
        assert other.returncode != 0 and "Forbidden" in other.stderr, other.stderr

        # Restarted, it reuses the certificate it keeps: no new request on the hub.
        stop(running)
        running = start_agent(spare, None)
        wait_until("its lease renewed by the restarted agent", renewed_by(hub, running))
        wait_until("Ready again", ready_is(hub, NAME, "True", "AgentLease"))
        assert set(csrs(hub)) == before

        # A renewal, asked as the agent asks it (with its certificate): approved as one. The
        # same identity asking for another pull location's name: left pending, saying why.
        def ask_as_agent(location: str) -> str:
            _, pem = identity.new_request(location, token_id)
            body = identity.csr_object(location, pem, 600)
            as_agent.run("create", "-f", "-", stdin=json.dumps(body))
            return str(body["metadata"]["name"])

        def issued_as(name: str, reason: str) -> Any:
            def check() -> tuple[Any, str | None]:
                status = hub.json("get", "csr", name).get("status") or {}
                reasons = [c.get("reason") for c in status.get("conditions") or []]
                if status.get("certificate") and reasons == [reason]:
                    return status, None
                return status, f"CSR {name}: {reasons}, certificate: {'certificate' in status}"

            return check

        renewal = ask_as_agent(NAME)
        wait_until("a renewal approved", issued_as(renewal, "KmcLocationRenewal"))
        stranger = "pull-other"
        hub.apply(
            {
                "apiVersion": "kmc.dev/v1alpha1",
                "kind": "Location",
                "metadata": {"name": stranger},
                "spec": {"mode": "Pull"},
            }
        )
        theirs = ""
        try:
            theirs = ask_as_agent(stranger)

            def warned() -> tuple[Any, str | None]:
                events = hub.json(
                    "get",
                    "events",
                    "-n",
                    "default",
                    "--field-selector",
                    f"involvedObject.name={theirs}",
                )["items"]
                reasons = [e["reason"] for e in events]
                return reasons, None if "NotItsJoin" in reasons else f"events: {reasons}"

            wait_until("another location's request refused", warned)
            assert not (hub.json("get", "csr", theirs).get("status") or {}).get("conditions")
        finally:
            hub.run("delete", "location", stranger, "--ignore-not-found")
            hub.run("delete", "csr", theirs, renewal, "--ignore-not-found", check=False)

        lease = ("update", "leases.coordination.k8s.io", f"kmc-agent-{NAME}")

        def refused(who: Kubectl) -> Any:
            def check() -> tuple[Any, str | None]:
                feed = who.run("get", "--raw", WORK.format(NAME), check=False)
                if feed.returncode != 0 and "Forbidden" in feed.stderr:
                    return feed.stderr, None
                return feed.stderr, f"the feed: {feed.returncode} {feed.stderr.strip()}"

            return check

        # Revoked while its Location stays: its certificate opens nothing (not even a renewal),
        # the Location is not Ready saying why, and what runs there stays (the agent deletes
        # nothing when it is refused).
        out = hub.mc("revoke", NAME)
        assert f"location.kmc.dev/{NAME} revoked (join {token_id})" in out.stdout, out.stdout
        wait_until("not Ready: revoked", ready_is(hub, NAME, "False", "JoinRevoked"))
        wait_until("the agent's feed refused after revoke", refused(as_agent))
        assert can(hub, token_id, *lease, **KMC_SYSTEM) == "no"
        _, pem = identity.new_request(NAME, token_id)
        renewing = as_agent.run(
            "create", "-f", "-", stdin=json.dumps(identity.csr_object(NAME, pem, 600)), check=False
        )
        assert renewing.returncode != 0 and "Forbidden" in renewing.stderr, renewing.stderr
        assert replicas_in(cluster, namespace) == 2
        assert hub.run("get", "location", NAME, check=False).returncode == 0

        # A new join brings it back: its agent, given the new token, trades it for a
        # certificate of the new join in place of the one it keeps; the old one stays refused.
        rejoined = hub.mc("join", NAME, "--mode", "pull")
        assert f"location.kmc.dev/{NAME} configured (pull)" in rejoined.stdout, rejoined.stdout
        found = TOKEN.search(rejoined.stdout)
        assert found, rejoined.stdout
        new_id = found.group(1).split(".")[0]
        assert new_id != token_id
        stop(running)
        running = start_agent(spare, found.group(1))
        wait_until("its lease renewed after a new join", renewed_by(hub, running))
        wait_until("Ready after a new join", ready_is(hub, NAME, "True", "AgentLease"))
        joined_again = [
            c for c in csrs(hub).values() if c["spec"]["username"] == f"system:bootstrap:{new_id}"
        ]
        assert len(joined_again) == 1, csrs(hub)
        reasons = [c.get("reason") for c in joined_again[0]["status"]["conditions"]]
        assert reasons == ["KmcLocationJoin"], joined_again[0]["status"]
        old = as_agent
        as_agent = certificate_kubeconfig(hub, cluster, tmp_path / "rejoined")
        own = as_agent.run("get", "--raw", WORK.format(NAME), check=False)
        assert own.returncode == 0 and '"kind":"WorkFeedList"' in own.stdout.replace(" ", "")
        wait_until("the old certificate still refused", refused(old))
        assert can(hub, new_id, *lease, **KMC_SYSTEM) == "yes"
        assert can(hub, token_id, *lease, **KMC_SYSTEM) == "no"

        # SIGHUP: the agent renews at once, as it does at 70-80% of its certificate's life,
        # and goes on with the new certificate (a renewal of the same join, kept in its
        # cluster, its lease still renewed after the switch).
        log_path = config.REPO_ROOT / ".testbed" / "logs" / f"kmc-agent-{NAME}.log"
        switched_before = log_path.read_text(errors="replace").count(SWITCHED)
        asked_before = set(csrs(hub))
        running.send_signal(signal.SIGHUP)

        def switched() -> tuple[Any, str | None]:
            lines = [
                line
                for line in log_path.read_text(errors="replace").splitlines()
                if SWITCHED in line
            ]
            if len(lines) > switched_before:
                return lines[-1], None
            return None, "the agent has not switched to a renewed certificate yet"

        line = wait_until("the agent switched to a renewed certificate", switched)
        renewals = [c for n, c in csrs(hub).items() if n not in asked_before]
        assert len(renewals) == 1, renewals
        assert renewals[0]["spec"]["username"] == USER
        assert [c["reason"] for c in renewals[0]["status"]["conditions"]] == ["KmcLocationRenewal"]
        kept = cluster.json("get", "secret", "kmc-agent-identity", "-n", "kmc-system")["data"]
        renewed = identity.Identity.of(b"", base64.b64decode(kept["tls.crt"]))
        assert renewed.join_id == new_id
        assert line.endswith(f"(serial {renewed.serial:x})"), line
        for _ in range(2):  # the first may have been on its way before the switch
            before_renewal = lease_renewed_at(hub)
            wait_until(
                "its lease renewed with the new certificate", renewed_since(hub, before_renewal)
            )
        wait_until("Ready with the new certificate", ready_is(hub, NAME, "True", "AgentLease"))

        # Unjoin: drained (the agent removes its share), then its rights go, and the Location.
        out = hub.mc("unjoin", NAME, "--timeout=180s")
        assert f"location.kmc.dev/{NAME} unjoined" in out.stdout, out.stdout + out.stderr
        assert replicas_in(pushed, namespace) == 4
        assert hub.run("get", "location", NAME, check=False).returncode != 0
        wait_until("the agent's feed refused after unjoin", refused(as_agent))
        assert can(hub, new_id, *lease, **KMC_SYSTEM) == "no"
        assert can(hub, new_id, "watch", "workfeeds.mc.kmc.dev", NAME) == "no"
        left = hub.json(
            "get", "clusterrolebindings,rolebindings", "-A", "-l", f"kmc.dev/location={NAME}"
        )
        assert left["items"] == []
    finally:
        stop(running)
