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


def render(
    children: dict[str, Any], shown: str, only: str | None, before: str = "hub"
) -> tuple[str, list[str], int]:
    """(the diffs, error lines, exit code) for the sub-resource's answer; `shown` names the
    object (`deployment.apps/web`); `only` keeps one location; `before` names the old side
    (`hub`, or `<location> now` with `{}` for the location)."""
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
        old = dump_yaml(entry.get("hub") or {}).splitlines(keepends=True)
        new = dump_yaml(entry.get("object") or {}).splitlines(keepends=True)
        old_name = f"{shown} ({before.format(location)})"
        out.extend(difflib.unified_diff(old, new, old_name, f"{shown} ({location})"))
    text = "".join(line if line.endswith("\n") else line + "\n" for line in out)
    code = ERROR if problems else (DIFFERENCES if out else NO_DIFFERENCES)
    return text, problems, code


def previews_path(namespace: str | None) -> str:
    """kmc-apiserver's read-only `previews`: in a namespace, or cluster-wide (None)."""
    where = f"/namespaces/{namespace}" if namespace else ""
    return f"/apis/{MC}/{VERSION}{where}/previews"


def shown_name(entry: dict[str, Any]) -> str:
    """`deployment.apps/web`, as kubectl names an object."""
    group = str(entry.get("apiVersion") or "").rpartition("/")[0]
    kind = str(entry.get("kind") or "").lower()
    return f"{kind}.{group}/{entry.get('name')}" if group else f"{kind}/{entry.get('name')}"


def render_preview(
    answer: dict[str, Any], proposed: str, only: str | None, before: str = "hub"
) -> tuple[str, list[str], int]:
    """(the diffs, lines for stderr, exit code) for the `previews` answer of one object from
    the file; `proposed` names it (`override.kmc.dev/eu`). For an Override the diff is what a
    location gets now against what it would get with the Override applied: `before` is then
    `{} now` (`--- deployment.apps/web (eu-west now)`)."""
    objects: Sequence[dict[str, Any]] = answer.get("objects") or []
    texts: list[str] = []
    problems: list[str] = []
    code = NO_DIFFERENCES
    if not objects:
        problems.append(f"warning: {proposed} targets no object")
    seen = False
    for entry in objects:
        shown = shown_name(entry)
        if entry.get("note"):
            problems.append(f"warning: {shown}: {entry['note']}")
        locations = entry.get("locations") or []
        if only is not None:
            locations = [e for e in locations if e.get("location") == only]
        seen = seen or bool(locations)
        text, errors, found = render({"locations": locations}, shown, None, before)
        texts.append(text)
        problems.extend(errors)
        code = max(code, found)
    if only is not None and objects and not seen:
        problems.append(f"error: {proposed} changes nothing in {only}: no copy there")
        code = ERROR
    return "".join(texts), problems, code
