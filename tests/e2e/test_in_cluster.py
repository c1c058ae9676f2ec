"""kmc-apiserver on the in-cluster path (issue #15): no kubeconfig, the hub found through
KUBERNETES_SERVICE_HOST/PORT and a ServiceAccount token file, as in a pod. The token file is
rewritten under it, the way the kubelet rotates a projected token, here after the account was
deleted and made again (so the old token is refused): it goes on without a restart."""

from __future__ import annotations

import base64
import datetime
import json
import os
import re
import subprocess
import sys
from pathlib import Path

from kmc_testbed import bed, config
from kubectl_mc.kubeconfig import load, select

from .conftest import Kubectl, run_testbed
from .test_locations import wait_until
from .test_plugin_exec_credentials import ready

ACCOUNT = "kmc-in-cluster"


def lease_writes_by(user: str, since: datetime.datetime) -> list[str]:
    """The hub's audit events of `user` writing the leader Lease since `since`."""
    found = []
    with bed.audit_log().open() as lines:
        for line in lines:
            if user not in line or '"leases"' not in line:
                continue
            event = json.loads(line)
            at = datetime.datetime.fromisoformat(event["requestReceivedTimestamp"].rstrip("Z"))
            code = (event.get("responseStatus") or {}).get("code")
            if event["user"]["username"] == user and at >= since and code in (200, 201):
                found.append(event["verb"])
    return found


def test_the_in_cluster_token_file_is_read_again_without_a_restart(
    installed: bed.State, kubectl: dict[str, Kubectl], namespace: str, tmp_path: Path
) -> None:
    hub = kubectl["hub"]
    hub.run("create", "serviceaccount", ACCOUNT, "-n", namespace)
    binding = f"{namespace}-in-cluster"
    hub.run(
        "create", "clusterrolebinding", binding, "--clusterrole=cluster-admin",
        f"--serviceaccount={namespace}:{ACCOUNT}",
    )  # fmt: skip
    bed_config, base = load(str(config.kubeconfig_path()))
    cluster = select(bed_config, "hub", base=base).cluster
    account = tmp_path / "serviceaccount"
    account.mkdir()
    (account / "ca.crt").write_bytes(base64.b64decode(cluster["certificate-authority-data"]))
    (account / "token").write_text(
        hub.run("create", "token", ACCOUNT, "-n", namespace, "--duration=1h").stdout
    )
    host, port = re.fullmatch(r"https://(.+):(\d+)", cluster["server"]).groups()  # type: ignore[union-attr]
    env = {k: v for k, v in os.environ.items() if k != "KUBECONFIG"}
    env.update(
        PYTHONPATH=str(config.REPO_ROOT),
        KUBERNETES_SERVICE_HOST=host,
        KUBERNETES_SERVICE_PORT=port,
        KMC_SERVICE_ACCOUNT_DIR=str(account),
    )
    serving = bed.free_ports(1)[0]
    log_path = tmp_path / "kmc.log"
    log = log_path.open("w")
    server = subprocess.Popen(
        [sys.executable, "-m", "apiserver", f"--secure-port={serving}",
         f"--cert-dir={tmp_path / 'certs'}"],
        stdout=log, stderr=subprocess.STDOUT, cwd=config.REPO_ROOT, env=env,
    )  # fmt: skip
    bed_kmc_stopped = False
    try:
        wait_until("the in-cluster kmc-apiserver ready", lambda: ready(serving), timeout=120)
        # The account made again: the token in the file is refused from now on.
        hub.run("delete", "serviceaccount", ACCOUNT, "-n", namespace)
        hub.run("create", "serviceaccount", ACCOUNT, "-n", namespace)
        wait_until(
            "a request refused for the old token",
            lambda: "Unauthorized" in log_path.read_text(),
            timeout=90,
        )
        # What the kubelet does: a new token, written in place.
        fresh = hub.run("create", "token", ACCOUNT, "-n", namespace, "--duration=1h").stdout
        (account / "token").write_text(fresh)
        since = datetime.datetime.utcnow()
        # With the bed's replica gone, ours takes the Lease: a write only a valid token makes.
        run_testbed("stop", "kmc-apiserver")
        bed_kmc_stopped = True
        user = f"system:serviceaccount:{namespace}:{ACCOUNT}"
        wait_until(
            "the in-cluster replica writing the Lease with the new token",
            lambda: lease_writes_by(user, since),
            timeout=120,
        )
        assert server.poll() is None and ready(serving), log_path.read_text()[-2000:]
    finally:
        server.terminate()
        server.wait(timeout=30)
        log.close()
        if bed_kmc_stopped:
            run_testbed("start", "kmc-apiserver")
        hub.run("delete", "clusterrolebinding", binding, "--ignore-not-found")
