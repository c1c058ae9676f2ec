"""Plugin start-up: `kubectl mc get deployments` against `kubectl get deployments`.

Both list the same N Deployments of one hub namespace, each run a new process started the
way a person starts it (kubectl finds `kubectl-mc` on PATH and runs it), so every run pays
for a cold start: Go's for kubectl, kubectl's plugin lookup plus Python's for the plugin.
Runs alternate between the commands so a busy machine slows both alike; the figures are
medians. A second baseline, `kubectl get deployments.mc.kmc.dev`, reads the very answer the
plugin reads (the mc.kmc.dev Table, through the hub and kmc-apiserver), so the two ratios
tell the client's cost from the server's, and `kubectl-mc` run directly shows what kubectl's
own start in front of a plugin costs. The goal is a ratio of at most 1.5.

    PYTHONPATH=hack .venv/bin/python -m bench.plugin [--deployments 20] [--runs 30]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from bench.objects import deployment
from kmc_testbed import config as bedconfig

VENV_BIN = bedconfig.REPO_ROOT / ".venv" / "bin"


def _kubectl(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    cmd = ["kubectl", *args, "--kubeconfig", str(bedconfig.kubeconfig_path()), "--context", "hub"]
    env = {**os.environ, "PATH": f"{VENV_BIN}{os.pathsep}{os.environ['PATH']}"}
    return subprocess.run(cmd, capture_output=True, text=True, input=stdin, env=env, check=True)


def _timed(cmd: list[str], first_on_path: Path = VENV_BIN) -> float:
    cmd = [*cmd, "--kubeconfig", str(bedconfig.kubeconfig_path()), "--context", "hub"]
    env = {**os.environ, "PATH": f"{first_on_path}{os.pathsep}{os.environ['PATH']}"}
    started = time.perf_counter()
    subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, check=True)
    return time.perf_counter() - started


def _zipapp(folder: Path) -> Path:
    """The plugin as krew installs it: the release's zipapp, as `kubectl-mc` in `folder`."""
    import kmc_release

    folder.mkdir()
    path = folder / "kubectl-mc"
    path.write_bytes(kmc_release.build_zipapp(kmc_release.zipapp_members()))
    path.chmod(0o755)
    return folder


def _without_shim(zipapp: Path, folder: Path) -> Path:
    """The zipapp again, with `python3` on PATH the interpreter itself: on a machine where
    python3 is a version manager's shell shim (pyenv here, about 70 ms), that shim is the
    zipapp's shebang's cost, not ours."""
    folder.mkdir()
    (folder / "kubectl-mc").symlink_to(zipapp / "kubectl-mc")
    (folder / "python3").symlink_to(getattr(sys, "_base_executable", sys.executable))
    return folder


def _empty_plugin(folder: Path) -> Path:
    """A `kubectl-mc` that does nothing (a shell script): what kubectl's start and plugin
    lookup cost before any plugin, in any language, begins its work."""
    folder.mkdir()
    path = folder / "kubectl-mc"
    path.write_text("#!/bin/sh\nexit 0\n")
    path.chmod(0o755)
    return folder


