"""`hack/testbed install`: put kubectl-mc on the bed the way a user would.

CRDs go in with the real kubectl, kmc-apiserver runs from the working tree as one more
component of the bed (so `stop`/`start kmc-apiserver` work like for a child), and every
running child is joined with the real `kubectl mc join`. Idempotent: run it again after
`add` and only the new child is joined.
"""

from __future__ import annotations

import json
import os
import subprocess

from kmc_testbed import bed, config

MANIFESTS = ("manifests/crds", "manifests/namespace.yaml")


def kubectl(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    """The real kubectl against the hub, with our plugin on PATH."""
    env = {
        **os.environ,
        "PATH": f"{config.REPO_ROOT / '.venv' / 'bin'}{os.pathsep}{os.environ['PATH']}",
    }
    # kubectl takes no flags before a plugin's name: they go after, and reach the plugin.
    cmd = ["kubectl", *args, "--kubeconfig", str(config.kubeconfig_path()), "--context", bed.HUB]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=config.REPO_ROOT)
    if check and proc.returncode != 0:
        raise bed.BedError(f"`kubectl {' '.join(args)}` failed: {proc.stderr.strip()}")
    return proc


def install(state: bed.State, log: bed.Log) -> None:
    files = [a for m in MANIFESTS for a in ("-f", str(config.REPO_ROOT / m))]
    kubectl("apply", "--server-side", "--field-manager=kmc-testbed", *files)
    kubectl("wait", "--for=condition=Established", "crd/locations.kmc.dev", "--timeout=60s")
    if state.kmc_port is None:
        state.kmc_port = bed.free_ports(1)[0]
        bed.save(state)
    bed.ensure_running(state, [bed.KMC], log)
    joined = set()
    for cluster in state.clusters:
        if cluster.role == bed.HUB or not bed.alive(state, f"{cluster.name}-apiserver"):
            continue
        labels = ",".join(f"{k}={v}" for k, v in sorted(cluster.labels.items()))
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
