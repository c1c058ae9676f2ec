"""One leader even when paused: two kmc-apiservers; the leader is stopped with SIGSTOP for
longer than its lease while it has reconciles in flight; the other takes over; the old one,
continued with SIGCONT, writes nothing after its renew deadline — judged by the hub's audit
log, where every request names its replica in the User-Agent — and the workloads converge
with nothing lost or doubled.

Seeded (KMC_FAULT_SEEDS): the seed picks how many Deployments are created just before the
pause (so writes are in flight when it lands), their sizes, and how long past the lease the
pause lasts.
"""

from __future__ import annotations

import datetime
import json
import os
import random
import signal
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import pytest

from apiserver.leader import Timing, identity, user_agent
from kmc_testbed import bed
from tests.e2e.conftest import CHILDREN, Kubectl, run_testbed
from tests.e2e.test_testbed import deployment
from tests.faults.test_kills import SEEDS
from tests.faults.test_leader import _served, holder, second_replica, stop, wait_for

TIMING = Timing()
WRITES = {"create", "update", "patch", "delete", "deletecollection"}


def audit_events(since: datetime.datetime) -> list[dict[str, Any]]:
    """The hub's audit events of kmc-apiserver's writes received at `since` or later."""
    log = bed.audit_log()
    assert log.exists(), (
        f"the hub's audit log {log} does not exist: the hub's apiserver was started before "
        "the bed enabled auditing; `hack/testbed down` and `hack/testbed up` again"
    )
    events = []
    with log.open() as lines:
        for line in lines:
            if '"userAgent":"kmc-apiserver/' not in line:
                continue  # the log holds every write of a long run: parse only ours
            event = json.loads(line)
            if event.get("verb") in WRITES and _at(event) >= since:
                events.append(event)
    return events


def _review(event: dict[str, Any]) -> bool:
    """A SubjectAccessReview or TokenReview: asked to authorize a read, nothing stored."""
    return str((event.get("objectRef") or {}).get("resource", "")).endswith("reviews")


def _at(event: dict[str, Any]) -> datetime.datetime:
    return datetime.datetime.fromisoformat(event["requestReceivedTimestamp"].replace("Z", "+00:00"))


def children_sum(kubectl: dict[str, Kubectl], name: str, namespace: str) -> tuple[int, int]:
    """(replicas over every child, children holding it)."""
    total = found = 0
    for child in CHILDREN:
        proc = kubectl[child].run(
            "get", "deployment", name, "-n", namespace, "-o", "json", check=False
        )
        if proc.returncode == 0:
            total += json.loads(proc.stdout)["spec"]["replicas"]
            found += 1
    return total, found


def pod_count(kubectl: dict[str, Kubectl], namespace: str) -> int:
    return sum(
        len(kubectl[child].json("get", "pods", "-n", namespace)["items"]) for child in CHILDREN
    )


@pytest.mark.parametrize("seed", SEEDS)
def test_a_paused_leader_writes_nothing_after_its_deadline(
    installed: bed.State, kubectl: dict[str, Kubectl], namespace: str, seed: int
) -> None:
    rng = random.Random(seed)
    hub = kubectl["hub"]
    assert installed.kmc_port is not None
    old = identity(installed.kmc_port)
    wait_for("the test bed's kmc-apiserver to lead", lambda: holder(hub) == old, 90)
    started = datetime.datetime.now(datetime.UTC)
    port = bed.free_ports(1)[0]
    state = bed.load()
    assert state is not None
    paused = state.pids[bed.KMC]
    with tempfile.TemporaryDirectory() as folder:
        certs = Path(folder) / "certs"
        command = second_replica(installed, port, certs)
        log = (Path(folder) / "second.log").open("w")
        second = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
        try:
            path = f"/apis/mc.kmc.dev/v1alpha1/namespaces/{namespace}/deployments"
            wait_for("the second replica to serve", lambda: _served(port, certs, path), 60)
            sizes = {f"web-{i}": rng.randint(1, 4) for i in range(rng.randint(3, 8))}
            items = [deployment(name, size) for name, size in sizes.items()]
            hub.apply({"apiVersion": "v1", "kind": "List", "items": items}, namespace)
            paused_at = datetime.datetime.now(datetime.UTC)
            os.kill(paused, signal.SIGSTOP)  # the leader is busy with those when it stops
            stopped = time.monotonic()
            try:
                wait_for(
                    "the second replica to take over", lambda: holder(hub) == identity(port), 60
                )
                # The new leader acts: scale everything while the old one is still stopped.
                sizes = {name: size + rng.randint(1, 3) for name, size in sizes.items()}
                for name, size in sizes.items():
                    hub.run("scale", f"deployment/{name}", f"--replicas={size}", "-n", namespace)
                pause = TIMING.lease + rng.uniform(1, 8)
                wait_for("the pause to last", lambda: time.monotonic() - stopped > pause, pause + 5)
            finally:
                os.kill(paused, signal.SIGCONT)
            # The old leader is back with its queues full of what it was doing: it must see
            # its deadline has passed and act on none of it, while the new leader converges.
            for name, size in sizes.items():
                converged = (size, min(size, len(CHILDREN)))
                wait_for(
                    f"{name} to converge to {size}",
                    lambda n=name, c=converged: children_sum(kubectl, n, namespace) == c,
                    120,
                )
            # Nothing lost or doubled: exactly the pods asked for, over the children.
            wait_for(
                "the pods to match",
                lambda: pod_count(kubectl, namespace) == sum(sizes.values()),
                120,
            )
            # From a little before the test: its last renewal may precede the test's start.
            events = audit_events(started - datetime.timedelta(seconds=TIMING.lease))
            mine = [e for e in events if e.get("userAgent") == user_agent(old)]
            renewals = [
                e
                for e in mine
                if (e.get("objectRef") or {}).get("resource") == "leases"
                and e.get("verb") == "update"
                and _at(e) <= paused_at
            ]
            assert renewals, "no lease renewal by the paused replica in the audit log"
            deadline = max(map(_at, renewals)) + datetime.timedelta(seconds=TIMING.renew_deadline)
            # Serving reads goes on (a follower answers both groups): the SubjectAccessReviews
            # it asks are questions, not writes.
            late = [
                f"{e['verb']} {e['requestURI']} at {e['requestReceivedTimestamp']}"
                for e in mine
                if _at(e) > deadline and not _review(e)
            ]
            assert not late, f"the old leader wrote after its deadline {deadline}: {late}"
            theirs = [e for e in events if e.get("userAgent") == user_agent(identity(port))]
            assert any((e.get("objectRef") or {}).get("resource") == "deployments" for e in theirs)
        finally:
            log.close()
            try:
                stop(second, Path(folder) / "second.log")
            finally:
                if not bed.pid_running(paused):
                    run_testbed("start", bed.KMC)
    wait_for("the test bed's kmc-apiserver to lead again", lambda: holder(hub) == old, 60)
