"""`mc.kmc.dev/v1alpha1`: placement views of hub workloads, and their sub-resources.

Lists and gets are answered from the hub cache with kube-apiserver's read semantics (see
`_cache_serves`): resourceVersions are the hub's, selectors and paging ours, rows kept per
object (`viewrows`). A consistent get, or list of a small namespace, is read from the hub
instead: one request, and no waiting for the cache (`_small_namespace`). What the cache
cannot answer (an Exact resourceVersion, a field it does not select on, a cache that cannot
catch up in time, a page of a list the hub began) goes to the hub as before. Watches follow
the hub's own watch and add what the loops know.
"""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import json
import operator
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from aiohttp import web

from apiserver import metrics
from apiserver.api import errors, paging, selectors, table
from apiserver.api.guard import info_of
from apiserver.api.respond import (
    WatchStream,
    json_response,
    object_list,
    stream_list,
    table_of,
)
from apiserver.contract import STRATEGY, read_placement
from apiserver.hubcache import HUB_CACHE, HubCache
from apiserver.kinds import VIEWS, Key, Kind
from apiserver.kube.client import HUB, ApiError, Kube
from apiserver.loops.placement.deciding import DECIDER, Decider
from apiserver.loops.sync.loop import PROGRESS
from apiserver.mc.rows import VIEW_ROWS, Ages, ViewRows
from apiserver.mc.views import API_VERSION, COLUMNS, GROUP, cells, view
from apiserver.objects import Obj
from apiserver.options import OPTIONS
from apiserver.readlimit import READS, Priority
from apiserver.subresources import along
from apiserver.subresources import children as children_sub
from apiserver.subresources import locations as locations_sub
from apiserver.subresources import strategy as strategy_sub

PREFIX = f"/apis/{API_VERSION}"
# Query parameters a list or watch passes on to the hub unchanged.
_PASSED = (
    "labelSelector",
    "fieldSelector",
    "limit",
    "continue",
    "resourceVersion",
    "resourceVersionMatch",
)
# Field selectors the cache answers; others (a CRD's selectable fields) go to the hub.
_CACHED_FIELDS = {"metadata.name", "metadata.namespace"}
# How long the hub cache's watch must stay quiet to count as caught up (see
# `Informer.caught_up`). The hub answers the probe for its version only once its own watch
# cache holds that version, and by then it has mostly sent the events to its watchers:
# `bench/settle.py` measures how long an event trails the probe (about 1 ms at p99 on the
# bed), so 20 ms is a wide margin; events seen trailing widen it (`Informer.caught_up`).
_SETTLE = 0.02
# A consistent read of a namespace with at most this many objects of the kind is answered
# from one hub list of it (`_small_namespace`).
_WHOLE = 100
_MAX_WATCH = 1800
_YIELD_EVERY = 200  # views built between two turns of the event loop
_row_key = operator.attrgetter("key")


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
    kind = VIEWS.get(plural)
    if kind is None:
        raise errors.route_not_found()
    return kind


def _view(request: web.Request, kind: Kind, hub: Obj, verdicts: Any = ()) -> tuple[Obj, str | None]:
    hub = kind.typed(hub)
    strategy, source, error = request.app[DECIDER].strategy_of(kind, hub)
    rows = request.app[PROGRESS].rows(kind, hub, verdicts)
    return view(kind, hub, strategy, source, rows), error


async def collection(request: web.Request) -> web.StreamResponse:
    kind = _kind(request)
    namespace = request.match_info.get("namespace")
    if info_of(request).verb == "watch":
        return await _watch(request, kind, namespace)
    wanted = table.negotiate(request.headers.get("Accept"))
    query = request.query
    labels = selectors.parse_labels(query.get("labelSelector"))
    fields = selectors.parse_fields(query.get("fieldSelector"))
    # Waiting for the cache to catch up is no work: it does not take a read's turn.
    cacheable = set(selectors.field_paths(fields)) <= _CACHED_FIELDS
    listed: _Listed | None = None
    if cacheable and namespace is not None and _consistent(query):
        listed, cached = await _small_namespace(request, kind, namespace)
    else:
        cached = cacheable and await _cache_serves(request, kind, query)
    metrics.READS.labels(GROUP, "cache" if cached and listed is None else "hub").inc()
    async with request.app[READS].turn(Priority.LIST):
        if not cached:
            return await _list_hub(request, kind, namespace, wanted)
        return await _list(request, kind, namespace, wanted, labels, fields, listed)


