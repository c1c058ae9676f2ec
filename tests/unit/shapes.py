"""What the kinds' entries say of an object's size, for tests that call the engine directly
as the placement loop does (`kind.shape(obj)`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from apiserver.kinds import PLACED
from apiserver.placement.engine import Shape


def shape(obj: Mapping[str, Any]) -> Shape:
    kind = PLACED.get(str(obj.get("kind")))
    return kind.shape(dict(obj)) if kind is not None else Shape(total=None)
