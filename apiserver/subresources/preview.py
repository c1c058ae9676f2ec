"""`previews`: what the locations would get from an object not yet written, for `kubectl mc
diff -f`.

Read-only: a POST of the proposed object answers a `Preview` and writes nothing. Two cases:

- a placed kind (a Deployment, a ClusterRole, ...): the object as the file has it, placed
  where the placement engine would place it now (`Decider.explain`, the decision the
  placement loop writes, keeping the current placement's say when the object exists), and
  per location the child the sync loop would apply (`children.children_object`, the same
  function `kubectl mc diff NAME` shows);
- an `Override` or `ClusterOverride`: for every hub object it would target, per location,
  what the location gets now beside what it would get with the proposed object in place of
  (or added to) the overrides of that name.

Each entry of `objects` names one hub object and has the `Children` shape per location:
`hub` (before), `object` (after) or `error`. This module is pure: the handler gathers the
hub cache's and the decider's answers and hands them in.
"""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import ValidationError

from apiserver.contract import MC_GROUP, PLACEMENT, VERSION, Placement, placement_text
from apiserver.models.child_inputs import ChildInputs
from apiserver.models.location import GROUP
from apiserver.models.override import CLUSTER_KIND, KIND, ClusterOverrideSpec, OverrideSpec
from apiserver.models.override_index import Source, read
from apiserver.objects import Obj, ReadOnly
from apiserver.subresources.children import children_object
from apiserver.sync.desired import ChildKind

API_VERSION = f"{MC_GROUP}/{VERSION}"


class PreviewError(ValueError):
    """The proposed object cannot be previewed; the message says why, for a 400."""


def is_override(obj: ReadOnly) -> bool:
    group = str(obj.get("apiVersion") or "").partition("/")[0]
    return group == GROUP and obj.get("kind") in (KIND, CLUSTER_KIND)


def proposed_override(obj: ReadOnly) -> Source:
    """The Override or ClusterOverride as the sync loop would read it; PreviewError, naming
    the field, when the admission webhook would refuse it."""
    meta = obj.get("metadata") or {}
    namespace, name = str(meta.get("namespace") or ""), str(meta.get("name") or "")
    if not name:
        raise PreviewError(f"{obj.get('kind')}: metadata.name: required")
    if (obj.get("kind") == KIND) != bool(namespace):
        raise PreviewError(f"{obj.get('kind')} {name}: metadata.namespace: wrong scope")
    model = OverrideSpec if namespace else ClusterOverrideSpec
    try:
        model.model_validate(obj.get("spec") or {})
    except ValidationError as err:
        first = err.errors()[0]
        where = ".".join(["spec", *(str(part) for part in first["loc"])])
        raise PreviewError(f"{obj.get('kind')} {name}: {where}: {first['msg']}") from None
    source = read(obj)
    if source is None:  # validated just above: cannot happen
        raise PreviewError(f"{obj.get('kind')} {name}: spec does not parse")
    if source.error:
        raise PreviewError(source.error)
    return source


def with_proposed(current: Sequence[Source], proposed: Source, targeted: bool) -> list[Source]:
    """The overrides of an object as they would be: `proposed` in place of the one of its
    name (or added), or that one gone when it no longer targets the object; in order."""
    kept = [s for s in current if (s.namespace, s.name) != (proposed.namespace, proposed.name)]
    if targeted:
        kept.append(proposed)
    return sorted(kept, key=lambda s: s.order)


def in_namespace(obj: ReadOnly, path: str, namespaced: bool) -> Obj:
    """The object in the namespace of the request's path (`path`, "" for a cluster-wide
    one): a namespaced object names it or none, a cluster-scoped one comes cluster-wide;
    PreviewError otherwise, in kube-apiserver's words."""
    meta = dict(obj.get("metadata") or {})
    given = str(meta.get("namespace") or "")
    named = f"{obj.get('kind')} {meta.get('name')}"
    if namespaced and not path:
        raise PreviewError(f"{named}: {obj.get('kind')} is namespaced: preview it in a namespace")
    if not namespaced and path:
        raise PreviewError(f"{named}: {obj.get('kind')} is cluster-scoped: preview it cluster-wide")
    if namespaced and given and given != path:
        raise PreviewError(
            f"{named}: the namespace of the provided object does not match the namespace sent "
            "on the request"
        )
    if not namespaced and given:
        del meta["namespace"]
    if namespaced:
        meta["namespace"] = path
    return {**obj, "metadata": meta}


# The uid a child names its hub object by, for an object not created yet (shown as such).
NEW_UID = "not-created-yet"


def placed(obj: ReadOnly, placement: Placement) -> Obj:
    """The object carrying `placement`, as the placement loop would write it (and a uid,
    `NEW_UID` when it has none yet)."""
    meta = dict(obj.get("metadata") or {})
    meta.setdefault("uid", NEW_UID)
    meta["annotations"] = {**(meta.get("annotations") or {}), PLACEMENT: placement_text(placement)}
    return {**obj, "metadata": meta}


def object_entry(
    hub: ReadOnly,
    kind: ChildKind,
    inputs: ChildInputs,
    after: Sequence[Source] | None = None,
) -> Obj:
    """One object's entry: with `after` None, each location's plain copy beside its child
    (a new object); else its child with the override objects it has now (`inputs`) beside
    the one with `after`."""
    meta = hub.get("metadata") or {}
    entry: Obj = {
        "apiVersion": hub.get("apiVersion"),
        "kind": hub.get("kind"),
        "name": meta.get("name"),
    }
    if meta.get("namespace"):
        entry["namespace"] = meta["namespace"]
    now = children_object(hub, kind, inputs)["locations"]
    if after is None:
        entry["locations"] = now
        return entry
    changed = inputs.with_overrides(after)
    then = {e["location"]: e for e in children_object(hub, kind, changed)["locations"]}
    locations = []
    for old in now:
        new = then[old["location"]]
        shown: Obj = {"location": old["location"], "hub": old.get("object", old["hub"])}
        for key in ("rules", "object", "error"):
            if key in new:
                shown[key] = new[key]
        locations.append(shown)
    entry["locations"] = locations
    return entry


def preview_object(entries: Sequence[Obj]) -> Obj:
    return {"apiVersion": API_VERSION, "kind": "Preview", "objects": list(entries)}
