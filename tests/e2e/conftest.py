"""The e2e fixtures: one real test bed per run, one namespace per test, the real kubectl.

The bed is brought up with the same `hack/testbed up` a person types. If it was already up
it is reused and left running; if this run started it, it is brought down at the end
(unless KMC_KEEP_TESTBED=1).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from kmc_testbed import bed, config

TESTBED = str(config.REPO_ROOT / "hack" / "testbed")
VENV_BIN = config.REPO_ROOT / ".venv" / "bin"
CHILDREN = ("us-east", "us-west", "eu-west")
CLUSTERS = ("hub", *CHILDREN)


def run_testbed(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run([TESTBED, *args], capture_output=True, text=True, timeout=3600)
    if check and proc.returncode != 0:
        raise AssertionError(f"hack/testbed {' '.join(args)} failed:\n{proc.stderr}{proc.stdout}")
    return proc


@dataclass(frozen=True)
class Kubectl:
    """The real kubectl binary, pointed at one cluster of the bed (through the bed's
    kubeconfig, or another one naming the same context)."""

    context: str
    binary: str = os.environ.get("KMC_KUBECTL", "kubectl")
    kubeconfig: str | None = None

    def run(
        self, *args: str, check: bool = True, stdin: str | None = None, timeout: float = 180
    ) -> subprocess.CompletedProcess[str]:
        # Flags after the arguments: kubectl accepts them there, and plugins need them there.
        kubeconfig = self.kubeconfig or str(config.kubeconfig_path())
        cmd = [self.binary, *args, "--kubeconfig", kubeconfig]
        cmd += ["--context", self.context]
        env = {**os.environ, "PATH": f"{VENV_BIN}{os.pathsep}{os.environ['PATH']}"}
        proc = subprocess.run(
            cmd, capture_output=True, text=True, input=stdin, timeout=timeout, env=env
        )
        if check and proc.returncode != 0:
            raise AssertionError(f"{' '.join(cmd)} failed ({proc.returncode}):\n{proc.stderr}")
        return proc

    def mc(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        """`kubectl mc …`: the plugin found by kubectl on PATH, as a user runs it."""
        return self.run("mc", *args, check=check)

    def json(self, *args: str) -> Any:
        return json.loads(self.run(*args, "-o", "json").stdout)

    def apply(self, manifest: dict[str, Any], namespace: str | None = None) -> None:
        ns = ["-n", namespace] if namespace else []
        self.run("apply", *ns, "-f", "-", stdin=json.dumps(manifest))

    def let_read(self, namespace: str, resource: str, subject: str) -> None:
        """A Role `pod-reader` in `namespace` (get, list, watch on `resource`), bound as
        `reader` to `subject`: a `--user=…` or `--serviceaccount=…` flag."""
        verbs = "--verb=get,list,watch"
        self.run("create", "role", "pod-reader", "-n", namespace, verbs, f"--resource={resource}")
        self.run("create", "rolebinding", "reader", "-n", namespace, "--role=pod-reader", subject)


@pytest.fixture(scope="session")
def testbed_up() -> Iterator[bed.State]:
    was_up = bed.load() is not None
    run_testbed("up")
    state = bed.load()
    assert state is not None
    yield state
    if not was_up and os.environ.get("KMC_KEEP_TESTBED") != "1":
        pids = list((bed.load() or state).pids.values())
        run_testbed("down")
        left = [pid for pid in pids if bed.pid_running(pid)]
        assert not left, f"hack/testbed down left processes behind: {left}"


@pytest.fixture(scope="session")
def installed(testbed_up: bed.State) -> bed.State:
    """kubectl-mc installed on the bed: CRDs, kmc-apiserver, every child joined and Ready."""
    run_testbed("install")
    state = bed.load()
    assert state is not None and state.kmc_port is not None
    return state


@pytest.fixture(scope="session")
def kubectl(testbed_up: bed.State) -> dict[str, Kubectl]:
    """kubectl per cluster: `kubectl["hub"].run("get", "ns")`."""
    return {name: Kubectl(name) for name in CLUSTERS}


def _fresh_name(request: pytest.FixtureRequest) -> str:
    base = re.sub(r"[^a-z0-9-]+", "-", request.node.name.lower()).strip("-")[:40].strip("-")
    return f"{base}-{uuid.uuid4().hex[:5]}"


@pytest.fixture
def namespace(request: pytest.FixtureRequest, kubectl: dict[str, Kubectl]) -> Iterator[str]:
    """A fresh namespace in the hub, named after the test, deleted as a user deletes one:
    on the hub only. The children's copies are kubectl-mc's to make and to remove, so every
    test also checks that clean-up (`children_cleaned_up`, at the end of the session), and
    none pulls a namespace from under a live hub object (what the next test would then find
    the sync loop busy putting back)."""
    name = _fresh_name(request)
    kubectl["hub"].run("create", "namespace", name)
    yield name
    kubectl["hub"].run("delete", "namespace", name, "--wait=false", "--ignore-not-found")
    _DELETED.append(name)


# Test namespaces deleted on the hub, whose clean-up in the children is checked at the end of
# the session (`children_cleaned_up`): waiting for each in its own teardown cost 5-12 s a test.
_DELETED: list[str] = []


@pytest.fixture(scope="session", autouse=True)
def children_cleaned_up(testbed_up: bed.State) -> Iterator[None]:
    """After the last test (and before a bed this run started goes down): nothing of any test
    is left in any child."""
    yield
    if _DELETED:
        assert_cleaned_up({name: Kubectl(name) for name in CLUSTERS}, _DELETED)


def assert_cleaned_up(kubectl: dict[str, Kubectl], names: list[str], timeout: float = 300) -> None:
    """Once a hub namespace is gone, nothing of its test may stay in any child: the namespace
    we made there is gone, or going with nothing of ours left in it."""
    deadline = time.monotonic() + timeout
    left: dict[str, str] = {}
    pending = list(names)
    while pending and time.monotonic() < deadline:
        left = {}
        for name in pending:
            hub = kubectl["hub"].run("get", "namespace", name, "-o", "name", check=False)
            if hub.returncode == 0:
                left[f"{name} on the hub"] = "still there"
                continue
            for child in CHILDREN:
                why = _left_in(kubectl[child], name)
                if why:
                    left[f"{name} in {child}"] = why
        pending = sorted({key.split(" ", 1)[0] for key in left})
        if pending:
            time.sleep(1)
    assert not left, f"test namespaces not cleaned up after {timeout:.0f}s: {left}"


def _left_in(child: Kubectl, name: str) -> str | None:
    proc = child.run("get", "namespace", name, "-o", "json", check=False)
    if proc.returncode != 0:
        return None if "NotFound" in proc.stderr else proc.stderr.strip()
    if not json.loads(proc.stdout)["metadata"].get("deletionTimestamp"):
        return "the namespace is still there, not being deleted"
    ours = child.run(
        "get",
        "all,configmaps,secrets,serviceaccounts",
        "-n",
        name,
        "-l",
        "kmc.dev/origin-uid",
        "-o",
        "name",
        check=False,
    )
    return f"still holds {ours.stdout.split()}" if ours.stdout.strip() else None


@pytest.fixture(autouse=True)
def kmc_never_forbidden(testbed_up: bed.State) -> Iterator[None]:
    """kmc-apiserver runs on the bed as its own ServiceAccount, bound by manifests/' RBAC:
    whatever it is refused on the hub during a test is a rule missing there, and fails that
    test (the loops retry and log such a refusal; a test may pass without noticing)."""
    log = bed.audit_log()
    start = log.stat().st_size if log.exists() else 0
    yield
    refused = sorted(refused_since(log, start, bed.KMC_USER))
    assert not refused, f"the hub refused {bed.KMC_USER} (missing RBAC in manifests/?): {refused}"


def refused_since(log: Path, start: int, user: str) -> set[str]:
    """What the hub refused `user` (403) in its audit log from byte `start` on, and did not
    allow later (the same verb on the same resource, any object). A missing rule is never
    allowed; a hub apiserver just restarted refuses what it allows once its RBAC caches are
    filled, and the object refused then may not be written again (its namespace went, or
    nothing of it changed since)."""
    if not log.exists():
        return set()
    refused: dict[str, str] = {}
    with log.open("rb") as lines:
        if log.stat().st_size >= start:  # (else it was rotated: read it all)
            lines.seek(start)
        for line in lines:
            if user.encode() not in line:
                continue
            event = json.loads(line)
            status = event.get("responseStatus") or {}
            causes = (status.get("details") or {}).get("causes") or []
            if event["user"]["username"] != user or any(
                # Not RBAC: admission refuses new objects (our Events) in a namespace going.
                c.get("reason") == "NamespaceTerminating"
                for c in causes
            ):
                continue
            ref = event.get("objectRef") or {}
            what = "/".join(
                filter(None, (ref.get("apiGroup"), ref.get("resource"), ref.get("subresource")))
            )
            request = f"{event['verb']} {what or event['requestURI']}"
            if status.get("code") == 403:
                refused[request] = request
            elif 200 <= (status.get("code") or 0) < 300:
                refused.pop(request, None)
    return set(refused.values())


@pytest.fixture
def namespace_everywhere(
    request: pytest.FixtureRequest, kubectl: dict[str, Kubectl]
) -> Iterator[str]:
    """A fresh namespace made by hand in the hub and every child, for tests that write to the
    children directly; deleted everywhere afterwards."""
    name = _fresh_name(request)
    for k in kubectl.values():
        k.run("create", "namespace", name)
    yield name
    for k in kubectl.values():
        k.run("delete", "namespace", name, "--wait=false", "--ignore-not-found", check=False)
