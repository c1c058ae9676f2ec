"""The admission webhook answers only the hub's apiserver (its front-proxy client
certificate); anyone else gets a bare 401 that names nothing, Locations least of all."""

from __future__ import annotations

import json
from typing import Any, ClassVar, cast

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from apiserver import admission
from apiserver.api.authn import AUTHENTICATOR, Authenticator, FrontProxyConfig, Unauthenticated
from apiserver.api.errors import status_errors
from apiserver.api.guard import guard
from apiserver.hubcache import HUB_CACHE

from .test_authn import (
    CLIENT_CA,
    FRONT_PROXY_CA,
    FRONT_PROXY_CLIENT,
    authenticator,
    der,
    hub_data,
    make_cert,
)

REVIEW = {
    "apiVersion": "admission.k8s.io/v1",
    "kind": "AdmissionReview",
    "request": {
        "uid": "u-1",
        "kind": {"kind": "Deployment"},
        "object": {
            "metadata": {
                "name": "web",
                "namespace": "demo",
                "annotations": {"kmc.dev/strategy": '{"pin": ["mars"]}'},
            }
        },
    },
}


def test_the_front_proxy_certificate_is_the_hub_calling() -> None:
    assert authenticator().authenticate_caller(der(FRONT_PROXY_CLIENT)) == "front-proxy-client"


def test_anyone_else_is_refused() -> None:
    auth = authenticator()
    user = make_cert(CLIENT_CA, "alice")
    for cert, why in (
        (None, "no client certificate"),
        (der(user), "not signed by the hub's request-header CA"),
        (der(make_cert(FRONT_PROXY_CA, "someone")), "not in requestheader-allowed-names"),
    ):
        with pytest.raises(Unauthenticated) as refused:
            auth.authenticate_caller(cert)
        assert why in refused.value.reason
    with pytest.raises(Unauthenticated):
        Authenticator().authenticate_caller(der(FRONT_PROXY_CLIENT))  # not configured yet


class _Locations:
    cache: ClassVar[dict[str, Any]] = {"us-east": {}, "eu-west": {}}


class _Cache:
    locations = _Locations()


async def test_an_unauthenticated_review_gets_401_and_no_location_names() -> None:
    app = web.Application(middlewares=[status_errors, guard])
    app[AUTHENTICATOR] = Authenticator(FrontProxyConfig.from_configmap(hub_data()))
    app[HUB_CACHE] = cast(Any, _Cache())
    admission.add_routes(app)
    async with TestClient(TestServer(app)) as client:
        answer = await client.post(admission.PATH, data=json.dumps(REVIEW))
        body = await answer.text()
    assert answer.status == 401
    assert json.loads(body)["reason"] == "Unauthorized"
    for name in ("us-east", "eu-west", "mars"):
        assert name not in body
