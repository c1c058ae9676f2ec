"""Build kubectl-mc's release archives and the krew manifest that points at them.

`kubectl mc` is installed with krew from our own index (the name `mc` is taken in the central
one), and krew installs archives, not Python packages. So a release is one `kubectl-mc` file
that runs with nothing but `python3` >= 3.11: a zipapp holding `kubectl_mc` and the pure-Python
code of its runtime dependencies, copied from the environment running this script. The plugin
imports only click and PyYAML (read kubectl_mc/*.py); the server's dependencies
(aiohttp, kubernetes_asyncio, pydantic, cryptography) never go in. PyYAML's C extension is
left out: `yaml` falls back to its pure-Python loader. After building, every `kubectl_mc`
module is imported by an isolated interpreter that sees only the stdlib and the zipapp, so an
archive that needs anything else is never written.

krew wants one archive per os/arch; the content is the same for all of them. Every byte is
fixed (sorted entries, fixed mtimes and modes, no gzip timestamp), so running this twice
gives the same sha256 and the same manifest.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import importlib.metadata
import io
import re
import subprocess
import sys
import tarfile
import tempfile
import tomllib
import zipfile
from pathlib import Path
from typing import Any

import yaml

REPO_ROOT = Path(__file__).resolve().parents[1]
HOMEPAGE = "https://github.com/kmc-dev/kubectl-mc"
PLATFORMS = (("linux", "amd64"), ("linux", "arm64"), ("darwin", "amd64"), ("darwin", "arm64"))
RUNTIME_DISTRIBUTIONS = ("click", "PyYAML")
# 1980-01-01T00:00:00Z, the earliest time a zip entry can carry.
EPOCH = (1980, 1, 1, 0, 0, 0)
EPOCH_SECONDS = 315532800

# Parsed by every Python 3, so an old interpreter prints this message instead of a SyntaxError.
# Python cannot cache bytecode inside a zip, so the first run unpacks the app into a cache
# folder named by its content and compiles it there (later runs import the bytecode: ~3x
# faster). It is compiled at once rather than left to imports, which write nothing where
# PYTHONDONTWRITEBYTECODE is set; unchecked hashes, since the folder's content never changes.
# Where nothing can be written, it runs from the zip as it is.
MAIN = """\
import os
import sys

if sys.version_info < (3, 11):
    sys.stderr.write(
        "kubectl-mc needs Python >= 3.11, but python3 on PATH (%s) is %s\\n"
        % (sys.executable, sys.version.split()[0])
    )
    sys.exit(1)

DIGEST = "@DIGEST@"


def _unpacked():
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    folder = os.path.join(base, "kubectl-mc", "app-" + DIGEST)
    if os.path.isdir(folder):
        return folder
    import shutil  # only now: together they take longer to import than Python to start
    import zipfile

    archive = os.path.dirname(os.path.abspath(__file__))
    partial = "%s.%d" % (folder, os.getpid())
    try:
        with zipfile.ZipFile(archive) as zf:
            zf.extractall(partial)
        import compileall
        import py_compile

        compileall.compile_dir(
            partial,
            ddir=folder,
            quiet=2,
            invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH,
        )
        os.replace(partial, folder)
    except OSError:
        shutil.rmtree(partial, ignore_errors=True)
        return folder if os.path.isdir(folder) else None
    return folder


here = os.path.dirname(os.path.abspath(__file__))
if os.path.basename(here) == "app-" + DIGEST:
    sys.path.insert(0, here)  # run from the unpacked app by the launcher (-I adds no path)
else:
    folder = _unpacked()
    if folder is not None:
        sys.path[0] = folder

from kubectl_mc.cli import main