@dataclasses.dataclass(frozen=True)
class _Listed:
    """A namespace's objects as the hub listed them, and the list's resourceVersion."""

    items: list[Obj]
    version: str


def _consistent(query: Mapping[str, str]) -> bool:
    """A read that must see every write made before it (no resourceVersion, no page)."""
    return not (query.get("resourceVersion") or query.get("continue"))


async def _small_namespace(
    request: web.Request, kind: Kind, namespace: str
) -> tuple[_Listed | None, bool]:
    """A consistent read of one namespace, and whether the cache may answer it. The hub's own
    list is a consistent read by itself: where the namespace holds at most `_WHOLE` objects of
    the kind, that one list is the answer, with no waiting for our watch to be quiet (which is
    most of what a consistent read from the cache costs: see `_SETTLE`). A larger namespace's
    list tells the hub's version the cache is then made to catch up with, as `HubCache.fresh`
    does with a list of one item. Objects the cache holds as listed are served as cached (their
    rows are kept), the others as the cache would keep them."""
    cache: HubCache = request.app[HUB_CACHE]
    informer = cache.objects.get(kind.key)
    if informer is None:
        return None, False
    params = {k: v for k in ("labelSelector", "fieldSelector") if (v := request.query.get(k))}
    # Where the cache already holds more than `_WHOLE` of them, the hub's list can only tell
    # the version to catch up with: one item does that, where a hundred cost the hub to send
    # and us to decode (a quarter of kmc-apiserver's CPU under 10 listers of 2,000 objects).
    # A cache behind the hub only makes the answer take the cache's path, which is right too.
    held = sum(1 for _ in itertools.islice(cache.list_keys(kind.key, namespace), _WHOLE + 1))
    hub: Kube = request.app[HUB]
    limit = _WHOLE if held <= _WHOLE else 1
    listing = await hub.get(kind.path(namespace), limit=str(limit), **params)
    meta = listing.get("metadata") or {}
    version = str(meta.get("resourceVersion", ""))
    if not meta.get("continue"):
        items = []
        for item in listing.get("items") or []:
            kept = informer.get(f"{namespace}/{item['metadata']['name']}")
            if kept is None or _version_of(kept) != _version_of(item):
                kept = informer.kept(item)
            items.append(kept)
        return _Listed(items, version), True
    if not informer.synced.is_set():
        return None, False
    try:
        wanted = int(version)
    except ValueError:
        return None, False
    timeout = request.app[OPTIONS].consistent_read_timeout
    return None, await informer.caught_up(wanted, _SETTLE, timeout)


def _version_of(obj: Obj) -> str:
    return str(obj["metadata"].get("resourceVersion", ""))


