"""Build the test bed's binaries from the Go module proxy, once, into a cache outside the repo.

`k8s.io/kubernetes` and etcd's server module both point their sibling modules at relative
paths (`=> ./staging/src/k8s.io/api`, `=> ../api`). Go ignores a dependency's replaces, so
neither can be `go install`ed; we build them inside a small wrapper module whose replaces
are derived mechanically from the upstream go.mod, pointing each sibling at its published
version. kwok has no replaces; it is built from its module's source with a small patch of
ours (`kwok-exec.patch`: an exec's exit code and the end of its stdin passed on, as a kubelet
does), so its cached folder is named for the patch too.

A cold build of Kubernetes takes a long time on a small machine, so `go build -v` output is
turned into a progress line with elapsed time. Binaries land in a temporary folder and are
renamed into place only when every one of them built: a half build is never reused. One
build at a time per cache (a file lock): beds of several checkouts share the cache, and two
builds would share its source and temporary folders.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from kmc_testbed import config

Log = Callable[[str], None]


class BuildError(Exception):
    """A build could not be done; the message says what is needed, in one line."""


@dataclass(frozen=True)
class Target:
    name: str
    version: str
    binaries: tuple[str, ...]
    patched: str = ""  # a tag for our patch on the upstream source, if any

    @property
    def folder(self) -> Path:
        tag = f"-{self.patched}" if self.patched else ""
        return config.cache_dir() / "bin" / f"{self.name}-{self.version}{tag}"

    def built(self) -> bool:
        return all((self.folder / b).is_file() for b in self.binaries)


KUBERNETES = Target(
    "kubernetes",
    config.KUBERNETES_VERSION,
    ("kube-apiserver", "kube-controller-manager", "kube-scheduler"),
)
ETCD = Target("etcd", config.ETCD_VERSION, ("etcd",))
# kwok v0.8.0 answers an exec that exits non-zero with an InternalError instead of the
# exit code a kubelet sends, and never closes a command's stdin when the caller's ends
# (`echo x | kubectl exec -i … -- cat` hangs). Our patch fixes both; bump its tag with it.
KWOK_PATCH = Path(__file__).with_name("kwok-exec.patch")
KWOK = Target("kwok", config.KWOK_VERSION, ("kwok", "kwok-stages.yaml"), patched="kmc1")
# The "fast" lifecycle kwokctl gives a cluster: nodes turn Ready and keep a lease, pods run.
# The bare kwok binary ships none, so the build copies them from the same module version.
KWOK_STAGES = (
    "kustomize/stage/node/fast/node-initialize.yaml",
    "kustomize/stage/node/heartbeat-with-lease/node-heartbeat-with-lease.yaml",
    "kustomize/stage/pod/fast/pod-ready.yaml",
    "kustomize/stage/pod/fast/pod-complete.yaml",
    "kustomize/stage/pod/fast/pod-delete.yaml",
)
# kwok's debugging resources (logs, exec, attach, port-forward of fake pods), as CRDs the
# children serve so tests can write their own; copied from the same module version.
KWOK_CRDS = tuple(
    f"kustomize/crd/bases/kwok.x-k8s.io_{plural}.yaml"
    for plural in (
        "logs",
        "clusterlogs",
        "execs",
        "clusterexecs",
        "attaches",
        "clusterattaches",
        "portforwards",
        "clusterportforwards",
    )
)
KWOK_CRDS_FILE = "kwok-crds.yaml"
# The Gateway API's standard-channel CRDs a child serves: an HTTPRoute, and the Gateway and
# GatewayClass it attaches to. Copied from the module once into the cache, like kwok's.
GATEWAY_API_CRDS = tuple(
    f"config/crd/standard/gateway.networking.k8s.io_{plural}.yaml"
    for plural in ("gatewayclasses", "gateways", "httproutes")
)
TARGETS = (KUBERNETES, ETCD, KWOK)
# Not part of the bed (see `krew`); named `kubectl-krew` so kubectl finds it as a plugin.
KREW = Target("krew", config.KREW_VERSION, ("kubectl-krew",))


def binary(name: str) -> Path:
    """Path of a built binary (it may not exist yet: see `ensure_built`)."""
    for target in TARGETS:
        if name in target.binaries:
            return target.folder / name
    raise KeyError(name)


def ensure_built(log: Log) -> None:
    """Build whatever is missing from the cache; a warm cache costs nothing. Another
    process's build of the same cache is waited for, then what it left is used."""
    if all(t.built() for t in TARGETS) and (KWOK.folder / KWOK_CRDS_FILE).is_file():
        return
    config.cache_dir().mkdir(parents=True, exist_ok=True)
    with (config.cache_dir() / "build.lock").open("w") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            log(f"another build of {config.cache_dir()} is running: waiting for it")
            fcntl.flock(lock, fcntl.LOCK_EX)
        _build_missing(log)


