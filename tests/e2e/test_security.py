"""Security boundaries on the test bed: RBAC of both groups as `kubectl auth can-i` says it,
and secrets that never leak into what kmc-apiserver answers, records or logs."""

from __future__ import annotations

import base64
import datetime
import json
import socket
import ssl
import tempfile
import time
import uuid
from pathlib import Path

from cryptography import x509

from apiserver import certs
from kmc_testbed import bed

from .conftest import Kubectl
from .test_aggregated import remote_pods, rows, running
from .test_locations import wait_until as wait_for
from .test_testbed import deployment

# (verb, resource, subresource, name): every resource and sub-resource kind the groups serve.
CHECKS = [
    ("list", "deployments.mc.kmc.dev", "", ""),
    ("get", "deployments.mc.kmc.dev", "", "web"),
    ("get", "deployments.mc.kmc.dev", "locations", "web"),
    ("get", "deployments.mc.kmc.dev", "strategy", "web"),
    ("patch", "deployments.mc.kmc.dev", "strategy", "web"),
    ("list", "pods.remote.kmc.dev", "", ""),
    ("list", "configmaps.remote.kmc.dev", "", ""),
    ("list", "events.remote.kmc.dev", "", ""),
]


def attempt(hub: Kubectl, namespace: str, user: str, check: tuple[str, str, str, str]) -> bool:
    """Does the request itself go through (anything but Forbidden)?"""
    verb, resource, sub, name = check
    args = ["-n", namespace, "--as", user]
    if verb == "patch":
        patch = '{"spec":{"type":"Split"}}'
        cmd = ["patch", resource, name, "--subresource", sub, "--type=merge", "-p", patch]
    else:
        cmd = ["get", resource, *([name] if name else []), *(["--subresource", sub] if sub else [])]
    proc = hub.run(*cmd, *args, check=False)
    assert proc.returncode == 0 or "Forbidden" in proc.stderr, proc.stderr
    return proc.returncode == 0


def can_i(hub: Kubectl, namespace: str, user: str, check: tuple[str, str, str, str]) -> bool:
    verb, resource, sub, name = check
    target = f"{resource}/{name}" if name else resource
    extra = ["--subresource", sub] if sub else []
    proc = hub.run(
        "auth", "can-i", verb, target, *extra, "-n", namespace, "--as", user, check=False
    )
    return proc.stdout.strip() == "yes"


def test_what_can_i_says_is_what_the_server_does(
    installed: bed.State, kubectl: dict[str, Kubectl], namespace: str
) -> None:
    hub = kubectl["hub"]
    hub.apply(deployment("web", 2), namespace)
    running(hub, namespace, 2)
    user = f"system:serviceaccount:{namespace}:limited"
    hub.run("create", "serviceaccount", "limited", "-n", namespace)
    role = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "Role",
        "metadata": {"name": "limited"},
        "rules": [
            {"apiGroups": ["mc.kmc.dev"], "resources": ["deployments"], "verbs": ["get", "list"]},
            {"apiGroups": ["mc.kmc.dev"], "resources": ["deployments/locations"], "verbs": ["get"]},
            {"apiGroups": ["remote.kmc.dev"], "resources": ["pods"], "verbs": ["list"]},
        ],
    }
    hub.apply(role, namespace)
    hub.run(
        "create",
        "rolebinding",
        "limited",
        "-n",
        namespace,
        "--role=limited",
        f"--serviceaccount={namespace}:limited",
    )
    outcomes = {
        c: (can_i(hub, namespace, user, c), attempt(hub, namespace, user, c)) for c in CHECKS
    }
    disagree = {c: o for c, o in outcomes.items() if o[0] != o[1]}
    assert not disagree, f"can-i (first) and the server (second) disagree: {disagree}"
    allowed = {c for c, (said, _) in outcomes.items() if said}
    assert allowed == set(CHECKS[:3] + CHECKS[5:6])


def test_secret_data_and_child_credentials_never_leak(
    installed: bed.State, kubectl: dict[str, Kubectl], namespace: str
) -> None:
    hub = kubectl["hub"]
    marker = f"s3cr3t-{uuid.uuid4().hex}"
    hub.run("create", "secret", "generic", "app", "-n", namespace, f"--from-literal=token={marker}")
    app = deployment("web", 2)
    app["spec"]["template"]["spec"]["containers"][0]["envFrom"] = [{"secretRef": {"name": "app"}}]
    hub.apply(app, namespace)
    running(hub, namespace, 2)
    # The Secret went where the Deployment runs (it is its dependency)…
    assert any(
        kubectl[c].run("get", "secret", "app", "-n", namespace, check=False).returncode == 0
        for c in ("us-east", "us-west", "eu-west")
    )
    # …and the child credentials kmc holds are these: neither may show up anywhere.
    creds = hub.json("get", "secret", "location-us-east", "-n", "kmc-system")["data"]
    kubeconfig = base64.b64decode(next(iter(creds.values()))).decode()
    key = next(
        line.split(":", 1)[1].strip()
        for line in kubeconfig.splitlines()
        if "client-key-data" in line
    )
    seen = "\n".join(
        [
            hub.run("get", "deployments.mc.kmc.dev", "-n", namespace, "-o", "json").stdout,
            hub.run(
                "get",
                "deployments.mc.kmc.dev",
                "web",
                "-n",
                namespace,
                "--subresource",
                "locations",
                "-o",
                "json",
            ).stdout,
            hub.run(
                "get",
                "deployments.mc.kmc.dev",
                "web",
                "-n",
                namespace,
                "--subresource",
                "strategy",
                "-o",
                "json",
            ).stdout,
            hub.run("get", "pods.remote.kmc.dev", "-n", namespace, "-o", "json").stdout,
            hub.run("get", "events.remote.kmc.dev", "-n", namespace, "-o", "json").stdout,
            hub.run("get", "events", "-n", namespace, "-o", "json").stdout,
            hub.run("get", "locations", "-o", "json").stdout,
            json.dumps(hub.json("get", "deployment", "web", "-n", namespace)["status"]),
            bed.log_path(bed.KMC).read_text(),
        ]
    )
    assert marker not in seen
    assert base64.b64encode(marker.encode()).decode() not in seen
    assert key not in seen
    secrets = hub.run("get", "secrets.remote.kmc.dev", "-n", namespace, check=False)
    assert secrets.returncode == 1 and "the server doesn't have a resource type" in secrets.stderr


