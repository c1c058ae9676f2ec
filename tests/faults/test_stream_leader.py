"""A stream is served by whichever replica answers, leader or not: a followed log read from a
follower goes on, line for line, while the leader is killed and the follower takes the lease;
and an exec through it works before and after."""

from __future__ import annotations

import http.client
import os
import signal
import ssl
import subprocess
import tempfile
import threading
import urllib.request
from pathlib import Path

from apiserver.leader import identity
from kmc_testbed import bed, config
from tests.e2e.conftest import Kubectl, run_testbed
from tests.e2e.test_locations import wait_until
from tests.e2e.test_streams import cri, kwok_logs, placed, ticks
from tests.faults.test_leader import _served, holder, second_replica
from tests.faults.test_leader import stop as stop_replica

REMOTE = "/apis/remote.kmc.dev/v1alpha1"


def follow(port: int, certs: Path, path: str, into: list[str], stop: threading.Event) -> None:
    """A followed log straight from one replica, as the hub's front proxy asks for it."""
    pki = config.state_dir() / "hub" / "pki"
    context = ssl.create_default_context(cafile=str(certs / "ca.crt"))
    context.load_cert_chain(
        str(pki / "front-proxy-client.crt"), str(pki / "front-proxy-client.key")
    )
    headers = {"X-Remote-User": "kmc-testbed-admin", "X-Remote-Group": "system:masters"}
    request = urllib.request.Request(f"https://localhost:{port}{path}", headers=headers)
    try:
        with urllib.request.urlopen(request, context=context, timeout=60) as response:
            while not stop.is_set() and (line := response.readline()):
                into.append(line.decode().rstrip("\n"))
    except (OSError, http.client.HTTPException):
        pass  # the replica went away at the end


def test_a_stream_goes_on_while_another_replica_takes_the_lease(
    installed: bed.State, kubectl: dict[str, Kubectl], namespace: str, tmp_path: Path
) -> None:
    hub = kubectl["hub"]
    assert installed.kmc_port is not None
    first = identity(installed.kmc_port)
    wait_until("the test bed's kmc-apiserver to lead", lambda: holder(hub) == first, 90)
    pods = placed(hub, namespace)
    location, pod = "eu-west", pods["eu-west"]
    log_file = tmp_path / "pod.log"
    log_file.write_text(cri("tick 0"))
    kwok_logs(kubectl[location], namespace, pod, log_file)
    stop = threading.Event()

    def write() -> None:
        tick = 1
        while not stop.is_set():
            with log_file.open("a") as handle:
                handle.write(cri(f"tick {tick}"))
            tick += 1
            stop.wait(0.2)

    port = bed.free_ports(1)[0]
    lines: list[str] = []
    with tempfile.TemporaryDirectory() as folder:
        certs = Path(folder) / "certs"
        log = (Path(folder) / "second.log").open("w")
        second = subprocess.Popen(
            second_replica(installed, port, certs), stdout=log, stderr=subprocess.STDOUT
        )
        try:
            probe = f"{REMOTE}/namespaces/{namespace}/pods"
            wait_until("the follower to serve", lambda: _served(port, certs, probe), 60)
            threading.Thread(target=write, daemon=True).start()
            path = f"{REMOTE}/namespaces/{namespace}/pods/{pod}@{location}/log?follow=true"
            reader = threading.Thread(
                target=follow, args=(port, certs, path, lines, stop), daemon=True
            )
            reader.start()
            wait_until("lines from the follower", lambda: len(ticks(lines, "tick ")) >= 5, 60)
            state = bed.load()
            assert state is not None
            os.kill(state.pids[bed.KMC], signal.SIGKILL)
            wait_until("the follower to lead", lambda: holder(hub) == identity(port), 60)
            at_takeover = len(lines)
            wait_until("lines after the takeover", lambda: len(lines) >= at_takeover + 10, 60)
            assert reader.is_alive(), "the stream ended"
        finally:
            stop.set()
            log.close()
            try:
                # Its streams end and the lease goes back.
                stop_replica(second, Path(folder) / "second.log")
            finally:
                run_testbed("start", bed.KMC)
    seen = ticks(lines, "tick ")
    assert seen == list(range(seen[0], seen[-1] + 1)), "the stream skipped lines"
    wait_until("the test bed's kmc-apiserver to lead again", lambda: holder(hub) == first, 60)

    # And an exec through the hub, once it sees the bed's replica again.
    def exec_ok() -> bool:
        done = subprocess.run(
            [hub.binary, "mc", "exec", f"{pod}@{location}", "-n", namespace, "--", "echo", "ok"],
            capture_output=True,
            text=True,
            timeout=120,
            env={
                **os.environ,
                "PATH": f"{config.REPO_ROOT / '.venv' / 'bin'}{os.pathsep}{os.environ['PATH']}",
                "KUBECONFIG": str(config.kubeconfig_path()),
            },
        )
        # Until the hub has checked our APIService again, it answers 503 itself.
        assert done.returncode == 0 or "service unavailable" in done.stderr, done.stderr
        return done.returncode == 0 and done.stdout == "ok\n"

    wait_until("an exec through the hub", exec_ok, 60)
