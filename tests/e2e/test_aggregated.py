"""The aggregated API server through the hub, with the real kubectl (every installed version).

`mc.kmc.dev` shows where hub workloads run; `remote.kmc.dev` lists the children's objects in
one table. Both go through the hub's aggregator, so discovery, authentication, authorization,
Tables and watch are the real ones a user meets.
"""

from __future__ import annotations

import json
import shutil
import ssl
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from apiserver import certs
from kmc_testbed import bed, config

from .conftest import CHILDREN, Kubectl, run_testbed
from .test_locations import wait_until as wait_for
from .test_placement import wait_placement, with_strategy
from .test_testbed import deployment

KUBECTL_DIR = Path(shutil.which("kubectl") or "kubectl").resolve().parent
VERSIONS = sorted(
    (p for p in KUBECTL_DIR.glob("kubectl.1.*") if int(p.name.split(".")[-1]) >= 28),
    key=lambda p: int(p.name.split(".")[-1]),
)


def header(output: str) -> list[str]:
    return output.splitlines()[0].split()


def rows(output: str) -> list[list[str]]:
    return [line.split() for line in output.splitlines()[1:] if line.strip()]


def remote_pods(hub: Kubectl, namespace: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = hub.json("get", "pods.remote.kmc.dev", "-n", namespace)["items"]
    return items


def running(
    hub: Kubectl, namespace: str, count: int, everywhere: bool = False
) -> list[dict[str, Any]]:
    """`count` running pods (in every child with `everywhere`: a child that joined moments
    ago gets its share once its cooldown is over)."""

    def check() -> list[dict[str, Any]]:
        pods = remote_pods(hub, namespace)
        ok = len(pods) == count and all(p["status"].get("phase") == "Running" for p in pods)
        where = {p["metadata"]["annotations"]["kmc.dev/location"] for p in pods}
        return pods if ok and (not everywhere or where == set(CHILDREN)) else []

    result: list[dict[str, Any]] = wait_for(f"{count} running pods", check, 60)
    return result


def test_discovery_lists_both_groups_and_explain_works(
    installed: bed.State, kubectl: dict[str, Kubectl]
) -> None:
    hub = kubectl["hub"]
    mc = hub.run("api-resources", "--api-group=mc.kmc.dev", "-o", "name").stdout.split()
    assert sorted(mc) == sorted(
        f"{r}.mc.kmc.dev"
        for r in ("deployments", "statefulsets", "replicasets", "jobs", "daemonsets", "workfeeds")
    )
    remote = hub.run("api-resources", "--api-group=remote.kmc.dev", "-o", "name").stdout.split()
    assert "pods.remote.kmc.dev" in remote and "events.remote.kmc.dev" in remote
    assert not any(name.startswith("secrets") for name in remote)
    explained = hub.run("explain", "deployments.mc.kmc.dev").stdout
    assert "GROUP:      mc.kmc.dev" in explained and "KIND:       Deployment" in explained
    deeper = hub.run("explain", "deployments.mc.kmc.dev.status.locations").stdout
    assert "syncedGeneration" in deeper and "state" in deeper


def test_every_kubectl_prints_the_stitched_pod_table(
    installed: bed.State, kubectl: dict[str, Kubectl], namespace: str
) -> None:
    hub = kubectl["hub"]
    hub.apply(deployment("web", 4), namespace)
    running(hub, namespace, 4, everywhere=True)
    assert len(VERSIONS) >= 5, f"expected kubectl 1.28 to 1.33 beside kubectl, found {VERSIONS}"
    for binary in VERSIONS:
        out = Kubectl("hub", str(binary)).run("get", "pods.remote.kmc.dev", "-n", namespace)
        assert header(out.stdout) == ["LOCATION", "NAME", "READY", "STATUS", "RESTARTS", "AGE"]
        printed = rows(out.stdout)
        assert len(printed) == 4, (binary.name, out.stdout)
        assert {r[0] for r in printed} == set(CHILDREN)
        assert all(r[3] == "Running" for r in printed)


def test_wide_selectors_json_and_watch(
    installed: bed.State, kubectl: dict[str, Kubectl], namespace: str
) -> None:
    hub = kubectl["hub"]
    hub.apply(deployment("web", 2), namespace)
    running(hub, namespace, 2)
    wide = hub.run("get", "pods.remote.kmc.dev", "-n", namespace, "-o", "wide").stdout
    assert header(wide)[:2] == ["LOCATION", "NAME"] and "NODE" in header(wide)
    none = hub.run("get", "pods.remote.kmc.dev", "-n", namespace, "-l", "app=other")
    assert none.stdout == "" and "No resources found" in none.stderr
    assert (
        len(rows(hub.run("get", "pods.remote.kmc.dev", "-n", namespace, "-l", "app=web").stdout))
        == 2
    )
    # A scale-up on the hub streams the new pods to a running watch.
    cmd = ["kubectl", "get", "pods.remote.kmc.dev", "-n", namespace, "-w", "--no-headers"]
    cmd += ["--kubeconfig", str(config.kubeconfig_path()), "--context", "hub"]
    with tempfile.TemporaryFile("w+") as out:
        watch = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, text=True)
        try:
            time.sleep(2)
            hub.run("scale", "deployment", "web", "-n", namespace, "--replicas=4")

            def streamed() -> bool:
                out.seek(0)
                names = {line.split()[1] for line in out.read().splitlines() if line.strip()}
                return len(names) >= 4

            wait_for("the new pods in the watch", streamed)
        finally:
            watch.kill()
            watch.wait()


