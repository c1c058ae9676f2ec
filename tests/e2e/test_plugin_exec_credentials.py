"""`kubectl mc get` with a kubeconfig whose user is an exec credential plugin (issue #15), run
by the real kubectl against the real hub: the plugin (`sa_token_plugin.py`) mints
ServiceAccount tokens with TokenRequest.

The ServiceAccount is bound to the built-in `view` ClusterRole and, because `view` does not
cover our groups, to a Role reading `mc.kmc.dev` and `remote.kmc.dev` in the namespace.
"""

from __future__ import annotations

import json
import os
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from kmc_testbed import bed, config
from kubectl_mc.kubeconfig import load, select

from .conftest import Kubectl
from .test_testbed import deployment

PLUGIN = Path(__file__).with_name("sa_token_plugin.py")
ACCOUNT = "mc-reader"


def grant(hub: Kubectl, namespace: str) -> None:
    """The ServiceAccount may read the namespace: `view`, and our groups by a Role."""
    hub.run("create", "serviceaccount", ACCOUNT, "-n", namespace)
    subject = f"--serviceaccount={namespace}:{ACCOUNT}"
    hub.run("create", "rolebinding", "view", "--clusterrole=view", subject, "-n", namespace)
    role = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "Role",
        "metadata": {"name": "kmc-view"},
        "rules": [
            {
                "apiGroups": ["mc.kmc.dev", "remote.kmc.dev"],
                "resources": ["*"],
                "verbs": ["get", "list", "watch"],
            }
        ],
    }
    hub.apply(role, namespace)
    hub.run("create", "rolebinding", "kmc-view", "--role=kmc-view", subject, "-n", namespace)


def exec_kubeconfig(folder: Path, namespace: str) -> Path:
    """The hub's cluster, and a user that is the plugin (nothing else: no certificate)."""
    bed_config, base = load(str(config.kubeconfig_path()))
    cluster = select(bed_config, "hub", base=base).cluster
    args = [str(PLUGIN), "--kubeconfig", str(config.kubeconfig_path()), "--context", "hub"]
    args += ["--namespace", namespace, "--serviceaccount", ACCOUNT]
    args += ["--log", str(folder / "runs.jsonl"), "--replay", str(folder / "replay")]
    command = {
        "apiVersion": "client.authentication.k8s.io/v1",
        "command": sys.executable,
        "args": args,
        "interactiveMode": "Never",
    }
    path = folder / "kubeconfig"
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "hub", "cluster": cluster}],
                "users": [{"name": "reader", "user": {"exec": command}}],
                "contexts": [{"name": "hub", "context": {"cluster": "hub", "user": "reader"}}],
                "current-context": "hub",
            }
        )
    )
    return path


def eventually(check: Callable[[], bool], timeout: float = 60) -> bool:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.5)
    return True


def runs(folder: Path) -> list[dict[str, Any]]:
    log = folder / "runs.jsonl"
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def authenticated(hub: Kubectl, token: str) -> bool:
    review = {
        "apiVersion": "authentication.k8s.io/v1",
        "kind": "TokenReview",
        "spec": {"token": token},
    }
    out = hub.run("create", "-f", "-", "-o", "json", stdin=json.dumps(review)).stdout
    return bool(json.loads(out).get("status", {}).get("authenticated"))


