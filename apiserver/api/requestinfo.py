"""What a request asks for, in Kubernetes' terms: verb, group, version, namespace, resource…

Authorization (a SubjectAccessReview on the hub) and routing must agree with the hub about
what a URL means — that `GET …/pods` is `list`, `?watch=1` is `watch`, `DELETE` without a
name is `deletecollection`, and `namespaces/demo` names the namespace itself — or a user
could be allowed here what the hub would refuse. So this is Kubernetes' RequestInfoFactory,
rule for rule, for the `/api` and `/apis` prefixes.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from apiserver.api import errors, selectors

API_PREFIXES = frozenset({"api", "apis"})
GROUPLESS_PREFIXES = frozenset({"api"})
# Path segments that act as verbs (`/apis/g/v/watch/...`); `proxy` never has subresources.
SPECIAL_VERBS = frozenset({"proxy", "watch"})
SPECIAL_VERBS_WITHOUT_SUBRESOURCES = frozenset({"proxy"})
# `namespaces/<ns>/status` is the namespace's subresource, not a resource named "status".
NAMESPACE_SUBRESOURCES = frozenset({"status", "finalize"})

_VERBS = {
    "POST": "create",
    "GET": "get",
    "HEAD": "get",
    "PUT": "update",
    "PATCH": "patch",
    "DELETE": "delete",
}


@dataclass(frozen=True)
class RequestInfo:
    is_resource_request: bool
    path: str
    # The Kubernetes verb for resource requests; the lowercase HTTP method otherwise.
    verb: str
    api_prefix: str = ""
    group: str = ""
    version: str = ""
    namespace: str = ""
    resource: str = ""
    subresource: str = ""
    # For list and watch: the name a `metadata.name=` field selector pins, as kube-apiserver
    # sets it for authorization. Route on `verb`, not on whether `name` is set.
    name: str = ""
    # The path from the resource on: (resource, name, subresource, …).
    parts: tuple[str, ...] = ()


def parse(method: str, path: str, query: Mapping[str, str]) -> RequestInfo:
    """Read `path` (already percent-decoded) the way kube-apiserver does."""
    method = method.upper()
    plain = RequestInfo(is_resource_request=False, path=path, verb=method.lower())
    parts = _split(path)
    if len(parts) < 3 or parts[0] not in API_PREFIXES:
        return plain
    prefix, parts = parts[0], parts[1:]
    group = ""
    if prefix not in GROUPLESS_PREFIXES:
        if len(parts) < 3:
            return plain  # /apis/<group>/<version>: discovery
        group, parts = parts[0], parts[1:]
    version, parts = parts[0], parts[1:]

    if parts[0] in SPECIAL_VERBS:
        if len(parts) < 2:
            raise errors.route_not_found()
        verb, parts = parts[0], parts[1:]
    else:
        verb = _VERBS.get(method, "")

    namespace = ""
    if parts[0] == "namespaces" and len(parts) > 1:
        namespace = parts[1]
        if len(parts) > 2 and parts[2] not in NAMESPACE_SUBRESOURCES:
            parts = parts[2:]

    resource = parts[0]
    name = parts[1] if len(parts) >= 2 else ""
    subresource = ""
    if len(parts) >= 3 and verb not in SPECIAL_VERBS_WITHOUT_SUBRESOURCES:
        subresource = parts[2]

    if not name and verb == "get":
        # Like ListOptions: any `watch` value but false/0 asks for a watch.
        watch = query.get("watch")
        verb = "watch" if watch is not None and watch.lower() not in ("false", "0") else "list"
        # A list of one name (`kubectl get pod x -w`) is authorized as that name.
        name = _single_name(query)
    if not name and verb == "delete":
        verb = "deletecollection"

    return RequestInfo(
        is_resource_request=True,
        path=path,
        verb=verb,
        api_prefix=prefix,
        group=group,
        version=version,
        namespace=namespace,
        resource=resource,
        subresource=subresource,
        name=name,
        parts=tuple(parts),
    )


def _single_name(query: Mapping[str, str]) -> str:
    """The name a `fieldSelector=metadata.name=<x>` pins, if the list options parse."""
    try:
        selectors.parse_labels(query.get("labelSelector"))
        fields = selectors.parse_fields(query.get("fieldSelector"))
    except errors.StatusError:
        return ""
    for requirement in fields.requirements:
        if requirement.path == "metadata.name" and not requirement.negated:
            # Only a name that could be a path segment (path.IsValidPathSegmentName).
            value = requirement.value
            if value in (".", "..") or "/" in value or "%" in value:
                return ""
            return value
    return ""


def _split(path: str) -> list[str]:
    trimmed = path.strip("/")
    return trimmed.split("/") if trimmed else []
