"""`remote.kmc.dev/v1alpha1`: list, get and watch the children's objects through the hub.

Every answer is stitched from the Ready locations' own answers: items unchanged but for the
`kmc.dev/location` annotation; Tables are the children's own Tables (their columns, their
formatting) with LOCATION put first. The same name in two locations is two rows; a GET of a
name found in several answers 409 and `name@location` picks one. Selectors go to the
children as given; paging is ours, over the stitched list, with one resourceVersion that
stands for every child's.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Coroutine
from dataclasses import dataclass
from typing import Any

import msgspec
from aiohttp import web
from multidict import CIMultiDict

from apiserver import metrics
from apiserver.api import errors, paging, selectors, table
from apiserver.api.authz import Decision, denial_status
from apiserver.api.guard import info_of, user_of
from apiserver.api.respond import WatchStream, json_response, object_list, stream_list
from apiserver.contract import LOCATION as ANNOTATION
from apiserver.contract import REMOTE_GROUP as GROUP
from apiserver.contract import VERSION
from apiserver.hubcache import HUB_CACHE
from apiserver.kinds import REMOTE as KINDS
from apiserver.kinds import Kind
from apiserver.kube.client import ApiError, Kube
from apiserver.kube.informer import Backoff
from apiserver.locations.fleet import FLEET
from apiserver.locations.tunnels import NOT_CONNECTED
from apiserver.objects import Obj
from apiserver.options import OPTIONS
from apiserver.readlimit import READS, WAITS, Priority
from apiserver.remote import stitch
from apiserver.remote.cache import (
    CHILD_AUTHZ,
    REMOTE_CACHES,
    Change,
    Entry,
    Gone,
    TableCache,
    attributes,
    table_head,
)
from apiserver.remote.fanout import (
    STALL_TIMEOUTS,
    Answer,
    Asked,
    failed,
    fan_out,
    first_then,
    impersonating,
    targets,
    warning_headers,
)

log = logging.getLogger(__name__)

API_VERSION = f"{GROUP}/{VERSION}"
PREFIX = f"/apis/{API_VERSION}"
CHILD_TABLE = "application/json;as=Table;v=v1;g=meta.k8s.io"
_SELECTORS = ("labelSelector", "fieldSelector")
_LOCATION_COLUMN = table.Column(
    "Location", description="The location (child cluster) the object was read from."
)
_LOCATION_DEFINITION = msgspec.json.encode(_LOCATION_COLUMN.definition())
_MAX_WATCH = 1800
_CACHED_FIELDS = {"metadata.name", "metadata.namespace"}
_MAX_BEHIND = 10000  # changes queued for one watch before it is let go


def add_routes(app: web.Application) -> None:
    app.router.add_get(PREFIX + "/{plural}", collection)
    app.router.add_get(PREFIX + "/namespaces/{namespace}/{plural}", collection)
    app.router.add_get(PREFIX + "/namespaces/{namespace}/{plural}/{name}", one)


def _kind(request: web.Request) -> Kind:
    kind = KINDS.get(request.match_info["plural"])
    if kind is None:
        raise errors.route_not_found()
    return kind


def _located(obj: Obj, location: str) -> Obj:
    """The object with `kmc.dev/location` added (a new dict: the child's answer is not kept)."""
    meta = dict(obj.get("metadata") or {})
    meta["annotations"] = {**(meta.get("annotations") or {}), ANNOTATION: location}
    if obj.get("kind") == "PartialObjectMetadata":
        # A Table row's metadata is for naming and sorting the row; its managedFields are
        # most of its bytes and nobody reads them there.
        meta.pop("managedFields", None)
    return {**obj, "metadata": meta}


def _row(row: Obj, location: str) -> Obj:
    located = {**row, "cells": [location, *row.get("cells", [])]}
    if isinstance(row.get("object"), dict):
        located["object"] = _located(row["object"], location)
    return located


def _timeout(request: web.Request) -> float:
    return request.app[OPTIONS].remote_timeout


@dataclass(frozen=True)
class _Ask:
    """What a list or watch asks every child, as the caller: the format the caller wants,
    which children are asked (and warnings for those left out), and the query for them."""

    wanted: table.Wanted
    include: table.IncludeObject
    clients: dict[str, Kube]
    warnings: list[str]
    params: dict[str, str]
    headers: CIMultiDict[str]


def _ask(request: web.Request) -> _Ask:
    wanted = table.negotiate(request.headers.get("Accept"))
    include = table.include_object(request.query) if wanted.format == "table" else "Metadata"
    clients, warnings = targets(request.app[HUB_CACHE].locations, request.app[FLEET])
    params = {k: v for k in _SELECTORS if (v := request.query.get(k))}
    if wanted.format == "table":
        # Metadata at least: rows are sorted and paged by it. Dropped again if not asked.
        params["includeObject"] = "Object" if include == "Object" else "Metadata"
    accept = CHILD_TABLE if wanted.format == "table" else None
    headers = impersonating(user_of(request), accept)
    return _Ask(wanted, include, clients, warnings, params, headers)


async def collection(request: web.Request) -> web.StreamResponse:
    kind = _kind(request)
    namespace = request.match_info.get("namespace")
    if info_of(request).verb == "watch":
        return await _watch(request, kind, namespace)
    return await _list(request, kind, namespace)


async def _list(request: web.Request, kind: Kind, namespace: str | None) -> web.StreamResponse:
    asked = _ask(request)
    limit = paging.limit_of(request.query)
    cont = request.query.get("continue")
    path = kind.path(namespace)
    cached = await _from_caches(request, kind, namespace, asked, limit, cont)
    if cached is not None:
        metrics.READS.labels(GROUP, "cache").inc()
        return cached
    metrics.READS.labels(GROUP, "children").inc()
    return await _list_live(request, kind, asked, path, limit, cont)


async def _list_live(
    request: web.Request,
    kind: Kind,
    asked: _Ask,
    path: str,
    limit: int | None,
    cont: str | None,
) -> web.Response:
    """Every Ready child asked now, as the caller. Waiting for them takes a turn among the
    reads that wait on children, stitching their answers a read's turn: a slow child must not
    hold a turn that lists served from memory need (see --read-concurrency)."""
    wanted, include, warnings = asked.wanted, asked.include, asked.warnings

    # kubectl's default: rows with metadata only, stitched without decoding what they carry.
    fast = wanted.format == "table" and include != "Object"

    async def ask(kube: Kube, how: Asked) -> Any:
        return await kube.request(
            "GET",
            path,
            params=asked.params,
            headers=asked.headers,
            idle_timeout=how.idle_timeout,
            answering=how.answering,
            decode=stitch.decode if fast else None,
        )

    async with request.app[WAITS].turn(Priority.LIST):
        answers = await fan_out(asked.clients, ask, _timeout(request))
    async with request.app[READS].turn(Priority.LIST):
        return _stitched(kind, asked, answers, warnings, fast, limit, cont)


def _stitched(
    kind: Kind,
    asked: _Ask,
    answers: list[Answer],
    warnings: list[str],
    fast: bool,
    limit: int | None,
    cont: str | None,
) -> web.Response:
    wanted, include = asked.wanted, asked.include
    warnings = warnings + [failed(a) for a in answers if a.error is not None]
    good = [a for a in answers if a.error is None]
    version = paging.composite_version({a.location: _list_version(a.body) for a in good})
    headers = warning_headers(warnings)
    if fast:
        tbl = stitch.stitched(
            [(a.location, a.body) for a in good],
            _LOCATION_DEFINITION,
            f"{table.TABLE_GROUP}/{wanted.version or 'v1'}",
            include == "Metadata",
            limit,
            cont,
            version,
        )
        return json_response(tbl, headers)
    if wanted.format == "table":
        return json_response(_stitched_table(good, wanted, include, limit, cont, version), headers)
    items = [_located(item, a.location) for a in good for item in a.body.get("items") or []]
    served, next_token, left = paging.page(items, limit, cont, version)
    listing = object_list(f"{kind.kind}List", API_VERSION, served, version, next_token, left)
    return json_response(listing, headers)


@dataclass(frozen=True)
class _Cached:
    """The children's caches a caller may read now, and what to select from them."""

    caches: dict[str, TableCache]
    warnings: list[str]
    labels: selectors.LabelSelectorQuery
    fields: selectors.FieldSelectorQuery
    namespace: str | None

    def selects(self, made: Entry) -> bool:
        if self.namespace is not None and made.namespace != self.namespace:
            return False
        if not self.labels.matches(made.labels):
            return False
        if self.fields.empty:  # most reads: no object to build for it
            return True
        return self.fields.matches({"metadata": {"name": made.name, "namespace": made.namespace}})


async def _cached(
    request: web.Request, kind: Kind, namespace: str | None, asked: _Ask, verb: str
) -> _Cached | None:
    """The children's watch caches for this read, or None while one of them is not ready
    (then every child is asked live, and the caches warm for the next read).

    What a caller sees of a child is what that child lets them do: its SubjectAccessReview
    for the caller, cached briefly. A child that denies, or cannot answer the review, is left
    out with a Warning; nothing of it comes from the cache."""
    fields = selectors.parse_fields(request.query.get("fieldSelector"))
    if not selectors.field_paths(fields) <= _CACHED_FIELDS:
        return None  # the children know which fields each kind selects on, and say so
    fleet = request.app[FLEET]
    if any(fleet.tunnel(name) is kube for name, kube in asked.clients.items()):
        # A pull location is read live, as the caller: its agent's tunnel carries only reads
        # made as a hub caller, not the caches' own lists and watches (docs/pull.md).
        return None
    labels = selectors.parse_labels(request.query.get("labelSelector"))
    caches = request.app[REMOTE_CACHES]
    ready = {name: caches.get(name, kube, kind) for name, kube in asked.clients.items()}
    if not all(cache.ready for cache in ready.values()):
        return None
    user = user_of(request)
    attrs = attributes(kind, namespace, verb)
    authz = request.app[CHILD_AUTHZ]
    patience = STALL_TIMEOUTS * _timeout(request)

    async def review(name: str) -> Decision:
        try:
            async with asyncio.timeout(patience):
                return await authz.authorize(name, asked.clients[name], user, attrs)
        except TimeoutError:
            return Decision(False, error=f"its SubjectAccessReview got no answer in {patience:g}s")

    decisions = await _reviewed({name: review(name) for name in ready}, _timeout(request))
    warnings = list(asked.warnings)
    allowed: dict[str, TableCache] = {}
    for (name, cache), decision in zip(ready.items(), decisions, strict=True):
        if decision.allowed:
            allowed[name] = cache
        else:
            why = decision.error or denial_status(decision, user, attrs)["message"]
            warnings.append(f"location {name} left out: {why}")
    return _Cached(allowed, warnings, labels, fields, namespace)


async def _reviewed(
    reviews: dict[str, Coroutine[Any, Any, Decision]], timeout: float
) -> list[Decision]:
    """The children's decisions, by `fan_out`'s rule: once one child has decided, the others
    have `timeout` more seconds, or are left out (a slow child's review goes on, shielded in
    its Authorizer, and its answer is cached for the reads after)."""
    tasks = {name: asyncio.create_task(coro) for name, coro in reviews.items()}
    try:
        await first_then(tasks.values(), timeout)
        late = f"its SubjectAccessReview got no answer {timeout:g}s after another location's"
        return [
            task.result() if task.done() else Decision(False, error=late) for task in tasks.values()
        ]
    finally:
        for task in tasks.values():
            task.cancel()


async def _from_caches(
    request: web.Request,
    kind: Kind,
    namespace: str | None,
    asked: _Ask,
    limit: int | None,
    cont: str | None,
) -> web.StreamResponse | None:
    """The list from the children's watch caches (see `_cached`), or None."""
    cached = await _cached(request, kind, namespace, asked, "list")
    if cached is None:
        return None
    units: list[tuple[paging.Key, Entry]] = []
    versions: dict[str, str] = {}
    columns = b""
    for name, cache in cached.caches.items():
        versions[name] = cache.version
        columns = columns or cache.columns
        units += [
            ((made.namespace, made.name, name), made)
            for made in cache.in_namespace(namespace)
            if cached.selects(made)
        ]
    version = paging.composite_version(versions)
    served, next_token, left = paging.page(units, limit, cont, version, key=lambda u: u[0])
    metadata: Obj = {"resourceVersion": version}
    if next_token:
        metadata["continue"] = next_token
    if left is not None:
        metadata["remainingItemCount"] = left
    headers = warning_headers(cached.warnings)
    if asked.wanted.format == "table":
        head: Obj = {
            "kind": "Table",
            "apiVersion": _table_version(asked.wanted),
            "metadata": metadata,
            "columnDefinitions": msgspec.Raw(_columns(columns)),
        }
        rows = (made.row(asked.include) for _, made in served)
        return await stream_list(request, head, "rows", rows, bytes, headers)
    head = {"kind": f"{kind.kind}List", "apiVersion": API_VERSION, "metadata": metadata}
    items = (made.item for _, made in served)
    return await stream_list(request, head, "items", items, bytes, headers)


def _table_version(wanted: table.Wanted) -> str:
    return f"{table.TABLE_GROUP}/{wanted.version or 'v1'}"


def _columns(child: bytes) -> bytes:
    return bytes(stitch.prepend(msgspec.Raw(child or b"[]"), _LOCATION_DEFINITION))


def _list_version(body: Any) -> str:
    """A child's list resourceVersion, from a stitchable Table or any other decoded list."""
    if isinstance(body, stitch.ChildTable):
        return body.metadata.resourceVersion
    return str((body.get("metadata") or {}).get("resourceVersion", ""))


def _stitched_table(
    answers: list[Answer],
    wanted: table.Wanted,
    include: table.IncludeObject,
    limit: int | None,
    cont: str | None,
    version: str,
) -> Obj:
    columns: list[Obj] = []
    units: list[Obj] = []
    for answer in answers:
        if not columns and answer.body.get("columnDefinitions"):
            columns = [_LOCATION_COLUMN.definition(), *answer.body["columnDefinitions"]]
        for row in answer.body.get("rows") or []:
            located = _row(row, answer.location)
            meta = (located.get("object") or {}).get("metadata") or {}
            units.append({"metadata": meta, "row": located})
    served, next_token, left = paging.page(units, limit, cont, version)
    rows = [unit["row"] for unit in served]
    if include == "None":
        rows = [{k: v for k, v in row.items() if k != "object"} for row in rows]
    tbl = table.table([], rows, resource_version=version, continue_=next_token, remaining=left)
    tbl["columnDefinitions"] = columns or [_LOCATION_COLUMN.definition()]
    tbl["apiVersion"] = f"{table.TABLE_GROUP}/{wanted.version or 'v1'}"
    return tbl


async def one(request: web.Request) -> web.StreamResponse:
    # One object from each child: the wait is the cost, not the work.
    async with request.app[WAITS].turn(Priority.GET):
        return await _one(request, _kind(request), request.match_info["namespace"])


def where(
    request: web.Request, plural: str, asked: str
) -> tuple[str, str, dict[str, Kube], list[str]]:
    """`name` or `name@location`: the name, the location named ("" if none), the clients of
    the Ready locations to ask (only that one, if named) and a warning for each left out.
    A location named that is not Ready is a 503, one that does not exist a 404."""
    name, _, only = asked.partition("@")
    clients, warnings = targets(request.app[HUB_CACHE].locations, request.app[FLEET], only or None)
    if only and only not in clients:
        names = {loc["metadata"]["name"] for loc in request.app[HUB_CACHE].locations.cache.values()}
        if only in names:
            why = next((w for w in warnings if w.startswith(f"location {only} ")), "")
            detail = why.partition(" left out: ")[2]
            if detail == NOT_CONNECTED:
                raise errors.unavailable(f"location {only}: {NOT_CONNECTED}")
            raise errors.unavailable(
                f"location {only} is not Ready: its objects cannot be reached now"
                + (f" ({detail})" if detail else "")
            )
        raise ApiError(
            errors.status(
                404,
                "NotFound",
                f'{plural}.{GROUP} "{asked}" not found: there is no location {only}',
            )
        )
    return name, only, clients, warnings


async def _one(request: web.Request, kind: Kind, namespace: str) -> web.StreamResponse:
    asked = request.match_info["name"]
    name, _, clients, warnings = where(request, kind.plural, asked)
    wanted = table.negotiate(request.headers.get("Accept"))
    user = user_of(request)
    accept = CHILD_TABLE if wanted.format == "table" else None
    path = kind.path(namespace, name)

    async def ask(kube: Kube, how: Asked) -> Any:
        headers = impersonating(user, accept)
        return await kube.request(
            "GET", path, headers=headers, idle_timeout=how.idle_timeout, answering=how.answering
        )

    answers = await fan_out(clients, ask, _timeout(request))
    found = [a for a in answers if a.error is None]
    warnings += [failed(a) for a in answers if a.error is not None and a.error.code != 404]
    headers = warning_headers(warnings)
    if not found:
        response = errors.status_response(errors.not_found(kind.plural, GROUP, asked).status)
        response.headers.extend(headers)
        return response
    if len(found) > 1:
        places = ", ".join(a.location for a in found)
        raise errors.conflict(
            f'{kind.plural}.{GROUP} "{name}" exists in several locations: {places}; '
            f"name one as {name}@{found[0].location}"
        )
    answer = found[0]
    if wanted.format == "table":
        body = dict(answer.body)
        body["rows"] = [_row(row, answer.location) for row in body.get("rows") or []]
        body["columnDefinitions"] = [
            _LOCATION_COLUMN.definition(),
            *(body.get("columnDefinitions") or []),
        ]
        body["apiVersion"] = f"{table.TABLE_GROUP}/{wanted.version or 'v1'}"
        return json_response(body, headers)
    return json_response(_located(answer.body, answer.location), headers)


# -- watch --------------------------------------------------------------------------------------


async def _watch(request: web.Request, kind: Kind, namespace: str | None) -> web.StreamResponse:
    """Every Ready child's watch, merged. The resourceVersion is the composite one of our
    list; a location it does not name starts from now, with its objects as ADDED events."""
    asked = _ask(request)
    wanted, include = asked.wanted, asked.include
    versions = paging.parse_composite(request.query.get("resourceVersion", ""))
    bookmarks = request.query.get("allowWatchBookmarks") == "true"
    timeout = min(int(request.query.get("timeoutSeconds") or _MAX_WATCH), _MAX_WATCH)
    cached = await _cached(request, kind, namespace, asked, "watch")
    if cached is not None:
        metrics.READS.labels(GROUP, "cache").inc()
        return await _watch_caches(request, kind, asked, cached, versions, bookmarks, timeout)
    metrics.READS.labels(GROUP, "children").inc()
    queue: asyncio.Queue[tuple[str, Obj]] = asyncio.Queue(maxsize=1000)
    seen = dict(versions)
    path = kind.path(namespace)

    async def follow(location: str, kube: Kube) -> None:
        backoff = Backoff(cap=10.0)
        while True:
            try:
                async for event in kube.watch(
                    path,
                    seen.get(location, ""),
                    timeout_seconds=timeout,
                    params=asked.params,
                    headers=asked.headers,
                ):
                    await queue.put((location, event))
                    backoff.reset()
            except ApiError as err:
                if err.code == 410:
                    await queue.put((location, {"type": "ERROR", "object": err.status}))
                    return
                log.info("watch of %s in %s: %s", kind.plural, location, err)
                await asyncio.sleep(backoff.next())

    stream = await WatchStream.open(request, warning_headers(asked.warnings))
    tasks = [asyncio.create_task(follow(n, k)) for n, k in asked.clients.items()]
    try:
        async with asyncio.timeout(timeout):
            while True:
                location, event = await queue.get()
                if event["type"] == "ERROR":
                    await stream.send("ERROR", event["object"])
                    break
                obj = event["object"]
                if version := _version_of(obj):
                    seen[location] = version
                if event["type"] == "BOOKMARK":
                    if bookmarks:
                        meta = {"resourceVersion": paging.composite_version(seen)}
                        await stream.send(
                            "BOOKMARK",
                            {"kind": kind.kind, "apiVersion": API_VERSION, "metadata": meta},
                        )
                    continue
                if obj.get("kind") == "Table":
                    body = _watch_table(obj, location, wanted, include)
                    await stream.send(event["type"], stream.table_event(body))
                else:
                    await stream.send(event["type"], _located(obj, location))
    except (TimeoutError, ConnectionResetError):
        pass
    finally:
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
    return stream.response


async def _watch_caches(
    request: web.Request,
    kind: Kind,
    asked: _Ask,
    cached: _Cached,
    versions: dict[str, str],
    bookmarks: bool,
    timeout: int,
) -> web.StreamResponse:
    """The watch from the children's caches: what each cache heard after the version our
    list gave for its location (410 Gone when its history no longer reaches back there, as
    kube-apiserver answers), or every object as ADDED for a location the version does not
    name; then every change as it comes. An object whose labels stop (or start) matching the
    selector is DELETED (ADDED) for this watch, as kube-apiserver's watch cache does."""
    changes: asyncio.Queue[tuple[str, Change] | None] = asyncio.Queue()
    seen = dict(versions)

    def hear(location: str, change: Change) -> None:
        if changes.qsize() > _MAX_BEHIND:
            changes.put_nowait(None)  # a watcher this far behind is let go, to list again
        else:
            changes.put_nowait((location, change))

    followed: list[TableCache] = []
    try:
        for name, cache in cached.caches.items():
            since = int(versions[name]) if name in versions and versions[name].isdigit() else None
            for change in cache.follow(hear, since):
                changes.put_nowait((name, change))
            followed.append(cache)
    except Gone as gone:
        for cache in followed:
            cache.unfollow(hear)
        stream = await WatchStream.open(request, warning_headers(cached.warnings))
        await stream.send("ERROR", errors.status(410, "Expired", str(gone)))
        return stream.response
    columns = _columns(next((c.columns for c in cached.caches.values() if c.columns), b""))
    stream = await WatchStream.open(request, warning_headers(cached.warnings))
    first = True
    try:
        async with asyncio.timeout(timeout):
            while (heard := await changes.get()) is not None:
                location, change = heard
                seen[location] = str(change.version)
                if change.type == "BOOKMARK":
                    if bookmarks:
                        meta = {"resourceVersion": paging.composite_version(seen)}
                        bookmark = {"kind": kind.kind, "apiVersion": API_VERSION, "metadata": meta}
                        await stream.send("BOOKMARK", bookmark)
                    continue
                event_type = _seen_as(change, cached)
                if event_type is None:
                    continue
                shown = change.entry if event_type != "DELETED" or change.entry else change.old
                assert shown is not None
                if asked.wanted.format == "table":
                    head = table_head(
                        _table_version(asked.wanted),
                        {"resourceVersion": str(change.version)},
                        columns if first else b"[]",
                    )
                    body = head + b"[" + shown.row(asked.include) + b"]}"
                    first = False
                else:
                    body = shown.typed
                await stream.response.write(
                    b'{"type":"' + event_type.encode() + b'","object":' + body + b"}\n"
                )
    except (TimeoutError, ConnectionResetError):
        pass
    finally:
        for cache in followed:
            cache.unfollow(hear)
    return stream.response


def _seen_as(change: Change, cached: _Cached) -> str | None:
    """The event a change is for a watch with this selection, if any."""
    now = change.entry is not None and change.type != "DELETED" and cached.selects(change.entry)
    before = change.old is not None and cached.selects(change.old)
    if change.type == "DELETED":
        return "DELETED" if before or (change.entry and cached.selects(change.entry)) else None
    if now:
        return "MODIFIED" if before else "ADDED"
    return "DELETED" if before else None


def _version_of(obj: Obj) -> str:
    """The resourceVersion an event carries (in its one row's object, for a Table)."""
    if obj.get("kind") == "Table":
        rows = obj.get("rows") or [{}]
        obj = rows[0].get("object") or {}
    return str((obj.get("metadata") or {}).get("resourceVersion", ""))


def _watch_table(
    tbl: Obj, location: str, wanted: table.Wanted, include: table.IncludeObject
) -> Obj:
    rows = [_row(row, location) for row in tbl.get("rows") or []]
    if include == "None":
        rows = [{k: v for k, v in row.items() if k != "object"} for row in rows]
    columns = tbl.get("columnDefinitions") or []
    return {
        **tbl,
        "apiVersion": f"{table.TABLE_GROUP}/{wanted.version or 'v1'}",
        "columnDefinitions": [_LOCATION_COLUMN.definition(), *columns] if columns else [],
        "rows": rows,
    }
