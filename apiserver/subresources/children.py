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

from apiserver.contract import MC_GROUP, VERSION, read_placement
from apiserver.models.child_inputs import ChildInputs
from apiserver.objects import Obj, ReadOnly
from apiserver.overrides.apply import OverrideError
from apiserver.overrides.rules import RuleError
from apiserver.subresources.meta import metadata_of
from apiserver.sync.desired import ChildKind, child_object

API_VERSION = f"{MC_GROUP}/{VERSION}"


def children_object(hub: ReadOnly, kind: ChildKind, inputs: ChildInputs) -> Obj:
    """The sub-resource's object; `inputs`: what the children are made from besides `hub`
    (`HubCache.child_inputs`)."""
    entries = []
    for location, share in sorted(read_placement(dict(hub)).items()):
        there = inputs.labels(location)
        entry: Obj = {
            "location": location,
            "hub": child_object(hub, kind, location, {location: None}, there),
        }
        try:
            entry["rules"] = [rule.name for rule in inputs.rules(hub, location)]
            entry["object"] = inputs.child(hub, kind, location, {location: share})
        except (RuleError, OverrideError) as err:
            entry["error"] = str(err)
        entries.append(entry)
    return {
        "apiVersion": API_VERSION,
        "kind": "Children",
        "metadata": metadata_of(hub),
        "locations": entries,
    }
