"""What a hub object's child in a location is made from besides the object itself: that
location's labels, the namespace's PlacementPolicy constraints, and the Override and
ClusterOverride objects that target the object. `HubCache.child_inputs` reads them from the
hub in one place; the sync loop applies `child`, the `children` sub-resource and previews
show it, the work feed serves it — one reading and one making, so none of them can differ.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace

from apiserver.contract import Placement
from apiserver.models.override_index import Source, location_rules, rules_of
from apiserver.objects import Obj, ReadOnly
from apiserver.overrides.rules import Rule
from apiserver.placement.policy import Constraints
from apiserver.sync.desired import ChildKind, child_object, location_child


def _no_labels(_: str) -> Mapping[str, str]:
    return {}


@dataclass(frozen=True)
class ChildInputs:
    # A Location's labels by name ({} for one that does not exist).
    labels: Callable[[str], Mapping[str, str]] = _no_labels
    added: Constraints | None = None  # None: a cluster-scoped object's, or no policy's
    overrides: Sequence[Source] = ()  # those that target the object, in the order they apply

    def with_overrides(self, overrides: Sequence[Source]) -> ChildInputs:
        return replace(self, overrides=overrides)

    def applying(self, location: str) -> list[Source]:
        """The override objects that apply in `location`."""
        there = self.labels(location)
        return [source for source in self.overrides if source.selects(location, there)]

    def rules(self, hub: ReadOnly, location: str) -> tuple[Rule, ...]:
        """Every rule `location` gets: the override objects', then the annotation's. Raises
        `RuleError` when one does not parse."""
        return location_rules(hub, self.overrides, location, self.labels(location))

    def child(self, hub: ReadOnly, kind: ChildKind, location: str, placement: Placement) -> Obj:
        """What `location` gets (`sync.desired.location_child`). Raises `RuleError` (a rule
        that does not parse) or `OverrideError` (one that cannot apply here)."""
        there = self.labels(location)
        before = rules_of(self.overrides, location, there)
        return location_child(hub, kind, location, placement, there, self.added, before)

    def plain(self, hub: ReadOnly, kind: ChildKind, location: str, placement: Placement) -> Obj:
        """What `location` would get without any override: is it the overrides a child
        refuses?"""
        return child_object(hub, kind, location, placement, self.labels(location), self.added)
