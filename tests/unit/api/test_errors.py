"""Failures read exactly like kube-apiserver's, and the middleware answers every one as a Status."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import make_mocked_request
from pytest_aiohttp import AiohttpClient

from apiserver.api import errors
from apiserver.kube.client import ApiError


def test_status_has_kube_apiserver_shape() -> None:
    err = errors.bad_request("bad thing")
    assert err.status == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": "bad thing",
        "reason": "BadRequest",
        "code": 400,
    }
    assert err.code == 400
    assert str(err) == "bad thing"


def test_not_found_names_the_qualified_resource() -> None:
    err = errors.not_found("deployments", "mc.kmc.dev", "web")
    assert err.code == 404
    assert err.status["reason"] == "NotFound"
    assert err.status["message"] == 'deployments.mc.kmc.dev "web" not found'
    assert err.status["details"] == {"name": "web", "group": "mc.kmc.dev", "kind": "deployments"}


def test_not_found_in_the_core_group_has_no_group() -> None:
    err = errors.not_found("pods", "", "x")
    assert err.status["message"] == 'pods "x" not found'
    assert err.status["details"] == {"name": "x", "kind": "pods"}


def test_forbidden_in_a_namespace() -> None:
    err = errors.forbidden("alice", "list", "pods", "remote.kmc.dev", "demo")
    assert err.code == 403
    assert err.status["reason"] == "Forbidden"
    assert err.status["message"] == (
        'pods.remote.kmc.dev is forbidden: User "alice" cannot list resource "pods" '
        'in API group "remote.kmc.dev" in the namespace "demo"'
    )
    assert err.status["details"] == {"group": "remote.kmc.dev", "kind": "pods"}


def test_forbidden_at_cluster_scope_with_a_subresource_a_name_and_a_reason() -> None:
    err = errors.forbidden(
        "bob",
        "get",
        "deployments",
        "mc.kmc.dev",
        "",
        subresource="locations",
        name="web",
        reason="no RBAC policy matched",
    )
    assert err.status["message"] == (
        'deployments.mc.kmc.dev "web" is forbidden: User "bob" cannot get resource '
        '"deployments/locations" in API group "mc.kmc.dev" at the cluster scope: '
        "no RBAC policy matched"
    )
    assert err.status["details"] == {"name": "web", "group": "mc.kmc.dev", "kind": "deployments"}


def test_forbidden_in_the_core_group_names_the_empty_group() -> None:
    err = errors.forbidden("system:anonymous", "get", "namespaces", "", "", name="demo")
    assert err.status["message"] == (
        'namespaces "demo" is forbidden: User "system:anonymous" cannot get resource '
        '"namespaces" in API group "" at the cluster scope'
    )


def test_forbidden_path() -> None:
    err = errors.forbidden_path("alice", "get", "/openapi/v2")
    assert err.code == 403
    assert err.status["message"] == 'forbidden: User "alice" cannot get path "/openapi/v2"'


def test_unauthorized() -> None:
    assert errors.unauthorized().status["message"] == "Unauthorized"
    assert errors.unauthorized().status["reason"] == "Unauthorized"
    assert errors.unauthorized().code == 401


@pytest.mark.parametrize(
    ("err", "code", "reason"),
    [
        (errors.conflict("web matches us-east, us-west"), 409, "Conflict"),
        (errors.not_acceptable("no"), 406, "NotAcceptable"),
        (errors.expired("too old resource version: 1 (5)"), 410, "Expired"),
        (errors.unavailable("us-east is unreachable"), 503, "ServiceUnavailable"),
        (errors.method_not_supported(), 405, "MethodNotAllowed"),
    ],
)
def test_codes_and_reasons(err: ApiError, code: int, reason: str) -> None:
    assert (err.code, err.status["code"], err.status["reason"]) == (code, code, reason)


def test_method_not_supported_words() -> None:
    generic = errors.method_not_supported()
    assert generic.status["message"] == (
        "the server does not allow this method on the requested resource"
    )
    assert generic.status["details"] == {}
    named = errors.method_not_supported("POST", "pods", "remote.kmc.dev")
    assert named.status["message"] == (
        "the server does not allow this method on the requested resource (post pods.remote.kmc.dev)"
    )
    assert named.status["details"] == {"group": "remote.kmc.dev", "kind": "pods"}


def test_timeout_is_prefixed_like_kube() -> None:
    err = errors.timeout("us-east did not answer in 10s", retry_after_seconds=2)
    assert err.code == 504
    assert err.status["message"] == "Timeout: us-east did not answer in 10s"
    assert err.status["details"] == {"retryAfterSeconds": 2}


def test_invalid_with_one_cause() -> None:
    cause = errors.invalid_value("Sometimes", 'must be one of "Split", "Replicate", "Single"')
    err = errors.invalid("Deployment", "mc.kmc.dev", "web", [("spec.type", cause)])
    assert err.code == 422
    assert err.status["reason"] == "Invalid"
    assert err.status["message"] == (
        'Deployment.mc.kmc.dev "web" is invalid: spec.type: Invalid value: "Sometimes": '
        'must be one of "Split", "Replicate", "Single"'
    )
    assert err.status["details"] == {
        "name": "web",
        "group": "mc.kmc.dev",
        "kind": "Deployment",
        "causes": [{"reason": "FieldValueInvalid", "message": cause, "field": "spec.type"}],
    }


def test_invalid_with_several_causes_is_bracketed() -> None:
    causes = [
        ("spec.weights.a", errors.invalid_value(-1, "must be greater than or equal to 0")),
        ("spec.pin", errors.invalid_value(["x"], "unknown location")),
    ]
    err = errors.invalid("Deployment", "mc.kmc.dev", "web", causes)
    assert err.status["message"] == (
        'Deployment.mc.kmc.dev "web" is invalid: [spec.weights.a: Invalid value: -1: '
        'must be greater than or equal to 0, spec.pin: Invalid value: ["x"]: unknown location]'
    )
    assert len(err.status["details"]["causes"]) == 2


@pytest.mark.parametrize(
    ("value", "shown"),
    [("x", '"x"'), (3, "3"), (2.5, "2.5"), (True, "true"), (None, "null"), ('a"b', '"a\\"b"')],
)
def test_invalid_value_formats_like_go(value: Any, shown: str) -> None:
    assert errors.invalid_value(value, "why") == f"Invalid value: {shown}: why"


def test_status_response() -> None:
    response = errors.status_response(errors.not_found("pods", "", "x").status)
    assert response.status == 404
    assert response.content_type == "application/json"
    no_code = errors.status_response({"kind": "Status", "message": "?"})
    assert no_code.status == 500
    retry = errors.status_response(errors.timeout("slow", retry_after_seconds=3).status)
    assert retry.headers["Retry-After"] == "3"


# --- the middleware -----------------------------------------------------------------------------


async def _raise_status(request: web.Request) -> web.Response:
    raise errors.not_found("pods", "remote.kmc.dev", "web")


async def _raise_api_error(request: web.Request) -> web.Response:
    raise ApiError.of(409, "AlreadyExists", 'deployments.apps "web" already exists')


async def _boom(request: web.Request) -> web.Response:
    raise RuntimeError("boom")


async def _created(request: web.Request) -> web.Response:
    return web.json_response({"kind": "Pod"}, status=201, headers={"X-Test": "kept"})


async def _too_big(request: web.Request) -> web.Response:
    raise web.HTTPRequestEntityTooLarge(max_size=10, actual_size=20)


async def _redirect(request: web.Request) -> web.Response:
    raise web.HTTPFound("/elsewhere")


@pytest.fixture
def app() -> web.Application:
    app = web.Application(middlewares=[errors.status_errors])
    app.router.add_get("/status", _raise_status)
    app.router.add_get("/api-error", _raise_api_error)
    app.router.add_get("/boom", _boom)
    app.router.add_get("/created", _created)
    app.router.add_get("/too-big", _too_big)
    app.router.add_get("/redirect", _redirect)
    return app


async def test_status_error_becomes_its_status(
    aiohttp_client: AiohttpClient, app: web.Application
) -> None:
    client = await aiohttp_client(app)
    response = await client.get("/status")
    assert response.status == 404
    assert response.content_type == "application/json"
    body = await response.json()
    assert body["message"] == 'pods.remote.kmc.dev "web" not found'
    assert body["kind"] == "Status"


async def test_api_error_from_a_cluster_travels_unchanged(
    aiohttp_client: AiohttpClient, app: web.Application
) -> None:
    client = await aiohttp_client(app)
    response = await client.get("/api-error")
    assert response.status == 409
    body = await response.json()
    assert body["reason"] == "AlreadyExists"
    assert body["message"] == 'deployments.apps "web" already exists'


async def test_unknown_path_is_a_kube_not_found(
    aiohttp_client: AiohttpClient, app: web.Application
) -> None:
    client = await aiohttp_client(app)
    response = await client.get("/apis/nothing/here")
    assert response.status == 404
    body = await response.json()
    assert body["reason"] == "NotFound"
    assert body["message"] == "the server could not find the requested resource"
    assert body["details"] == {}


async def test_wrong_method_is_a_kube_method_not_allowed(
    aiohttp_client: AiohttpClient, app: web.Application
) -> None:
    client = await aiohttp_client(app)
    response = await client.post("/status")
    assert response.status == 405
    body = await response.json()
    assert body["reason"] == "MethodNotAllowed"
    assert body["message"] == "the server does not allow this method on the requested resource"


async def test_unexpected_exception_is_logged_and_answered_500(
    aiohttp_client: AiohttpClient, app: web.Application, caplog: pytest.LogCaptureFixture
) -> None:
    client = await aiohttp_client(app)
    with caplog.at_level(logging.ERROR, logger="apiserver.api.errors"):
        response = await client.get("/boom")
    assert response.status == 500
    body = await response.json()
    assert body["reason"] == "InternalError"
    assert body["message"] == "Internal error occurred: boom"
    assert body["details"] == {"causes": [{"message": "boom"}]}
    assert "Traceback" not in await response.text()
    assert any(record.exc_info for record in caplog.records)


async def test_normal_responses_pass_untouched(
    aiohttp_client: AiohttpClient, app: web.Application
) -> None:
    client = await aiohttp_client(app)
    response = await client.get("/created")
    assert response.status == 201
    assert response.headers["X-Test"] == "kept"
    assert await response.json() == {"kind": "Pod"}
    redirect = await client.get("/redirect", allow_redirects=False)
    assert redirect.status == 302


async def test_aiohttp_errors_become_statuses(
    aiohttp_client: AiohttpClient, app: web.Application
) -> None:
    client = await aiohttp_client(app)
    response = await client.get("/too-big")
    assert response.status == 413
    body = await response.json()
    assert body["reason"] == "RequestEntityTooLarge"
    assert body["message"].startswith("Maximum request body size 10")


async def test_cancellation_propagates() -> None:
    async def cancelled(request: web.Request) -> web.StreamResponse:
        raise asyncio.CancelledError

    with pytest.raises(asyncio.CancelledError):
        await errors.status_errors(make_mocked_request("GET", "/"), cancelled)
