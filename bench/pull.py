"""Push against pull over the same three children, in one run (issue #34).

The bed's three children are push locations. This phase measures, on them:

- converge: N Deployments of 3 created on the hub (split 1/1/1), from the first create
  until every hub object reports availableReplicas 3 for its generation (as `converge`
  measures it, without its direct floor), with kmc-apiserver's CPU seconds over that time
  (`/proc/<pid>/stat`), per location and per object;
- propagation: a ConfigMap with a Replicate strategy created on the hub, until every
  child's watch has it, one at a time, p50/p99 (as `sync.propagation` measures it).

Then, once the push objects are gone, it turns the same three children into pull
locations: `kubectl mc unjoin` of each push Location, `kubectl mc join NAME --mode pull`
with the real plugin, and one `kmc-agent` per child given only that child's kubeconfig,
the hub's URL and CA and the bootstrap token (as `tests/e2e/test_pull_join.py` starts one).
It measures the same two things again, with the agents' CPU seconds counted apart from
kmc-apiserver's; and puts the bed back as it was (push, `hack/testbed install`), failure or
not, so a later phase finds it unchanged. Ratios are pull against push, both measured here.

`python -m bench.pull [--count N] [--propagation P]` runs it alone (needs the bed up with
kubectl-mc installed), or `hack/bench pull …`, which brings the bed up first.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import re
import statistics
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp

from apiserver.kube.client import ApiError, Kube
from bench import namespaces
from bench.converge import CONCURRENCY, EXTRA_NODES, REQUESTS, _available, _cpu_seconds
from bench.objects import deployment, kwok_nodes
from bench.report import row
from bench.sync import CHILDREN, _client, _pct, through_hub, watched
from kmc_testbed import bed, config, install

CSR = "certificatesigningrequest.certificates.k8s.io"
IDENTITY = "/api/v1/namespaces/kmc-system/secrets/kmc-agent-identity"
TOKEN = re.compile(r"bootstrap token \(one use, expires [^)]+\): (\S+)")
LIMIT = 900.0  # seconds a converge may take before the phase gives up, as `converge`'s


@dataclass
class Measured:
    """One mode's figures: converge seconds, CPU seconds over it, propagation samples."""

    converge_s: float
    kmc_cpu_s: float
    agents_cpu_s: float
    propagation_s: list[float]


@dataclass
class Agents:
    """The `kmc-agent` processes this phase started, one per child, and their logs."""

    procs: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)

    def cpu_seconds(self) -> float:
        return sum(_cpu_seconds(p.pid) for p in self.procs.values())

    def check(self) -> None:
        for name, proc in self.procs.items():
            if proc.poll() is not None:
                raise RuntimeError(
                    f"kmc-agent for {name} exited with {proc.returncode}; see {_log(name)}"
                )

    def stop(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.terminate()
        for proc in self.procs.values():
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)
        self.procs.clear()


def _log(name: str) -> Path:
    return config.state_dir() / "logs" / f"kmc-agent-bench-{name}.log"


def _own_kubeconfig(name: str) -> Path:
    """The child's own kubeconfig, naming it only: all the agent is given of it."""
    own = subprocess.run(
        [
            "kubectl",
            "config",
            "view",
            "--raw",
            "--minify",
            "--flatten",
            "--kubeconfig",
            str(config.kubeconfig_path()),
            "--context",
            name,
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    folder = config.state_dir() / "bench-pull"
    folder.mkdir(exist_ok=True)
    path = folder / f"{name}.kubeconfig"
    path.write_text(own)
    path.chmod(0o600)
    return path


def _forget_identity(state: bed.State, name: str) -> None:
    """The hub certificate an agent kept in its child: a later join must start anew."""
    bed.admin_client(state.cluster(name)).request("DELETE", IDENTITY)


def _forget_requests() -> None:
    """The agents' certificate requests on the hub (approved and issued): the bed had none."""
    found = install.kubectl("get", "csr", "-o", "name", check=False).stdout.split()
    ours = [n for n in found if any(n.startswith(f"{CSR}/kmc-agent-{c}-") for c in CHILDREN)]
    if ours:
        install.kubectl("delete", *ours, check=False)


def start_agent(state: bed.State, name: str, token: str) -> subprocess.Popen[bytes]:
    hub = state.cluster(bed.HUB)
    command = [
        str(config.REPO_ROOT / ".venv" / "bin" / "kmc-agent"),
        "--location",
        name,
        "--hub-url",
        hub.server,
        "--hub-ca",
        str(hub.folder / "pki" / "ca.crt"),
        "--kubeconfig",
        str(_own_kubeconfig(name)),
        "--bootstrap-token",
        token,
    ]
    log = _log(name).open("ab")
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    return subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env)


def _ready(names: Sequence[str], mode: str) -> bool:
    found = install.kubectl("get", "locations", "-o", "json", check=False)
    if found.returncode != 0:
        return False
    ready = {
        item["metadata"]["name"]
        for item in json.loads(found.stdout)["items"]
        if ((item.get("spec") or {}).get("mode") or "Push") == mode
        and any(
            c["type"] == "Ready" and c["status"] == "True"
            for c in (item.get("status") or {}).get("conditions") or []
        )
    }
    return set(names) <= ready


def _wait(what: str, done: Any, limit: float, agents: Agents | None = None) -> None:
    deadline = time.monotonic() + limit
    while not done():
        if agents is not None:
            agents.check()
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what}: not after {limit:g} s")
        time.sleep(1.0)


