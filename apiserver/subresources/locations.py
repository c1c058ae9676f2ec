"""`<workload>/locations`: where one hub workload runs, a row per location.

As an object (`kind: Placement`) for `-o yaml`, and as a Table for
`kubectl get deployments.mc.kmc.dev web --subresource locations`: several rows for one object
are fine to kubectl, which prints every row it is given. Each row also says what went there
with the workload (`along`: its ConfigMaps, Services, namespace policy…, see `along.py`),
in the object and in the Table's `-o wide` column, and which overrides apply there (`overrides`,
the OVERRIDES column: ClusterOverrides, the namespace's Overrides, then `kmc.dev/overrides`,
in the order they apply).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from apiserver.api.table import Column
from apiserver.contract import MC_GROUP, OVERRIDES, VERSION
from apiserver.models.override_index import Source
from apiserver.objects import Obj
from apiserver.overrides.annotation import overrides_for
from apiserver.overrides.rules import RuleError
from apiserver.subresources.along import Along
from apiserver.subresources.meta import metadata_of
from apiserver.sync.report import LocationState

API_VERSION = f"{MC_GROUP}/{VERSION}"

COLUMNS = (
    Column("Location", format="name", description="The location (a Location on the hub)."),
    Column("Desired", description="Replicas placed there (<none> for kinds copied whole)."),
    Column("Ready", description="Ready pods there, as the child reports."),
    Column("Available", description="Available pods there, as the child reports."),
    Column("Synced-Generation", description="The hub generation the child has caught up with."),
    Column(
        "State",
        description="Pending, Synced, Moving, Evacuating, Unreachable or Incompatible.",
    ),
    Column("Message", description="Why the location is in that state, when it is not Synced."),
    Column(
        "Overrides",
        description=(
            "The overrides that apply there, in their order: ClusterOverrides, the namespace's "
            "Overrides, then its kmc.dev/overrides annotation."
        ),
    ),
    Column(
        "Along",
        description=(
            "The objects that went there with it (kind/name); (absent) marks one the child "
            "does not hold yet."
        ),
        priority=1,
    ),
)

Companions = Mapping[str, Sequence[Along]]
"""location -> the objects that went there with the workload."""
Overrides = Mapping[str, Sequence[str]]
"""location -> the overrides that apply there, in their order."""


def overrides_by_location(
    hub: Obj, objects: Sequence[Source], labels: Mapping[str, Mapping[str, str]]
) -> dict[str, list[str]]:
    """For each location (`labels`: each Location's labels, by name), the overrides that apply
    to `hub` there: the objects by kind and name, then the annotation when it selects it."""
    found: dict[str, list[str]] = {}
    for location, there in labels.items():
        names = [source.label for source in objects if source.selects(location, there)]
        try:
            if overrides_for(hub, location, there):
                names.append(OVERRIDES)
        except RuleError:
            names.append(f"{OVERRIDES} (malformed)")
        found[location] = names
    return found


def placement_object(
    hub: Obj,
    locations: Sequence[LocationState],
    along: Companions | None = None,
    overrides: Overrides | None = None,
) -> Obj:
    """The sub-resource's object: each row with `along`, the objects that went there too, and
    `overrides`, those that apply there."""
    shown: list[Obj] = []
    for row in locations:
        went = (along or {}).get(row["location"], ())
        applied = list((overrides or {}).get(row["location"], ()))
        shown.append({**row, "along": [item.shown() for item in went], "overrides": applied})
    return {
        "apiVersion": API_VERSION,
        "kind": "Placement",
        "metadata": metadata_of(hub),
        "locations": shown,
    }


def rows(
    locations: Sequence[LocationState],
    along: Companions | None = None,
    overrides: Overrides | None = None,
) -> list[list[Any]]:
    return [
        [
            row["location"],
            _shown(row["desired"]),
            _shown(row["ready"]),
            _shown(row["available"]),
            _shown(row["syncedGeneration"]),
            row["state"],
            row["message"],
            ", ".join((overrides or {}).get(row["location"], ())) or "<none>",
            _along((along or {}).get(row["location"], ())),
        ]
        for row in locations
    ]


def _along(went: Sequence[Along]) -> str:
    """`configmap/web, service/web (absent)`, or <none>."""
    named = [
        f"{item.kind.lower()}/{item.name}" + ("" if item.present else " (absent)") for item in went
    ]
    return ", ".join(named) or "<none>"


def _shown(value: int | None) -> str:
    return "<none>" if value is None else str(value)
