"""Writing our marks on a user's hub object without fighting our own status writes.

The loops write a hub object's status often (the Placed condition, the fold). A write that
carries the resourceVersion it read as a precondition fails whenever one of those landed in
between, and a thousand objects turn into a storm of conflicts and retries. What the loops
write to the object itself — an annotation, our finalizer — does not need that guard where
the API can merge: built-in kinds take a strategic merge patch, which merges `finalizers`
as a set, and a finalizer is removed by a JSON patch that first tests it is still where it
was read. A CRD's objects take no strategic merge patch, so they keep the precondition.
"""

from __future__ import annotations

from apiserver.kinds import Kind
from apiserver.kube.client import Kube
from apiserver.objects import Obj


async def annotate(
    hub: Kube, kind: Kind, obj: Obj, annotations: dict[str, str | None], finalizer: str = ""
) -> Obj:
    """Set (None: remove) annotations, and add `finalizer` when it is missing; the answer."""
    meta = obj["metadata"]
    path = kind.path(meta.get("namespace"), meta["name"])
    finalizers = list(meta.get("finalizers") or [])
    adding = bool(finalizer) and finalizer not in finalizers
    if not kind.custom:
        patch: Obj = {"metadata": {"annotations": annotations}}
        if adding:
            patch["metadata"]["finalizers"] = [finalizer]
        return await hub.strategic_patch(path, patch)
    patch = {"metadata": {"resourceVersion": meta["resourceVersion"], "annotations": annotations}}
    if adding:
        patch["metadata"]["finalizers"] = [*finalizers, finalizer]
    return await hub.merge_patch(path, patch)


async def add_finalizer(hub: Kube, kind: Kind, obj: Obj, finalizer: str) -> Obj | None:
    """Add `finalizer` if `obj` lacks it; the answer, None when nothing was written."""
    if finalizer in (obj["metadata"].get("finalizers") or []):
        return None
    return await annotate(hub, kind, obj, {}, finalizer)


async def remove_finalizer(hub: Kube, kind: Kind, obj: Obj, finalizer: str) -> None:
    meta = obj["metadata"]
    finalizers = list(meta.get("finalizers") or [])
    if finalizer not in finalizers:
        return
    at = f"/metadata/finalizers/{finalizers.index(finalizer)}"
    await hub.json_patch(
        kind.path(meta.get("namespace"), meta["name"]),
        [{"op": "test", "path": at, "value": finalizer}, {"op": "remove", "path": at}],
    )