def to_pull(state: bed.State, agents: Agents) -> None:
    """Each push Location unjoined, joined again as pull, its agent started; all Ready."""
    for name in CHILDREN:
        labels = ",".join(f"{k}={v}" for k, v in sorted(state.cluster(name).labels.items()))
        install.unjoin(name)
        _forget_identity(state, name)
        joined = install.kubectl(
            "mc", "join", name, "--mode", "pull", *(["--labels", labels] if labels else [])
        ).stdout
        found = TOKEN.search(joined)
        if found is None:
            raise RuntimeError(f"`kubectl mc join {name} --mode pull` printed no token: {joined}")
        agents.procs[name] = start_agent(state, name, found.group(1))
    _wait("the pull Locations Ready", lambda: _ready(CHILDREN, "Pull"), 180.0, agents)


def to_push(state: bed.State, agents: Agents) -> None:
    """Back as the bed was: the pull Locations unjoined, their agents stopped and their
    kept certificates removed, every child joined again as push (`hack/testbed install`)."""
    try:
        for name in CHILDREN:
            found = install.kubectl("get", "location", name, "-o", "name", check=False)
            if found.returncode == 0 and not _ready([name], "Push"):
                install.unjoin(name)
    finally:
        agents.stop()
    for name in CHILDREN:
        _forget_identity(state, name)
    _forget_requests()
    subprocess.run([str(config.REPO_ROOT / "hack" / "testbed"), "install"], check=True)
    _wait("the push Locations Ready", lambda: _ready(CHILDREN, "Push"), 120.0)


async def converge(hub: Kube, count: int, namespace: str, agents: Agents) -> Measured:
    """`count` Deployments of 3 created on the hub until all are available there; the CPU
    seconds kmc-apiserver and the agents (if any) spent meanwhile."""
    state = bed.load()
    assert state is not None
    pid = state.pids[bed.KMC]
    await hub.create("/api/v1/namespaces", {"metadata": {"name": namespace}})
    path = f"/apis/apps/v1/namespaces/{namespace}/deployments"
    gate = asyncio.Semaphore(CONCURRENCY)

    async def create(i: int) -> None:
        async with gate:
            await hub.create(path, deployment(f"d{i}", 3, REQUESTS))

    kmc_before, agents_before = _cpu_seconds(pid), agents.cpu_seconds()
    started = time.monotonic()
    try:
        await asyncio.gather(*(create(i) for i in range(count)))
        while True:
            done = _available((await hub.get(path))["items"], 3)
            if done == count:
                break
            agents.check()
            if time.monotonic() - started > LIMIT:
                raise TimeoutError(f"{done}/{count} converged after {LIMIT:g} s")
            await asyncio.sleep(3.0)  # listing 1,000 objects is not free: do not crowd the run
        took = time.monotonic() - started
        kmc, by_agents = _cpu_seconds(pid) - kmc_before, agents.cpu_seconds() - agents_before
    finally:  # gone before the mode changes, measured or not
        with contextlib.suppress(ApiError):
            await hub.delete(f"/api/v1/namespaces/{namespace}")
        await namespaces.gone(hub, namespace)
    return Measured(took, kmc, by_agents, [])


async def propagation(
    session: aiohttp.ClientSession, hub: Kube, count: int, ns: str
) -> list[float]:
    """Seconds from each hub create until every child's watch has it (`sync.propagation`)."""
    children, path, seen, tasks = await watched(session, hub, ns)
    try:
        ours, _ = await through_hub(hub, path, seen, count)
    finally:
        for task in tasks:
            task.cancel()
    await hub.delete(f"/api/v1/namespaces/{ns}")
    await namespaces.gone(hub, ns)
    for kube in children.values():
        with contextlib.suppress(ApiError):
            await kube.delete(f"/api/v1/namespaces/{ns}")
    for kube in children.values():
        await namespaces.gone(kube, ns)
    return ours


async def measure_mode(mode: str, count: int, spread: int, agents: Agents) -> Measured:
    async with aiohttp.ClientSession() as session:
        hub = await _client(session, "hub")
        run = uuid.uuid4().hex[:5]  # a namespace an earlier, failed run left is not in the way
        moved = await propagation(session, hub, spread, f"bench-{mode}-prop-{run}")
        measured = await converge(hub, count, f"bench-{mode}-converge-{run}", agents)
    measured.propagation_s = moved
    return measured


@contextlib.contextmanager
def pulled(state: bed.State) -> Iterator[Agents]:
    """The three children as pull locations for the block, push again after it."""
    agents = Agents()
    try:
        to_pull(state, agents)
        yield agents
    finally:
        to_push(state, agents)


