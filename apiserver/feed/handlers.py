"""`GET /apis/mc.kmc.dev/v1alpha1/workfeeds?fieldSelector=metadata.name=<location>`: a pull
location's work feed (`feed/resources.py` says why it is a resource of its own).

A list (`WorkFeedList`: the child objects, namespaces first, and `kept`: those whose
overrides do not apply there, to be left as they are), or with `watch=true` kubectl's watch:
the whole feed as ADDED events, a BOOKMARK annotated `k8s.io/initial-events-end`, then the
changes, and with `allowWatchBookmarks=true` a BOOKMARK after every quiet `BOOKMARK_EVERY`
seconds. A watch never resumes from a resourceVersion (a feed object is made from several
hub objects; none orders it): every watch starts from the whole state. See docs/pull.md.

Authorized by the guard like every request: `list` or `watch` of `workfeeds` in
`mc.kmc.dev`, with the name the field selector pins (kube-apiserver's request-info, which
`api/requestinfo.py` follows), so a role's `resourceNames` decide which feeds an agent
reads, here and in the hub's aggregator. The location served is that very name: a list or
watch that does not pin exactly one (another field, a label selector, none) is a 400, and a
get of a name a 405 (the feed is not one object).
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterable, Mapping

from aiohttp import web

from apiserver import metrics
from apiserver.api import errors, requestinfo, selectors
from apiserver.api.respond import WatchStream, json_response, object_list
from apiserver.contract import MC_GROUP, VERSION
from apiserver.feed.resources import KIND, PLURAL
from apiserver.feed.work import FEEDS, Feeds
from apiserver.hubcache import HUB_CACHE
from apiserver.kinds import PLACED, Kind
from apiserver.objects import Obj
from apiserver.sync.work import Sent, kept_refs, ordered

API_VERSION = f"{MC_GROUP}/{VERSION}"
PATH = f"/apis/{API_VERSION}/{PLURAL}"
INITIAL_EVENTS_END = "k8s.io/initial-events-end"
KEPT = f"{MC_GROUP}/kept"  # on the initial-events-end bookmark: the `kept` references, JSON
# On it too: the imported kinds (CRDs' kinds the kinds table does not place), JSON, so an
# agent watches them for drift and orphans from its start, not only once it writes one.
KINDS = f"{MC_GROUP}/kinds"
BOOKMARK_EVERY = 30.0
_MAX_WATCH = 1800
_ONE = "fieldSelector=metadata.name=<location>"


def add_routes(app: web.Application) -> None:
    app.router.add_get(PATH, work)
    app.router.add_get(PATH + "/{name}", _not_one_object)


async def _not_one_object(request: web.Request) -> web.StreamResponse:
    raise errors.method_not_supported("get", PLURAL, MC_GROUP)


async def work(request: web.Request) -> web.StreamResponse:
    feeds: Feeds = request.app[FEEDS]
    # The request as the guard (and the hub before it) authorized it: its verb, and the name
    # its field selector pins, are what is served.
    info = requestinfo.parse(request.method, request.path, request.query)
    location = _location(info, request.query)
    timeout = _timeout(request)
    await request.app[HUB_CACHE].wait_synced()
    if not feeds.knows(location):
        raise errors.not_found(PLURAL, MC_GROUP, location)
    await feeds.decided()
    if info.verb == "watch":
        return await _watch(request, feeds, location, timeout)
    entries = feeds.work(location)
    items = [entry for key in ordered(entries) if isinstance(entry := entries[key], dict)]
    body = object_list(f"{KIND}List", API_VERSION, items, feeds.version())
    body["kept"] = kept_refs(entries)
    return json_response(body)


def _location(info: requestinfo.RequestInfo, query: Mapping[str, str]) -> str:
    """The one location a list or watch asks for: its field selector must be
    `metadata.name=<location>` and nothing else (the feed's items are not WorkFeeds: no other
    field or label of theirs selects a feed)."""
    if query.get("labelSelector"):
        raise errors.bad_request(f"a work feed is not selected by labels: {_ONE}")
    fields = selectors.parse_fields(query.get("fieldSelector"))
    pinned = [(r.path, r.value, r.negated) for r in fields.requirements]
    if not info.name or pinned != [("metadata.name", info.name, False)]:
        raise errors.bad_request(f"a work feed is read one location at a time: {_ONE}")
    return info.name


def _timeout(request: web.Request) -> float:
    text = request.query.get("timeoutSeconds")
    if not text:
        return _MAX_WATCH
    try:
        seconds = int(text)
    except ValueError:
        raise errors.bad_request(f"timeoutSeconds: invalid value {text!r}") from None
    return float(min(max(seconds, 0), _MAX_WATCH)) or _MAX_WATCH


async def _watch(
    request: web.Request, feeds: Feeds, location: str, timeout: float
) -> web.StreamResponse:
    bookmarks = request.query.get("allowWatchBookmarks") == "true"
    stream = await WatchStream.open(request)
    watcher = feeds.watch(location)  # before computing: nothing between is missed
    metrics.FEED_WATCHES.labels(location).inc()
    metrics.FEED_WATCHES_OPEN.labels(location).inc()
    ends = time.monotonic() + timeout
    namespaces = feeds.cache.namespaces.cache
    try:
        entries = feeds.objects(location)
        sent = Sent()  # what this watcher holds: a change to a few objects costs those few
        for event in sent.whole(entries, namespaces):
            await stream.send(event.type, event.object)
        initial = {
            INITIAL_EVENTS_END: "true",
            KEPT: json.dumps(kept_refs(entries)),
            KINDS: json.dumps(imported_refs(feeds.cache.kinds.values())),
        }
        await stream.send("BOOKMARK", _bookmark(feeds, location, initial))
        while (left := ends - time.monotonic()) > 0:
            try:
                async with asyncio.timeout(min(left, BOOKMARK_EVERY)):  # never wait_for: leader.py
                    await watcher.woken.wait()
            except TimeoutError:
                if bookmarks and ends - time.monotonic() > 0:
                    await stream.send("BOOKMARK", _bookmark(feeds, location))
                continue
            everything, keys = watcher.take()
            if everything:
                events = sent.whole(feeds.objects(location), namespaces)
            else:
                events = sent.update(feeds.again(location, keys), namespaces)
            for event in events:
                await stream.send(event.type, event.object)
    except ConnectionResetError:
        pass  # the client went away
    finally:
        feeds.close(watcher)
        metrics.FEED_WATCHES_OPEN.labels(location).dec()
    return stream.response


def imported_refs(kinds: Iterable[Kind]) -> list[Obj]:
    """The kinds the hub places that the kinds table does not (imported CRDs' kinds, and
    those it knows that join at run time from their CRD, such as HTTPRoute): an agent knows
    the others, and needs these to watch them."""
    return [
        {
            "apiVersion": k.api_version,
            "kind": k.kind,
            "plural": k.plural,
            "namespaced": k.namespaced,
        }
        for k in sorted(kinds, key=lambda k: k.key)
        if k.crd and k.role is not None and k.key not in PLACED
    ]


def _bookmark(feeds: Feeds, location: str, annotations: dict[str, str] | None = None) -> Obj:
    """A BOOKMARK's object: the feed itself, named like its location."""
    metadata: Obj = {"name": location, "resourceVersion": feeds.version()}
    if annotations:
        metadata["annotations"] = annotations
    return {"apiVersion": API_VERSION, "kind": KIND, "metadata": metadata}
