"""Serve discovery and OpenAPI: the documents the hub and kubectl read to know our groups.

All of them are pure functions of `apiserver.resources.RESOURCES`, built once at import and
served as bytes with an ETag: the aggregator polls them, and an unchanged answer costs it a 304.
They never depend on the children, so the APIServices stay Available through any outage.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from aiohttp import web

from apiserver.api import discovery, errors, openapi, table
from apiserver.api.registry import group_versions
from apiserver.resources import RESOURCES


@dataclass(frozen=True)
class _Document:
    body: bytes
    etag: str
    content_type: str = "application/json"

    @classmethod
    def of(cls, document: dict[str, Any], content_type: str = "application/json") -> _Document:
        body = openapi.serialize(document)
        return cls(body, f'"{openapi.spec_hash(document)[:32]}"', content_type)

    def answer(self, request: web.Request) -> web.Response:
        headers = {"ETag": self.etag, "Vary": "Accept"}
        if request.headers.get("If-None-Match") == self.etag:
            return web.Response(status=304, headers=headers)
        response = web.Response(body=self.body, headers=headers)
        response.headers["Content-Type"] = self.content_type
        return response


_GROUP_LIST = _Document.of(discovery.group_list(RESOURCES))
_AGGREGATED = {
    version: _Document.of(
        discovery.aggregated(RESOURCES, version), discovery.content_type_for_aggregated(version)
    )
    for version in table.DISCOVERY_VERSIONS
}
_OPENAPI_V2 = _Document.of(openapi.v2(RESOURCES))
_OPENAPI_V3 = _Document.of(openapi.v3_index(RESOURCES))
_OPENAPI_V3_GROUPS = {
    (group, version): _Document.of(document)
    for group, version in group_versions(RESOURCES)
    if (document := openapi.v3_group(RESOURCES, group, version)) is not None
}


def add_routes(app: web.Application) -> None:
    app.router.add_get("/apis", apis)
    app.router.add_get("/apis/{group}", group)
    app.router.add_get("/apis/{group}/{version}", group_version)
    app.router.add_get("/openapi/v2", openapi_v2)
    app.router.add_get("/openapi/v3", openapi_v3)
    app.router.add_get("/openapi/v3/apis/{group}/{version}", openapi_v3_group)


async def apis(request: web.Request) -> web.Response:
    wanted = table.negotiate(request.headers.get("Accept"))
    if wanted.format == "discovery":
        return _AGGREGATED[wanted.version].answer(request)
    return _GROUP_LIST.answer(request)


async def group(request: web.Request) -> web.Response:
    document = discovery.api_group(RESOURCES, request.match_info["group"])
    if document is None:
        raise errors.route_not_found()
    return _json(document)


async def group_version(request: web.Request) -> web.Response:
    info = request.match_info
    document = discovery.resource_list(RESOURCES, info["group"], info["version"])
    if document is None:
        raise errors.route_not_found()
    return _json(document)


async def openapi_v2(request: web.Request) -> web.Response:
    return _OPENAPI_V2.answer(request)


async def openapi_v3(request: web.Request) -> web.Response:
    return _OPENAPI_V3.answer(request)


async def openapi_v3_group(request: web.Request) -> web.Response:
    info = request.match_info
    document = _OPENAPI_V3_GROUPS.get((info["group"], info["version"]))
    if document is None:
        raise errors.route_not_found()
    return document.answer(request)


def _json(document: dict[str, Any]) -> web.Response:
    return web.Response(body=json.dumps(document).encode(), content_type="application/json")