def served_certificate(port: int, ca: Path) -> x509.Certificate:
    context = ssl.create_default_context(cafile=str(ca))
    with (
        socket.create_connection(("localhost", port), timeout=5) as raw,
        context.wrap_socket(raw, server_hostname="localhost") as tls,
    ):
        der = tls.getpeercert(binary_form=True)
    assert der is not None
    return x509.load_der_x509_certificate(der)


def test_an_expiring_serving_certificate_is_renewed_without_a_restart(
    installed: bed.State, kubectl: dict[str, Kubectl]
) -> None:
    assert installed.kmc_port is not None
    folder = bed.kmc_folder() / "certs"
    ca = certs.Pair(folder / "ca.crt", folder / "ca.key")
    before = served_certificate(installed.kmc_port, ca.cert)
    now = bed.load()  # earlier tests may have restarted it since the bed was installed
    assert now is not None
    pid = now.pids[bed.KMC]
    # As if a year had passed: the pair on disk expires tomorrow.
    with tempfile.TemporaryDirectory(dir=folder.parent) as tmp:  # same filesystem: atomic
        hosts = ("localhost", "127.0.0.1", "kmc-apiserver.kmc-system.svc")
        short = certs.ensure_cert(
            Path(tmp),
            "apiserver",
            ca,
            "kmc-apiserver",
            hosts=hosts,
            validity=datetime.timedelta(days=1),
        )
        short.key.replace(folder / "apiserver.key")
        short.cert.replace(folder / "apiserver.crt")
    deadline = time.monotonic() + 30
    while True:
        served = served_certificate(installed.kmc_port, ca.cert)
        left = served.not_valid_after_utc - datetime.datetime.now(datetime.UTC)
        if served.serial_number != before.serial_number and left > datetime.timedelta(days=300):
            break
        assert time.monotonic() < deadline, f"still serving one valid for {left}"
        time.sleep(1)
    state = bed.load()
    assert state is not None and state.pids[bed.KMC] == pid  # renewed in place
    kubectl["hub"].run("get", "pods.remote.kmc.dev", "-n", "default")  # the hub still trusts it


def test_the_built_in_view_and_edit_roles_cover_kubectl_mc(
    installed: bed.State, kubectl: dict[str, Kubectl], namespace: str
) -> None:
    """A service account bound only to the built-in `view` ClusterRole reads the views, their
    sub-resources, the children's pods and their logs; it may not change a strategy or exec
    into a pod; with `edit` it may."""
    hub = kubectl["hub"]
    hub.apply(deployment("web", 3), namespace)
    running(hub, namespace, 3)
    hub.run("create", "serviceaccount", "viewer", "-n", namespace)
    hub.run(
        "create",
        "rolebinding",
        "viewer",
        "-n",
        namespace,
        "--clusterrole=view",
        f"--serviceaccount={namespace}:viewer",
    )
    user = f"system:serviceaccount:{namespace}:viewer"
    as_user = ("-n", namespace, "--as", user)
    views = hub.run("get", "deployments.mc.kmc.dev", *as_user).stdout
    assert "web" in views
    hub.run("get", "deployments.mc.kmc.dev", "web", "--subresource", "locations", *as_user)
    hub.run("get", "deployments.mc.kmc.dev", "web", "--subresource", "strategy", *as_user)
    # The RoleBinding follows the namespace to the children, where `view` covers pods.
    wait_for(
        "the viewer to see the pods",
        lambda: len(rows(hub.run("get", "pods.remote.kmc.dev", *as_user).stdout)) == 3,
        60,
    )
    # A pod's log too, wherever it runs (`view` covers pods/log in the child as well).
    pod = remote_pods(hub, namespace)[0]["metadata"]["name"]
    log_path = f"/apis/remote.kmc.dev/v1alpha1/namespaces/{namespace}/pods/{pod}/log"
    assert "a fake pod of" in hub.run("get", "--raw", log_path, "--as", user).stdout

    def may_exec() -> bool:
        asked = ["auth", "can-i", "create", "pods.remote.kmc.dev", "--subresource=exec"]
        return hub.run(*asked, *as_user, check=False).stdout.strip() == "yes"

    assert not may_exec()
    patch = ["--subresource", "strategy", "--type=merge", "-p", '{"spec":{"type":"Split"}}']
    refused = hub.run("patch", "deployments.mc.kmc.dev", "web", *patch, *as_user, check=False)
    assert refused.returncode != 0 and "Forbidden" in refused.stderr
    hub.run(
        "create",
        "rolebinding",
        "editor",
        "-n",
        namespace,
        "--clusterrole=edit",
        f"--serviceaccount={namespace}:viewer",
    )
    wait_for(
        "edit to allow a strategy change",
        lambda: (
            hub.run(
                "patch", "deployments.mc.kmc.dev", "web", *patch, *as_user, check=False
            ).returncode
            == 0
        ),
        30,
    )
    assert may_exec()
