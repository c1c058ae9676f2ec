"""`python -m bench.hub [COUNT]`: what kubectl-mc costs the hub everyone shares (issue 35),
alone, in the same run: the figures of `python -m bench` that say it, without the rest.

- the user's burst of 200 creates with kubectl-mc running, against the same burst while the
  children do the same work directly (`sync.hub_creates`);
- COUNT (1,000) Deployments converged, with every write the hub served meanwhile, per
  created Deployment, by resource and verb (`converge`, `hubwrites`);
- one create in a quiet namespace while COUNT are created in another, against a direct
  create into the children at the same moment (`fairness`).

Needs the bed up with kubectl-mc installed (`hack/testbed up && hack/testbed install`).
"""

from __future__ import annotations

import sys
from typing import Any

from bench import fairness, sync
from bench.__main__ import _converge, figure
from bench.report import emit


def measure(count: int = 1000) -> list[dict[str, Any]]:
    rows = sync.hub_creates(200)
    rows += _converge(count)
    rows += fairness.measure(count)
    return rows


def summary(rows: list[dict[str, Any]], count: int) -> dict[str, Any]:
    return {
        f"hub_writes_per_create_{count}": figure(
            rows, "hub.writes", f"hub_writes_per_create_{count}"
        ),
        "hub_burst_ratio_children_working": figure(
            rows, "hub.creates", "burst_200_s_vs_children_working", "ratio"
        ),
        "fairness_ratio_vs_direct": figure(
            rows, "fairness.floor", f"p50_ms_while_creating_{count}_vs_direct_meanwhile", "ratio"
        ),
    }


def main(argv: list[str]) -> None:
    count = int(argv[0]) if argv else 1000
    rows = measure(count)
    emit(rows)
    for key, value in summary(rows, count).items():
        print(f"{key}: {value}", file=sys.stderr)


if __name__ == "__main__":
    main(sys.argv[1:])
