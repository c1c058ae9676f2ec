"""Serve discovery and OpenAPI: the documents the hub and kubectl read to know our groups.

All of them are pure functions of the resources the wings serve (`mc/resources.py`,
`remote/resources.py`), built once when the routes are added and served as bytes with an
ETag: the aggregator polls them, and an unchanged answer costs it a 304.
They never depend on the children, so the APIServices stay Available through any outage.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from aiohttp import web

from apiserver.api import discovery, errors, openapi, table
from apiserver.api.registry import Resource, group_versions
from apiserver.objects import Obj


@dataclass(frozen=True)
class _Document:
    body: bytes
    etag: str
    content_type: str = "application/json"

    @classmethod
    def of(cls, document: Obj, content_type: str = "application/json") -> _Document:
        body = openapi.serialize(document)
        return cls(body, f'"{openapi.spec_hash(document)[:32]}"', content_type)

    def answer(self, request: web.Request) -> web.Response:
        headers = {"ETag": self.etag, "Vary": "Accept"}
        if request.headers.get("If-None-Match") == self.etag:
            return web.Response(status=304, headers=headers)
        response = web.Response(body=self.body, headers=headers)
        response.headers["Content-Type"] = self.content_type
        return response


class Documents:
    """Every document, rendered once from `resources`."""

    def __init__(self, resources: tuple[Resource, ...]) -> None:
        self.resources = resources
        self.group_list = _Document.of(discovery.group_list(resources))
        self.aggregated = {
            version: _Document.of(
                discovery.aggregated(resources, version),
                discovery.content_type_for_aggregated(version),
            )
            for version in table.DISCOVERY_VERSIONS
        }
        self.openapi_v2 = _Document.of(openapi.v2(resources))
        self.openapi_v3 = _Document.of(openapi.v3_index(resources))
        self.openapi_v3_groups = {
            (group, version): _Document.of(document)
            for group, version in group_versions(resources)
            if (document := openapi.v3_group(resources, group, version)) is not None
        }

    async def apis(self, request: web.Request) -> web.Response:
        wanted = table.negotiate(request.headers.get("Accept"))
        if wanted.format == "discovery":
            return self.aggregated[wanted.version].answer(request)
        return self.group_list.answer(request)

    async def group(self, request: web.Request) -> web.Response:
        document = discovery.api_group(self.resources, request.match_info["group"])
        if document is None:
            raise errors.route_not_found()
        return _json(document)

    async def group_version(self, request: web.Request) -> web.Response:
        info = request.match_info
        document = discovery.resource_list(self.resources, info["group"], info["version"])
        if document is None:
            raise errors.route_not_found()
        return _json(document)

    async def v2(self, request: web.Request) -> web.Response:
        return self.openapi_v2.answer(request)

    async def v3(self, request: web.Request) -> web.Response:
        return self.openapi_v3.answer(request)

    async def v3_group(self, request: web.Request) -> web.Response:
        info = request.match_info
        document = self.openapi_v3_groups.get((info["group"], info["version"]))
        if document is None:
            raise errors.route_not_found()
        return document.answer(request)


def add_routes(app: web.Application, resources: tuple[Resource, ...]) -> None:
    documents = Documents(resources)
    app.router.add_get("/apis", documents.apis)
    app.router.add_get("/apis/{group}", documents.group)
    app.router.add_get("/apis/{group}/{version}", documents.group_version)
    app.router.add_get("/openapi/v2", documents.v2)
    app.router.add_get("/openapi/v3", documents.v3)
    app.router.add_get("/openapi/v3/apis/{group}/{version}", documents.v3_group)


def _json(document: Obj) -> web.Response:
    return web.Response(body=json.dumps(document).encode(), content_type="application/json")
