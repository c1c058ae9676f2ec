"""Two kmc-apiservers: both serve reads, only the Lease holder acts, and the other takes over
within the lease duration when the leader is killed."""

from __future__ import annotations

import json
import os
import signal
import ssl
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

from apiserver.leader import identity
from kmc_testbed import bed, config
from tests.e2e.conftest import Kubectl, run_testbed
from tests.e2e.test_placement import wait_placement
from tests.e2e.test_testbed import deployment

LEASE = ("get", "lease", "kmc-apiserver", "-n", "kmc-system")


def holder(hub: Kubectl) -> str:
    return str(hub.json(*LEASE)["spec"].get("holderIdentity", ""))


def wait_for(what: str, check: Any, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.5)


def direct_get(port: int, certs: Path, path: str) -> Any:
    """A request to one replica straight, as the hub's front proxy would make it."""
    pki = config.state_dir() / "hub" / "pki"
    context = ssl.create_default_context(cafile=str(certs / "ca.crt"))
    context.load_cert_chain(
        str(pki / "front-proxy-client.crt"), str(pki / "front-proxy-client.key")
    )
    headers = {"X-Remote-User": "kmc-testbed-admin", "X-Remote-Group": "system:masters"}
    request = urllib.request.Request(f"https://localhost:{port}{path}", headers=headers)
    with urllib.request.urlopen(request, context=context, timeout=10) as response:
        return json.loads(response.read())


def second_replica(installed: bed.State, port: int, certs: Path) -> list[str]:
    """The bed's kmc-apiserver command for one more replica, on `port` with its own certs."""
    assert installed.kmc_port is not None
    return [
        arg.replace(f"--secure-port={installed.kmc_port}", f"--secure-port={port}")
        for arg in bed._kmc_command(installed)
        if not arg.startswith("--cert-dir")
    ] + [f"--cert-dir={certs}"]


STOP_LIMIT = 60.0  # seconds; kmc-apiserver gives open requests 5 of them


def stop(second: subprocess.Popen[bytes], log: Path) -> None:
    """Stop a second replica gracefully, as a rollout would (it hands the lease back at
    once); kill it if it will not go, and say so with the end of its log. The end of its log
    is printed either way: pytest shows it when the test fails."""
    second.terminate()
    try:
        second.wait(timeout=STOP_LIMIT)
    except subprocess.TimeoutExpired:
        second.kill()
        second.wait()
        raise AssertionError(f"a replica took over {STOP_LIMIT:.0f}s to stop") from None
    finally:
        print(f"--- the second replica's log ends:\n{log.read_text(errors='replace')[-8000:]}")


def test_the_follower_serves_reads_and_takes_over_from_a_killed_leader(
    installed: bed.State, kubectl: dict[str, Kubectl], namespace: str
) -> None:
    hub = kubectl["hub"]
    assert installed.kmc_port is not None
    first = identity(installed.kmc_port)
    wait_for("the test bed's kmc-apiserver to lead", lambda: holder(hub) == first, 90)
    port = bed.free_ports(1)[0]
    with tempfile.TemporaryDirectory() as folder:
        certs = Path(folder) / "certs"
        command = second_replica(installed, port, certs)
        log = (Path(folder) / "second.log").open("w")
        second = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
        try:
            hub.apply(deployment("before", 2), namespace)
            wait_placement(hub, "deployment", "before", namespace)
            # The follower answers reads from its own caches, and does not take the lease.
            path = f"/apis/mc.kmc.dev/v1alpha1/namespaces/{namespace}/deployments"
            wait_for("the follower to serve", lambda: _served(port, certs, path), 30)
            views = direct_get(port, certs, path)["items"]
            assert [v["metadata"]["name"] for v in views] == ["before"]
            assert holder(hub) == first

            state = bed.load()
            assert state is not None
            os.kill(state.pids[bed.KMC], signal.SIGKILL)
            killed = time.monotonic()
            hub.apply(deployment("after", 3), namespace)
            wait_placement(hub, "deployment", "after", namespace, timeout=40)
            took = time.monotonic() - killed
            assert holder(hub) == identity(port)
            assert took < 15 + 10, f"took over after {took:.0f}s"  # lease + retry + decision
        finally:
            log.close()
            try:
                stop(second, Path(folder) / "second.log")
            finally:
                run_testbed("start", bed.KMC)
    wait_for("the test bed's kmc-apiserver to lead again", lambda: holder(hub) == first, 90)


def _served(port: int, certs: Path, path: str) -> bool:
    try:
        direct_get(port, certs, path)
        return True
    except OSError:
        return False