def measure(deployments: int, runs: int) -> list[dict[str, Any]]:
    ns = f"bench-plugin-{uuid.uuid4().hex[:5]}"
    _kubectl("create", "namespace", ns)
    krew = _zipapp(Path(tempfile.mkdtemp(prefix="kmc-bench-plugin-")) / "zipapp")
    try:
        items = [deployment(f"web-{i}", 1) for i in range(deployments)]
        _kubectl(
            "apply",
            "-n",
            ns,
            "-f",
            "-",
            stdin=json.dumps({"kind": "List", "apiVersion": "v1", "items": items}),
        )
        deadline = time.monotonic() + 60
        while True:  # every Deployment listed by both, before any timing
            ours = _kubectl("mc", "get", "deployments", "-n", ns, "--no-headers").stdout
            if len(ours.splitlines()) == deployments:
                break
            if time.monotonic() > deadline:
                raise TimeoutError(f"kubectl mc get listed {len(ours.splitlines())} Deployments")
            time.sleep(0.5)
        commands = {
            "plugin": ["kubectl", "mc", "get", "deployments", "-n", ns],
            "kubectl": ["kubectl", "get", "deployments", "-n", ns],
            "kubectl_mc_view": ["kubectl", "get", "deployments.mc.kmc.dev", "-n", ns],
            "plugin_alone": [str(VENV_BIN / "kubectl-mc"), "get", "deployments", "-n", ns],
            "plugin_zipapp": ["kubectl", "mc", "get", "deployments", "-n", ns],
            "plugin_zipapp_no_shim": ["kubectl", "mc", "get", "deployments", "-n", ns],
            "empty_plugin": ["kubectl", "mc"],
        }
        path = {
            "plugin_zipapp": krew,
            "plugin_zipapp_no_shim": _without_shim(krew, krew.parent / "no-shim"),
            "empty_plugin": _empty_plugin(krew.parent / "empty"),
        }
        # Bytecode, as a wheel install (pip compiles) or any run without
        # PYTHONDONTWRITEBYTECODE leaves it; the zipapp compiles its own on first run.
        subprocess.run(
            [str(VENV_BIN / "python"), "-m", "compileall", "-q", "kubectl_mc"],
            cwd=bedconfig.REPO_ROOT,
            check=True,
        )
        for name, args in commands.items():  # warm: kubectl's discovery cache, the page cache
            _timed(args, path.get(name, VENV_BIN))
        times: dict[str, list[float]] = {name: [] for name in commands}
        for _ in range(runs):
            for name, args in commands.items():
                times[name].append(_timed(args, path.get(name, VENV_BIN)))
    finally:
        _kubectl("delete", "namespace", ns, "--wait=false")
        shutil.rmtree(krew.parent, ignore_errors=True)
    median = {name: statistics.median(values) * 1000 for name, values in times.items()}
    return [
        {
            "benchmark": "plugin.get_deployments",
            "figure": f"median_ms_{deployments}_deployments_{runs}_runs",
            "value": round(median["plugin"], 1),
            "baseline": round(median["kubectl"], 1),
            "ratio": round(median["plugin"] / median["kubectl"], 2),
        },
        {
            "benchmark": "plugin.get_deployments",
            "figure": "median_ms_vs_kubectl_get_deployments.mc.kmc.dev",
            "value": round(median["plugin"], 1),
            "baseline": round(median["kubectl_mc_view"], 1),
            "ratio": round(median["plugin"] / median["kubectl_mc_view"], 2),
        },
        {
            # As krew installs it: the release zipapp on PATH (no editable-install finder; its
            # bytecode cached under ~/.cache/kubectl-mc by the first run), `python3` as PATH has it.
            "benchmark": "plugin.get_deployments",
            "figure": "median_ms_krew_zipapp",
            "value": round(median["plugin_zipapp"], 1),
            "baseline": round(median["kubectl"], 1),
            "ratio": round(median["plugin_zipapp"] / median["kubectl"], 2),
        },
        {
            # The same, with `python3` the interpreter itself rather than a shell shim.
            "benchmark": "plugin.get_deployments",
            "figure": "median_ms_krew_zipapp_python3_not_a_shim",
            "value": round(median["plugin_zipapp_no_shim"], 1),
            "baseline": round(median["kubectl"], 1),
            "ratio": round(median["plugin_zipapp_no_shim"] / median["kubectl"], 2),
        },
        {
            # kubectl running a plugin that does nothing: the floor under any `kubectl mc`.
            "benchmark": "plugin.get_deployments",
            "figure": "median_ms_kubectl_running_an_empty_plugin",
            "value": round(median["empty_plugin"], 1),
            "baseline": round(median["kubectl"], 1),
            "ratio": round(median["empty_plugin"] / median["kubectl"], 2),
        },
        {
            # kubectl-mc run directly: what Python costs without kubectl's own start in front.
            "benchmark": "plugin.get_deployments",
            "figure": "median_ms_kubectl-mc_without_kubectl",
            "value": round(median["plugin_alone"], 1),
            "baseline": round(median["kubectl"], 1),
            "ratio": round(median["plugin_alone"] / median["kubectl"], 2),
        },
    ]


def main(argv: list[str]) -> None:
    from bench.report import emit

    parser = argparse.ArgumentParser(prog="python -m bench.plugin")
    parser.add_argument("--deployments", type=int, default=20)
    parser.add_argument("--runs", type=int, default=30)
    args = parser.parse_args(argv)
    emit(measure(args.deployments, args.runs))


if __name__ == "__main__":
    main(sys.argv[1:])