def test_kubectl_mc_get_runs_the_exec_plugin_and_recovers_from_a_401(
    installed: bed.State, kubectl: dict[str, Kubectl], namespace: str, tmp_path: Path
) -> None:
    hub = kubectl["hub"]
    grant(hub, namespace)
    hub.apply(deployment("web", 1), namespace)
    reader = Kubectl("hub", kubeconfig=str(exec_kubeconfig(tmp_path, namespace)))

    answers: list[str] = []

    def shows_web(*command: str) -> bool:
        """Does the command, run with the plugin's kubeconfig, list web? (Bindings take a
        moment to be seen by the authorizers.)"""
        proc = reader.run(*command, "-n", namespace, "--no-headers", check=False)
        answers.append(proc.stderr)
        return proc.returncode == 0 and proc.stdout.split()[:1] == ["web"]

    assert eventually(lambda: shows_web("get", "deployments.apps")), answers[-1]  # kubectl
    assert eventually(lambda: shows_web("mc", "get", "deploy")), answers[-1]
    first = runs(tmp_path)[-1]
    assert first["action"] == "minted"

    # A new ServiceAccount of the same name: the tokens of the old one are refused.
    hub.run("delete", "serviceaccount", ACCOUNT, "-n", namespace)
    hub.run("create", "serviceaccount", ACCOUNT, "-n", namespace)
    assert eventually(lambda: not authenticated(hub, first["token"])), "old token still valid"

    # The next process is handed the old token first (far from expiry): only a 401 and a
    # second run of the plugin can get it a working one.
    (tmp_path / "replay").write_text(first["token"])
    before = len(runs(tmp_path))
    out = reader.mc("get", "deploy", "-n", namespace, "--no-headers")
    assert out.stdout.split()[:1] == ["web"], out.stderr
    second = runs(tmp_path)[before:]
    assert [r["action"] for r in second] == ["replayed", "minted"]
    assert second[0]["ppid"] == second[1]["ppid"]  # both runs by the same kubectl mc


def ready(port: int) -> bool:
    context = ssl.create_default_context()
    context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
    try:
        with urllib.request.urlopen(
            f"https://127.0.0.1:{port}/readyz", context=context, timeout=10
        ) as answer:
            return bool(answer.status == 200)
    except (OSError, urllib.error.URLError):
        return False


def test_kmc_apiserver_with_an_exec_hub_credential_recovers_without_a_restart(
    installed: bed.State, kubectl: dict[str, Kubectl], namespace: str, tmp_path: Path
) -> None:
    """A second kmc-apiserver (a standby: the bed's holds the lease) whose hub credential is
    the exec plugin. Its ServiceAccount is deleted and made again, so the token it holds is
    refused; its next request gets a 401, runs the plugin again and goes on, no restart."""
    hub = kubectl["hub"]
    hub.run("create", "serviceaccount", ACCOUNT, "-n", namespace)
    binding = f"{namespace}-kmc"
    hub.run(
        "create",
        "clusterrolebinding",
        binding,
        "--clusterrole=cluster-admin",
        f"--serviceaccount={namespace}:{ACCOUNT}",
    )
    port = bed.free_ports(1)[0]
    log = (tmp_path / "kmc.log").open("w")
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "apiserver",
            f"--kubeconfig={exec_kubeconfig(tmp_path, namespace)}",
            "--context=hub",
            f"--secure-port={port}",
            f"--cert-dir={tmp_path / 'certs'}",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
        cwd=config.REPO_ROOT,
        env={**os.environ, "PYTHONPATH": str(config.REPO_ROOT)},
    )
    try:
        assert eventually(lambda: ready(port), 120), (tmp_path / "kmc.log").read_text()[-2000:]
        first = runs(tmp_path)[-1]
        hub.run("delete", "serviceaccount", ACCOUNT, "-n", namespace)
        hub.run("create", "serviceaccount", ACCOUNT, "-n", namespace)
        assert eventually(lambda: not authenticated(hub, first["token"])), "old token still valid"
        # The standby asks for the lease every few seconds: one of those is refused, and the
        # plugin is run again, by kmc-apiserver itself.
        assert eventually(
            lambda: any(
                r["action"] == "minted" and r["token"] != first["token"] for r in runs(tmp_path)
            ),
            90,
        ), (tmp_path / "kmc.log").read_text()[-2000:]
        assert server.poll() is None and ready(port)
        fresh = runs(tmp_path)[-1]["token"]
        assert authenticated(hub, fresh)
    finally:
        server.terminate()
        server.wait(timeout=30)
        log.close()
        hub.run("delete", "clusterrolebinding", binding, "--ignore-not-found")
