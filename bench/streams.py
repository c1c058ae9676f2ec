"""Streams through the hub against the same streams read from the child directly.

- log throughput: one pod's log (a CRI log file of `--megabytes`, served by kwok) read whole
  through `pods.remote.kmc.dev` (hub aggregator → kmc-apiserver → child) and straight from
  the child that holds the pod, in alternating rounds; median MB/s each. Goal ≥ 0.7x.
- exec round trip: a small exec (`true`) over WebSocket (v5.channel.k8s.io), from the
  handshake to the outcome on channel 3, through the hub (by `name@location`, as the plugin
  asks after its first lookup) and straight to the child; median ms each. Goal ≤ 1.5x.
- the same exec as people type it: `kubectl mc exec` against `kubectl exec` (process start
  included: Python's and the plugin's against kubectl's own), for information.

Both paths use the same client code in the same process, and the same pod.
Run: `PYTHONPATH=hack .venv/bin/python -m bench.streams [--rounds 20] [--megabytes 16]`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import aiohttp

from apiserver.kube import config as kubeconfig
from apiserver.kube import streams
from apiserver.kube.client import ApiError, Kube
from bench.report import emit, row
from kmc_testbed import config as bedconfig

REMOTE = "/apis/remote.kmc.dev/v1alpha1"
LINE = "x" * 100  # a log line's text: 100 bytes, as a chatty service writes them


async def client(session: aiohttp.ClientSession, context: str) -> Kube:
    creds = await kubeconfig.from_file(bedconfig.kubeconfig_path(), context)
    return Kube(session, creds, context)


async def setup(hub: Kube, namespace: str) -> tuple[str, str]:
    """One pod of a Deployment placed by the hub: its name and location."""
    await hub.create(
        "/api/v1/namespaces",
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}},
    )
    labels = {"app": "bench-streams"}
    await hub.create(
        f"/apis/apps/v1/namespaces/{namespace}/deployments",
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "streams"},
            "spec": {
                "replicas": 1,
                "selector": {"matchLabels": labels},
                "template": {
                    "metadata": {"labels": labels},
                    "spec": {"containers": [{"name": "c", "image": "registry.example/bench:1"}]},
                },
            },
        },
    )
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        try:
            listing = await hub.get(f"{REMOTE}/namespaces/{namespace}/pods")
        except ApiError:  # kmc-apiserver just started, say: its APIService not Available yet
            listing = {}
        for pod in listing.get("items", []):
            if pod.get("status", {}).get("phase") == "Running":
                meta = pod["metadata"]
                return meta["name"], meta["annotations"]["kmc.dev/location"]
        await asyncio.sleep(1)
    raise SystemExit("the benchmark's pod did not run within 180 s")


def write_log(path: Path, megabytes: int) -> int:
    """A CRI log file of about `megabytes`; the bytes a reader gets (text and newlines)."""
    stamp = "2024-01-01T00:00:00.000000000Z stdout F "
    count = megabytes * 1024 * 1024 // (len(stamp) + len(LINE) + 1)
    with path.open("w") as handle:
        for _ in range(count):
            handle.write(f"{stamp}{LINE}\n")
    return count * (len(LINE) + 1)


async def serve_log(child: Kube, namespace: str, pod: str, path: Path, size: int) -> None:
    """kwok serves `path` as the pod's log (a `Logs` named after it), once it has seen it."""
    body = {
        "apiVersion": "kwok.x-k8s.io/v1alpha1",
        "kind": "Logs",
        "metadata": {"name": pod, "namespace": namespace},
        "spec": {"logs": [{"logsFile": str(path)}]},
    }
    await child.create(f"/apis/kwok.x-k8s.io/v1alpha1/namespaces/{namespace}/logs", body)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if await read_all(child, f"/api/v1/namespaces/{namespace}/pods/{pod}/log") == size:
            return
        await asyncio.sleep(0.5)
    raise SystemExit("kwok did not serve the benchmark's log within 60 s")


async def read_all(kube: Kube, path: str) -> int:
    async with streams.opened(kube, "GET", path, [], {}) as opened:
        return sum([len(chunk) async for chunk in opened.chunks])