def _build_missing(log: Log) -> None:
    missing = [t for t in TARGETS if not t.built()]
    if not missing:
        if not (KWOK.folder / KWOK_CRDS_FILE).is_file():
            # A kwok built before the bed served streams: its module is still in the cache.
            _kwok_crds(_go(), KWOK.folder)
        return
    go = _go()
    started = time.monotonic()
    log(f"building {', '.join(f'{t.name} {t.version}' for t in missing)} into {config.cache_dir()}")
    log("a cold build takes about 10 minutes on 2 cores; later runs reuse the cache")
    for target in missing:
        {"kubernetes": _build_kubernetes, "etcd": _build_etcd, "kwok": _build_kwok}[target.name](
            go, target, log
        )
    log(f"built in {_elapsed(time.monotonic() - started)}")


def krew(log: Log) -> Path:
    """kubectl-krew, built once into the same cache as the bed's binaries."""
    if not KREW.built():
        out = _fresh(KREW.folder.with_name(KREW.folder.name + ".tmp"))
        ldflags = f"-s -w -X sigs.k8s.io/krew/internal/version.gitTag={KREW.version}"
        cmd = [_go(), "install", "-v", "-trimpath", f"-ldflags={ldflags}"]
        cmd.append(f"sigs.k8s.io/krew/cmd/krew@{KREW.version}")
        _run_go(cmd, KREW, None, {"GOBIN": str(out)}, total=None, log=log)
        (out / "krew").rename(out / "kubectl-krew")
        _promote(out, KREW)
    return KREW.folder / "kubectl-krew"


def _go() -> str:
    go = shutil.which("go")
    if go is None:
        raise BuildError(
            "the test bed needs Go >= 1.26 on PATH and the Go module proxy to build "
            "kube-apiserver, etcd and kwok (once; they are cached afterwards)"
        )
    return go


