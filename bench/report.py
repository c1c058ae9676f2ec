"""How a benchmark reports: one JSON line per figure on stdout, then a table a person reads."""

from __future__ import annotations

import json
import platform
import sys
from typing import Any

from kubectl_mc.table import render


def row(
    benchmark: str, figure: str, value: float, baseline: float | None = None, digits: int = 1
) -> dict[str, Any]:
    """One figure, with its baseline and their ratio (taken before rounding) when it has one."""
    return {
        "benchmark": benchmark,
        "figure": figure,
        "value": round(value, digits),
        "baseline": round(baseline, digits) if baseline is not None else None,
        "ratio": round(value / baseline, 2) if baseline else None,
    }


def emit(rows: list[dict[str, Any]]) -> None:
    machine = {"python": platform.python_version(), "machine": platform.machine()}
    for row in rows:
        # Raw samples are for plots (python -m bench), not for the lines a person reads.
        shown = {k: v for k, v in row.items() if not k.endswith("samples")}
        print(json.dumps({**shown, **machine}))
    print(file=sys.stderr)
    headers = ["benchmark", "figure", "value", "baseline", "ratio"]
    table = [
        [
            r["benchmark"],
            r["figure"],
            _fmt(r["value"]),
            _fmt(r.get("baseline")),
            _fmt(r.get("ratio")),
        ]
        for r in rows
    ]
    print(render(headers, table), file=sys.stderr)


def _fmt(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.3g}"
    return str(value)
