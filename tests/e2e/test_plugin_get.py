"""`kubectl mc get/describe/version` and completion, run by the real kubectl as a user runs them.

kubectl finds `kubectl-mc` (and `kubectl_complete-mc`) on PATH in .venv/bin and passes its
flags through; every answer comes from the real hub and kmc-apiserver.
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
import time

import yaml

from kmc_testbed import bed, config

from .conftest import VENV_BIN, Kubectl
from .test_aggregated import header, rows
from .test_locations import wait_until as wait_for
from .test_placement import wait_placement
from .test_testbed import deployment


def placed(hub: Kubectl, namespace: str, name: str, replicas: int) -> dict[str, int]:
    """Apply a Deployment; wait until all of it is placed and ready. Its placement."""
    hub.apply(deployment(name, replicas), namespace)
    placement = wait_placement(
        hub, "deployment", name, namespace, lambda p: sum(v or 0 for v in p.values()) == replicas
    )

    def ready() -> bool:
        out = hub.mc("get", "deployments", name, "-n", namespace, "--no-headers").stdout
        return out.split()[3] == f"{replicas}/{replicas}"

    wait_for(f"{name} ready", ready, timeout=60)
    return {k: v or 0 for k, v in placement.items()}


def completions(*words: str) -> list[str]:
    """What kubectl's shell completion gets for `kubectl WORDS…` (the last one being typed)."""
    env = {**os.environ, "PATH": f"{VENV_BIN}{os.pathsep}{os.environ['PATH']}"}
    env["KUBECONFIG"] = str(config.kubeconfig_path())  # its current context is the hub
    cmd = ["kubectl", "__complete", *words]
    return subprocess.run(cmd, capture_output=True, text=True, env=env, check=True).stdout.split(
        "\n"
    )[:-1]


def test_deployments_and_pods_print_as_tables(
    installed: bed.State, kubectl: dict[str, Kubectl], namespace: str
) -> None:
    hub = kubectl["hub"]
    placement = placed(hub, namespace, "web", 3)
    out = hub.mc("get", "deployments", "-n", namespace)
    assert header(out.stdout) == ["NAME", "STRATEGY", "LOCATIONS", "READY", "AGE"]
    [row] = rows(out.stdout)
    assert row[:4] == [
        "web",
        "Split",
        ",".join(f"{k}={v}" for k, v in sorted(placement.items())),
        "3/3",
    ]
    wide = hub.mc("get", "deploy", "-n", namespace, "-o", "wide").stdout
    assert header(wide)[-2:] == ["PLACED", "SYNCED"]
    pods = hub.mc("get", "pods", "-n", namespace).stdout
    assert header(pods) == ["LOCATION", "NAME", "READY", "STATUS", "RESTARTS", "AGE"]
    assert {r[0] for r in rows(pods)} == set(placement)
    assert len(rows(pods)) == 3
    labels = hub.mc("get", "deploy", "-n", namespace, "--show-labels").stdout
    assert header(labels)[-1] == "LABELS" and rows(labels)[0][-1] == "app=web"
    everywhere = hub.mc("get", "pods", "-A", "-l", "app=web").stdout
    assert header(everywhere)[:2] == ["NAMESPACE", "LOCATION"]
    assert sorted(r[1] for r in rows(everywhere) if r[0] == namespace) == sorted(
        r[0] for r in rows(pods)
    )
    empty = hub.mc("get", "deploy", "-n", namespace, "-l", "app=none")
    assert empty.stdout == "" and empty.stderr == f"No resources found in {namespace} namespace.\n"


def test_a_subresource_over_a_list_and_describe(
    installed: bed.State, kubectl: dict[str, Kubectl], namespace: str
) -> None:
    hub = kubectl["hub"]
    # Scaled up after its first placement: a third location gets a share, and the hub's
    # Event says so (a first placement has none; its condition says where).
    placed(hub, namespace, "web", 2)
    web = placed(hub, namespace, "web", 3)
    api = placed(hub, namespace, "api", 2)

    def synced() -> str:
        out = hub.mc("get", "deployments", "-n", namespace, "--subresource", "locations").stdout
        return out if rows(out) and all(r[6] == "Synced" for r in rows(out)) else ""

    out = wait_for("every location Synced", synced, timeout=60)
    assert header(out) == [
        "NAME",
        "LOCATION",
        "DESIRED",
        "READY",
        "AVAILABLE",
        "SYNCED-GENERATION",
        "STATE",
        "MESSAGE",
        "OVERRIDES",
    ]
    by_name: dict[str, dict[str, int]] = {}
    for r in rows(out):
        by_name.setdefault(r[0], {})[r[1]] = int(r[2])
    assert by_name == {"web": web, "api": api}
    strategy = hub.mc("get", "deploy", "-n", namespace, "--subresource", "strategy").stdout
    assert header(strategy) == ["NAME", "LOCATION", "ELIGIBLE", "REASON", "PLACED"]
    described = hub.mc("describe", "deployment", "web", "-n", namespace).stdout
    lines = described.splitlines()
    fields = dict(line.split(None, 1) for line in lines if not line.startswith(" ") and " " in line)
    assert fields["Name:"] == "web" and fields["Namespace:"] == namespace
    assert fields["Strategy:"] == '{"type":"Split"}' and fields["Source:"] == "default"
    start = lines.index("Locations:") + 3
    end = next(i for i in range(start, len(lines)) if not lines[i].startswith(" "))
    section = lines[start:end]  # up to the next section (Went Along, which has <none> here)
    assert lines[end] == "Went Along:        <none>"
    assert {line.split()[0] for line in section} == set(web)
    verdicts = lines[lines.index("Verdicts:") + 3 : lines.index("Conditions:")]
    assert {line.split()[0] for line in verdicts} >= set(web)
    events = lines[lines.index("Events:") + 3 :]
    assert any(e.split()[:3] == ["(hub)", "Normal", "SpilledOver"] for e in events), events
    assert {e.split()[0] for e in events if "pod/web-" in e} <= set(web)
    assert any("pod/web-" in e for e in events)
    assert not any("/api" in e for e in events)


