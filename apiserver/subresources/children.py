"""`<workload>/children`: what each location gets, next to the hub object, for `kubectl mc diff`.

Read-only. For every location of the object's placement (the hub's `kmc.dev/placement`), the
child the sync loop would apply there — the same function makes both (`sync/desired.py`
`location_child`: the share, the location's overrides, the namespace's PlacementPolicy
constraints) — beside `hub`, the hub object as a location gets it with nothing of that
location's own (no share cut, no overrides, no constraints), and the names of the `rules`
that apply there (`kubectl mc describe` lists them). The diff between the two is what
differs in that location. A location whose overrides do not apply gets `error` instead of
`object` (the sync loop leaves its child as it was).

Computed on the server so the plugin shows exactly what the sync loop applies, from the hub
cache and the Locations; nothing is written. An autoscaled child's replicas are its
autoscaler's and are not sent: shown here as the share it starts at.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from apiserver.contract import MC_GROUP, VERSION, read_placement
from apiserver.models.override_index import Source, location_rules, rules_of
from apiserver.objects import Obj, ReadOnly
from apiserver.overrides.apply import OverrideError
from apiserver.overrides.rules import RuleError
from apiserver.placement.policy import Constraints
from apiserver.subresources.meta import metadata_of
from apiserver.sync.desired import ChildKind, child_object, location_child

API_VERSION = f"{MC_GROUP}/{VERSION}"


def children_object(
    hub: ReadOnly,
    kind: ChildKind,
    labels: Mapping[str, Mapping[str, str]],
    added: Constraints | None,
    objects: Sequence[Source] = (),
) -> Obj:
    """The sub-resource's object; `labels`: each Location's labels, by name; `objects`: the
    Overrides and ClusterOverrides that target `hub`."""
    entries = []
    for location, share in sorted(read_placement(dict(hub)).items()):
        there = labels.get(location) or {}
        entry: Obj = {
            "location": location,
            "hub": child_object(hub, kind, location, {location: None}, there),
        }
        try:
            entry["rules"] = [rule.name for rule in location_rules(hub, objects, location, there)]
            before = rules_of(objects, location, there)
            entry["object"] = location_child(
                hub, kind, location, {location: share}, there, added, before
            )
        except (RuleError, OverrideError) as err:
            entry["error"] = str(err)
        entries.append(entry)
    return {
        "apiVersion": API_VERSION,
        "kind": "Children",
        "metadata": metadata_of(hub),
        "locations": entries,
    }
