"""Revocation: how long a child's rows stay visible through the hub after that child stops
granting the caller.

A user may list pods.remote.kmc.dev on the hub (a cluster-wide grant, which does not follow
namespaces to the children), and may list pods in one namespace of each child. The grant is
removed in one child at a time; we list as that user until the child's rows are gone. The
goal is the allowed-decision TTL of the children's reviews (`--child-authz-allowed-ttl`,
10 s) plus 1 s.

Run: `PYTHONPATH=hack .venv/bin/python -m bench.revocation`.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
import uuid
from typing import Any

from bench import remote
from bench.objects import deployment
from bench.report import emit, row
from kmc_testbed import config as bedconfig

RBAC = "rbac.authorization.k8s.io"


def kubectl(context: str, *args: str, stdin: str | None = None) -> str:
    cmd = [
        "kubectl",
        *args,
        "--kubeconfig",
        str(bedconfig.user_kubeconfig_path()),
        "--context",
        context,
    ]
    done = subprocess.run(cmd, capture_output=True, text=True, input=stdin)
    if done.returncode != 0:
        raise RuntimeError(f"kubectl {' '.join(args)}: {done.stderr.strip()}")
    return done.stdout


def grant(context: str, name: str, user: str, group: str, namespace: str = "") -> None:
    role = {
        "apiVersion": f"{RBAC}/v1",
        "kind": "ClusterRole",
        "metadata": {"name": name},
        "rules": [{"apiGroups": [group], "resources": ["pods"], "verbs": ["get", "list", "watch"]}],
    }
    binding = {
        "apiVersion": f"{RBAC}/v1",
        "kind": "RoleBinding" if namespace else "ClusterRoleBinding",
        "metadata": {"name": name, **({"namespace": namespace} if namespace else {})},
        "roleRef": {"apiGroup": RBAC, "kind": "ClusterRole", "name": name},
        "subjects": [{"apiGroup": RBAC, "kind": "User", "name": user}],
    }
    listing = {"apiVersion": "v1", "kind": "List", "items": [role, binding]}
    kubectl(context, "apply", "-f", "-", stdin=json.dumps(listing))


def locations_seen(namespace: str, user: str | None = None) -> set[str]:
    who = ["--as", user] if user else []
    out = kubectl("hub", "get", "pods.remote.kmc.dev", "-n", namespace, *who, "-o", "json")
    return {p["metadata"]["annotations"]["kmc.dev/location"] for p in json.loads(out)["items"]}


def wait(what: str, check: Any, timeout: float = 180.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise TimeoutError(what)
        time.sleep(0.2)


def measure() -> list[dict[str, Any]]:
    children = remote.children()
    namespace = f"bench-revoke-{uuid.uuid4().hex[:6]}"
    user = f"revoked-{namespace}"
    kubectl("hub", "create", "namespace", namespace)
    try:
        manifest = deployment("web", len(children))
        kubectl("hub", "apply", "-n", namespace, "-f", "-", stdin=json.dumps(manifest))
        grant("hub", namespace, user, "remote.kmc.dev")
        wait("a pod in every location", lambda: locations_seen(namespace) >= set(children))
        for child in children:
            grant(child, namespace, user, "", namespace)
        everywhere = set(children)
        wait(
            "the user to see every location", lambda: locations_seen(namespace, user) == everywhere
        )
        took = []
        for child in children:
            kubectl(child, "delete", "rolebinding", namespace, "-n", namespace)
            revoked = time.monotonic()
            wait(f"{child}'s rows to go", lambda c=child: c not in locations_seen(namespace, user))
            took.append(time.monotonic() - revoked)
        return [
            {**row("revocation", "rows_gone_after_s", max(took), None, 2), "each": took},
        ]
    finally:
        kubectl("hub", "delete", "namespace", namespace, "--wait=false")
        kubectl("hub", "delete", "clusterrole,clusterrolebinding", namespace, "--ignore-not-found")
        for child in children:
            kubectl(child, "delete", "clusterrole", namespace, "--ignore-not-found")


def main(argv: list[str]) -> None:
    emit(measure())


if __name__ == "__main__":
    main(sys.argv[1:])
