"""What the placement loop remembers of each object between two looks, kept in one place.

A `Record` per object: capacity holds, the last Warning posted, what its pod template uses,
what it follows. Beside them, the indexes derived from records: which workloads use a
dependency (`users`), which reference followers go with an object (`followers`), which
objects weigh room (`room`), and the replicas placed per location (`load`). An object that
goes is forgotten here, all of it at once (`forget`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from apiserver.contract import Placement
from apiserver.kinds import Key
from apiserver.loops.placement.load import Load


@dataclass
class Record:
    # location -> (the share it is held to, until when): found short of room there
    held: dict[str, tuple[int, float]] = field(default_factory=dict)
    warned: str | None = None  # the last Warning message recorded for the object
    uses: frozenset[Key] = frozenset()  # the dependencies its pod template names
    follows: frozenset[Key] = frozenset()  # a reference follower's: the objects it names
    noted: str | None = None  # the last word on where it is placed, posted as an Event


class Records:
    def __init__(self, touched: Callable[[Key], None]) -> None:
        """`touched` is told of a dependency whose users changed: its placement follows."""
        self._records: dict[Key, Record] = {}
        self.users: dict[Key, set[Key]] = {}  # dependency -> workloads using it
        self.followers: dict[Key, set[Key]] = {}  # object -> reference followers naming it
        # Objects whose last decision can change with room in a location: not placed (a
        # Single picks the roomiest), replicas stuck for want of room or not placed as asked
        # (a move held back for want of room), or weighed by capacity. Kept as each is
        # decided, so a Location's room changing looks at these, not at every object.
        self.room: set[Key] = set()
        self.load = Load()  # replicas per location over every workload: ties go to the least
        self._touched = touched

    def of(self, key: Key) -> Record:
        record = self._records.get(key)
        if record is None:
            record = self._records[key] = Record()
        return record

    def get(self, key: Key) -> Record | None:
        """The object's record, if it has one (`of` makes one)."""
        return self._records.get(key)

    def held(self, key: Key, now: float) -> dict[str, tuple[int, float]]:
        """The capacity holds of an object that have not run out."""
        record = self._records.get(key)
        if record is None:
            return {}
        return {name: hold for name, hold in record.held.items() if hold[1] > now}

    def decided(self, key: Key, placement: Placement, weighs_room: bool, workload: bool) -> None:
        if weighs_room:
            self.room.add(key)
        else:
            self.room.discard(key)
        if workload:
            self.load.note(key, placement)

    def use(self, key: Key, uses: frozenset[Key]) -> None:
        """The dependencies a workload's pod template names now; each one whose users may have
        changed is touched."""
        record = self.of(key)
        for dependency in record.uses | uses:
            if dependency in uses:
                self.users.setdefault(dependency, set()).add(key)
            else:
                self.users.get(dependency, set()).discard(key)
            self._touched(dependency)
        record.uses = uses

    def follow(self, key: Key, follows: frozenset[Key]) -> None:
        """The objects a reference follower names now: a change to any of them (its
        placement) is a reason to look at the follower again."""
        record = self.of(key)
        for followed in record.follows - follows:
            self._unfollow(followed, key)
        for followed in follows:
            self.followers.setdefault(followed, set()).add(key)
        record.follows = follows

    def _unfollow(self, followed: Key, key: Key) -> None:
        followers = self.followers.get(followed)
        if followers is not None:
            followers.discard(key)
            if not followers:
                del self.followers[followed]

    def forget(self, key: Key) -> None:
        """The object is gone: everything about it, and its part in the indexes."""
        record = self._records.pop(key, None)
        for dependency in record.uses if record else ():
            self.users.get(dependency, set()).discard(key)
            self._touched(dependency)
        for followed in record.follows if record else ():
            self._unfollow(followed, key)
        self.room.discard(key)
        self.load.note(key, {})
