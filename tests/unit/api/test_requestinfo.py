"""A URL means here what it means to kube-apiserver (cases from its requestinfo_test.go)."""

# ruff: noqa: E501 -- the case table reads best one request per line

from __future__ import annotations

from urllib.parse import parse_qsl, urlsplit

import pytest

from apiserver.api import requestinfo
from apiserver.api.requestinfo import RequestInfo
from apiserver.kube.client import ApiError


def parse(method: str, url: str) -> RequestInfo:
    split = urlsplit(url)
    return requestinfo.parse(
        method, split.path, dict(parse_qsl(split.query, keep_blank_values=True))
    )


# method, url, verb, prefix, group, version, namespace, resource, subresource, name, parts
CASES = [
    ("GET", "/api/v1/namespaces", "list", "api", "", "v1", "", "namespaces", "", "", ["namespaces"]),
    ("GET", "/api/v1/namespaces/other", "get", "api", "", "v1", "other", "namespaces", "", "other", ["namespaces", "other"]),
    ("GET", "/api/v1/namespaces/other/pods", "list", "api", "", "v1", "other", "pods", "", "", ["pods"]),
    ("GET", "/api/v1/namespaces/other/pods/foo", "get", "api", "", "v1", "other", "pods", "", "foo", ["pods", "foo"]),
    ("HEAD", "/api/v1/namespaces/other/pods/foo", "get", "api", "", "v1", "other", "pods", "", "foo", ["pods", "foo"]),
    ("GET", "/api/v1/pods", "list", "api", "", "v1", "", "pods", "", "", ["pods"]),
    ("HEAD", "/api/v1/pods", "list", "api", "", "v1", "", "pods", "", "", ["pods"]),
    ("PATCH", "/api/v1/namespaces/new-namespace", "patch", "api", "", "v1", "new-namespace", "namespaces", "", "new-namespace", ["namespaces", "new-namespace"]),
    # special verbs
    ("GET", "/api/v1/proxy/namespaces/other/pods/foo", "proxy", "api", "", "v1", "other", "pods", "", "foo", ["pods", "foo"]),
    ("GET", "/api/v1/proxy/namespaces/other/pods/foo/subpath/not/a/subresource", "proxy", "api", "", "v1", "other", "pods", "", "foo", ["pods", "foo", "subpath", "not", "a", "subresource"]),
    ("GET", "/api/v1/watch/pods", "watch", "api", "", "v1", "", "pods", "", "", ["pods"]),
    ("GET", "/api/v1/pods?watch=true", "watch", "api", "", "v1", "", "pods", "", "", ["pods"]),
    ("GET", "/api/v1/pods?watch=false", "list", "api", "", "v1", "", "pods", "", "", ["pods"]),
    ("GET", "/api/v1/watch/namespaces/other/pods", "watch", "api", "", "v1", "other", "pods", "", "", ["pods"]),
    ("GET", "/api/v1/namespaces/other/pods?watch=1", "watch", "api", "", "v1", "other", "pods", "", "", ["pods"]),
    ("GET", "/api/v1/namespaces/other/pods?watch=0", "list", "api", "", "v1", "other", "pods", "", "", ["pods"]),
    # subresources
    ("GET", "/api/v1/namespaces/other/pods/foo/status", "get", "api", "", "v1", "other", "pods", "status", "foo", ["pods", "foo", "status"]),
    ("GET", "/api/v1/namespaces/other/pods/foo/proxy/subpath", "get", "api", "", "v1", "other", "pods", "proxy", "foo", ["pods", "foo", "proxy", "subpath"]),
    ("PUT", "/api/v1/namespaces/other/finalize", "update", "api", "", "v1", "other", "namespaces", "finalize", "other", ["namespaces", "other", "finalize"]),
    ("PUT", "/api/v1/namespaces/other/status", "update", "api", "", "v1", "other", "namespaces", "status", "other", ["namespaces", "other", "status"]),
    # verbs
    ("PATCH", "/api/v1/namespaces/other/pods/foo", "patch", "api", "", "v1", "other", "pods", "", "foo", ["pods", "foo"]),
    ("DELETE", "/api/v1/namespaces/other/pods/foo", "delete", "api", "", "v1", "other", "pods", "", "foo", ["pods", "foo"]),
    ("POST", "/api/v1/namespaces/other/pods", "create", "api", "", "v1", "other", "pods", "", "", ["pods"]),
    ("DELETE", "/api/v1/nodes", "deletecollection", "api", "", "v1", "", "nodes", "", "", ["nodes"]),
    ("DELETE", "/api/v1/namespaces", "deletecollection", "api", "", "v1", "", "namespaces", "", "", ["namespaces"]),
    ("DELETE", "/apis/extensions/v1/namespaces/other/pods", "deletecollection", "apis", "extensions", "v1", "other", "pods", "", "", ["pods"]),
    ("POST", "/apis/extensions/v1beta3/namespaces/other/pods", "create", "apis", "extensions", "v1beta3", "other", "pods", "", "", ["pods"]),
    # ours
    ("GET", "/apis/mc.kmc.dev/v1alpha1/namespaces/demo/deployments/web/locations", "get", "apis", "mc.kmc.dev", "v1alpha1", "demo", "deployments", "locations", "web", ["deployments", "web", "locations"]),
    ("PUT", "/apis/mc.kmc.dev/v1alpha1/namespaces/demo/deployments/web/strategy", "update", "apis", "mc.kmc.dev", "v1alpha1", "demo", "deployments", "strategy", "web", ["deployments", "web", "strategy"]),
    ("GET", "/apis/remote.kmc.dev/v1alpha1/namespaces/demo/pods/web-1@us-east", "get", "apis", "remote.kmc.dev", "v1alpha1", "demo", "pods", "", "web-1@us-east", ["pods", "web-1@us-east"]),
    ("GET", "/apis/remote.kmc.dev/v1alpha1/pods?watch=true&resourceVersion=abc", "watch", "apis", "remote.kmc.dev", "v1alpha1", "", "pods", "", "", ["pods"]),
    ("GET", "/apis/remote.kmc.dev/v1alpha1/watch/namespaces/demo/pods/web", "watch", "apis", "remote.kmc.dev", "v1alpha1", "demo", "pods", "", "web", ["pods", "web"]),
]  # fmt: skip


