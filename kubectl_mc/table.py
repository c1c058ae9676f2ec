"""Tables printed the way kubectl prints them: uppercase headers, left-aligned, 3-space gaps.

kubectl's own printer pads every column to its widest cell and separates columns with three
spaces; numbers are not right-aligned. That is a few lines of padding, so it is done here
rather than with tabulate, whose import alone (about 50 ms) would be a third of what
`kubectl get` takes end to end.

`Columns` keeps the widths it has printed with, for `-w`: rows that come later line up with
the header printed first (widening only when a cell needs more room).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

GAP = "   "


def render(
    headers: Sequence[str], rows: Iterable[Sequence[object]], no_headers: bool = False
) -> str:
    """The table as text, without a trailing newline; '' when there are no rows."""
    return Columns(headers, no_headers).lines(rows, with_header=True)


def cell_text(cell: object) -> str:
    """A cell as kubectl prints it: booleans lowercase, integral floats without '.0'."""
    if cell is None:
        return ""
    if isinstance(cell, bool):
        return "true" if cell else "false"
    if isinstance(cell, float) and cell.is_integer():
        return str(int(cell))
    return str(cell)


class Columns:
    """Column widths that only grow, so a stream of rows stays aligned with its header."""

    def __init__(self, headers: Sequence[str], no_headers: bool = False) -> None:
        self.headers = [h.upper() for h in headers]
        self.no_headers = no_headers
        self.widths = [0 if no_headers else len(h) for h in self.headers]

    def lines(self, rows: Iterable[Sequence[object]], with_header: bool = False) -> str:
        """Rows (and the header, if asked and wanted) as text; '' when there are no rows."""
        body = [[cell_text(c) for c in row] for row in rows]
        if not body:
            return ""
        for row in body:
            for i, cell in enumerate(row):
                if i < len(self.widths):
                    self.widths[i] = max(self.widths[i], len(cell))
                else:
                    self.widths.append(len(cell))
        out = [self._line(self.headers)] if with_header and not self.no_headers else []
        out.extend(self._line(row) for row in body)
        return "\n".join(out)

    def _line(self, cells: Sequence[str]) -> str:
        padded = (cell.ljust(self.widths[i]) for i, cell in enumerate(cells))
        return GAP.join(padded).rstrip()