def _build_kubernetes(go: str, target: Target, log: Log) -> None:
    version = target.version
    staging_version = "v0." + version.split(".", 1)[1]  # v1.34.4 -> v0.34.4
    upstream = _download_gomod(go, "k8s.io/kubernetes", version)
    work = _wrapper_module(
        target,
        require=f"k8s.io/kubernetes {version}",
        go_line=_go_line(upstream),
        replaces=[(m, staging_version) for m in _relative_replaces(upstream)],
    )
    major, minor = version.lstrip("v").split(".")[:2]
    stamp = {
        "gitVersion": version,
        "gitMajor": major,
        "gitMinor": minor,
        "gitTreeState": "clean",
        "buildDate": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    ldflags = ["-s", "-w"] + [
        f"-X {pkg}.{key}={value}"
        for pkg in ("k8s.io/component-base/version", "k8s.io/client-go/pkg/version")
        for key, value in stamp.items()
    ]
    packages = [f"k8s.io/kubernetes/cmd/{b}" for b in target.binaries]
    _go_build(go, target, work, packages, ldflags, log)


def _build_etcd(go: str, target: Target, log: Log) -> None:
    module = "go.etcd.io/etcd/server/v3"
    upstream = _download_gomod(go, module, target.version)
    work = _wrapper_module(
        target,
        require=f"{module} {target.version}",
        go_line=_go_line(upstream),
        replaces=[(m, target.version) for m in _relative_replaces(upstream)],
    )
    _go_build(go, target, work, [module], ["-s", "-w"], log)


def _build_kwok(go: str, target: Target, log: Log) -> None:
    out = _fresh(target.folder.with_name(target.folder.name + ".tmp"))
    source = Path(_download(go, "sigs.k8s.io/kwok", target.version)["Dir"])
    work = config.cache_dir() / "src" / target.folder.name
    shutil.rmtree(work, ignore_errors=True)
    shutil.copytree(source, work)
    for path in work.rglob("*"):
        path.chmod(path.stat().st_mode | 0o200)  # the module cache is read-only
    patched = subprocess.run(
        ["git", "apply", "--whitespace=nowarn", str(KWOK_PATCH)],
        cwd=work,
        capture_output=True,
        text=True,
        check=False,
    )
    if patched.returncode != 0:
        raise BuildError(
            f"kwok {target.version}: {KWOK_PATCH.name} does not apply: "
            f"{_last_error(patched.stderr)}"
        )
    cmd = [go, "build", "-v", "-trimpath", "-ldflags=-s -w", "-o", str(out / "kwok"), "./cmd/kwok"]
    _run_go(cmd, target, work, {"GOFLAGS": "-mod=mod"}, total=None, log=log)
    shutil.rmtree(work, ignore_errors=True)
    stages = [(source / path).read_text().strip() for path in KWOK_STAGES]
    (out / "kwok-stages.yaml").write_text("\n---\n".join(stages) + "\n")
    _kwok_crds(go, out)
    _promote(out, target)


def _kwok_crds(go: str, folder: Path) -> None:
    source = Path(_download(go, "sigs.k8s.io/kwok", KWOK.version)["Dir"])
    crds = [(source / path).read_text().strip().removeprefix("---").strip() for path in KWOK_CRDS]
    (folder / KWOK_CRDS_FILE).write_text("\n---\n".join(crds) + "\n")


def gateway_api_crds() -> Path:
    """The Gateway API's CRDs (`GATEWAY_API_CRDS`) in one file of the cache, fetched from the
    Go module proxy the first time."""
    folder = config.cache_dir() / "crds" / f"gateway-api-{config.GATEWAY_API_VERSION}"
    file = folder / "gateway-api-crds.yaml"
    if not file.is_file():
        source = Path(
            _download(_go(), "sigs.k8s.io/gateway-api", config.GATEWAY_API_VERSION)["Dir"]
        )
        docs = [
            (source / path).read_text().strip().removeprefix("---").strip()
            for path in GATEWAY_API_CRDS
        ]
        folder.mkdir(parents=True, exist_ok=True)
        partial = file.with_suffix(".tmp")
        partial.write_text("\n---\n".join(docs) + "\n")
        partial.rename(file)  # never half a file in the cache
    return file


def _download_gomod(go: str, module: str, version: str) -> str:
    return Path(_download(go, module, version)["GoMod"]).read_text()


def _download(go: str, module: str, version: str) -> dict[str, str]:
    """`go mod download -json` of one module: where its go.mod and its source landed."""
    proc = subprocess.run(
        [go, "mod", "download", "-json", f"{module}@{version}"],
        capture_output=True,
        text=True,
        check=False,
    )
    try:
        info = json.loads(proc.stdout)
    except json.JSONDecodeError:
        info = {}
    if proc.returncode != 0 or "Dir" not in info:
        reason = info.get("Error") or proc.stderr.strip().splitlines()[-1:] or ["no answer"]
        raise BuildError(
            f"cannot fetch {module}@{version} from the Go module proxy "
            f"(GOPROXY={_goproxy(go)}): {reason if isinstance(reason, str) else reason[0]}"
        )
    return {k: v for k, v in info.items() if isinstance(v, str)}


def _goproxy(go: str) -> str:
    return subprocess.run([go, "env", "GOPROXY"], capture_output=True, text=True).stdout.strip()


def _go_line(gomod: str) -> str:
    match = re.search(r"^go\s+(\S+)", gomod, re.MULTILINE)
    return match.group(1) if match else "1.24"


def _relative_replaces(gomod: str) -> list[str]:
    """Modules the upstream go.mod replaces with a folder of its own repository."""
    found = re.findall(r"^\s*(?:replace\s+)?(\S+)\s+=>\s+(\.\.?/\S+)\s*$", gomod, re.MULTILINE)
    return sorted({module for module, path in found if "FORBIDDEN" not in path})


def _wrapper_module(
    target: Target, require: str, go_line: str, replaces: Iterable[tuple[str, str]]
) -> Path:
    work = config.cache_dir() / "src" / f"{target.name}-{target.version}"
    work.mkdir(parents=True, exist_ok=True)
    lines = ["module kmc.dev/testbed-build", "", f"go {go_line}", "", f"require {require}", ""]
    lines += [f"replace {module} => {module} {version}" for module, version in replaces]
    (work / "go.mod").write_text("\n".join(lines) + "\n")
    # Imports keep `go mod tidy` from dropping the requirement; the build tag keeps them out
    # of every real build.
    main_packages = {
        "kubernetes": [f"k8s.io/kubernetes/cmd/{b}" for b in target.binaries],
        "etcd": [require.split()[0]],
    }[target.name]
    imports = "\n".join(f'\t_ "{p}"' for p in main_packages)
    (work / "tools.go").write_text(f"//go:build tools\n\npackage tools\n\nimport (\n{imports}\n)\n")
    return work


def _go_build(
    go: str, target: Target, work: Path, packages: list[str], ldflags: list[str], log: Log
) -> None:
    env = {"GOFLAGS": "-mod=mod"}
    log(f"{target.name} {target.version}: resolving modules")
    tidy = subprocess.run(
        [go, "mod", "tidy"], cwd=work, env=_env(env), capture_output=True, text=True, check=False
    )
    if tidy.returncode != 0:
        raise BuildError(
            f"{target.name} {target.version}: go mod tidy failed: {_last_error(tidy.stderr)}"
        )
    deps = subprocess.run(
        [go, "list", "-deps", *packages], cwd=work, env=_env(env), capture_output=True, text=True
    )
    total = len(deps.stdout.split()) if deps.returncode == 0 else None
    out = _fresh(target.folder.with_name(target.folder.name + ".tmp"))
    cmd = [go, "build", "-v", "-trimpath", f"-ldflags={' '.join(ldflags)}", "-o", f"{out}/"]
    if len(packages) == 1:
        cmd[-1] = str(out / target.binaries[0])
    _run_go(cmd + packages, target, work, {**env, "CGO_ENABLED": "0"}, total, log)
    _promote(out, target)


def _run_go(
    cmd: list[str],
    target: Target,
    cwd: Path | None,
    extra_env: dict[str, str],
    total: int | None,
    log: Log,
) -> None:
    started = time.monotonic()
    label = f"{target.name} {target.version}"
    compiled = downloaded = 0
    tail: list[str] = []
    tty = sys.stderr.isatty()
    last_print = 0.0
    env = _env({"CGO_ENABLED": "0", **extra_env})
    proc = subprocess.Popen(
        cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    assert proc.stdout is not None
    for raw in proc.stdout:
        line = raw.rstrip()
        if line.startswith("go: downloading"):
            downloaded += 1
        elif line and " " not in line:
            compiled += 1
        else:
            tail = ([*tail, line])[-20:]
        now = time.monotonic()
        if now - last_print >= (1 if tty else 30):
            last_print = now
            of = f"/~{total}" if total else ""
            msg = f"[{_elapsed(now - started):>7}] {label}: {compiled}{of} packages compiled" + (
                f", {downloaded} modules downloaded" if downloaded else ""
            )
            if tty:
                sys.stderr.write("\r" + msg + "\x1b[K")
                sys.stderr.flush()
            else:
                log(msg)
    code = proc.wait()
    if tty:
        sys.stderr.write("\r\x1b[K")
    if code != 0:
        raise BuildError(f"{label}: go build failed: {_last_error(chr(10).join(tail))}")
    log(f"{label}: built in {_elapsed(time.monotonic() - started)}")


def _promote(out: Path, target: Target) -> None:
    shutil.rmtree(target.folder, ignore_errors=True)
    out.rename(target.folder)


def _fresh(path: Path) -> Path:
    shutil.rmtree(path, ignore_errors=True)
    path.mkdir(parents=True)
    return path


def _env(extra: dict[str, str]) -> dict[str, str]:
    return {**os.environ, **extra}


def _last_error(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[-1] if lines else "no output"


def _elapsed(seconds: float) -> str:
    minutes, secs = divmod(int(seconds), 60)
    return f"{minutes}m{secs:02d}s" if minutes else f"{secs}s"
