"""`hack/testbed install`: put kubectl-mc on the bed the way a user would.

`manifests/` goes in with the real kubectl (CRDs, roles, kmc-apiserver's ServiceAccount, RBAC
and FlowSchemas), kmc-apiserver runs from the working tree as one more component of the bed
(so `stop`/`start kmc-apiserver` work like for a child) with a token of that ServiceAccount
(`bed.kmc_credentials`), not an admin's, and every running child is joined with the real
`kubectl mc join`. Idempotent: run it again after `add` and only the new child is joined.

A pull child (`hack/testbed add NAME --pull`) is joined with `kubectl mc join NAME --mode
pull` instead, never push: kmc-apiserver gets nothing of it, and its agent (`kmc-agent-NAME`,
a component of the bed) is given only its own cluster's kubeconfig, the hub's URL and CA and
the token the join printed (`join_pull`).
"""

from __future__ import annotations

import base64
import json
import os
import re
import signal
import subprocess
from typing import Any

import yaml

from kmc_testbed import bed, config

# The Multi-Cluster Services API's CRDs on the hub (ServiceExports); `bed.up` puts them in
# every child (ServiceImports, which kmc-apiserver writes there).
MCS_CRDS = ("crd/serviceexports.multicluster.x-k8s.io", "crd/serviceimports.multicluster.x-k8s.io")

# What a real install applies on the hub, but for kmc-apiserver's Deployment and the
# registration (`register`: the bed's reach the local process). kmc-apiserver runs as the
# ServiceAccount these make, bound by their RBAC and classified by their FlowSchemas.
MANIFESTS = (
    "manifests/crds",
    "manifests/mcs",
    "manifests/namespace.yaml",
    "manifests/roles.yaml",
    "manifests/apiserver/rbac.yaml",
    "manifests/apiserver/flowschema.yaml",
)


def kubectl(
    *args: str, check: bool = True, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    """The real kubectl against the hub, with our plugin on PATH."""
    env = {
        **os.environ,
        "PATH": f"{config.REPO_ROOT / '.venv' / 'bin'}{os.pathsep}{os.environ['PATH']}",
    }
    # kubectl takes no flags before a plugin's name: they go after, and reach the plugin.
    cmd = ["kubectl", *args, "--kubeconfig", str(config.kubeconfig_path()), "--context", bed.HUB]
    proc = subprocess.run(
        cmd, capture_output=True, text=True, env=env, cwd=config.REPO_ROOT, input=stdin
    )
    if check and proc.returncode != 0:
        raise bed.BedError(f"`kubectl {' '.join(args)}` failed: {proc.stderr.strip()}")
    return proc


def install(state: bed.State, log: bed.Log) -> None:
    files = [a for m in MANIFESTS for a in ("-f", str(config.REPO_ROOT / m))]
    kubectl("apply", "--server-side", "--field-manager=kmc-testbed", *files)
    kubectl(
        "wait",
        "--for=condition=Established",
        "crd/locations.kmc.dev",
        "crd/placementpolicies.kmc.dev",
        "crd/overrides.kmc.dev",
        "crd/clusteroverrides.kmc.dev",
        *MCS_CRDS,
        "--timeout=60s",
    )
    if state.kmc_port is None:
        state.kmc_port = bed.free_ports(1)[0]
        bed.save(state)
    bed.ensure_running(state, [bed.KMC], log)
    register(state.kmc_port)
    bed.wait_for("the APIServices Available", _apiservices_available, 60.0, bed.KMC)
    bed.wait_for("our groups in the hub's OpenAPI", _openapi_aggregated, 90.0, bed.KMC)
    joined = set()
    for cluster in state.clusters:
        if cluster.role == bed.HUB or not bed.alive(state, f"{cluster.name}-apiserver"):
            continue
        if cluster.pull:
            join_pull(state, cluster, log)
            joined.add(cluster.name)
            continue
        labels = _labels(cluster)
        log(f"joining {cluster.name}")
        kubectl(
            "mc",
            "join",
            cluster.name,
            "--cluster-kubeconfig",
            str(config.kubeconfig_path()),
            "--cluster-context",
            cluster.name,
            *(["--labels", labels] if labels else []),
        )
        joined.add(cluster.name)
    bed.wait_for("every Location Ready", lambda: _all_ready(joined), 60.0, bed.KMC)


def _labels(cluster: bed.Cluster) -> str:
    return ",".join(f"{k}={v}" for k, v in sorted(cluster.labels.items()))


TOKEN_LINE = re.compile(r"bootstrap token \(one use, expires [^)]+\): (\S+)")


def join_pull(state: bed.State, cluster: bed.Cluster, log: bed.Log) -> None:
    """Join a pull child as a person would (`kubectl mc join NAME --mode pull` on the hub,
    the agent started in the location with the token it printed), then keep its agent
    running. Idempotent: an agent whose certificate is kept in its cluster and whose pull
    Location exists is only started if it is not running; otherwise it joins anew (a new
    token; a certificate kept from an earlier join is dropped, its rights are gone)."""
    location = kubectl("get", "location", cluster.name, "-o", "json", check=False)
    is_pull = (
        location.returncode == 0
        and (json.loads(location.stdout).get("spec") or {}).get("mode") == "Pull"
    )
    if not (is_pull and bed.joined(cluster) and bed.identity_kept(cluster)):
        log(f"joining {cluster.name} (pull)")
        agent = f"{bed.AGENT}-{cluster.name}"
        bed.kill(state, agent, signal.SIGTERM)
        bed.forget_identity(cluster)
        labels = _labels(cluster)
        printed = kubectl(
            "mc", "join", cluster.name, "--mode", "pull", *(["--labels", labels] if labels else [])
        ).stdout
        found = TOKEN_LINE.search(printed)
        if not found:
            raise bed.BedError(f"`kubectl mc join {cluster.name} --mode pull` printed no token")
        token = bed.agent_token(cluster)
        token.parent.mkdir(parents=True, exist_ok=True)
        tmp = token.with_suffix(".tmp")
        tmp.write_text(found.group(1) + "\n")
        tmp.chmod(0o600)
        tmp.replace(token)
    bed.ensure_running(state, [n for n in state.agents() if n.endswith(f"-{cluster.name}")], log)


def add(name: str, labels: dict[str, str], log: bed.Log, pull: bool = False) -> bed.State:
    """`hack/testbed add NAME [--pull]`: one more child, started as `up` starts one. A pull
    child is joined at once when kmc-apiserver is installed (`install` joins it otherwise),
    and waited for until its Location is Ready. Takes the bed's lock."""
    with bed.locked():
        state = bed.load()
        if state is None:
            raise bed.BedError("the test bed is not up; run `hack/testbed up` first")
        bed.validate_new_name(state, name)
        labels = {"topology.kubernetes.io/zone": name, **labels}
        mode = bed.PULL if pull else bed.PUSH
        state = bed.up(log, extra=bed.new_cluster(name, "child", labels, mode))
        if pull and state.kmc_port is not None:
            join_pull(state, state.cluster(name), log)
            bed.wait_for(f"Location {name} Ready", lambda: _all_ready({name}), 90.0, None)
        return state


def remove(name: str, log: bed.Log) -> None:
    """`hack/testbed remove NAME`: unjoin (drains it: a pull child through its agent), then
    stop its components, agent included, and delete its data. Takes the bed's lock."""
    with bed.locked():
        state = bed.load()
        if state is None:
            raise bed.BedError("the test bed is not up; run `hack/testbed up` first")
        state.cluster(name)
        if state.kmc_port is not None:
            unjoin(name)
        bed.remove(state, name, log)


def register(port: int) -> None:
    """Serve our groups through the hub, as `manifests/apiserver/` does in a cluster, but
    reaching the local process: an ExternalName Service pointing at localhost (the hub dials
    https://localhost:<port>), and the webhook by URL."""
    ca = (bed.kmc_folder() / "certs" / "ca.crt").read_bytes()
    bundle = base64.b64encode(ca).decode()
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "kmc-apiserver", "namespace": "kmc-system"},
        "spec": {"type": "ExternalName", "externalName": "localhost", "ports": [{"port": port}]},
    }
    objects: list[Any] = [service]
    for obj in _manifests("apiservices.yaml"):
        obj["spec"]["caBundle"] = bundle
        obj["spec"]["service"]["port"] = port
        objects.append(obj)
    for obj in _manifests("webhook.yaml"):
        for hook in obj["webhooks"]:
            hook["clientConfig"] = {
                "url": f"https://localhost:{port}{hook['clientConfig']['service']['path']}",
                "caBundle": bundle,
            }
        objects.append(obj)
    listing = json.dumps({"apiVersion": "v1", "kind": "List", "items": objects})
    kubectl(
        "apply",
        "--server-side",
        "--force-conflicts",
        "--field-manager=kmc-testbed",
        "-f",
        "-",
        stdin=listing,
    )