def measure(count: int = 1000, spread: int = 200) -> list[dict[str, Any]]:
    """Push, then pull, over the same children; the bed is push again afterwards."""
    state = bed.load()
    assert state is not None and state.kmc_port is not None, "kubectl-mc is not installed"
    kwok_nodes(True, EXTRA_NODES, "bench", CHILDREN)
    try:
        push = asyncio.run(measure_mode("push", count, spread, Agents()))
        with pulled(state) as agents:
            pull = asyncio.run(measure_mode("pull", count, spread, agents))
    finally:
        kwok_nodes(False, EXTRA_NODES, "bench", CHILDREN)
    return rows(count, push, pull)


def rows(count: int, push: Measured, pull: Measured) -> list[dict[str, Any]]:
    where = len(CHILDREN)
    p50 = (statistics.median(pull.propagation_s), statistics.median(push.propagation_s))
    p99 = (_pct(pull.propagation_s, 0.99), _pct(push.propagation_s, 0.99))
    return [
        row("pull.converge", f"converge_{count}_s", pull.converge_s, push.converge_s),
        row("pull.cpu", "kmc_cpu_s", pull.kmc_cpu_s, push.kmc_cpu_s),
        row(
            "pull.cpu",
            "kmc_cpu_s_per_location",
            pull.kmc_cpu_s / where,
            push.kmc_cpu_s / where,
            digits=2,
        ),
        row(
            "pull.cpu",
            "kmc_cpu_ms_per_object",
            pull.kmc_cpu_s / count * 1000,
            push.kmc_cpu_s / count * 1000,
        ),
        row("pull.cpu", "agents_cpu_s", pull.agents_cpu_s),
        row("pull.cpu", "agent_cpu_s_per_location", pull.agents_cpu_s / where, digits=2),
        row("pull.cpu", "agents_cpu_ms_per_object", pull.agents_cpu_s / count * 1000),
        # All the CPU the work took in pull (hub side and agents) against push's.
        row(
            "pull.cpu",
            "kmc_and_agents_cpu_ms_per_object",
            (pull.kmc_cpu_s + pull.agents_cpu_s) / count * 1000,
            push.kmc_cpu_s / count * 1000,
        ),
        row("pull.propagation", "p50_ms", p50[0] * 1000, p50[1] * 1000),
        row("pull.propagation", "p99_ms", p99[0] * 1000, p99[1] * 1000),
    ]


def _figure(rows: list[dict[str, Any]], benchmark: str, name: str, key: str = "value") -> Any:
    return next(
        (r.get(key) for r in rows if r["benchmark"] == benchmark and r["figure"] == name), None
    )


def summary(rows: list[dict[str, Any]], count: int) -> dict[str, Any]:
    """Pull against push over the same children, both measured by `bench.pull`."""
    return {
        f"pull_converge_{count}_s": _figure(rows, "pull.converge", f"converge_{count}_s"),
        f"push_converge_{count}_s_same_children": _figure(
            rows, "pull.converge", f"converge_{count}_s", "baseline"
        ),
        "pull_converge_ratio": _figure(rows, "pull.converge", f"converge_{count}_s", "ratio"),
        "pull_kmc_cpu_s_per_location": _figure(rows, "pull.cpu", "kmc_cpu_s_per_location"),
        "push_kmc_cpu_s_per_location": _figure(
            rows, "pull.cpu", "kmc_cpu_s_per_location", "baseline"
        ),
        "pull_kmc_cpu_ms_per_object": _figure(rows, "pull.cpu", "kmc_cpu_ms_per_object"),
        "push_kmc_cpu_ms_per_object": _figure(
            rows, "pull.cpu", "kmc_cpu_ms_per_object", "baseline"
        ),
        "pull_kmc_cpu_ratio": _figure(rows, "pull.cpu", "kmc_cpu_s", "ratio"),
        "pull_agent_cpu_s_per_location": _figure(rows, "pull.cpu", "agent_cpu_s_per_location"),
        "pull_agents_cpu_ms_per_object": _figure(rows, "pull.cpu", "agents_cpu_ms_per_object"),
        "pull_propagation_p50_ms": _figure(rows, "pull.propagation", "p50_ms"),
        "pull_propagation_p50_ratio": _figure(rows, "pull.propagation", "p50_ms", "ratio"),
        "pull_propagation_p99_ms": _figure(rows, "pull.propagation", "p99_ms"),
        "pull_propagation_p99_ratio": _figure(rows, "pull.propagation", "p99_ms", "ratio"),
    }


def main(argv: list[str]) -> None:
    from bench.report import emit

    parser = argparse.ArgumentParser(prog="python -m bench.pull")
    parser.add_argument("--count", type=int, default=1000, help="Deployments to converge")
    parser.add_argument(
        "--propagation", type=int, default=200, help="ConfigMaps for the propagation figures"
    )
    args = parser.parse_args(argv)
    rows = measure(args.count, args.propagation)
    emit(rows)
    for key, value in summary(rows, args.count).items():
        print(f"{key}: {value}", file=sys.stderr)


if __name__ == "__main__":
    main(sys.argv[1:])
