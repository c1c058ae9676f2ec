"""`docs/strategy.md` has a row for every kind in the registry, so the table of what goes
where cannot go stale as kinds join (issue #31, item 10)."""

from __future__ import annotations

import re
from pathlib import Path

from apiserver.kinds import ALL, SERVED_BY_CRDS

DOC = Path(__file__).resolve().parents[2] / "docs" / "strategy.md"
# Rows for kinds handled elsewhere, not registry entries: a ServiceExport is a CRD of the
# Multi-Cluster Services API that the exports loop reads; a Namespace is made in a child by
# the sync loop for what goes into it.
ELSEWHERE = {"ServiceExport", "Namespace"}
# Built-in kinds and the kinds we know that CRDs serve (an HTTPRoute, once imported).
REGISTERED = {kind.kind for kind in (*ALL, *SERVED_BY_CRDS.values())}


def documented_kinds() -> set[str]:
    """The kinds the first column of the "What goes where" table names."""
    text = DOC.read_text()
    section = text.split("## What goes where", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| ")][1:]  # no header
    assert rows, "no table under ## What goes where"
    found = set()
    for row in rows:
        first = row.split("|")[1]
        for item in first.split(","):
            word = item.split()[0] if item.split() else ""
            if re.fullmatch(r"[A-Z][A-Za-z]+", word):  # "an object of a CRD's kind": no kind
                found.add(word)
    return found


def test_every_registered_kind_has_a_row() -> None:
    missing = REGISTERED - documented_kinds()
    assert not missing, f"docs/strategy.md's What goes where has no row for {sorted(missing)}"


def test_every_row_is_a_registered_kind() -> None:
    unknown = documented_kinds() - REGISTERED - ELSEWHERE
    assert not unknown, f"docs/strategy.md names kinds the registry does not have: {unknown}"
