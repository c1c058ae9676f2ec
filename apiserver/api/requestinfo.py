"""What a request asks for, in Kubernetes' terms: verb, group, version, namespace, resource…

Authorization (a SubjectAccessReview on the hub) and routing must agree with the hub about
what a URL means — that `GET …/pods` is `list`, `?watch=1` is `watch`, `DELETE` without a
name is `deletecollection`, and `namespaces/demo` names the namespace itself — or a user
could be allowed here what the hub would refuse. So this is Kubernetes' RequestInfoFactory,
rule for rule, for the `/api` and `/apis` prefixes.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from apiserver.api import errors, selectors
from apiserver.kube.client import ApiError

API_PREFIXES = frozenset({"api", "apis"})
GROUPLESS_PREFIXES = frozenset({"api"})
# Path segments that act as verbs (`/apis/g/v/watch/...`); `proxy` never has subresources.
SPECIAL_VERBS = frozenset({"proxy", "watch"})
SPECIAL_VERBS_WITHOUT_SUBRESOURCES = frozenset({"proxy"})
# `namespaces/<ns>/status` is the namespace's subresource, not a resource named "status".
NAMESPACE_SUBRESOURCES = frozenset({"status", "finalize"})
# ListOptions fields that are integers: a value that does not parse is a 400, list or watch.
INTEGER_LIST_OPTIONS = ("limit", "timeoutSeconds")
_INT64 = re.compile(r"[+-]?[0-9]+")

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
    except ApiError:
        return ""
    for requirement in fields.requirements:
        if requirement.path == "metadata.name" and not requirement.negated:
            # Only a name that could be a path segment (path.IsValidPathSegmentName).
            value = requirement.value
            if value in (".", "..") or "/" in value or "%" in value:
                return ""
            return value
    return ""


def check(info: RequestInfo, segments: Mapping[str, str], query: Mapping[str, str]) -> None:
    """Refuse, as kube-apiserver does once a request is authorized, what no handler may be
    given: a namespace or name that is not one path segment, and list options that do not parse.

    `segments` are the route's placeholders, percent-decoded. Handlers put the namespace and
    name into the hub's or a child's URL as they are, so `/`, `..`, `%`, `?` or `#` there would
    address another URL than the one authorized; no object can have such a name, so kube-apiserver
    answers these requests with a 400 or a 404, and so do we.
    """
    namespace, name = segments.get("namespace"), segments.get("name")
    if any("/" in value for value in (namespace, name) if value is not None):
        # kube-apiserver splits the decoded path: more segments than any route has.
        raise errors.route_not_found()
    if name is not None:
        problems = path_segment_problems(name)
        if problems:
            raise errors.bad_request(
                f"Name parameter invalid: {errors.quote(name)}: {';'.join(problems)}"
            )
    if namespace is not None and (namespace in (".", "..") or _url_special(namespace, "%?#")):
        # A namespace that cannot exist: whatever is asked of it is not found.
        if name is not None:
            raise errors.not_found(info.resource, info.group, name)
        raise errors.not_found("namespaces", "", namespace)
    if name is not None and _url_special(name, "?#"):
        raise errors.not_found(info.resource, info.group, name)
    if info.verb in ("list", "watch"):
        for key in INTEGER_LIST_OPTIONS:
            int64_option(query, key)


def path_segment_problems(name: str) -> list[str]:
    """Go's path.IsValidPathSegmentName: what keeps `name` from being one path segment."""
    if name in (".", ".."):
        return [f"may not be '{name}'"]
    return [f"may not contain '{c}'" for c in ("/", "%") if c in name]


def _url_special(value: str, characters: str) -> bool:
    return any(c in value for c in characters)


def int64_option(query: Mapping[str, str], key: str) -> int | None:
    """An integer query parameter (None when absent or empty), parsed like Go's
    strconv.ParseInt(text, 10, 64) in ListOptions; anything else is a 400 with its words."""
    text = query.get(key)
    if not text:
        return None
    if not _INT64.fullmatch(text):
        raise errors.bad_request(f"strconv.ParseInt: parsing {errors.quote(text)}: invalid syntax")
    value = int(text)
    if not -(2**63) <= value < 2**63:
        raise errors.bad_request(
            f"strconv.ParseInt: parsing {errors.quote(text)}: value out of range"
        )
    return value


def _split(path: str) -> list[str]:
    trimmed = path.strip("/")
    return trimmed.split("/") if trimmed else []
