"""krew installs kubectl-mc the way a user would, from what `hack/release` builds.

No test bed: krew needs only kubectl, git and the archives. Both ways in are covered: offline
(`--manifest` and `--archive`), and from our own index (a git repository) with the archives
served over HTTP from 127.0.0.1, as a published release would be. krew is built from the Go
module proxy once and cached. The venv's kubectl-mc is taken off PATH, so what answers
`kubectl mc` is the copy krew installed.
"""

from __future__ import annotations

import os
import platform
import shutil
import subprocess
import sys
import tarfile
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import yaml

from kmc_testbed import build, config
from kubectl_mc import __version__

RELEASE = str(config.REPO_ROOT / "hack" / "release")
KUBECTL = shutil.which(os.environ.get("KMC_KUBECTL", "kubectl"))


@dataclass(frozen=True)
class Release:
    default_manifest: Path  # with the default (GitHub) base URL, as committed
    served_manifest: Path  # pointing at `served` over HTTP
    dist: Path
    served: Path
    requests: list[str]


def run(*cmd: str | Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(
        [str(c) for c in cmd], capture_output=True, text=True, env=env, timeout=300
    )
    if proc.returncode != 0:
        raise AssertionError(f"{' '.join(map(str, cmd))} failed:\n{proc.stderr}{proc.stdout}")
    return proc


@pytest.fixture(scope="module")
def krew_bin() -> Path:
    return build.krew(lambda message: print(message, file=sys.stderr))


@pytest.fixture(scope="module")
def release(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Release]:
    tmp = tmp_path_factory.mktemp("release")
    served = tmp / "served"
    requests: list[str] = []

    class Handler(SimpleHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            requests.append(self.path)

    server = ThreadingHTTPServer(("127.0.0.1", 0), partial(Handler, directory=str(served)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        run(RELEASE, "--out-dir", tmp / "dist", "--index-dir", tmp / "index")
        base_url = f"http://127.0.0.1:{server.server_address[1]}/"
        # The committed index as it is (README and all), with the manifest rewritten.
        served_index = tmp / "served-index"
        shutil.copytree(config.REPO_ROOT / "plugin-index", served_index)
        run(RELEASE, "--out-dir", served, "--index-dir", served_index, "--base-url", base_url)
        yield Release(
            tmp / "index" / "plugins" / "mc.yaml",
            served_index / "plugins" / "mc.yaml",
            tmp / "dist",
            served,
            requests,
        )
    finally:
        server.shutdown()
        server.server_close()


def this_platform(manifest: Path) -> dict[str, Any]:
    """The manifest's entry krew picks on this machine."""
    arch = {"x86_64": "amd64", "amd64": "amd64", "aarch64": "arm64", "arm64": "arm64"}
    labels = {"os": sys.platform, "arch": arch[platform.machine().lower()]}
    doc = yaml.safe_load(manifest.read_text())
    (entry,) = [p for p in doc["spec"]["platforms"] if p["selector"]["matchLabels"] == labels]
    return dict(entry)


def krew_env(root: Path, krew_bin: Path) -> dict[str, str]:
    """PATH with krew's bin first and without any other kubectl-mc (the venv's included)."""
    kept = [d for d in os.environ["PATH"].split(os.pathsep) if d and Path(d).is_dir()]
    kept = [d for d in kept if not (Path(d) / "kubectl-mc").exists()]
    path = os.pathsep.join([str(root / "bin"), str(krew_bin.parent), *kept])
    return {**os.environ, "KREW_ROOT": str(root), "KREW_NO_UPGRADE_CHECK": "1", "PATH": path}


def kubectl() -> str:
    assert KUBECTL, "the krew e2e test needs kubectl on PATH (or KMC_KUBECTL)"
    return KUBECTL


def test_release_is_deterministic(release: Release) -> None:
    archives = sorted(release.dist.glob("*.tar.gz"))
    assert [a.name for a in archives] == [
        f"kubectl-mc_v{__version__}_{os_}_{arch}.tar.gz"
        for os_, arch in sorted((o, a) for o in ("darwin", "linux") for a in ("amd64", "arm64"))
    ]
    for archive in archives:
        assert archive.read_bytes() == (release.served / archive.name).read_bytes()
    # The committed index is what hack/release writes, up to the sha256 of the current tree.
    committed = yaml.safe_load((config.REPO_ROOT / "plugin-index/plugins/mc.yaml").read_text())
    generated = yaml.safe_load(release.default_manifest.read_text())
    for doc in committed, generated:
        for entry in doc["spec"]["platforms"]:
            entry.pop("sha256")
    assert committed == generated, "plugin-index/plugins/mc.yaml is stale: run hack/release"


def test_old_python_is_told(release: Release, tmp_path: Path) -> None:
    """The archive's entry point refuses an interpreter older than 3.11 with a clear message."""
    with tarfile.open(release.dist / f"kubectl-mc_v{__version__}_linux_amd64.tar.gz") as tar:
        tar.extractall(tmp_path, filter="data")
    code = "import sys, zipfile; sys.version_info = (3, 10, 13); "
    code += f"exec(zipfile.ZipFile({str(tmp_path / 'kubectl-mc')!r}).read('__main__.py'))"
    proc = subprocess.run([sys.executable, "-I", "-c", code], capture_output=True, text=True)
    assert proc.returncode == 1
    assert proc.stderr.startswith("kubectl-mc needs Python >= 3.11, but python3 on PATH (")


def test_offline_install(release: Release, krew_bin: Path, tmp_path: Path) -> None:
    root = tmp_path / "krew"
    env = krew_env(root, krew_bin)
    archive = release.dist / this_platform(release.default_manifest)["uri"].rsplit("/", 1)[1]
    run(
        kubectl(),
        "krew",
        "install",
        f"--manifest={release.default_manifest}",
        f"--archive={archive}",
        env=env,
    )
    assert (
        run(kubectl(), "mc", "version", "--client", env=env).stdout
        == f"Client Version: v{__version__}\n"
    )
    plugins = run(kubectl(), "plugin", "list", env=env).stdout
    assert str(root / "bin" / "kubectl-mc") in plugins.split()


def test_install_from_index(release: Release, krew_bin: Path, tmp_path: Path) -> None:
    index = tmp_path / "plugin-index"
    shutil.copytree(release.served_manifest.parent.parent, index)
    git = ["git", "-C", str(index), "-c", "user.name=kmc", "-c", "user.email=kmc@example.invalid"]
    run(*git, "init", "-q")
    run(*git, "add", ".")
    run(*git, "-c", "commit.gpgsign=false", "commit", "-qm", "kubectl-mc")
    env = krew_env(tmp_path / "krew", krew_bin)

    run(kubectl(), "krew", "index", "add", "kmc", index, env=env)
    run(kubectl(), "krew", "install", "kmc/mc", env=env)

    uri = this_platform(release.served_manifest)["uri"]
    assert release.requests == ["/" + uri.rsplit("/", 1)[1]]
    assert (
        run(kubectl(), "mc", "version", "--client", env=env).stdout
        == f"Client Version: v{__version__}\n"
    )
    assert run(kubectl(), "krew", "list", env=env).stdout.split() == ["kmc/mc"]


def test_the_unpacked_app_keeps_its_bytecode(release: Release, tmp_path: Path) -> None:
    """Its first run unpacks the zipapp and compiles it, also where Python itself would write
    no bytecode; later runs import that bytecode."""
    with tarfile.open(release.dist / f"kubectl-mc_v{__version__}_linux_amd64.tar.gz") as tar:
        tar.extractall(tmp_path, filter="data")
    cache = tmp_path / "cache"
    env = {**os.environ, "XDG_CACHE_HOME": str(cache), "PYTHONDONTWRITEBYTECODE": "1"}
    for _ in range(2):
        done = run(sys.executable, tmp_path / "kubectl-mc", "version", "--client", env=env)
        assert done.stdout == f"Client Version: v{__version__}\n"
    (app,) = (cache / "kubectl-mc").iterdir()
    sources = sorted(p for p in app.rglob("*.py") if p.name != "__main__.py")
    tag = sys.implementation.cache_tag
    missing = [
        p for p in sources if not (p.parent / "__pycache__" / f"{p.stem}.{tag}.pyc").exists()
    ]
    assert sources and not missing
