"""Placement gates: `kmc.dev/placement-gates`, a hold on an object's first placement.

A Pod's `schedulingGates` keep the scheduler away until a controller has done its part; this
is the same for placement. A user's controller can create a workload with a gate, fill in what
it needs (a Secret, a database, an approval), and remove the gate; only then is the workload
placed, and at once. Like scheduling gates they hold the first placement only: an object
already placed stays where its strategy puts it, whatever gates are added later, so a gate
can never strand an object on a location that is gone.

The annotation is a JSON list of gate names (`["example.com/db-ready"]`), each a qualified
name as for a Pod's scheduling gate, no name twice. Anything else is a one-line error that
names the object, and nothing is placed until it is fixed: a controller that meant to hold
a workload must not see it placed because of a typo.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping

from apiserver.contract import PLACEMENT_GATES

_DNS1123_LABEL = r"[a-z0-9](?:[-a-z0-9]*[a-z0-9])?"
_QUALIFIED = re.compile(
    rf"(?:{_DNS1123_LABEL}(?:\.{_DNS1123_LABEL})*/)?[A-Za-z0-9](?:[-A-Za-z0-9_.]*[A-Za-z0-9])?"
)


class GatesError(ValueError):
    """A `kmc.dev/placement-gates` annotation that cannot be read, with a one-line reason."""


def placement_gates(annotations: Mapping[str, str] | None, where: str) -> tuple[str, ...]:
    """The gates an object carries, in the order written; () without the annotation."""
    text = (annotations or {}).get(PLACEMENT_GATES)
    if text is None:
        return ()
    prefix = f"{PLACEMENT_GATES} on {where}: "
    try:
        value = json.loads(text)
    except json.JSONDecodeError as error:
        raise GatesError(f"{prefix}not JSON: {error}") from None
    if not isinstance(value, list):
        raise GatesError(f"{prefix}must be a list of gate names, got {json.dumps(value)}")
    seen: set[str] = set()
    for index, name in enumerate(value):
        if not isinstance(name, str) or not _valid_name(name):
            raise GatesError(
                f"{prefix}[{index}]: must be a qualified name like example.com/ready, "
                f"got {json.dumps(name)}"
            )
        if name in seen:
            raise GatesError(f"{prefix}[{index}]: duplicate gate {json.dumps(name)}")
        seen.add(name)
    return tuple(value)


def _valid_name(name: str) -> bool:
    prefix, _, last = name.rpartition("/")
    return bool(_QUALIFIED.fullmatch(name)) and len(last) <= 63 and len(prefix) <= 253


def gated_message(gates: tuple[str, ...]) -> str:
    """The `kmc.dev/Placed` condition's message while gates hold an object."""
    return f"waiting for placement gates: {', '.join(gates)}"