async def _list(
    request: web.Request,
    kind: Kind,
    namespace: str | None,
    wanted: table.Wanted,
    labels: selectors.LabelSelectorQuery,
    fields: selectors.FieldSelectorQuery,
    listed: _Listed | None = None,
) -> web.StreamResponse:
    """The cache's objects (or those the hub just `listed`) as views, a page of them."""
    query = request.query
    limit = paging.limit_of(query)
    cache: HubCache = request.app[HUB_CACHE]
    rows: ViewRows = request.app[VIEW_ROWS]
    if listed is not None:
        version, objects = listed.version, listed.items
    else:
        version, objects = str(cache.objects[kind.key].version), cache.items(kind.key)
    stale = rows.stale()
    # Read once per list, not per row: the Namespace the rows share, whether anything selects.
    shared = cache.namespace(namespace) if namespace is not None else None
    selecting = not (labels.empty and fields.empty)
    built = []
    for i, hub in enumerate(objects):
        if i and i % _YIELD_EVERY == 0:
            await asyncio.sleep(0)  # thousands of objects: let health checks and others in
        meta = hub["metadata"]
        if namespace is not None and meta.get("namespace") != namespace:
            continue
        if selecting and not (labels.matches(meta.get("labels") or {}) and fields.matches(hub)):
            continue
        built.append(rows.row(kind, hub, stale, shared))
    served, cont, left = paging.page(built, limit, query.get("continue"), version, key=_row_key)
    if wanted.format == "table":
        include = table.include_object(query)
        head = table_of(
            wanted, COLUMNS, [], include, resource_version=version, cont=cont, left=left
        )
        rows_version = wanted.version or "v1"
        ages = Ages(datetime.now(UTC))
        printed = (row.table_row(include, rows_version, ages) for row in served)
        return await stream_list(request, head, "rows", printed, bytes)
    head = object_list(f"{kind.kind}List", API_VERSION, [], version, cont, left)
    return await stream_list(request, head, "items", (row.item() for row in served), bytes)


async def _cache_serves(request: web.Request, kind: Kind, query: Mapping[str, str]) -> bool:
    """Can the hub cache answer this read as kube-apiserver's watch cache would? A read
    without resourceVersion (or one resuming our own `continue`) must see every write made
    before it: the cache catches up first. `0` is whatever the cache holds; a version the
    cache has not reached yet is waited for; an Exact one is the hub's to answer."""
    cache: HubCache = request.app[HUB_CACHE]
    informer = cache.objects.get(kind.key)
    if informer is None or not informer.synced.is_set():
        return False
    if query.get("resourceVersionMatch") == "Exact":
        return False
    if query.get("continue"):
        return _ours(query["continue"])  # a page of a list started here, or at the hub
    timeout = request.app[OPTIONS].consistent_read_timeout
    version = query.get("resourceVersion", "")
    if version == "0":
        return True
    if version:
        try:
            wanted = int(version)
        except ValueError:
            raise errors.bad_request(f"invalid resource version {errors.quote(version)}") from None
        return await informer.caught_up(wanted, _SETTLE, timeout)
    return await cache.fresh(kind.key, _SETTLE, timeout)


def _ours(token: str) -> bool:
    try:
        paging.decode_continue(token)
    except ApiError:
        return False
    return True


async def _list_hub(
    request: web.Request, kind: Kind, namespace: str | None, wanted: table.Wanted
) -> web.Response:
    """The hub's own list with our views: for what the cache cannot answer."""
    params = {k: v for k in _PASSED if (v := request.query.get(k))}
    hub: Kube = request.app[HUB]
    listing = await hub.get(kind.path(namespace), **params)
    meta = listing.get("metadata") or {}
    views = []
    for i, item in enumerate(listing.get("items") or []):
        if i and i % _YIELD_EVERY == 0:
            await asyncio.sleep(0)
        views.append(_view(request, kind, item))
    rv, cont, left = (
        meta.get("resourceVersion", ""),
        meta.get("continue", ""),
        meta.get("remainingItemCount"),
    )
    if wanted.format == "table":
        now = datetime.now(UTC)
        include = table.include_object(request.query)
        rows = [(cells(kind, obj, now, error), obj) for obj, error in views]
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
            kind.path(namespace),
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
    now = datetime.now(UTC)
    kept = request.app[VIEW_ROWS].kept_for(kind, obj)
    if kept is not None:
        shown, shown_cells = kept.view, kept.cells_now(now)
    else:
        shown, error = _view(request, kind, obj)
        shown_cells = cells(kind, shown, now, error) if wanted.format == "table" else []
    if wanted.format == "table":
        row = [(shown_cells, shown)]
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
    return kind.typed(obj)


