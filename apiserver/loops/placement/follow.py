"""Placements that follow other objects' instead of a strategy.

A dependency (what a pod template names) goes exactly where the workloads that use it are;
a namespace follower goes wherever its namespace's workloads run, and one the kind says is
`weighed` (a ResourceQuota) carries the replicas they run in each location, by which its
children are divided; a selector follower (a Service) goes wherever the workloads whose pods
its selector matches run, and says in its `kmc.dev/Placed` condition which those are, or that
there are none and it stays on the hub; one the kind says is `weighed` (a disruption budget)
carries the replicas they run in each location. A reference follower (an Ingress) goes
wherever any of the objects it names (its Services) is placed, says so the same way, and
takes the dependencies it names (its TLS Secrets) with it as a workload takes its pod
template's. A scaler (an HPA) goes where the workload it names has replicas, with that
workload's shares, or says why it stays on the hub. A dependency whose kind has a word on
where it went (a ReadWriteOnce claim in two locations) says it in a Warning Event, once per
change. Any follower that goes to new locations or leaves some after its first placement says
so in a Normal Event (`Followed`, `Left`), as a workload's placement changes do.
"""

from __future__ import annotations

from collections.abc import Callable

from apiserver.contract import PLACEMENT, Placement, describe, read_placement
from apiserver.hubcache import HubCache
from apiserver.kinds import Key, Kind, Role
from apiserver.loops.placement.records import Records
from apiserver.loops.placement.writes import Writer
from apiserver.objects import Obj
from apiserver.placement.dependencies import follow, went


def _all_serve(kind: Kind, placement: Placement) -> list[str]:
    return []


