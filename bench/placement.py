"""Placement benchmarks.

- `decide`: CPU time of the placement engine for 10,000 workloads over 50 locations, against
  the naive divider kcp's 2021 splitter used (replicas // n, remainder dropped) on the same
  inputs: what our eligibility checks and exact, stable apportionment cost on top. Also the
  time per decision for each kind of strategy on its own, since each takes a different path
  through the engine (a fast average could hide one slow path).
- `replace` (needs the test bed, `--testbed`): 500 Deployments on the hub; the time until the
  placement loop has placed them all (baseline), then the time from joining a new location
  until every one of them has spilled into it.
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
import time
from typing import Any

from apiserver.kinds import DEPLOYMENT
from apiserver.placement.engine import Candidate, Resources, decide
from apiserver.placement.strategy import Strategy

SERVED = frozenset({"apps/v1/Deployment", "batch/v1/Job", "v1/ConfigMap"})


def _candidates(n: int) -> list[Candidate]:
    rng = random.Random(7)
    return [
        Candidate(
            name=f"loc-{i:02d}",
            labels={"topology.kubernetes.io/region": rng.choice(["us", "eu", "ap"])},
            taints=(),
            unschedulable=False,
            ready=True,
            ready_changed_at=0.0,
            served=SERVED,
            free=Resources(cpu_milli=rng.randint(1000, 64000), memory=2**35, pods=110),
        )
        for i in range(n)
    ]


# One strategy of each kind the engine treats differently, by the name its figure carries.
def _strategies() -> dict[str, Strategy]:
    return {
        "split": Strategy(type="Split"),
        "split_capacity": Strategy.model_validate({"type": "Split", "weights": "capacity"}),
        "split_selector": Strategy.model_validate(
            {
                "type": "Split",
                "locationSelector": {"matchLabels": {"topology.kubernetes.io/region": "eu"}},
            }
        ),
        "replicate": Strategy.model_validate({"type": "Replicate"}),
        "single": Strategy.model_validate({"type": "Single"}),
    }


def _workloads(n: int) -> list[tuple[str, dict[str, Any], Strategy]]:
    rng = random.Random(11)
    strategies = list(_strategies().items())
    return [
        (
            strategies[i % len(strategies)][0],
            {
                "apiVersion": "apps/v1",
                "kind": "Deployment",
                "metadata": {"name": f"w{i}", "namespace": "bench"},
                "spec": {"replicas": rng.randint(1, 200)},
            },
            strategies[i % len(strategies)][1],
        )
        for i in range(n)
    ]


def bench_decide(workloads: int = 10_000, locations: int = 50) -> list[dict[str, Any]]:
    candidates = _candidates(locations)
    objects = _workloads(workloads)
    by_type: dict[str, list[tuple[dict[str, Any], Strategy]]] = {}
    for name, obj, strategy in objects:
        by_type.setdefault(name, []).append((obj, strategy))
    spent: dict[str, float] = {}
    for name, group in by_type.items():
        started = time.process_time()
        for obj, strategy in group:
            decide(obj, DEPLOYMENT.shape(obj), strategy, candidates, {}, now=1000.0)
        spent[name] = time.process_time() - started
    ours = sum(spent.values())
    started = time.process_time()
    for _, obj, _ in objects:
        share = obj["spec"]["replicas"] // len(candidates)
        {c.name: share for c in candidates}
    naive = time.process_time() - started
    return [
        {
            "benchmark": "placement.decide",
            "figure": f"cpu_s_{workloads}x{locations}",
            "value": round(ours, 3),
            "baseline": round(naive, 4),
            "ratio": round(ours / naive, 1),
        },
        {
            "benchmark": "placement.decide",
            "figure": "us_per_decision",
            "value": round(ours / workloads * 1e6, 1),
            "baseline": None,
            "ratio": None,
        },
    ] + [
        {
            "benchmark": "placement.decide",
            "figure": f"us_per_decision_{name}",
            "value": round(spent[name] / len(by_type[name]) * 1e6, 1),
            "baseline": None,
            "ratio": None,
        }
        for name in by_type
    ]


def bench_replace(count: int = 500) -> list[dict[str, Any]]:
    """On the running test bed with kubectl-mc installed (hack/testbed up && install)."""
    from kmc_testbed import config

    def kubectl(*args: str, stdin: str | None = None) -> str:
        cmd = ["kubectl", *args, "--kubeconfig", str(config.kubeconfig_path()), "--context", "hub"]
        return subprocess.run(cmd, input=stdin, capture_output=True, text=True, check=True).stdout

    def placements() -> list[dict[str, Any]]:
        items = json.loads(kubectl("get", "deployments", "-n", "bench-replace", "-o", "json"))
        return [
            json.loads((d["metadata"].get("annotations") or {}).get("kmc.dev/placement") or "{}")
            for d in items["items"]
        ]

    def wait(ok: Any, timeout: float = 600) -> float:
        started = time.monotonic()
        while True:
            got = placements()
            if len(got) == count and all(ok(p) for p in got):
                return time.monotonic() - started
            if time.monotonic() - started > timeout:
                raise TimeoutError(f"{sum(map(ok, got))}/{count} after {timeout}s")
            time.sleep(0.25)

    kubectl("create", "namespace", "bench-replace")
    try:
        docs = [
            {
                "apiVersion": "apps/v1",
                "kind": "Deployment",
                "metadata": {"name": f"d{i}"},
                "spec": {
                    "replicas": 5,
                    "selector": {"matchLabels": {"app": f"d{i}"}},
                    "template": {
                        "metadata": {"labels": {"app": f"d{i}"}},
                        "spec": {"containers": [{"name": "c", "image": "x"}]},
                    },
                },
            }
            for i in range(count)
        ]
        started = time.monotonic()
        kubectl(
            "apply",
            "-n",
            "bench-replace",
            "-f",
            "-",
            stdin=json.dumps({"apiVersion": "v1", "kind": "List", "items": docs}),
        )
        created = time.monotonic() - started
        initial = wait(lambda p: len(p) >= 3) + created
        subprocess.run(
            [str(config.REPO_ROOT / "hack" / "testbed"), "add", "bench-extra"],
            check=True,
            capture_output=True,
        )
        try:
            started = time.monotonic()
            subprocess.run(
                [str(config.REPO_ROOT / "hack" / "testbed"), "install"],
                check=True,
                capture_output=True,
            )
            replaced = wait(lambda p: "bench-extra" in p) + (time.monotonic() - started)
        finally:
            subprocess.run(
                [str(config.REPO_ROOT / "hack" / "testbed"), "remove", "bench-extra"],
                check=True,
                capture_output=True,
            )
    finally:
        kubectl("delete", "namespace", "bench-replace", "--wait=false")
    return [
        {
            "benchmark": "placement.replace",
            "figure": f"join_to_all_{count}_replaced_s",
            "value": round(replaced, 2),
            "baseline": round(initial, 2),
            "ratio": round(replaced / initial, 2),
        },
    ]


def main(argv: list[str]) -> None:
    from bench.report import emit

    rows = bench_decide()
    if "--testbed" in argv:
        rows += bench_replace()
    emit(rows)


if __name__ == "__main__":
    main(sys.argv[1:])
