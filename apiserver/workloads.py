"""`mc.kmc.dev/v1alpha1`: placement views of hub workloads, and their sub-resources.

Lists, gets and watches go to the hub for the workload itself (so selectors, paging and
resourceVersions are the hub's own, exactly) and add what the loops know: the strategy in
force and the state of every location. Nothing is cached here beyond what the loops keep.
"""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime
from typing import Any

from aiohttp import web

from apiserver.api import errors, table
from apiserver.api.guard import info_of
from apiserver.api.respond import WatchStream, json_response, object_list, table_of
from apiserver.keys import BIG_READS, HUB, HUB_CACHE, PLACEMENT, SYNC
from apiserver.kinds import WORKLOADS, Kind
from apiserver.kube.client import ApiError, Kube
from apiserver.placement.loop import STRATEGY, PlacementLoop, read_placement
from apiserver.subresources import locations as locations_sub
from apiserver.subresources import strategy as strategy_sub
from apiserver.sync.loop import SyncLoop
from apiserver.views import API_VERSION, COLUMNS, GROUP, cells, view

Obj = dict[str, Any]

KINDS = {kind.plural: kind for kind in WORKLOADS.values()}
PREFIX = f"/apis/{API_VERSION}"
# Query parameters a list or watch passes on to the hub unchanged.
_PASSED = ("labelSelector", "fieldSelector", "limit", "continue", "resourceVersion")
_MAX_WATCH = 1800
_YIELD_EVERY = 200  # views built between two turns of the event loop


def add_routes(app: web.Application) -> None:
    app.router.add_get(PREFIX + "/{plural}", collection)
    app.router.add_get(PREFIX + "/namespaces/{namespace}/{plural}", collection)
    app.router.add_get(PREFIX + "/namespaces/{namespace}/{plural}/{name}", one)
    item = PREFIX + "/namespaces/{namespace}/{plural}/{name}/{sub}"
    app.router.add_get(item, subresource)
    app.router.add_put(item, subresource)
    app.router.add_patch(item, subresource)


def _kind(request: web.Request) -> Kind:
    plural = request.match_info["plural"]
    kind = KINDS.get(plural)
    if kind is None:
        raise errors.route_not_found()
    return kind


def _collection_path(kind: Kind, namespace: str | None) -> str:
    return kind.path(namespace, "")[:-1] if namespace else kind.collection


def _view(request: web.Request, kind: Kind, hub: Obj, verdicts: Any = ()) -> tuple[Obj, str | None]:
    placement: PlacementLoop = request.app[PLACEMENT]
    sync: SyncLoop = request.app[SYNC]
    hub = {"kind": kind.kind, "apiVersion": kind.api_version, **hub}
    strategy, source, error = placement.strategy_of(kind.key, hub)
    return view(kind, hub, strategy, source, sync.locations_of(kind.key, hub, verdicts)), error


async def collection(request: web.Request) -> web.StreamResponse:
    kind = _kind(request)
    namespace = request.match_info.get("namespace")
    if info_of(request).verb == "watch":
        return await _watch(request, kind, namespace)
    async with request.app[BIG_READS]:
        return await _list(request, kind, namespace)


async def _list(request: web.Request, kind: Kind, namespace: str | None) -> web.Response:
    wanted = table.negotiate(request.headers.get("Accept"))
    params = {k: v for k in _PASSED if (v := request.query.get(k))}
    hub: Kube = request.app[HUB]
    listing = await hub.get(_collection_path(kind, namespace), **params)
    meta = listing.get("metadata") or {}
    views = []
    for i, item in enumerate(listing.get("items") or []):
        if i and i % _YIELD_EVERY == 0:
            await asyncio.sleep(0)  # thousands of views: let health checks and others in
        views.append(_view(request, kind, item))
    rv, cont, left = (
        meta.get("resourceVersion", ""),
        meta.get("continue", ""),
        meta.get("remainingItemCount"),
    )
    if wanted.format == "table":
        now = datetime.now(UTC)
        include = table.include_object(request.query)
        rows = [(cells(obj, now, error), obj) for obj, error in views]
        return json_response(
            table_of(wanted, COLUMNS, rows, include, resource_version=rv, cont=cont, left=left)
        )
    items = [obj for obj, _ in views]
    return json_response(object_list(f"{kind.kind}List", API_VERSION, items, rv, cont, left))


async def _watch(request: web.Request, kind: Kind, namespace: str | None) -> web.StreamResponse:
    wanted = table.negotiate(request.headers.get("Accept"))
    include = table.include_object(request.query) if wanted.format == "table" else "Metadata"
    params = {k: v for k in ("labelSelector", "fieldSelector") if (v := request.query.get(k))}
    bookmarks = request.query.get("allowWatchBookmarks") == "true"
    timeout = min(int(request.query.get("timeoutSeconds") or _MAX_WATCH), _MAX_WATCH)
    hub: Kube = request.app[HUB]
    stream = await WatchStream.open(request)
    try:
        async for event in hub.watch(
            _collection_path(kind, namespace),
            request.query.get("resourceVersion", ""),
            timeout_seconds=timeout,
            params=params,
        ):
            await _send(request, stream, kind, event, wanted, include, bookmarks)
    except ApiError as err:
        await stream.send("ERROR", err.status)
    except ConnectionResetError:
        pass  # the client went away
    return stream.response


