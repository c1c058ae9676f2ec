"""Credentials that expire are renewed on a 401 and the request tried once more, as client-go
does: the client object stays the same, so everyone holding it goes on with the new ones."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

import aiohttp
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from apiserver.kube.client import ApiError, Credentials, Kube


class Cluster:
    """Accepts only the bearer token in `valid`; counts what it was sent."""

    def __init__(self) -> None:
        self.valid = "new"
        self.seen: list[str] = []

    async def handle(self, request: web.Request) -> web.Response:
        token = request.headers.get("Authorization", "").removeprefix("Bearer ")
        self.seen.append(token)
        if token != self.valid:
            status = {"kind": "Status", "code": 401, "reason": "Unauthorized", "message": "no"}
            return web.json_response(status, status=401)
        return web.json_response({"kind": "Namespace", "metadata": {"name": "ok"}})


@contextlib.asynccontextmanager
async def serving(cluster: Cluster) -> AsyncIterator[tuple[TestServer, aiohttp.ClientSession]]:
    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", cluster.handle)
    server = TestServer(app)
    await server.start_server()
    try:
        async with aiohttp.ClientSession() as session:
            yield server, session
    finally:
        await server.close()


def credentials(server: TestServer, token: str, renewed: list[str]) -> Credentials:
    base = str(server.make_url("")).rstrip("/")

    async def renew() -> Credentials:
        fresh = renewed.pop(0)
        return Credentials(base, False, fresh, renew)

    return Credentials(base, False, token, renew)


async def test_a_401_renews_the_credentials_and_tries_once_more() -> None:
    cluster = Cluster()
    async with serving(cluster) as (server, session):
        kube = Kube(session, credentials(server, "old", ["new"]), "child")
        assert (await kube.get("/api/v1/namespaces/ok"))["metadata"]["name"] == "ok"
        assert cluster.seen == ["old", "new"]
        assert kube.creds.token == "new"  # kept for the next requests
        await kube.get("/api/v1/namespaces/ok")
        assert cluster.seen[-1] == "new"


async def test_credentials_that_renew_to_the_same_still_answer_401_once_tried_again() -> None:
    cluster = Cluster()
    cluster.valid = "never"
    async with serving(cluster) as (server, session):
        kube = Kube(session, credentials(server, "old", ["other", "more"]), "child")
        with pytest.raises(ApiError) as refused:
            await kube.get("/api/v1/namespaces/ok")
        assert refused.value.code == 401
        assert cluster.seen == ["old", "other"]  # one retry, not a loop


async def test_credentials_with_nothing_to_renew_keep_the_401() -> None:
    cluster = Cluster()
    async with serving(cluster) as (server, session):
        base = str(server.make_url("")).rstrip("/")
        kube = Kube(session, Credentials(base, False, "old"), "child")
        with pytest.raises(ApiError):
            await kube.get("/api/v1/namespaces/ok")
        assert cluster.seen == ["old"]


async def test_a_watch_refused_renews_for_the_next_watch() -> None:
    cluster = Cluster()
    async with serving(cluster) as (server, session):
        kube = Kube(session, credentials(server, "old", ["new"]), "child")
        with pytest.raises(ApiError):
            async for _ in kube.watch("/api/v1/namespaces", "1"):
                pass
        assert kube.creds.token == "new"
