"""`kubectl mc diff`: per location, a unified diff between the hub object and what that
location gets.

Both sides come from the server's read-only `children` sub-resource of the workload's
`mc.kmc.dev` view, computed by the function the sync loop applies with (the share, the
location's `kmc.dev/overrides`, its namespace's PlacementPolicy constraints), so what is shown
is what is applied. This module only prints: YAML as kubectl writes it, `difflib` for the diff.
Exit codes are `kubectl diff`'s: 0 no differences, 1 differences, more than 1 an error (here 2:
the request failed, a location named with `--location` has no copy, or a location's overrides
do not apply).
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from typing import Any

from kubectl_mc.printers import dump_yaml
from kubectl_mc.resources import MC, VERSION, Workload

NO_DIFFERENCES, DIFFERENCES, ERROR = 0, 1, 2


def children_path(kind: Workload, namespace: str, name: str) -> str:
    return f"/apis/{MC}/{VERSION}/namespaces/{namespace}/{kind.plural}/{name}/children"


def render(children: dict[str, Any], shown: str, only: str | None) -> tuple[str, list[str], int]:
    """(the diffs, error lines, exit code) for the sub-resource's answer; `shown` names the
    object (`deployment.apps/web`); `only` keeps one location."""
    entries: Sequence[dict[str, Any]] = children.get("locations") or []
    if only is not None:
        entries = [e for e in entries if e.get("location") == only]
        if not entries:
            placed = ", ".join(str(e.get("location")) for e in children.get("locations") or [])
            return (
                "",
                [f"error: {shown} has no copy in {only} (placed in: {placed or 'none'})"],
                ERROR,
            )
    out: list[str] = []
    problems: list[str] = []
    for entry in entries:
        location = str(entry.get("location"))
        if "error" in entry:
            problems.append(f"error: {shown} in {location}: {entry['error']}")
            continue
        before = dump_yaml(entry.get("hub") or {}).splitlines(keepends=True)
        after = dump_yaml(entry.get("object") or {}).splitlines(keepends=True)
        out.extend(difflib.unified_diff(before, after, f"{shown} (hub)", f"{shown} ({location})"))
    text = "".join(line if line.endswith("\n") else line + "\n" for line in out)
    code = ERROR if problems else (DIFFERENCES if out else NO_DIFFERENCES)
    return text, problems, code