@pytest.mark.parametrize(
    ("method", "url", "verb", "prefix", "group", "version", "namespace", "resource", "sub", "name", "parts"),
    CASES,
)  # fmt: skip
def test_resource_requests(
    method: str,
    url: str,
    verb: str,
    prefix: str,
    group: str,
    version: str,
    namespace: str,
    resource: str,
    sub: str,
    name: str,
    parts: list[str],
) -> None:
    info = parse(method, url)
    assert info.is_resource_request
    assert info.path == urlsplit(url).path
    assert (info.verb, info.api_prefix, info.group, info.version) == (verb, prefix, group, version)
    assert (info.namespace, info.resource, info.subresource, info.name) == (
        namespace,
        resource,
        sub,
        name,
    )
    assert list(info.parts) == parts


@pytest.mark.parametrize(
    "url",
    [
        "/",
        "",
        "/api",
        "/api/v1",
        "/api/version/",
        "/apis",
        "/apis/mc.kmc.dev",
        "/apis/mc.kmc.dev/v1alpha1",
        "/apis/group/version/",
        "/badprefix/version/resource",
        "/apis/version/resource",
        "/openapi/v2",
        "/openapi/v3/apis/mc.kmc.dev/v1alpha1",
        "/healthz",
        "/readyz/ping",
    ],
)
def test_non_resource_requests(url: str) -> None:
    info = requestinfo.parse("GET", url, {})
    assert not info.is_resource_request
    assert info.verb == "get"
    assert info.path == url
    assert (info.group, info.resource, info.name) == ("", "", "")