main()
"""

# What comes before the zip (Python finds a zip's entries from its end, so any prefix will
# do): a shell script rather than `#!/usr/bin/env python3`, so Python can be started with
# flags, which a shebang cannot pass everywhere. `-I -S`: the app carries everything it
# imports beyond the standard library, so it needs nothing from site-packages, and whatever
# the user's Python has there (.pth files run at every start, an older click) can neither
# slow it down nor break it. Once the app is unpacked (see MAIN), its `__main__.py` is run
# from there: as a script, Python opens neither the zip nor runpy. Only these lines are read:
# `exec` replaces the shell.
LAUNCHER = """\
#!/bin/sh
command -v python3 >/dev/null 2>&1 || {
    echo "kubectl-mc needs python3 >= 3.11 on PATH, and there is none" >&2
    exit 1
}
app="${XDG_CACHE_HOME:-$HOME/.cache}/kubectl-mc/app-@DIGEST@"
[ -f "$app/__main__.py" ] && exec python3 -I -S "$app/__main__.py" "$@"
exec python3 -I -S "$0" "$@"
"""

SHORT_DESCRIPTION = "Transparent multi-cluster: one hub, many clusters"
DESCRIPTION = """\
kubectl-mc is the client side of kubectl-mc's control plane: you keep writing plain
Kubernetes objects to one hub cluster, and workloads are placed on the child clusters
(locations) joined to it. `kubectl mc` joins and unjoins clusters and shows where things
run, without leaving kubectl.
"""
CAVEATS = """\
kubectl-mc is a Python program: it needs python3 >= 3.11 on PATH.
It talks to a hub cluster that runs kmc-apiserver; see {homepage}.
"""


def version() -> str:
    """The version in pyproject.toml, which must be the one `kubectl mc version` prints."""
    with (REPO_ROOT / "pyproject.toml").open("rb") as f:
        project: str = tomllib.load(f)["project"]["version"]
    init = (REPO_ROOT / "kubectl_mc" / "__init__.py").read_text()
    match = re.search(r'^__version__ = "([^"]+)"', init, re.MULTILINE)
    if match is None or match.group(1) != project:
        found = match.group(1) if match else "none"
        sys.exit(f"pyproject.toml says {project}, kubectl_mc.__version__ says {found}")
    return project


def zipapp_members() -> dict[str, bytes]:
    """Every file the zipapp holds, by its name inside the zip."""
    members: dict[str, bytes] = {}
    for path in sorted((REPO_ROOT / "kubectl_mc").rglob("*.py")):
        members[path.relative_to(REPO_ROOT).as_posix()] = path.read_bytes()
    for name in RUNTIME_DISTRIBUTIONS:
        dist = importlib.metadata.distribution(name)
        for file in dist.files or ():
            text = file.as_posix()
            keep = text.endswith(".py") or text.endswith("METADATA") or "/licenses/" in text
            if keep and not text.startswith("../") and "__pycache__" not in text:
                members[text] = file.read_binary()
    digest = hashlib.sha256()
    for name in sorted(members):
        digest.update(name.encode() + b"\0" + members[name] + b"\0")
    members["__main__.py"] = MAIN.replace("@DIGEST@", digest.hexdigest()[:16]).encode()
    return members


def build_zipapp(members: dict[str, bytes]) -> bytes:
    digest = re.search(rb'^DIGEST = "([0-9a-f]+)"$', members["__main__.py"], re.MULTILINE)
    assert digest is not None, "__main__.py names no DIGEST"
    buf = io.BytesIO()
    buf.write(LAUNCHER.replace("@DIGEST@", digest.group(1).decode()).encode())
    with zipfile.ZipFile(buf, "w") as zf:
        for name in sorted(members):
            info = zipfile.ZipInfo(name, date_time=EPOCH)
            info.create_system = 3  # unix, so the mode below is read
            info.external_attr = 0o644 << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            zf.writestr(info, members[name], compresslevel=9)
    return buf.getvalue()


def check_self_contained(app: bytes) -> None:
    """Import every kubectl_mc module with nothing but the stdlib and the zipapp on sys.path."""
    modules = [
        p.relative_to(REPO_ROOT).with_suffix("").as_posix().replace("/", ".")
        for p in sorted((REPO_ROOT / "kubectl_mc").rglob("*.py"))
    ]
    modules = [m.removesuffix(".__init__") for m in modules]
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "kubectl-mc"
        path.write_bytes(app)
        code = f"import sys; sys.path.insert(0, {str(path)!r})\n"
        code += "".join(f"import {m}\n" for m in modules)
        proc = subprocess.run(
            [sys.executable, "-I", "-S", "-c", code], capture_output=True, text=True
        )
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        sys.exit(f"the zipapp is not self-contained: {last}")


def build_tarball(app: bytes, license_text: bytes) -> bytes:
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name, data, mode in (("LICENSE", license_text, 0o644), ("kubectl-mc", app, 0o755)):
            info = tarfile.TarInfo(name)
            info.size, info.mode, info.mtime = len(data), mode, EPOCH_SECONDS
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            tar.addfile(info, io.BytesIO(data))
    out = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", fileobj=out, mtime=0, compresslevel=9) as gz:
        gz.write(raw.getvalue())
    return out.getvalue()


def manifest(ver: str, base_url: str, sha: str) -> dict[str, Any]:
    platforms = [
        {
            "selector": {"matchLabels": {"os": os_, "arch": arch}},
            "uri": base_url + archive_name(ver, os_, arch),
            "sha256": sha,
            "bin": "kubectl-mc",
            "files": [{"from": "kubectl-mc", "to": "."}, {"from": "LICENSE", "to": "."}],
        }
        for os_, arch in PLATFORMS
    ]
    return {
        "apiVersion": "krew.googlecontainertools.github.com/v1alpha2",
        "kind": "Plugin",
        "metadata": {"name": "mc"},
        "spec": {
            "version": f"v{ver}",
            "homepage": HOMEPAGE,
            "shortDescription": SHORT_DESCRIPTION,
            "description": DESCRIPTION,
            "caveats": CAVEATS.format(homepage=HOMEPAGE),
            "platforms": platforms,
        },
    }


def archive_name(ver: str, os_: str, arch: str) -> str:
    return f"kubectl-mc_v{ver}_{os_}_{arch}.tar.gz"


class _Dumper(yaml.SafeDumper):
    """Multi-line strings as `|` blocks, so the manifest reads like a hand-written one."""


def _str(dumper: yaml.SafeDumper, data: str) -> yaml.ScalarNode:
    return dumper.represent_scalar(
        "tag:yaml.org,2002:str", data, style="|" if "\n" in data else None
    )


_Dumper.add_representer(str, _str)


def _write(path: Path, data: bytes) -> None:
    """Write through a temporary file: a reader never sees half an archive."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(data)
    tmp.replace(path)


