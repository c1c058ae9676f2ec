"""Pull locations' children as their agents last reported them: `ChildWatch`'s read side.

A pull location's agent reports its children whole (`PUT …/locations/<name>/report`,
`feed/report.py`); the last report per location is kept here, in memory only, and read by
the sync loop exactly where it reads a pushed location's watches (`Children.of`,
`Children.view`), so the fold, the rows and the handover read pushed and pulled children the
same way. A kmc-apiserver restart forgets them: until the agent's next report (one at least
every 30 s), the location's rows say `waiting for its agent`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping

from apiserver.kinds import NAMESPACE, Key, Kind, Role
from apiserver.objects import Obj


class Reported:
    """One pull location's children, as its agent last reported them (read-only)."""

    def __init__(
        self,
        location: str,
        children: Mapping[Key, Obj],
        namespaces: frozenset[str],
        workloads: frozenset[str],
        received: float,
        probe: Obj | None = None,
    ) -> None:
        self.location = location
        self.children = dict(children)
        self.namespaces = namespaces  # the namespaces its agent made
        self.workloads = workloads  # the kinds (keys) that run pods
        self.received = received  # when (monotonic clock)
        self.probe = probe  # its agent's probe: Location status fields, if it sent one

    def get(self, key: Key) -> Obj | None:
        if key.kind == NAMESPACE:
            return {"metadata": {"name": key.name}} if key.name in self.namespaces else None
        return self.children.get(key)

    def count(self) -> int:
        """How many of our objects the location holds, as `ChildWatch.count` counts them
        (namespaces not counted)."""
        return len(self.children)

    def namespace_has_workloads(self, namespace: str) -> bool:
        return any(k.namespace == namespace and k.kind in self.workloads for k in self.children)


def keyed(children: list[Obj], kinds: Mapping[tuple[str, str], Kind]) -> dict[Key, Obj]:
    """A report's children by hub key; those of a kind the hub does not know are left out
    (a kind whose CRD is gone from the hub: nothing of the hub's to fold them into)."""
    found = {}
    for child in children:
        kind = kinds.get((child["apiVersion"], child["kind"]))
        if kind is not None:
            found[Key.of(kind.key, child)] = child
    return found


def changed_keys(old: Reported | None, new: Reported | None) -> set[Key]:
    """The hub keys whose child differs between two reports of one location."""
    before = old.children if old is not None else {}
    after = new.children if new is not None else {}
    keys = {k for k in before.keys() | after.keys() if before.get(k) != after.get(k)}
    made_before = old.namespaces if old is not None else frozenset()
    made_after = new.namespaces if new is not None else frozenset()
    keys |= {Key(NAMESPACE, "", name) for name in made_before ^ made_after}
    return keys


# A report older than this is stale: the agent sends one at least every 30 s.
SILENT_AFTER = 90.0

Listener = Callable[[str, set[Key], bool], None]  # location, keys changed, first or last report


class Reports:
    """The last report of every pull location, in memory."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self.reports: dict[str, Reported] = {}
        self.listeners: list[Listener] = []

    def subscribe(self, listener: Listener) -> None:
        self.listeners.append(listener)

    def get(self, location: str) -> Reported | None:
        return self.reports.get(location)

    def put(
        self,
        location: str,
        children: Mapping[Key, Obj],
        namespaces: frozenset[str],
        kinds: Mapping[str, Kind],
        probe: Obj | None = None,
    ) -> set[Key]:
        """Keep a location's new report; the keys whose child it changed."""
        workloads = frozenset(k for k, kind in kinds.items() if kind.role is Role.WORKLOAD)
        new = Reported(location, children, namespaces, workloads, self.clock(), probe)
        old = self.reports.get(location)
        self.reports[location] = new
        keys = changed_keys(old, new)
        for listener in list(self.listeners):
            listener(location, keys, old is None)
        return keys

    def drop(self, location: str) -> None:
        """Forget a location's report (the Location is gone, or no longer a pull one)."""
        old = self.reports.pop(location, None)
        if old is not None:
            for listener in list(self.listeners):
                listener(location, changed_keys(old, None), True)