def test_non_resource_verb_is_the_lowercase_method() -> None:
    assert requestinfo.parse("POST", "/healthz", {}).verb == "post"


def test_a_watch_value_other_than_false_or_0_is_a_watch() -> None:
    assert parse("GET", "/api/v1/pods?watch=").verb == "watch"
    assert parse("GET", "/api/v1/pods?watch=FALSE").verb == "list"
    assert parse("GET", "/api/v1/pods?watch=yes").verb == "watch"


def test_a_list_pinned_to_one_name_carries_it_like_kube() -> None:
    info = parse("GET", "/apis/g/v/namespaces/demo/pods?watch=1&fieldSelector=metadata.name%3Dweb")
    assert (info.verb, info.name, info.parts) == ("watch", "web", ("pods",))
    listed = parse(
        "GET", "/apis/g/v/pods?fieldSelector=metadata.name%3Dweb%2Cstatus.phase%3DRunning"
    )
    assert (listed.verb, listed.name) == ("list", "web")
    # Not pinned: a negation, another field, a bad selector, a name that is no path segment.
    for selector in (
        "metadata.name!%3Dweb",
        "foo%3Dbar",
        "metadata.name%3Dweb%2Cfoo",
        "metadata.name%3Da%2Fb",
    ):
        assert parse("GET", f"/apis/g/v/pods?fieldSelector={selector}").name == ""
    assert (
        parse("GET", "/apis/g/v/pods?fieldSelector=metadata.name%3Dweb&labelSelector=a%20b").name
        == ""
    )


def test_deletecollection_stays_when_a_field_selector_names_one() -> None:
    info = parse("DELETE", "/apis/g/v/pods?fieldSelector=metadata.name%3Dweb")
    assert (info.verb, info.name) == ("deletecollection", "")


def test_watch_prefix_without_a_resource_is_not_found() -> None:
    with pytest.raises(ApiError) as caught:
        requestinfo.parse("GET", "/apis/g/v/watch", {})
    assert caught.value.code == 404


@pytest.mark.parametrize(
    ("segments", "query", "code", "words"),
    [
        ({"namespace": "a/b", "name": "web"}, {}, 404, "could not find"),
        ({"namespace": "demo", "name": ".."}, {}, 400, "may not be '..'"),
        ({"namespace": "demo", "name": "we%b"}, {}, 400, "may not contain '%'"),
        ({"namespace": "demo", "name": "web#x"}, {}, 404, "not found"),
        ({"namespace": "..", "name": "web"}, {}, 404, "not found"),
        ({"namespace": "demo"}, {"limit": "null"}, 400, 'parsing "null": invalid syntax'),
        ({"namespace": "demo"}, {"timeoutSeconds": "9" * 30}, 400, "value out of range"),
    ],
)
def test_what_no_handler_may_be_given_is_refused_like_kube(
    segments: dict[str, str], query: dict[str, str], code: int, words: str
) -> None:
    """Handlers paste namespace and name into the hub's or a child's URL: nothing there may
    address another URL than the one authorized (found by schemathesis and by reading)."""
    path = "/apis/remote.kmc.dev/v1alpha1/namespaces/demo/pods" + (
        "/web" if "name" in segments else ""
    )
    info = requestinfo.parse("GET", path, query)
    with pytest.raises(ApiError) as refused:
        requestinfo.check(info, segments, query)
    assert refused.value.status["code"] == code
    assert words in refused.value.status["message"]


def test_ordinary_names_and_options_pass() -> None:
    info = requestinfo.parse("GET", "/apis/mc.kmc.dev/v1alpha1/namespaces/demo/deployments", {})
    requestinfo.check(info, {"namespace": "demo"}, {"limit": "500", "timeoutSeconds": "30"})
    info = requestinfo.parse("GET", "/apis/remote.kmc.dev/v1alpha1/namespaces/demo/pods/web@x", {})
    requestinfo.check(info, {"namespace": "demo", "name": "web@us-east"}, {})
