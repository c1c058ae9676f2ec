"""The `status` of each Override and ClusterOverride: per location how many hub objects it
applies to, where its rules failed, and which other overrides at its priority set the same
paths of the same objects (`conflicts`).

The sync loop tells the tally what it applied (`saw`: which overrides applied to one child, and
whether they failed there); the tally marks the overrides whose status that changes, and
`Writer` writes those, and only when what they would say differs from what the hub holds.
Memory only: after a restart every object is looked at again and the statuses come back.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Iterable
from dataclasses import dataclass

from apiserver.hubcache import HubCache
from apiserver.kinds import Key
from apiserver.kube.client import ApiError
from apiserver.leader import Leadership
from apiserver.models.location import API_VERSION
from apiserver.models.override import (
    CLUSTER_PATH,
    PLURAL,
    Conflict,
    Failure,
    LocationCount,
    OverrideStatus,
)
from apiserver.models.override_index import Source
from apiserver.overrides.paths import overlap, sets

log = logging.getLogger(__name__)

SourceId = tuple[str, str]  # (namespace, name); "" for a ClusterOverride
Child = tuple[Key, str]  # (hub object, location)
MOST = 50  # failures and conflicts listed per override, at most


@dataclass(frozen=True)
class Failed:
    """Why one child's overrides did not apply: the override whose rule failed (None: all of
    those that apply there, as for a result the child refused), the rule, the error."""

    source: SourceId | None
    rule: str | None
    error: str


def source_id(source: Source) -> SourceId:
    return (source.namespace, source.name)


class Tally:
    def __init__(self) -> None:
        self._reach: dict[Child, dict[SourceId, Source]] = {}
        self._by_source: dict[SourceId, set[Child]] = {}
        self._failed: dict[Child, Failed] = {}
        self._locations: dict[Key, set[str]] = {}  # hub object -> its children we tallied
        self.dirty: set[SourceId] = set()

    def saw(
        self, key: Key, location: str, applying: Iterable[Source], failed: Failed | None = None
    ) -> None:
        """The overrides that apply to `key`'s child in `location` now, and how it went."""
        child = (key, location)
        now = {source_id(s): s for s in applying}
        before = self._reach.get(child, {})
        if now != before or self._failed.get(child) != failed:
            self.dirty |= set(before) | set(now)
        for gone in set(before) - set(now):
            self._by_source.get(gone, set()).discard(child)
        for new in set(now) - set(before):
            self._by_source.setdefault(new, set()).add(child)
        if now:
            self._reach[child] = now
        else:
            self._reach.pop(child, None)
        if failed is None:
            self._failed.pop(child, None)
        else:
            self._failed[child] = failed
        if now or failed is not None:
            self._locations.setdefault(key, set()).add(location)

    def drop(self, key: Key, location: str | None = None) -> None:
        """A child gone (or every child of a hub object gone)."""
        known = self._locations.get(key, set())
        for gone in [location] if location is not None else sorted(known):
            self.saw(key, gone, ())
            known.discard(gone)
        if not known:
            self._locations.pop(key, None)

    def changed(self, source: SourceId) -> None:
        """Its spec changed: its status says which generation it reflects."""
        self.dirty.add(source)

    def status(self, source: SourceId, generation: int | None) -> OverrideStatus:
        counts: dict[str, int] = {}
        failures: list[Failure] = []
        conflicts: list[Conflict] = []
        for key, location in sorted(self._by_source.get(source, ())):
            counts[location] = counts.get(location, 0) + 1
            named = f"{key.kind} {key.cache_key}"
            failed = self._failed.get((key, location))
            if failed is not None and failed.source in (source, None):
                failures.append(
                    Failure(object=named, location=location, rule=failed.rule, error=failed.error)
                )
            reach = self._reach.get((key, location), {})
            ours = reach.get(source)
            if ours is None:
                continue
            for other_id, other in sorted(reach.items()):
                if other_id == source or (other.cluster, other.spec.priority) != (
                    ours.cluster,
                    ours.spec.priority,
                ):
                    continue
                for path in overlap(_sets(ours), _sets(other)):
                    conflicts.append(
                        Conflict(object=named, location=location, path=path, other=other.label)
                    )
        return OverrideStatus(
            observed_generation=generation,
            locations=tuple(LocationCount(name=n, objects=c) for n, c in sorted(counts.items())),
            failures=tuple(failures[:MOST]),
            conflicts=tuple(conflicts[:MOST]),
        )


def _sets(source: Source) -> frozenset[str]:
    return frozenset().union(*(sets(rule) for rule in source.rules))


class Writer:
    """Writes the statuses the tally marked, every `interval`, each only when it differs from
    the hub's. A change of counts alone (objects coming and going) waits `quiet` since that
    override's last write, so a burst of creates costs the hub one status write per override,
    not one per interval; a new failure, conflict or generation goes at once."""

    def __init__(
        self,
        cache: HubCache,
        tally: Tally,
        leadership: Leadership,
        interval: float,
        quiet: float = 10.0,
    ) -> None:
        self.cache, self.tally, self.leadership, self.interval = cache, tally, leadership, interval
        self.quiet = quiet
        self._written: dict[SourceId, float] = {}  # when we last wrote its status (monotonic)

    async def run(self) -> None:
        while True:
            await asyncio.sleep(self.interval)
            await self.leadership.leading.wait()
            await self.write_due()

    async def write_due(self) -> None:
        due, self.tally.dirty = self.tally.dirty, set()
        for namespace, name in sorted(due):
            informer = self.cache.overrides if namespace else self.cache.cluster_overrides
            raw = informer.get(f"{namespace}/{name}" if namespace else name)
            if raw is None:
                self._written.pop((namespace, name), None)
                continue  # deleted: nothing to write on
            meta = raw["metadata"]
            status = self.tally.status((namespace, name), meta.get("generation")).to_json()
            current = raw.get("status") or {}
            if status == current:
                continue
            counts_only = all(
                status.get(field) == current.get(field)
                for field in ("observedGeneration", "failures", "conflicts")
            )
            last = self._written.get((namespace, name))
            if counts_only and last is not None and time.monotonic() - last < self.quiet:
                self.tally.dirty.add((namespace, name))  # later, with whatever came meanwhile
                continue
            path = (
                f"/apis/{API_VERSION}/namespaces/{namespace}/{PLURAL}/{name}"
                if namespace
                else f"{CLUSTER_PATH}/{name}"
            )
            try:
                answer = await self.cache.hub.merge_patch(f"{path}/status", {"status": status})
            except ApiError as err:
                if err.code != 404:
                    log.warning("%s: writing its status failed: %s", path, err)
                    self.tally.dirty.add((namespace, name))
                continue
            self._written[(namespace, name)] = time.monotonic()
            await informer.observe(answer)
