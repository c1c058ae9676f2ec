"""A `Signal`: how one part tells others that something happened, wired in `app.py`.

The loops never reach into one another. What one loop asks of another is a function given to
its constructor; what one tells others is a signal it emits, which `app.make_app` connects to
whoever listens. A listener that raises is logged and does not stop the others.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Generic, ParamSpec

log = logging.getLogger(__name__)

P = ParamSpec("P")


class Signal(Generic[P]):
    def __init__(self, name: str) -> None:
        self.name = name
        self._listeners: list[Callable[P, None]] = []

    def connect(self, listener: Callable[P, None]) -> None:
        self._listeners.append(listener)

    def emit(self, *args: P.args, **kwargs: P.kwargs) -> None:
        for listener in self._listeners:
            try:
                listener(*args, **kwargs)
            except Exception:
                log.exception("a listener of %s failed", self.name)
