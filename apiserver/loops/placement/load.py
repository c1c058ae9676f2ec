"""How many replicas the placement loop has put in each location, over every workload.

A replica left over among equal locations goes to the least loaded one (`apportion`), so a
burst of small workloads lands evenly: hashes alone, independent per workload, would scatter
90 single replicas over three locations by about ±5. The tally is the loop's own: primed from
the hub's placements at start, moved with each decision, dropped when an object goes. It only
breaks ties — a placement that holds its seats keeps them whatever the load — so a replica
that counts it a little off (a decision still on its way to the hub) costs evenness, never a
move.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping

from apiserver.kinds import Key


class Load:
    def __init__(self) -> None:
        self._placed: dict[Key, dict[str, int]] = {}
        self._total: Counter[str] = Counter()

    def note(self, key: Key, placement: Mapping[str, int | None]) -> None:
        """`key` is placed so now (an empty placement: nowhere, or gone)."""
        old = self._placed.pop(key, None)
        if old:
            self._total.subtract(old)
        new = {name: count for name, count in placement.items() if count}
        if new:
            self._placed[key] = new
            self._total.update(new)

    def besides(self, key: Key) -> dict[str, int]:
        """Replicas per location of every workload but `key` (its own share is no reason to
        go elsewhere)."""
        own = self._placed.get(key, {})
        return {
            name: count - own.get(name, 0)
            for name, count in self._total.items()
            if count - own.get(name, 0) > 0
        }