def main(argv: list[str] | None = None) -> None:
    ver = version()
    parser = argparse.ArgumentParser(prog="hack/release", description=__doc__.splitlines()[0])
    parser.add_argument("--out-dir", type=Path, default=REPO_ROOT / "dist", help="archives")
    parser.add_argument(
        "--index-dir", type=Path, default=REPO_ROOT / "plugin-index", help="the krew index"
    )
    parser.add_argument(
        "--base-url",
        default=f"{HOMEPAGE}/releases/download/v{ver}/",
        help="where the archives are published; each uri is this plus the archive name",
    )
    args = parser.parse_args(argv)
    base_url = args.base_url if args.base_url.endswith("/") else args.base_url + "/"

    app = build_zipapp(zipapp_members())
    check_self_contained(app)
    tarball = build_tarball(app, (REPO_ROOT / "LICENSE").read_bytes())
    sha = hashlib.sha256(tarball).hexdigest()
    for os_, arch in PLATFORMS:
        path = args.out_dir / archive_name(ver, os_, arch)
        _write(path, tarball)
        print(f"{path}  sha256 {sha}")
    doc = manifest(ver, base_url, sha)
    text = "# Written by hack/release: edit hack/kmc_release.py, not this file.\n"
    text += yaml.dump(doc, Dumper=_Dumper, sort_keys=False, width=100)
    out = args.index_dir / "plugins" / "mc.yaml"
    _write(out, text.encode())
    print(out)


if __name__ == "__main__":
    main()