def _manifests(name: str) -> list[Any]:
    text = (config.REPO_ROOT / "manifests" / "apiserver" / name).read_text()
    return [doc for doc in yaml.safe_load_all(text) if doc]


def _apiservices_available() -> bool:
    proc = kubectl("get", "apiservices", "-o", "json", check=False)
    if proc.returncode != 0:
        return False
    ours = [
        item
        for item in json.loads(proc.stdout)["items"]
        if item["spec"].get("group") in ("mc.kmc.dev", "remote.kmc.dev")
    ]
    return len(ours) == 2 and all(
        c["type"] == "Available" and c["status"] == "True"
        for item in ours
        for c in item.get("status", {}).get("conditions", [])
    )


def _openapi_aggregated() -> bool:
    """The hub fetches an aggregated server's OpenAPI on its own schedule, after the
    APIService is Available; until it has, `kubectl explain` cannot find our kinds."""
    proc = kubectl("get", "--raw", "/openapi/v3", check=False)
    if proc.returncode != 0:
        return False
    paths = json.loads(proc.stdout).get("paths", {})
    return all(f"apis/{group}/v1alpha1" in paths for group in ("mc.kmc.dev", "remote.kmc.dev"))


def unjoin(name: str) -> None:
    """Drain and unjoin, as a person retiring a cluster would; forget it if that fails."""
    if kubectl("mc", "unjoin", name, "--timeout=120s", check=False).returncode != 0:
        kubectl("mc", "unjoin", name, "--force", check=False)


def _all_ready(names: set[str]) -> bool:
    proc = kubectl("get", "locations", "-o", "json", check=False)
    if proc.returncode != 0:
        return False
    ready = {
        item["metadata"]["name"]
        for item in json.loads(proc.stdout)["items"]
        for c in item.get("status", {}).get("conditions", [])
        if c["type"] == "Ready" and c["status"] == "True"
    }
    return names <= ready
