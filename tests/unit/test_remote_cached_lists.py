"""A remote.kmc.dev list from the children's caches shows each caller what each child lets
them list: a child that denies is left out with its own words, one that cannot answer the
review is left out and named, and nothing of either comes from the cache."""

from __future__ import annotations

import asyncio
import json
from typing import Any, cast

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from apiserver.api import paging
from apiserver.api.authn import UserInfo
from apiserver.api.authz import Attributes, Decision
from apiserver.hubcache import HUB_CACHE
from apiserver.kinds import REMOTE as KINDS
from apiserver.kube.client import Kube
from apiserver.locations.fleet import FLEET
from apiserver.objects import Obj
from apiserver.options import OPTIONS
from apiserver.remote import handlers
from apiserver.remote.cache import (
    CHILD_AUTHZ,
    REMOTE_CACHES,
    ChildAuthorizers,
    RemoteCaches,
    TableCache,
    entry,
)

PODS = KINDS["pods"]
pytestmark = pytest.mark.filterwarnings("ignore::aiohttp.web.NotAppKeyWarning")
LOCATIONS_ = ("eu-west", "us-east", "us-west")


def pod(location: str, name: str, **labels: str) -> Obj:
    meta = {"name": name, "namespace": "demo", "resourceVersion": "5", "labels": labels}
    return {
        "cells": [name, "Running"],
        "object": {"kind": "Pod", "apiVersion": "v1", "metadata": meta},
    }


class Caches:
    def __init__(self) -> None:
        self.by_location: dict[str, TableCache] = {}
        for location in LOCATIONS_:
            cache = TableCache(location, cast(Kube, object()), PODS, 100)
            for made in (
                entry(location, pod(location, "web-1", app="web")),
                entry(location, pod(location, "db-1", app="db")),
            ):
                cache.entries[(made.namespace, made.name)] = made
            cache.columns = json.dumps([{"name": "Name"}, {"name": "Status"}]).encode()
            cache.version = f"{len(location)}0"
            cache.synced.set()
            cache.watching = True
            self.by_location[location] = cache

    def get(self, location: str, kube: Any, kind: Any) -> TableCache:
        return self.by_location[location]


class Authz:
    """us-east denies, us-west cannot answer, eu-west allows."""

    def __init__(self) -> None:
        self.asked: list[tuple[str, Attributes]] = []

    async def authorize(
        self, location: str, kube: Any, user: UserInfo, attrs: Attributes
    ) -> Decision:
        self.asked.append((location, attrs))
        if location == "us-east":
            return Decision(False, "")
        if location == "us-west":
            return Decision(
                False, error="the request could not be authorized by location us-west: boom"
            )
        return Decision(True, "RBAC: allowed")


class HubCache:
    def __init__(self) -> None:
        ready = [{"type": "Ready", "status": "True"}]
        self.locations = type("I", (), {})()
        self.locations.cache = {
            n: {"metadata": {"name": n}, "status": {"conditions": ready}} for n in LOCATIONS_
        }


class Fleet:
    def get(self, name: str) -> object:
        return object()

    def tunnel(self, name: str) -> object:
        return None  # push locations only: no reverse tunnels


class Options:
    remote_timeout = 3.0


def served(query: str, accept: str) -> tuple[Obj, list[str], Authz]:
    """Serve one list from the caches through a real aiohttp server, as `alice`."""
    authz = Authz()

    async def handler(request: web.Request) -> web.StreamResponse:
        request["kmc.user"] = UserInfo("alice", groups=("system:authenticated",))
        asked = handlers._ask(request)
        limit, cont = paging.limit_of(request.query), request.query.get("continue")
        answer = await handlers._from_caches(request, PODS, "demo", asked, limit, cont)
        assert answer is not None
        return answer

    async def ask() -> tuple[Obj, list[str]]:
        app = web.Application()
        app[REMOTE_CACHES] = cast(RemoteCaches, Caches())
        app[CHILD_AUTHZ] = cast(ChildAuthorizers, authz)
        app[HUB_CACHE] = cast(Any, HubCache())
        app[FLEET] = cast(Any, Fleet())
        app[OPTIONS] = cast(Any, Options())
        app.router.add_get("/pods", handler)
        async with TestClient(TestServer(app)) as client:
            response = await client.get(f"/pods?{query}", headers={"Accept": accept})
            assert response.status == 200
            return await response.json(), response.headers.getall("Warning", [])

    body, warnings = asyncio.run(ask())
    return body, warnings, authz


TABLE = "application/json;as=Table;v=v1;g=meta.k8s.io"


def test_only_the_child_that_allows_is_shown_and_the_others_are_named() -> None:
    tbl, warnings, authz = served("", TABLE)
    assert [row["cells"] for row in tbl["rows"]] == [
        ["eu-west", "db-1", "Running"],
        ["eu-west", "web-1", "Running"],
    ]
    assert [c["name"] for c in tbl["columnDefinitions"]] == ["Location", "Name", "Status"]
    assert tbl["rows"][0]["object"]["kind"] == "PartialObjectMetadata"
    denied = next(w for w in warnings if "us-east" in w)
    assert 'pods is forbidden: User \\"alice\\" cannot list resource \\"pods\\"' in denied
    assert 'in the namespace \\"demo\\"' in denied
    failed = next(w for w in warnings if "us-west" in w)
    assert "could not be authorized by location us-west: boom" in failed
    assert {attrs.verb for _, attrs in authz.asked} == {"list"}
    assert {attrs.namespace for _, attrs in authz.asked} == {"demo"}
    # The list's version names only the child it shows.
    assert set(paging.parse_composite(tbl["metadata"]["resourceVersion"])) == {"eu-west"}


def test_selectors_paging_and_plain_lists() -> None:
    listing, _, _ = served("labelSelector=app%3Dweb", "application/json")
    assert listing["kind"] == "PodList" and listing["apiVersion"] == "remote.kmc.dev/v1alpha1"
    assert [i["metadata"]["name"] for i in listing["items"]] == ["web-1"]
    assert listing["items"][0]["metadata"]["annotations"] == {"kmc.dev/location": "eu-west"}
    assert "kind" not in listing["items"][0]
    first, _, _ = served("limit=1", TABLE)
    assert len(first["rows"]) == 1 and first["metadata"]["remainingItemCount"] == 1
    rest, _, _ = served(f"limit=5&continue={first['metadata']['continue']}", TABLE)
    assert [r["cells"][1] for r in rest["rows"]] == ["web-1"]
    whole, _, _ = served("includeObject=Object", TABLE)
    assert whole["rows"][0]["object"]["kind"] == "Pod"
