"""Live progress of a move, from the rows of a workload's `locations` view.

A person watching a terminal wants one table that changes in place; a log or a CI job wants
a line each time something changes and nothing when nothing does. So on a TTY the table is
redrawn (cursor up, clear, print), elsewhere each change is one line of ready/desired per
location. Either way the last table is left on screen as the final answer.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from kubectl_mc.table import render

Row = Mapping[str, Any]
HEADERS = ("location", "desired", "ready", "available", "state", "message")


def _count(value: object, none: str = "-") -> str:
    return none if value is None else str(value)


def line(rows: Sequence[Row], divided: bool) -> str:
    """`eu-west 4/6 ready (Moving), us-east 2/0 ready (Evacuating: not pinned)`.

    ready/desired for kinds whose replicas are divided (a location being left wants 0);
    ready alone for kinds copied whole. The state is shown only when it is not Synced.
    """
    parts = []
    for row in rows:
        ready = _count(row.get("ready"))
        if divided:
            desired = row.get("desired")
            text = f"{row['location']} {ready}/{0 if desired is None else desired} ready"
        else:
            text = f"{row['location']} {ready} ready"
        state = row.get("state", "")
        if state != "Synced":
            message = row.get("message")
            text += f" ({state}: {message})" if message else f" ({state})"
        parts.append(text)
    return ", ".join(parts) or "placed nowhere yet"


def table(rows: Sequence[Row]) -> str:
    """The rows as kubectl prints the `locations` sub-resource (`<none>` where unknown)."""
    return render(
        HEADERS,
        [
            [
                row.get("location"),
                _count(row.get("desired"), "<none>"),
                _count(row.get("ready"), "<none>"),
                _count(row.get("available"), "<none>"),
                row.get("state"),
                row.get("message"),
            ]
            for row in rows
        ],
    )


class Progress:
    """Shows successive states of a move on `write` (which adds no newline of its own)."""

    def __init__(
        self, write: Callable[[str], None], tty: bool, divided: bool, width: int = 0
    ) -> None:
        self.write = write
        self.tty = tty
        self.divided = divided
        self.width = width  # of the terminal: longer lines are cut, so none wraps
        self._last = ""
        self._drawn = 0  # lines of the table now on screen (TTY)

    def show(self, rows: Sequence[Row]) -> None:
        text = self._fit(table(rows)) if self.tty else line(rows, self.divided)
        if text == self._last:
            return
        self._last = text
        if not self.tty:
            self.write(text + "\n")
            return
        # Back to the first line of the table drawn before, and clear from there down.
        clear = f"\x1b[{self._drawn}F\x1b[J" if self._drawn else ""
        self.write(clear + text + "\n")
        self._drawn = text.count("\n") + 1

    def _fit(self, text: str) -> str:
        """Lines cut to the terminal's width: a wrapped line would throw the redraw's count
        of lines to go back up off."""
        if self.width <= 1:
            return text
        return "\n".join(part[: self.width - 1] for part in text.split("\n"))

    def finish(self, rows: Sequence[Row]) -> None:
        """Leave the final table: on a TTY the one on screen, redrawn if it changed."""
        if self.tty:
            self.show(rows)
        else:
            self.write(table(rows) + "\n")
