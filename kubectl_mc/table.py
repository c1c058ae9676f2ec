"""Tables printed the way kubectl prints them: uppercase headers, left-aligned, 3-space gaps.

kubectl's own printer pads every column to its widest cell and separates columns with three
spaces; numbers are not right-aligned. tabulate does the measuring; the format is ours.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import tabulate as _tabulate
from tabulate import DataRow, TableFormat, tabulate

# tabulate widens every column to its header plus MIN_PADDING; kubectl does not.
_tabulate.MIN_PADDING = 0

_KUBECTL = TableFormat(
    lineabove=None,
    linebelowheader=None,
    linebetweenrows=None,
    linebelow=None,
    headerrow=DataRow("", "   ", ""),
    datarow=DataRow("", "   ", ""),
    padding=0,
    with_header_hide=None,
)


def render(
    headers: Sequence[str], rows: Iterable[Sequence[object]], no_headers: bool = False
) -> str:
    """The table as text, without a trailing newline; '' when there are no rows."""
    body = [["" if cell is None else str(cell) for cell in row] for row in rows]
    if not body:
        return ""
    text = tabulate(
        body,
        headers=() if no_headers else [h.upper() for h in headers],
        tablefmt=_KUBECTL,
        disable_numparse=True,
        stralign="left",
    )
    return "\n".join(line.rstrip() for line in text.splitlines())
