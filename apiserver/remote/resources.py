"""The `remote.kmc.dev` resources: punch-through reads of the child clusters' own objects,
one per kind with a `remote` in `kinds/`. Their fields are the child's, so they are
documented by pointing at the real kind instead of copying its schema."""

from __future__ import annotations

from apiserver.api.registry import Resource
from apiserver.contract import REMOTE_GROUP, VERSION
from apiserver.kinds import REMOTE, Kind

READ = ("get", "list", "watch")


def _remote(entry: Kind) -> Resource:
    assert entry.remote is not None
    kind, home, explain = entry.kind, entry.remote.home, entry.remote.explain
    return Resource(
        group=REMOTE_GROUP,
        version=VERSION,
        plural=entry.plural,
        singular=entry.remote.singular,
        kind=kind,
        namespaced=True,
        verbs=READ,
        categories=("kmc-remote",),
        description=(
            f"{kind} objects of the child clusters, read through the hub and stitched into one "
            f"list. Each item is the child cluster's own {kind} ({home}), unchanged except "
            "for the annotation kmc.dev/location naming the location it came from; for its "
            f"fields, see kubectl explain {explain}. The same name in two locations gives two "
            "items; get NAME@LOCATION picks one. A location that does not answer is named in "
            "a warning and its items are missing."
        ),
        schema={"type": "object", "x-kubernetes-preserve-unknown-fields": True},
    )


RESOURCES: tuple[Resource, ...] = tuple(_remote(kind) for kind in REMOTE.values())
