"""`POST /apis/mc.kmc.dev/v1alpha1/previews`: what the locations would get from an object not
yet written (`subresources/preview.py` says what; this gathers the inputs). Read-only: the
answer comes from the hub cache, the Locations and the placement engine; nothing is written.
Authorized as any request: `create` on `previews` of `mc.kmc.dev`, in the namespace of the
path (`/namespaces/NS/previews`, for a namespaced object or an Override) or cluster-wide
(`/previews`, for a cluster-scoped object or a ClusterOverride), so a preview shows only what
its caller was allowed to ask about there. A namespaced object that names no namespace gets
the path's."""

from __future__ import annotations

import asyncio
import json

from aiohttp import web

from apiserver.api import errors
from apiserver.api.respond import json_response
from apiserver.contract import STRATEGY, Placement, never_placed, read_placement
from apiserver.hubcache import HUB_CACHE, HubCache
from apiserver.kinds import Key, Kind, Role
from apiserver.loops.placement.deciding import DECIDER, Decider
from apiserver.mc.views import API_VERSION
from apiserver.models.override import KIND
from apiserver.objects import Obj
from apiserver.subresources import preview as preview_sub
from apiserver.subresources.preview import PreviewError

PATH = f"/apis/{API_VERSION}/previews"
_YIELD_EVERY = 100  # targets previewed between two turns of the event loop


def add_routes(app: web.Application) -> None:
    app.router.add_post(PATH, preview)
    app.router.add_post(f"/apis/{API_VERSION}/namespaces/{{namespace}}/previews", preview)


async def preview(request: web.Request) -> web.StreamResponse:
    try:
        body = json.loads(await request.read() or b"null")
    except ValueError as err:  # not JSON, or not UTF-8
        raise errors.bad_request(f"the body is not JSON: {err}") from None
    if (
        not isinstance(body, dict)
        or not isinstance(body.get("apiVersion"), str)
        or not isinstance(body.get("kind"), str)
        or not isinstance(body.get("metadata") or {}, dict)
    ):
        raise errors.bad_request("the body must be one object with apiVersion and kind")
    cache: HubCache = request.app[HUB_CACHE]
    namespace = request.match_info.get("namespace", "")
    try:
        if preview_sub.is_override(body):
            body = preview_sub.in_namespace(body, namespace, body["kind"] == KIND)
            entries = await _override_entries(cache, body)
        else:
            kind = _kind_of(cache, body)
            body = preview_sub.in_namespace(body, namespace, kind.namespaced)
            entries = [await _object_entry(cache, request.app[DECIDER], kind, body)]
    except PreviewError as err:
        raise errors.bad_request(str(err)) from None
    except (KeyError, TypeError, AttributeError, ValueError) as err:  # a field of the wrong type
        raise errors.bad_request(f"{body['kind']}: the object does not parse: {err!r}") from None
    return json_response(preview_sub.preview_object(entries))


def _labels(cache: HubCache) -> dict[str, dict[str, str]]:
    return {
        name: location["metadata"].get("labels") or {}
        for name, location in cache.locations.cache.items()
    }


def _kind_of(cache: HubCache, obj: Obj) -> Kind:
    found = [
        kind
        for kind in list(cache.kinds.values())
        if kind.api_version == obj["apiVersion"] and kind.kind == obj["kind"]
    ]
    if not found or found[0].role is None:
        raise PreviewError(
            f'the server does not place objects of kind "{obj["kind"]}" in version '
            f'"{obj["apiVersion"]}"'
        )
    return found[0]


async def _object_entry(cache: HubCache, decider: Decider, kind: Kind, body: Obj) -> Obj:
    """A placed kind: placed as the engine would place it now, each location's child."""
    meta = body.get("metadata") or {}
    name, namespace = str(meta.get("name") or ""), str(meta.get("namespace") or "")
    if not name:
        raise PreviewError(f"{kind.kind}: metadata.name: required")
    if kind.namespaced != bool(namespace):
        scope = "needs a namespace" if kind.namespaced else "is cluster-scoped: no namespace"
        raise PreviewError(f"{kind.kind} {name}: {kind.kind} {scope}")
    obj = kind.typed(body)
    live = cache.get(Key(kind.key, namespace, name))
    current = read_placement(dict(live)) if live is not None else {}
    placement: Placement = {}
    note: str | None = None
    asked = STRATEGY in (meta.get("annotations") or {})
    if namespace and never_placed(cache.namespace(namespace)):
        note = f"namespace {namespace} is not placed: nothing is sent down"
    elif not kind.syncable(obj):
        note = "the hub's own: never placed"
    elif kind.role is Role.WORKLOAD or asked:
        explanation = await decider.explain(kind, preview_sub.placed(obj, current))
        if explanation.error:
            raise PreviewError(explanation.error)
        placement, note = explanation.placement, explanation.unplaceable
    elif kind.role is Role.ASKED:
        note = f"not placed: it carries no {STRATEGY} annotation"
    elif live is not None:
        placement = current  # a follower goes where what it follows goes
    else:
        raise PreviewError(
            f"{kind.kind} {name} goes where the objects it follows go: create it, or give it "
            f"a {STRATEGY} annotation, to see where"
        )
    hub = preview_sub.placed(obj, placement)
    entry = preview_sub.object_entry(hub, kind, cache.child_inputs(kind, hub))
    if note:
        entry["note"] = note
    return entry


async def _override_entries(cache: HubCache, body: Obj) -> list[Obj]:
    """An Override or ClusterOverride: every object it (or the one of its name now) targets,
    each location's child now beside the one with it applied."""
    proposed = preview_sub.proposed_override(body)
    keys = set(cache.override_targets(proposed))
    now = cache.override_index.get(proposed.namespace, proposed.name)
    if now is not None:
        keys |= set(cache.override_targets(now))  # those it would stop targeting
    entries = []
    for done, key in enumerate(sorted(keys), 1):
        if done % _YIELD_EVERY == 0:
            await asyncio.sleep(0)  # a ClusterOverride may target thousands: let others run
        kind, hub = cache.kinds.get(key.kind), cache.get(key)
        if kind is None or hub is None:
            continue
        meta = hub.get("metadata") or {}
        targeted = proposed.targets(
            (kind.group, kind.kind),
            key.namespace,
            key.name,
            meta.get("labels") or {},
            cache.namespace_labels(key.namespace),
        )
        inputs = cache.child_inputs(kind, hub)
        after = preview_sub.with_proposed(inputs.overrides, proposed, targeted)
        entries.append(preview_sub.object_entry(hub, kind, inputs, after))
    return entries
