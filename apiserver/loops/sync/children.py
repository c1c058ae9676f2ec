"""What the children hold of ours: one set of watches per location we write to.

Each location's watches list and watch our objects there (the origin label selects them),
per kind, as slim copies: counts, status and versions, never a pod template or a Secret's
data. The sync loop reads children from here and is woken by their changes; the views read
the same. Where clients come from is the caller's: the fleet, for kmc-apiserver, or one
location's client alone.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable, Mapping

from apiserver.contract import ORIGIN
from apiserver.kinds import NAMESPACE, Key, Kind, Role
from apiserver.kube.client import Kube
from apiserver.kube.informer import Informer
from apiserver.locations.reports import Reported, Reports
from apiserver.objects import Obj

# Kinds whose child stays in a location while its namespace runs workloads there.
STAY_WITH_WORKLOADS = (Role.DEPENDENCY, Role.SELECTOR_FOLLOWER, Role.REFERENCE_FOLLOWER)


class ChildWatch:
    """Our objects in one child (origin label set), per kind, as last seen."""

    def __init__(self, location: str, kube: Kube, on_change: Callable[[Key], None]) -> None:
        self.location = location
        self.kube = kube
        self.on_change = on_change
        self.informers: dict[str, Informer] = {}
        self.kinds: dict[str, Kind] = {}
        self.tasks: list[asyncio.Task[None]] = []
        self.namespaces: set[str] = set()  # known to exist in the child
        # name -> digest of the namespace we last applied there (its hub labels, annotations)
        self.namespaces_written: dict[str, str] = {}
        # The namespaces we made there (origin label): each goes when its hub namespace does.
        self.made = Informer(
            kube,
            "/api/v1/namespaces",
            self._namespace_changed,
            {"labelSelector": ORIGIN},
            backoff_cap=5.0,
        )
        self.tasks.append(asyncio.create_task(self.made.run(), name=f"namespaces {location}"))

    async def _namespace_changed(self, _: str, ns: Obj, __: Obj | None) -> None:
        self.on_change(Key(NAMESPACE, "", ns["metadata"]["name"]))

    def ensure(self, kind: Kind) -> None:
        if kind.key in self.informers:
            return
        self.kinds[kind.key] = kind

        async def handler(event: str, obj: Obj, __: Obj | None) -> None:
            # Every change, status too: it is folded up at once. Under load the queue holds a
            # key once however often it changes, which batches a child's churn by itself.
            self.on_change(Key.of(kind.key, obj))
            if event == "DELETED" and kind.role is Role.WORKLOAD:
                self._workload_gone(obj["metadata"].get("namespace", ""))

        # A child back from an outage must be seen again within seconds: the hub's status of
        # everything placed there waits for it.
        informer = Informer(
            self.kube,
            kind.collection,
            handler,
            {"labelSelector": ORIGIN},
            backoff_cap=5.0,
            slim=_slim,
        )
        self.informers[kind.key] = informer
        self.tasks.append(asyncio.create_task(informer.run(), name=f"watch {self.location}"))

    async def observe(self, kind: Kind, answer: Obj) -> None:
        """Our write's answer, taken as if the watch brought it: the next look at the hub
        object sees the child it made, not the one before."""
        informer = self.informers.get(kind.key)
        if informer is not None:
            await informer.observe(answer)

    def get(self, key: Key) -> Obj | None:
        """Our child of a hub object, as cached (read-only)."""
        informer = self.informers.get(key.kind)
        return informer.get(key.cache_key) if informer else None

    def _workload_gone(self, namespace: str) -> None:
        """The last workload of a namespace gone from this child: what stayed only for it (a
        ConfigMap, a claim, a Service, an Ingress that left the placement during a move) is
        looked at again, as nothing else about them changed."""
        if self.namespace_has_workloads(namespace):
            return
        for key, informer in list(self.informers.items()):
            if self.kinds[key].role not in STAY_WITH_WORKLOADS:
                continue
            for cache_key in list(informer.cache):
                ns, _, name = cache_key.rpartition("/")
                if ns == namespace:
                    self.on_change(Key(key, ns, name))

    def namespace_has_workloads(self, namespace: str) -> bool:
        return any(
            key.split("/", 1)[0] == namespace
            for kind, informer in list(self.informers.items())
            if self.kinds[kind].role is Role.WORKLOAD
            for key in informer.cache
        )

    def count(self) -> int | None:
        """How many of our objects the child holds; None until every watch has listed."""
        if not all(i.synced.is_set() for i in self.informers.values()):
            return None
        return sum(len(i.cache) for i in self.informers.values())

    def stop(self) -> None:
        for task in self.tasks:
            task.cancel()


class Children:
    """Every location's watches, started when a client for it exists and restarted when the
    client changes (new credentials)."""

    def __init__(
        self,
        clients: Callable[[str], Kube | None],
        watched: Iterable[Kind],
        on_change: Callable[[Key], None],
        reports: Reports | None = None,
    ) -> None:
        self.clients = clients
        # Pull locations' children, as their agents report them: read like the watches.
        self.reports = reports if reports is not None else Reports()
        self.reports.subscribe(self._reported)
        self.watched = tuple(watched)  # kinds watched from the start in every location
        self.on_change = on_change
        self.watches: dict[str, ChildWatch] = {}
        # How often each object's children changed, and how often the set of watches did: a
        # view kept for an object is current while both are as they were when it was built.
        self.versions: dict[Key, int] = {}
        self.epoch = 0

    def _changed(self, key: Key) -> None:
        self.versions[key] = self.versions.get(key, 0) + 1
        self.on_change(key)

    def _reported(self, _: str, keys: set[Key], first_or_last: bool) -> None:
        if first_or_last:
            self.epoch += 1  # a location's children appear or go as a whole
        for key in keys:
            self._changed(key)

    def changes(self, key: Key) -> tuple[int, int]:
        """What has changed of an object's children, as two counters: equal counters, the
        same children."""
        return self.epoch, self.versions.get(key, 0)

    def forget(self, key: Key) -> None:
        self.versions.pop(key, None)

    def connect(self, location: str) -> bool:
        """Start (or restart, for a new client) the location's watches; True if it changed.
        A location that has no client any more (one turned into a pull location) has none."""
        kube = self.clients(location)
        watch = self.watches.get(location)
        if kube is None:
            return self.drop(location) if watch is not None else False
        if watch is not None and watch.kube is kube:
            return False
        if watch:
            watch.stop()
        self.epoch += 1
        watch = self.watches[location] = ChildWatch(location, kube, self._changed)
        for kind in self.watched:
            watch.ensure(kind)
        return True

    def watch_kind(self, kind: Kind) -> None:
        """Watch `kind` in every location, now and in any connected later: a kind placed only
        when asked (a ClusterRole) is first watched when something of it is placed, and after
        a restart its children must be seen before its first apply (a strategy taken away, a
        location left, the hub object deleted)."""
        if kind not in self.watched:
            self.watched = (*self.watched, kind)
        for watch in list(self.watches.values()):
            watch.ensure(kind)

    def drop(self, location: str) -> bool:
        """Stop a location's watches (the Location is gone); True if there were any."""
        watch = self.watches.pop(location, None)
        if watch is None:
            return False
        self.epoch += 1
        watch.stop()
        return True

    def get(self, location: str) -> ChildWatch | None:
        """The location's watches, to write through: none for a pull location."""
        return self.watches.get(location)

    def view(self, location: str) -> ChildWatch | Reported | None:
        """What the location holds of ours, to read: its watches, or its agent's report."""
        return self.watches.get(location) or self.reports.get(location)

    def views(self) -> Mapping[str, ChildWatch | Reported]:
        """Every location's view: watched ones, and pull ones whose agent reported."""
        if not self.reports.reports:
            return self.watches  # no pull location reported: no copy on this hot path
        found: dict[str, ChildWatch | Reported] = dict(self.reports.reports)
        found.update(self.watches)
        return found

    def of(self, key: Key, uid: str) -> dict[str, Obj]:
        """The children of one hub object, by location (same name, our origin label), watched
        or reported."""
        return {
            loc: child
            for loc, view in self.views().items()
            if (child := view.get(key)) is not None
            and (child["metadata"].get("labels") or {}).get(ORIGIN) == uid
        }

    def stop(self) -> None:
        for watch in self.watches.values():
            watch.stop()


def _slim(obj: Obj) -> Obj:
    """What the loop reads of a child: its counts, status and versions, never its pod template
    or its data (the hub holds those; a Secret's data has no business in our memory twice)."""
    spec = obj.get("spec")
    if isinstance(spec, dict):
        spec.pop("template", None)
    for field in ("data", "binaryData", "stringData"):
        obj.pop(field, None)
    return obj
