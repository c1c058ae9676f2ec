"""Room for replicas in a location: what one replica asks for, and how many more fit.

Replicas that stay unschedulable in a location move elsewhere (`engine`), but moving a share
only helps when the destination has room. With every child full, a replica moved from one
full location to another stays just as stuck, and moves back when the first one's hold ends:
271 Deployments did that on a full bed, one of them 44 times in ten minutes. So a share
moves only as far as the other locations' free capacity — CPU, memory and pod slots, from
their nodes' allocatable minus what runs there (`Candidate.free`) — fits it, and what fits
nowhere stays where it is, pending as on one cluster, with the shortfall said.

Pure functions over plain data, like the engine.
"""

from __future__ import annotations

from collections.abc import Mapping
from fractions import Fraction
from typing import NamedTuple

from apiserver.objects import ReadOnly
from apiserver.quantity import parse_quantity


class Ask(NamedTuple):
    """What one replica needs: millicores, bytes, and one pod slot."""

    cpu_milli: int
    memory: int


class Free(NamedTuple):
    """Room left in a location (the engine's `Resources`, by shape)."""

    cpu_milli: int
    memory: int
    pods: int


def ask_of(spec: ReadOnly | None) -> Ask:
    """One replica's requests (`spec`: its pod spec), as the scheduler counts them: the larger
    of the containers' sum and the largest init container, per resource."""
    spec = spec or {}

    def requests(container: ReadOnly) -> tuple[int, int]:
        asked = (container.get("resources") or {}).get("requests") or {}
        cpu = parse_quantity(str(asked.get("cpu", "0"))) * 1000
        memory = parse_quantity(str(asked.get("memory", "0")))
        return _ceil(cpu), _ceil(memory)

    running = [requests(c) for c in spec.get("containers") or []]
    starting = [requests(c) for c in spec.get("initContainers") or []]
    cpu = max(sum(c for c, _ in running), max((c for c, _ in starting), default=0))
    memory = max(sum(m for _, m in running), max((m for _, m in starting), default=0))
    return Ask(cpu, memory)


def fits(free: Free, ask: Ask) -> int:
    """How many more replicas fit in `free`."""
    counts = [free.pods]
    if ask.cpu_milli:
        counts.append(free.cpu_milli // ask.cpu_milli)
    if ask.memory:
        counts.append(free.memory // ask.memory)
    return max(0, min(counts))


def shortfall(free: Free, ask: Ask, replicas: int) -> str:
    """What a location lacks for `replicas` more: "cpu 300m, pods 2" ("" when they fit)."""
    short = []
    if ask.cpu_milli and (lack := replicas * ask.cpu_milli - free.cpu_milli) > 0:
        short.append(f"cpu {lack}m")
    if ask.memory and (lack := replicas * ask.memory - free.memory) > 0:
        short.append(f"memory {_bytes(lack)}")
    if (lack := replicas - free.pods) > 0:
        short.append(f"pods {lack}")
    return ", ".join(short)


def no_room(
    stuck: int,
    ask: Ask,
    free: Mapping[str, Free | None],
    elsewhere: Mapping[str, int],
    unschedulable: Mapping[str, int] | None = None,
) -> str:
    """The Unplaceable message: `stuck` replicas fit nowhere; each location's shortfall for
    them (`elsewhere`: replicas it takes already in this decision; `unschedulable`: replicas
    the child's scheduler could not place there, for a location whose counted room would
    have fit them — a node selector, a taint or scattered room can do that)."""
    noun = "replica" if stuck == 1 else "replicas"
    unschedulable = unschedulable or {}
    parts = []
    for name in sorted(free):
        room = free[name]
        if room is None:
            parts.append(f"{name}: room unknown")
            continue
        lack = shortfall(Free(room.cpu_milli, room.memory, room.pods), ask, stuck)
        if not lack and unschedulable.get(name):
            parts.append(f"{name}: {unschedulable[name]} unschedulable there")
            continue
        taken = elsewhere.get(name, 0)
        lack = lack or "none"
        parts.append(f"{name}: short of {lack}" + (f" after {taken} more" if taken else ""))
    detail = "; ".join(parts) if parts else "no other eligible location"
    return f"no location has room for {stuck} {noun}: {detail}"


def _ceil(value: Fraction) -> int:
    return -((-value.numerator) // value.denominator)


def _bytes(amount: int) -> str:
    for unit, size in (("Gi", 1 << 30), ("Mi", 1 << 20), ("Ki", 1 << 10)):
        if amount >= size:
            return f"{-(-amount // size)}{unit}"
    return str(amount)
