"""The handover step the sync loop decided for each hub object, for the work feed to serve.

The sync loop decides, for one hub object, what every location's child holds now, over all
its locations at once, push and pull (`SyncLoop._decide`, from the pushed children's
watches and the pull children's reports): on a move, the new copies first, the old ones
shrinking only as far as the replicas available elsewhere allow (`sync/handover.plan`). It
applies that step to the push locations itself. A pull location's agent applies what its
work feed serves, so the feed must serve the same step, not the placement's goal: the loop
records each step here and the feed reads it (`feed/work.py`). The decision is made once,
by one function; a new step wakes the feeds' watchers of that object.

A step also names the locations whose child stays as it is (`kept`): a location whose
numbers are last known ones (not Ready, or a pull location whose agent has not reported
since kmc-apiserver started or for a while: the push loop changes nothing there either), and
a follower (a ConfigMap, a Service…) that left the placement while workloads of its
namespace still run there (as the push loop keeps it).

`primed` is set once the sync loop has decided every hub object it found at its start: until
then a feed's whole state could be the goal of an object in the middle of a move (a
kmc-apiserver that restarted), so the feed waits for it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field

from apiserver.contract import Placement
from apiserver.kinds import Key


@dataclass(frozen=True)
class Step:
    """What each location's child of one hub object holds now."""

    # the share per location whose child is made or kept up to date now (placed ones, and
    # ones still draining on a move)
    shares: Placement
    # location -> why its child stays as it is (neither written nor removed)
    kept: Mapping[str, str] = field(default_factory=dict)


FOLLOWERS_STAY = "kept while workloads of its namespace still run there"


def kept_where(
    children: Collection[str],
    shares: Collection[str],
    deletable: Collection[str],
    stale: Mapping[str, str],
) -> dict[str, str]:
    """The locations whose child stays as it is, and why: those whose numbers are last known
    ones (`stale`), among those with a child or a share; and those with a child that neither
    gets a share nor may be deleted yet (only a follower while workloads of its namespace
    still run there: a handover gives every child a share or deletes it)."""
    kept: dict[str, str] = {}
    for location in sorted({*children, *shares}):
        if location in stale:
            kept[location] = f"left as it is: {stale[location]}"
        elif location not in shares and location not in deletable:
            kept[location] = FOLLOWERS_STAY
    return kept


Listener = Callable[[Key], None]


class Steps:
    """The last step decided for every hub object (memory only)."""

    def __init__(self) -> None:
        self.steps: dict[Key, Step] = {}
        self.listeners: list[Listener] = []
        self.primed = asyncio.Event()

    def subscribe(self, listener: Listener) -> None:
        self.listeners.append(listener)

    def get(self, key: Key) -> Step | None:
        return self.steps.get(key)

    def record(self, key: Key, step: Step) -> bool:
        """Keep the object's new step; True (and its listeners told) if it changed."""
        if self.steps.get(key) == step:
            return False
        self.steps[key] = step
        self._tell(key)
        return True

    def forget(self, key: Key) -> None:
        """The object has no step any more (gone, or placed nowhere with no child left)."""
        if self.steps.pop(key, None) is not None:
            self._tell(key)

    def _tell(self, key: Key) -> None:
        for listener in list(self.listeners):
            listener(key)