@pytest.mark.parametrize("version", ["1.32", "1.33"])
def test_locations_and_strategy_subresources(
    installed: bed.State, kubectl: dict[str, Kubectl], namespace: str, version: str
) -> None:
    hub = kubectl["hub"]
    hub.apply(deployment("web", 5), namespace)
    wait_placement(hub, "deployment", "web", namespace, lambda p: len(p) == 3)
    running(hub, namespace, 5)
    k = Kubectl("hub", str(KUBECTL_DIR / f"kubectl.{version}"))
    get = ("get", "deployments.mc.kmc.dev", "web", "-n", namespace, "--subresource")

    def all_synced() -> str:
        out = k.run(*get, "locations").stdout
        return out if all(r[5] == "Synced" for r in rows(out)) else ""

    out = wait_for("every location Synced", all_synced)
    assert header(out) == [
        "LOCATION",
        "DESIRED",
        "READY",
        "AVAILABLE",
        "SYNCED-GENERATION",
        "STATE",
        "MESSAGE",
        "OVERRIDES",
    ]
    printed = rows(out)
    assert [r[0] for r in printed] == sorted(CHILDREN)
    assert sum(int(r[1]) for r in printed) == 5 and sum(int(r[2]) for r in printed) == 5
    strategy = k.run(*get, "strategy").stdout
    assert header(strategy) == ["LOCATION", "ELIGIBLE", "REASON", "PLACED"]
    assert all(r[1] == "true" for r in rows(strategy))
    as_yaml = k.run(*get, "locations", "-o", "json").stdout
    assert json.loads(as_yaml)["kind"] == "Placement"


def test_writing_the_strategy_subresource_validates_then_sets_the_annotation(
    installed: bed.State, kubectl: dict[str, Kubectl], namespace: str
) -> None:
    hub = kubectl["hub"]
    hub.apply(deployment("web", 3), namespace)
    wait_placement(hub, "deployment", "web", namespace)
    patch = ("patch", "deployments.mc.kmc.dev", "web", "-n", namespace, "--subresource", "strategy")
    bad = hub.run(*patch, "-p", '{"spec":{"type":"Split","pin":["mars"]}}', check=False)
    assert bad.returncode == 1
    assert "no such location: mars" in bad.stderr
    worse = hub.run(*patch, "-p", '{"spec":{"type":"Bogus"}}', check=False)
    assert 'spec.type: must be one of Split, Replicate, Single, got "Bogus"' in worse.stderr
    annotations = hub.json("get", "deployment", "web", "-n", namespace)["metadata"]
    assert "kmc.dev/strategy" not in (annotations.get("annotations") or {})
    hub.run(*patch, "--type=merge", "-p", '{"spec":{"type":"Single","pin":["eu-west"]}}')
    written = hub.json("get", "deployment", "web", "-n", namespace)["metadata"]["annotations"]
    assert json.loads(written["kmc.dev/strategy"]) == {"type": "Single", "pin": ["eu-west"]}
    wait_placement(hub, "deployment", "web", namespace, lambda p: p == {"eu-west": 3})


def test_the_webhook_refuses_a_bad_strategy_at_apply_time(
    installed: bed.State, kubectl: dict[str, Kubectl], namespace: str
) -> None:
    hub = kubectl["hub"]
    manifest = json.dumps(with_strategy(deployment("web", 1), {"type": "Split", "pin": ["mars"]}))
    refused = hub.run("apply", "-n", namespace, "-f", "-", stdin=manifest, check=False)
    assert refused.returncode == 1
    assert "denied the request" in refused.stderr and "no location named mars" in refused.stderr
    broken = deployment("web", 1)
    broken["metadata"]["annotations"] = {"kmc.dev/strategy": "{not json"}
    refused = hub.run("apply", "-n", namespace, "-f", "-", stdin=json.dumps(broken), check=False)
    assert "not JSON" in refused.stderr
    assert hub.run("get", "deployment", "web", "-n", namespace, check=False).returncode == 1