async def _send(
    request: web.Request,
    stream: WatchStream,
    kind: Kind,
    event: Obj,
    wanted: table.Wanted,
    include: table.IncludeObject,
    bookmarks: bool,
) -> None:
    event_type, obj = event["type"], event["object"]
    if event_type == "BOOKMARK":
        if bookmarks:
            meta = {"resourceVersion": obj.get("metadata", {}).get("resourceVersion", "")}
            await stream.send(
                "BOOKMARK", {"kind": kind.kind, "apiVersion": API_VERSION, "metadata": meta}
            )
        return
    shown, error = _view(request, kind, obj)
    if wanted.format == "table":
        row = [(cells(shown, datetime.now(UTC), error), shown)]
        await stream.send(event_type, stream.table_event(table_of(wanted, COLUMNS, row, include)))
    else:
        await stream.send(event_type, shown)


async def _hub_object(request: web.Request, kind: Kind) -> Obj:
    hub: Kube = request.app[HUB]
    namespace, name = request.match_info["namespace"], request.match_info["name"]
    try:
        obj = await hub.get(kind.path(namespace, name))
    except ApiError as err:
        if err.code == 404:
            raise errors.not_found(kind.plural, GROUP, name) from None
        raise
    return {"kind": kind.kind, "apiVersion": kind.api_version, **obj}


async def one(request: web.Request) -> web.StreamResponse:
    kind = _kind(request)
    wanted = table.negotiate(request.headers.get("Accept"))
    hub = await _hub_object(request, kind)
    explanation = await request.app[PLACEMENT].explain(kind.key, hub)
    shown, error = _view(request, kind, hub, explanation.verdicts)
    if wanted.format == "table":
        include = table.include_object(request.query)
        row = [(cells(shown, datetime.now(UTC), error), shown)]
        return json_response(table_of(wanted, COLUMNS, row, include))
    return json_response(shown)


async def subresource(request: web.Request) -> web.StreamResponse:
    kind = _kind(request)
    sub = request.match_info["sub"]
    if sub == "locations":
        if request.method != "GET":
            raise errors.method_not_supported(
                request.method.lower(), f"{kind.plural}/locations", GROUP
            )
        return await _locations(request, kind)
    if sub == "strategy":
        return await _strategy(request, kind)
    raise errors.route_not_found()


async def _locations(request: web.Request, kind: Kind) -> web.StreamResponse:
    wanted = table.negotiate(request.headers.get("Accept"))
    hub = await _hub_object(request, kind)
    explanation = await request.app[PLACEMENT].explain(kind.key, hub)
    rows = request.app[SYNC].locations_of(kind.key, hub, explanation.verdicts)
    obj = locations_sub.placement_object(hub, rows)
    if wanted.format == "table":
        include = table.include_object(request.query)
        printed = [(cells, obj) for cells in locations_sub.rows(rows)]
        return json_response(table_of(wanted, locations_sub.COLUMNS, printed, include))
    return json_response(obj)


async def _strategy(request: web.Request, kind: Kind) -> web.StreamResponse:
    placement: PlacementLoop = request.app[PLACEMENT]
    hub = await _hub_object(request, kind)
    if request.method in ("PUT", "PATCH"):
        hub = await _write_strategy(request, kind, hub)
    obj = strategy_sub.strategy_object(hub, await placement.explain(kind.key, hub))
    wanted = table.negotiate(request.headers.get("Accept"))
    if wanted.format == "table":
        include = table.include_object(request.query)
        printed = [(cells, obj) for cells in strategy_sub.rows(obj, read_placement(hub))]
        return json_response(table_of(wanted, strategy_sub.COLUMNS, printed, include))
    return json_response(obj)


async def _write_strategy(request: web.Request, kind: Kind, hub: Obj) -> Obj:
    """Validate the strategy asked for, then set (or remove) the annotation; 4xx otherwise."""
    placement: PlacementLoop = request.app[PLACEMENT]
    try:
        body = json.loads(await request.read() or b"null")
    except ValueError as err:  # not JSON, or not UTF-8
        raise errors.bad_request(f"the body is not JSON: {err}") from None
    current = strategy_sub.strategy_object(hub, await placement.explain(kind.key, hub))
    given = body.get("metadata") if isinstance(body, dict) else None
    wanted_version = given.get("resourceVersion") if isinstance(given, dict) else None
    meta = hub["metadata"]
    if wanted_version and wanted_version != meta["resourceVersion"]:
        raise errors.conflict(
            f'Operation cannot be fulfilled on {kind.plural}.{GROUP} "{meta["name"]}": the object '
            "has been modified; please apply your changes to the latest version and try again"
        )
    new = strategy_sub.desired(current, body, request.content_type, request.method)
    text = new.to_json() if new is not None else None
    if text is not None:
        unknown = (await placement.explain(kind.key, hub, annotation=text)).unknown
        if unknown:
            known = ", ".join(sorted(request.app[HUB_CACHE].locations.cache))
            problem = f"no such location: {', '.join(unknown)} (locations: {known or 'none'})"
            raise errors.invalid("Strategy", GROUP, meta["name"], [("spec", problem)])
    if request.query.get("dryRun") == "All":
        annotations = {**(meta.get("annotations") or {})}
        annotations.pop(STRATEGY, None)
        if text is not None:
            annotations[STRATEGY] = text
        return {**hub, "metadata": {**meta, "annotations": annotations}}
    patch = {
        "metadata": {"resourceVersion": meta["resourceVersion"], "annotations": {STRATEGY: text}}
    }
    hub_client: Kube = request.app[HUB]
    updated = await hub_client.merge_patch(kind.path(meta["namespace"], meta["name"]), patch)
    return {"kind": kind.kind, "apiVersion": kind.api_version, **updated}
