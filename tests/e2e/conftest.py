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
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from kmc_testbed import bed, config

TESTBED = str(config.REPO_ROOT / "hack" / "testbed")
CHILDREN = ("us-east", "us-west", "eu-west")
CLUSTERS = ("hub", *CHILDREN)


def run_testbed(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run([TESTBED, *args], capture_output=True, text=True, timeout=3600)
    if check and proc.returncode != 0:
        raise AssertionError(f"hack/testbed {' '.join(args)} failed:\n{proc.stderr}{proc.stdout}")
    return proc


@dataclass(frozen=True)
class Kubectl:
    """The real kubectl binary, pointed at one cluster of the bed."""

    context: str
    binary: str = os.environ.get("KMC_KUBECTL", "kubectl")

    def run(
        self, *args: str, check: bool = True, stdin: str | None = None, timeout: float = 180
    ) -> subprocess.CompletedProcess[str]:
        cmd = [
            self.binary,
            "--kubeconfig",
            str(config.kubeconfig_path()),
            "--context",
            self.context,
            *args,
        ]
        proc = subprocess.run(cmd, capture_output=True, text=True, input=stdin, timeout=timeout)
        if check and proc.returncode != 0:
            raise AssertionError(f"{' '.join(cmd)} failed ({proc.returncode}):\n{proc.stderr}")
        return proc

    def json(self, *args: str) -> Any:
        return json.loads(self.run(*args, "-o", "json").stdout)

    def apply(self, manifest: dict[str, Any], namespace: str | None = None) -> None:
        ns = ["-n", namespace] if namespace else []
        self.run("apply", *ns, "-f", "-", stdin=json.dumps(manifest))


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
def kubectl(testbed_up: bed.State) -> dict[str, Kubectl]:
    """kubectl per cluster: `kubectl["hub"].run("get", "ns")`."""
    return {name: Kubectl(name) for name in CLUSTERS}


@pytest.fixture
def namespace(request: pytest.FixtureRequest, kubectl: dict[str, Kubectl]) -> Iterator[str]:
    """A fresh namespace, in the hub and every child, named after the test."""
    base = re.sub(r"[^a-z0-9-]+", "-", request.node.name.lower()).strip("-")[:40].strip("-")
    name = f"{base}-{uuid.uuid4().hex[:5]}"
    for k in kubectl.values():
        k.run("create", "namespace", name)
    yield name
    for k in kubectl.values():
        k.run("delete", "namespace", name, "--wait=false", "--ignore-not-found", check=False)