async def _read(request: web.Request, kind: Kind) -> Obj:
    """The hub object for a read. A consistent one is the hub's own get: one request, as one
    probe of the hub's version costs, and no waiting for our watch (see `_cache_serves`). The
    hub cache answers the others, as for a list."""
    if _consistent(request.query) or not await _cache_serves(request, kind, request.query):
        metrics.READS.labels(GROUP, "hub").inc()
        return await _hub_object(request, kind)
    metrics.READS.labels(GROUP, "cache").inc()
    namespace, name = request.match_info["namespace"], request.match_info["name"]
    obj = request.app[HUB_CACHE].get(Key(kind.key, namespace, name))
    if obj is None:
        raise errors.not_found(kind.plural, GROUP, name)
    return kind.typed(obj)


async def one(request: web.Request) -> web.StreamResponse:
    kind = _kind(request)
    wanted = table.negotiate(request.headers.get("Accept"))
    hub = await _read(request, kind)
    explanation = await request.app[DECIDER].explain(kind, hub)
    shown, error = _view(request, kind, hub, explanation.verdicts)
    if wanted.format == "table":
        include = table.include_object(request.query)
        row = [(cells(kind, shown, datetime.now(UTC), error), shown)]
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
    if sub == "children":
        if request.method != "GET":
            raise errors.method_not_supported(
                request.method.lower(), f"{kind.plural}/children", GROUP
            )
        return await _children(request, kind)
    raise errors.route_not_found()


async def _children(request: web.Request, kind: Kind) -> web.StreamResponse:
    hub = await _read(request, kind)
    cache: HubCache = request.app[HUB_CACHE]
    inputs = cache.child_inputs(kind, hub)
    return json_response(children_sub.children_object(hub, kind, inputs))


async def _locations(request: web.Request, kind: Kind) -> web.StreamResponse:
    wanted = table.negotiate(request.headers.get("Accept"))
    hub = await _read(request, kind)
    explanation = await request.app[DECIDER].explain(kind, hub)
    progress = request.app[PROGRESS]
    rows = progress.rows(kind, hub, explanation.verdicts)
    went = along.companions(kind, hub, along.gather(request.app[HUB_CACHE], kind, hub))
    by_location = along.by_location((row["location"] for row in rows), went, progress.held_in)
    cache: HubCache = request.app[HUB_CACHE]
    labels = {
        row["location"]: (cache.locations.get(row["location"]) or {})
        .get("metadata", {})
        .get("labels")
        or {}
        for row in rows
    }
    overrides = locations_sub.overrides_by_location(hub, cache.overrides_of(kind, hub), labels)
    obj = locations_sub.placement_object(hub, rows, by_location, overrides)
    if wanted.format == "table":
        include = table.include_object(request.query)
        printed = [(cells, obj) for cells in locations_sub.rows(rows, by_location, overrides)]
        return json_response(table_of(wanted, locations_sub.COLUMNS, printed, include))
    return json_response(obj)


async def _strategy(request: web.Request, kind: Kind) -> web.StreamResponse:
    decider: Decider = request.app[DECIDER]
    if request.method in ("PUT", "PATCH"):
        hub = await _write_strategy(request, kind, await _hub_object(request, kind))
    else:
        hub = await _read(request, kind)
    obj = strategy_sub.strategy_object(hub, await decider.explain(kind, hub))
    wanted = table.negotiate(request.headers.get("Accept"))
    if wanted.format == "table":
        include = table.include_object(request.query)
        printed = [(cells, obj) for cells in strategy_sub.rows(obj, read_placement(hub))]
        return json_response(table_of(wanted, strategy_sub.COLUMNS, printed, include))
    return json_response(obj)


async def _write_strategy(request: web.Request, kind: Kind, hub: Obj) -> Obj:
    """Validate the strategy asked for, then set (or remove) the annotation; 4xx otherwise."""
    decider: Decider = request.app[DECIDER]
    try:
        body = json.loads(await request.read() or b"null")
    except ValueError as err:  # not JSON, or not UTF-8
        raise errors.bad_request(f"the body is not JSON: {err}") from None
    current = strategy_sub.strategy_object(hub, await decider.explain(kind, hub))
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
        unknown = (await decider.explain(kind, hub, annotation=text)).unknown
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
    return kind.typed(updated)
