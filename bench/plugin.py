"""Plugin start-up: `kubectl mc get deployments` against `kubectl get deployments`.

Both list the same N Deployments of one hub namespace, each run a new process started the
way a person starts it (kubectl finds `kubectl-mc` on PATH and runs it), so every run pays
for a cold start: Go's for kubectl, kubectl's plugin lookup plus Python's for the plugin.
The plugin measured is the one the README installs: krew's zipapp (`hack/release`), with
`python3` the interpreter itself. Runs alternate between the commands so a busy machine
slows both alike; the figures are medians. A second baseline, `kubectl get
deployments.mc.kmc.dev`, reads the very answer the plugin reads (the mc.kmc.dev Table,
through the hub and kmc-apiserver), so the two ratios tell the client's cost from the
server's. Also reported: the zipapp behind this machine's pyenv shim, a checkout's
`.venv/bin/kubectl-mc`, kubectl running a plugin that does nothing, and the zipapp run
without kubectl. The goal is a ratio of at most 1.5.

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

from bench import report
from bench.objects import deployment
from kmc_testbed import config as bedconfig

VENV_BIN = bedconfig.REPO_ROOT / ".venv" / "bin"


def _kubectl(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    cmd = [
        "kubectl",
        *args,
        "--kubeconfig",
        str(bedconfig.user_kubeconfig_path()),
        "--context",
        "hub",
    ]
    env = {**os.environ, "PATH": f"{VENV_BIN}{os.pathsep}{os.environ['PATH']}"}
    return subprocess.run(cmd, capture_output=True, text=True, input=stdin, env=env, check=True)


def _timed(cmd: list[str], first_on_path: Path = VENV_BIN) -> float:
    cmd = [*cmd, "--kubeconfig", str(bedconfig.user_kubeconfig_path()), "--context", "hub"]
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
    user's Python's cost, not ours."""
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
        get = ["get", "deployments", "-n", ns]
        commands = {
            "zipapp": ["kubectl", "mc", *get],
            "kubectl": ["kubectl", *get],
            "kubectl_mc_view": ["kubectl", "get", "deployments.mc.kmc.dev", "-n", ns],
            "zipapp_shim": ["kubectl", "mc", *get],
            "checkout": ["kubectl", "mc", *get],
            "zipapp_alone": ["kubectl-mc", *get],
            "empty_plugin": ["kubectl", "mc"],
        }
        interpreter = _without_shim(krew, krew.parent / "no-shim")
        path = {
            "zipapp": interpreter,
            "zipapp_shim": krew,
            "zipapp_alone": interpreter,
            "empty_plugin": _empty_plugin(krew.parent / "empty"),
        }
        # Bytecode, as any run without PYTHONDONTWRITEBYTECODE leaves it in a checkout; the
        # zipapp compiles its own on first run.
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

    def row(figure: str, name: str, baseline: str = "kubectl") -> dict[str, Any]:
        return report.row("plugin.get_deployments", figure, median[name], median[baseline])

    return [
        # As the README installs it: krew's zipapp on PATH, its bytecode unpacked by the first
        # run, `python3` the interpreter itself (as /usr/bin/python3 is).
        row(f"median_ms_krew_zipapp_{deployments}_deployments_{runs}_runs", "zipapp"),
        # The same against the very answer it reads, kubectl printing it.
        row(
            "median_ms_krew_zipapp_vs_kubectl_get_deployments.mc.kmc.dev",
            "zipapp",
            "kubectl_mc_view",
        ),
        # `python3` as this machine's PATH has it: pyenv's shell shim, tens of ms before Python.
        row("median_ms_krew_zipapp_python3_a_pyenv_shim", "zipapp_shim"),
        # A checkout's .venv/bin/kubectl-mc: the editable install's import hook runs at start.
        row("median_ms_checkout_venv", "checkout"),
        # kubectl running a plugin that does nothing: the floor under any `kubectl mc`.
        row("median_ms_kubectl_running_an_empty_plugin", "empty_plugin"),
        # The zipapp run directly: what it costs without kubectl's own start in front.
        row("median_ms_krew_zipapp_without_kubectl", "zipapp_alone"),
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