def test_errors_are_kubectls(
    installed: bed.State, kubectl: dict[str, Kubectl], namespace: str
) -> None:
    hub = kubectl["hub"]
    nope = hub.mc("get", "deployments", "nope", "-n", namespace, check=False)
    assert nope.returncode == 1 and nope.stdout == ""
    assert nope.stderr == 'Error from server (NotFound): deployments.mc.kmc.dev "nope" not found\n'
    foo = hub.mc("get", "foo", check=False)
    assert foo.returncode == 1
    assert foo.stderr == 'error: the server doesn\'t have a resource type "foo"\n'
    described = hub.mc("describe", "deploy", "nope", "-n", namespace, check=False)
    assert described.returncode == 1 and "(NotFound)" in described.stderr


def test_json_yaml_name_and_jsonpath(
    installed: bed.State, kubectl: dict[str, Kubectl], namespace: str
) -> None:
    hub = kubectl["hub"]
    placement = placed(hub, namespace, "web", 2)
    listing = json.loads(hub.mc("get", "deployments", "-n", namespace, "-o", "json").stdout)
    assert listing["kind"] == "List" and listing["apiVersion"] == "v1"
    [item] = listing["items"]
    assert item["kind"] == "Deployment" and item["apiVersion"] == "mc.kmc.dev/v1alpha1"
    assert item["status"]["placement"] == placement
    one = yaml.safe_load(hub.mc("get", "deploy", "web", "-n", namespace, "-o", "yaml").stdout)
    assert one["kind"] == "Deployment" and one["metadata"]["name"] == "web"
    assert hub.mc("get", "deploy", "-n", namespace, "-o", "name").stdout == (
        "deployment.mc.kmc.dev/web\n"
    )
    names = hub.mc("get", "pods", "-n", namespace, "-o", "name").stdout.split()
    assert len(names) == 2 and all(n.startswith("pod.remote.kmc.dev/web-") for n in names)
    template = '{range .items[*]}{.metadata.annotations.kmc\\.dev/location}{"\\n"}{end}'
    where = hub.mc("get", "pods", "-n", namespace, "-o", f"jsonpath={template}").stdout
    assert sorted(where.split()) == sorted(k for k, v in placement.items() for _ in range(v or 0))
    subs = json.loads(
        hub.mc("get", "deploy", "-n", namespace, "--subresource", "strategy", "-o", "json").stdout
    )
    assert subs["kind"] == "List" and subs["items"][0]["kind"] == "Strategy"


def test_watch_shows_a_scale_up(
    installed: bed.State, kubectl: dict[str, Kubectl], namespace: str
) -> None:
    hub = kubectl["hub"]
    placed(hub, namespace, "web", 2)
    cmd = ["kubectl", "mc", "get", "deployments", "-n", namespace, "-w"]
    cmd += ["--kubeconfig", str(config.kubeconfig_path()), "--context", "hub"]
    env = {**os.environ, "PATH": f"{VENV_BIN}{os.pathsep}{os.environ['PATH']}"}
    with tempfile.TemporaryFile("w+") as out:
        watch = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, text=True, env=env)
        try:
            time.sleep(2)
            hub.run("scale", "deployment", "web", "-n", namespace, "--replicas=4")

            def scaled_up() -> list[str]:
                out.seek(0)
                return [line for line in out.read().splitlines() if line.split()[3:4] == ["4/4"]]

            wait_for("4/4 in the watch", scaled_up, timeout=60)
            out.seek(0)
            lines = out.read().splitlines()
            assert lines[0].split() == ["NAME", "STRATEGY", "LOCATIONS", "READY", "AGE"]
            assert sum(1 for line in lines if line.startswith("NAME")) == 1
            assert lines[1].split()[3] == "2/2"
        finally:
            watch.kill()
            watch.wait()


def test_version_and_completion_through_kubectl(
    installed: bed.State, kubectl: dict[str, Kubectl], namespace: str
) -> None:
    hub = kubectl["hub"]
    lines = hub.mc("version").stdout.splitlines()
    assert lines[0].startswith("Client Version: v")
    assert lines[1].startswith("Server Version: v1.")
    assert "kmc-apiserver: mc.kmc.dev/v1alpha1 served" in lines
    as_json = json.loads(hub.mc("version", "-o", "json").stdout)
    assert as_json["serverVersion"]["major"] == "1"
    hub.apply(deployment("web", 1), namespace)
    wait_placement(hub, "deployment", "web", namespace)
    # kubectl >= 1.26 completes `kubectl mc …` by running kubectl_complete-mc.
    assert completions("mc", "get", "dep") == [
        "deployments",
        "deployments.remote",
        "deployments.mc",
        ":4",
    ]
    assert completions("mc", "get", "deploy", "-n", namespace, "") == ["web", ":4"]
    assert completions("mc", "get", "deploy", "-n", namespace[:-2]) == [namespace, ":4"]
