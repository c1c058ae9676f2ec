"""What every `mc.kmc.dev` object shows of its hub object's metadata: its identity, version
and labels, so a watch or a conditional write on the view is one on the hub object."""

from __future__ import annotations

from apiserver.objects import Obj, ReadOnly

_KEPT = (
    "name",
    "namespace",
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "labels",
)


def metadata_of(hub: ReadOnly) -> Obj:
    meta = hub.get("metadata") or {}
    return {key: meta[key] for key in _KEPT if key in meta}