async def log_throughput(
    hub: Kube, child: Kube, namespace: str, pod: str, location: str, size: int, rounds: int
) -> list[dict[str, Any]]:
    through = f"{REMOTE}/namespaces/{namespace}/pods/{pod}@{location}/log"
    direct = f"/api/v1/namespaces/{namespace}/pods/{pod}/log"
    times: dict[str, list[float]] = {"hub": [], "direct": []}
    for _ in range(2):  # warm connections on both paths
        await read_all(hub, through)
        await read_all(child, direct)
    for _ in range(rounds):
        for name, kube, path in (("direct", child, direct), ("hub", hub, through)):
            started = time.perf_counter()
            got = await read_all(kube, path)
            times[name].append(time.perf_counter() - started)
            assert got == size, f"{name}: {got} bytes of {size}"
    mb = size / 2**20
    hub_rate = mb / statistics.median(times["hub"])
    direct_rate = mb / statistics.median(times["direct"])
    # A throughput: higher is better, so its goal is a ratio of at least 0.7.
    return [row("streams.log", f"throughput_{round(mb)}mb_mb_per_s", hub_rate, direct_rate)]


async def exec_once(kube: Kube, path: str) -> float:
    """One exec of `true` over WebSocket, handshake to outcome: its seconds."""
    query = [("command", "true"), ("stdout", "true"), ("stderr", "true")]
    started = time.perf_counter()
    headers = kube.headers()
    async with kube.session.ws_connect(
        kube.creds.server + path,
        params=query,
        protocols=("v5.channel.k8s.io",),
        headers=headers,
        ssl=kube.creds.ssl,
    ) as ws:
        async for message in ws:
            if message.type == aiohttp.WSMsgType.BINARY and message.data[:1] == b"\x03":
                outcome = json.loads(message.data[1:])
                assert outcome.get("status") == "Success", outcome
                break
    return time.perf_counter() - started


async def exec_round_trip(
    hub: Kube, child: Kube, namespace: str, pod: str, location: str, rounds: int
) -> list[dict[str, Any]]:
    through = f"{REMOTE}/namespaces/{namespace}/pods/{pod}@{location}/exec"
    direct = f"/api/v1/namespaces/{namespace}/pods/{pod}/exec"
    times: dict[str, list[float]] = {"hub": [], "direct": []}
    for _ in range(2):
        await exec_once(hub, through)
        await exec_once(child, direct)
    for _ in range(rounds):
        times["direct"].append(await exec_once(child, direct))
        times["hub"].append(await exec_once(hub, through))
    hub_ms = statistics.median(times["hub"]) * 1000
    direct_ms = statistics.median(times["direct"]) * 1000
    return [row("streams.exec", "round_trip_p50_ms", hub_ms, direct_ms)]


def cli_exec(namespace: str, pod: str, location: str, rounds: int) -> list[dict[str, Any]]:
    """`kubectl mc exec` against `kubectl exec`, as a person runs them."""
    env = {
        **os.environ,
        "PATH": f"{bedconfig.REPO_ROOT / '.venv' / 'bin'}{os.pathsep}{os.environ['PATH']}",
        "KUBECONFIG": str(bedconfig.kubeconfig_path()),
    }
    ours = ["kubectl", "mc", "exec", f"{pod}@{location}", "-n", namespace, "--", "true"]
    theirs = ["kubectl", "--context", location, "exec", pod, "-n", namespace, "--", "true"]
    times: dict[str, list[float]] = {"ours": [], "theirs": []}
    for _ in range(rounds):
        for name, cmd in (("theirs", theirs), ("ours", ours)):
            started = time.perf_counter()
            subprocess.run(cmd, check=True, env=env, capture_output=True)
            times[name].append(time.perf_counter() - started)
    return [
        row(
            "streams.exec_cli",
            "kubectl_mc_exec_p50_ms",
            statistics.median(times["ours"]) * 1000,
            statistics.median(times["theirs"]) * 1000,
        )
    ]


async def run(rounds: int, megabytes: int) -> list[dict[str, Any]]:
    namespace = f"bench-streams-{uuid.uuid4().hex[:6]}"
    async with aiohttp.ClientSession() as session:
        hub = await client(session, "hub")
        try:
            pod, location = await setup(hub, namespace)
            child = await client(session, location)
            with tempfile.TemporaryDirectory() as folder:
                path = Path(folder) / "bench.log"
                size = write_log(path, megabytes)
                await serve_log(child, namespace, pod, path, size)
                rows = await log_throughput(hub, child, namespace, pod, location, size, rounds)
            rows += await exec_round_trip(hub, child, namespace, pod, location, rounds)
            rows += await asyncio.to_thread(cli_exec, namespace, pod, location, rounds)
            return rows
        finally:
            await hub.delete(f"/api/v1/namespaces/{namespace}")


def measure(rounds: int = 20, megabytes: int = 16) -> list[dict[str, Any]]:
    return asyncio.run(run(rounds, megabytes))


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.streams")
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--megabytes", type=int, default=16)
    args = parser.parse_args(argv)
    emit(measure(args.rounds, args.megabytes))


if __name__ == "__main__":
    main(sys.argv[1:])