class Follower:
    def __init__(
        self,
        cache: HubCache,
        records: Records,
        writer: Writer,
        unserved: Callable[[Kind, Placement], list[str]] = _all_serve,
    ) -> None:
        self.cache = cache
        self.records = records
        self.writer = writer
        # The locations of a placement that do not serve the kind (`Decider.unserved`): a
        # follower goes where its company is, but never where its kind is not served.
        self.unserved = unserved

    async def users(self, kind: Kind, key: Key, obj: Obj) -> None:
        """A dependency goes exactly where the workloads that use it are."""
        placements = []
        for user in sorted(self.records.users.get(key, ())):
            workload = self.cache.get(user)
            if workload is not None:
                placements.append(read_placement(workload))
        placement: Placement = dict(follow(placements))
        users = ", ".join(self._named(user) for user in sorted(self.records.users.get(key, ())))
        await self._place(kind, key, obj, placement, users or "nothing")
        self.writer.note(key, obj, kind.note(obj, placement))

    async def _place(
        self, kind: Kind, key: Key, obj: Obj, placement: Placement, company: str
    ) -> list[str]:
        """Write a placement that changed (or was never written), with an Event per reason
        when it went somewhere new or left somewhere after its first one. Returns the
        locations left out because they do not serve the kind."""
        unserved = self.unserved(kind, placement)
        if unserved:
            placement = {k: v for k, v in placement.items() if k not in unserved}
        current = read_placement(obj)
        has_annotation = PLACEMENT in (obj["metadata"].get("annotations") or {})
        if placement == current and (not placement or has_annotation):
            return unserved
        await self.writer.placement(kind, key, obj, placement)
        for reason, message in went(current, placement, company):
            self.writer.events.post(obj, "Normal", reason, message)
        return unserved

    def _named(self, key: Key) -> str:
        """`deployments/web`, as kubectl names an object."""
        kind = self.cache.kinds.get(key.kind)
        return f"{kind.plural if kind else key.kind}/{key.name}"

    async def namespace(self, kind: Kind, key: Key, obj: Obj) -> None:
        """Where the namespace's workloads run; weighed by their replicas there (1 for kinds
        without replicas) when the kind says so, else copied whole."""
        weights: Placement = {}
        for workloads in self.cache.kinds.values():
            if workloads.role is not Role.WORKLOAD:
                continue
            for workload_key in self.cache.list_keys(workloads.key, key.namespace):
                workload = self.cache.get(workload_key)
                if workload is None:
                    continue
                for location, replicas in read_placement(workload).items():
                    weights[location] = (weights.get(location) or 0) + (
                        1 if replicas is None else replicas
                    )
        if not kind.weighed:
            weights = dict.fromkeys(weights)
        await self._place(kind, key, obj, weights, "its namespace's workloads")

    async def selector(self, kind: Kind, key: Key, obj: Obj) -> None:
        """Wherever the workloads its selector matches run (any share but 0), weighed by the
        replicas they run there when the kind says so; without a selector, wherever its
        namespace's workloads run."""
        selects = kind.selector(obj)
        if selects is None:
            await self.namespace(kind, key, obj)
            return
        weights: dict[str, int] = {}
        matched: list[str] = []
        for workloads in list(self.cache.kinds.values()):
            if workloads.role is not Role.WORKLOAD:
                continue
            for workload_key in self.cache.list_keys(workloads.key, key.namespace):
                workload = self.cache.get(workload_key)
                if workload is None or not selects(workloads.pod_labels(workload)):
                    continue
                placed = {
                    loc: 1 if n is None else n
                    for loc, n in read_placement(workload).items()
                    if n is None or n
                }
                if placed:
                    for location, replicas in placed.items():
                        weights[location] = weights.get(location, 0) + replicas
                    matched.append(f"{workloads.plural}/{workload_key.name}")
        placement: Placement = (
            dict(sorted(weights.items())) if kind.weighed else dict.fromkeys(sorted(weights))
        )
        await self._place(kind, key, obj, placement, ", ".join(sorted(matched)) or "nothing")
        if matched:
            message = f"with {', '.join(sorted(matched))}: {describe(placement)}"
            self.writer.condition(kind, key, obj, "True", "Placed", message)
        else:
            message = "no placed workload's pods match its selector: it stays on the hub"
            self.writer.condition(kind, key, obj, "False", "NothingSelected", message)

    async def named(self, kind: Kind, key: Key, obj: Obj) -> None:
        """Wherever any of the objects it names (in its namespace) is placed; the
        dependencies it names go with it."""
        names = kind.follows(obj)
        followed = frozenset(Key(k, key.namespace, name) for k, name in names)
        self.records.follow(key, followed)
        where: set[str] = set()
        placed_ones: list[str] = []
        for target in sorted(followed):
            found = self.cache.get(target)
            target_kind = self.cache.kinds.get(target.kind)
            if found is None or target_kind is None:
                continue
            placed = {loc for loc, n in read_placement(found).items() if n is None or n}
            if placed:
                where |= placed
                placed_ones.append(f"{target_kind.plural}/{target.name}")
        placement: Placement = dict.fromkeys(sorted(where))
        company = ", ".join(placed_ones) or "nothing"
        unserved = await self._place(kind, key, obj, placement, company)
        uses = kind.uses(obj)
        self.records.use(key, frozenset(Key(k, key.namespace, name) for k, name in uses))
        # Said once per change by a Warning Event (its status may have no conditions).
        word = f"not sent to {', '.join(unserved)}: {kind.kind} is not served there"
        self.writer.note(key, obj, ("NotServed", word) if unserved else None)
        if placed_ones:
            sent = {k: v for k, v in placement.items() if k not in unserved}
            message = f"with {', '.join(placed_ones)}: {describe(sent)}"
            if unserved:
                message += f" (not {', '.join(unserved)}: {kind.kind} is not served there)"
            self.writer.condition(kind, key, obj, "True", "Placed", message)
            return
        named = ", ".join(
            f"{self.cache.kinds[k].plural if k in self.cache.kinds else k}/{name}"
            for k, name in sorted(names)
        )
        message = (
            f"nothing it names is placed ({named}): it stays on the hub"
            if names
            else "it names nothing it could go with: it stays on the hub"
        )
        self.writer.condition(kind, key, obj, "False", "NothingPlaced", message)

    async def target(self, kind: Kind, key: Key, obj: Obj) -> None:
        """Where the workload it scales has replicas, weighed by its shares there (whole
        copies where it runs whole: Replicate, or a kind without replicas); nowhere, and
        said so, while that workload is missing or placed nowhere."""
        target = kind.target(obj)
        workload_key = target.key(self.cache.kinds.values(), key.namespace) if target else None
        workload = self.cache.get(workload_key) if workload_key else None
        placement: Placement = {}
        if workload_key is not None and workload is not None:
            workloads = self.cache.kinds[workload_key.kind]
            placement = {
                loc: n for loc, n in sorted(read_placement(workload).items()) if n is None or n
            }
            total = workloads.size(workload).total
            shares = [n for n in placement.values() if n is not None]
            if total is None or len(shares) < len(placement) or sum(shares) > total:
                placement = dict.fromkeys(placement)
        company = self._named(workload_key) if workload_key and workload else "nothing"
        await self._place(kind, key, obj, placement, company)
        if target is None:
            status, reason, message = "False", "NoTarget", "its scaleTargetRef names nothing"
        elif workload_key is None:
            status, reason = "False", "TargetNotFound"
            message = f"its target {target.kind} {target.name} is not of a kind that is placed"
        else:
            what = f"{self.cache.kinds[workload_key.kind].plural}/{target.name}"
            if workload is None:
                status, reason, message = "False", "TargetNotFound", f"{what} does not exist"
            elif not placement:
                status, reason = "False", "TargetNotPlaced"
                message = f"{what} is not placed in any location"
            else:
                status, reason, message = "True", "Placed", f"with {what}: {describe(placement)}"
        if status == "False":
            message += ": it stays on the hub"
        self.writer.condition(kind, key, obj, status, reason, message)