def test_a_name_in_several_locations_needs_name_at_location(
    installed: bed.State, kubectl: dict[str, Kubectl], namespace: str
) -> None:
    hub = kubectl["hub"]
    hub.apply(with_strategy(deployment("web", 1), {"type": "Replicate"}), namespace)
    wait_for(
        "three child deployments",
        lambda: len(hub.json("get", "deployments.remote.kmc.dev", "-n", namespace)["items"]) == 3,
    )
    clash = hub.run("get", "deployments.remote.kmc.dev", "web", "-n", namespace, check=False)
    assert clash.returncode == 1
    assert "exists in several locations: eu-west, us-east, us-west" in clash.stderr
    one = hub.json("get", "deployments.remote.kmc.dev", "web@us-east", "-n", namespace)
    assert one["metadata"]["annotations"]["kmc.dev/location"] == "us-east"
    table = hub.run("get", "deployments.remote.kmc.dev", "web@us-west", "-n", namespace).stdout
    assert rows(table)[0][:2] == ["us-west", "web"]


def test_a_stopped_child_is_left_out_with_a_warning(
    installed: bed.State, kubectl: dict[str, Kubectl], namespace: str
) -> None:
    hub = kubectl["hub"]
    hub.apply(deployment("web", 3), namespace)
    running(hub, namespace, 3, everywhere=True)
    run_testbed("stop", "us-west")
    try:
        started = time.monotonic()
        out = hub.run("get", "pods.remote.kmc.dev", "-n", namespace)
        took = time.monotonic() - started
        assert took < 2.0, f"the list took {took:.1f}s"
        assert "Warning:" in out.stderr and "us-west" in out.stderr
        assert {r[0] for r in rows(out.stdout)} == {"us-east", "eu-west"}
    finally:
        run_testbed("start", "us-west")


def test_rbac_is_the_hubs_and_forged_requests_are_refused(
    installed: bed.State, kubectl: dict[str, Kubectl], namespace: str
) -> None:
    hub = kubectl["hub"]
    hub.apply(deployment("web", 2), namespace)
    running(hub, namespace, 2)
    user = f"system:serviceaccount:{namespace}:reader"
    hub.run("create", "serviceaccount", "reader", "-n", namespace)
    hub.let_read(namespace, "pods.remote.kmc.dev", f"--serviceaccount={namespace}:reader")
    # The Role follows the namespace to the children, so the impersonated reads pass there.
    allowed = wait_for(
        "the reader to see both pods",
        lambda: (
            len(rows(hub.run("get", "pods.remote.kmc.dev", "-n", namespace, "--as", user).stdout))
            == 2
        ),
    )
    assert allowed
    other = hub.run("get", "pods.remote.kmc.dev", "-n", "default", "--as", user, check=False)
    assert other.returncode == 1 and "Forbidden" in other.stderr

    url = f"https://localhost:{installed.kmc_port}/apis/remote.kmc.dev/v1alpha1/namespaces/{namespace}/pods"
    forged = {"X-Remote-User": "kmc-testbed-admin", "X-Remote-Group": "system:masters"}
    pki = config.state_dir() / "hub" / "pki"
    kmc_ca = str(bed.kmc_folder() / "certs" / "ca.crt")
    assert direct(url, forged, kmc_ca, None) == 401  # no client certificate
    hub_user = (pki / "admin.crt", pki / "admin.key")  # valid for the hub, not a front proxy
    assert direct(url, forged, kmc_ca, hub_user) == 401
    with tempfile.TemporaryDirectory() as folder:
        stranger = certs.ensure_ca(Path(folder), "ca", "stranger")
        pair = certs.ensure_cert(Path(folder), "client", stranger, "front-proxy-client")
        with pytest.raises((ssl.SSLError, urllib.error.URLError, ConnectionResetError)):
            direct(url, forged, kmc_ca, (pair.cert, pair.key))


def direct(url: str, headers: dict[str, str], ca: str, cert: tuple[Path, Path] | None) -> int:
    """A request straight to kmc-apiserver, around the hub: its HTTP status."""
    context = ssl.create_default_context(cafile=ca)
    if cert is not None:
        context.load_cert_chain(str(cert[0]), str(cert[1]))
    request = urllib.request.Request(url, headers=headers)
    try:
        with urllib.request.urlopen(request, context=context, timeout=10) as response:
            return int(response.status)
    except urllib.error.HTTPError as err:
        body = json.loads(err.read())
        assert body["kind"] == "Status" and body["reason"] == "Unauthorized"
        return err.code
