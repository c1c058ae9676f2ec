"""Placements that follow other objects' instead of a strategy.

A dependency (what a pod template names) goes exactly where the workloads that use it are;
a namespace follower goes wherever its namespace's workloads run, and one the kind says is
`weighed` (a ResourceQuota) carries the replicas they run in each location, by which its
children are divided.
"""

from __future__ import annotations

from apiserver.contract import PLACEMENT, Placement, read_placement
from apiserver.hubcache import HubCache
from apiserver.kinds import Key, Kind, Role
from apiserver.loops.placement.records import Records
from apiserver.loops.placement.writes import Writer
from apiserver.objects import Obj
from apiserver.placement.dependencies import follow


class Follower:
    def __init__(self, cache: HubCache, records: Records, writer: Writer) -> None:
        self.cache = cache
        self.records = records
        self.writer = writer

    async def users(self, kind: Kind, key: Key, obj: Obj) -> None:
        """A dependency goes exactly where the workloads that use it are."""
        placements = []
        for user in sorted(self.records.users.get(key, ())):
            workload = self.cache.get(user)
            if workload is not None:
                placements.append(read_placement(workload))
        placement: Placement = dict(follow(placements))
        current = read_placement(obj)
        has_annotation = PLACEMENT in (obj["metadata"].get("annotations") or {})
        if placement != current or (placement and not has_annotation):
            await self.writer.placement(kind, key, obj, placement)

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
        if weights != read_placement(obj):
            await self.writer.placement(kind, key, obj, weights)
