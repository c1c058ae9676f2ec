"""`<workload>/locations`: where one hub workload runs, a row per location.

As an object (`kind: Placement`) for `-o yaml`, and as a Table for
`kubectl get deployments.mc.kmc.dev web --subresource locations`: several rows for one object
are fine to kubectl, which prints every row it is given.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from apiserver.api.table import Column
from apiserver.contract import MC_GROUP, VERSION
from apiserver.objects import Obj
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
)


def placement_object(hub: Obj, locations: Sequence[LocationState]) -> Obj:
    return {
        "apiVersion": API_VERSION,
        "kind": "Placement",
        "metadata": metadata_of(hub),
        "locations": list(locations),
    }


def rows(locations: Sequence[LocationState]) -> list[list[Any]]:
    return [
        [
            row["location"],
            _shown(row["desired"]),
            _shown(row["ready"]),
            _shown(row["available"]),
            _shown(row["syncedGeneration"]),
            row["state"],
            row["message"],
        ]
        for row in locations
    ]


def _shown(value: int | None) -> str:
    return "<none>" if value is None else str(value)
