"""May this user do this: the hub decides, through a SubjectAccessReview, for every request.

An aggregated API server has no RBAC of its own: the hub's authorizers (RBAC, webhooks, …) are
the one source of truth, so a request is allowed exactly when the hub would allow it. Asking for
every request would double the hub's load, so decisions are cached briefly, allowed ones longer
than denied ones, and concurrent identical questions share one review — as Kubernetes'
delegating (webhook) authorizer does.

Members of `system:masters` are allowed without asking, as Kubernetes' delegating authorizer
does (its `AlwaysAllowGroups`): the group passes every authorizer on the hub anyway, and the
hub's own availability checks of our APIServices come as that group — a check that waited on a
busy hub's review would time out and make the hub answer 503 for both groups.

When the hub cannot answer, nothing is decided: the `Decision` carries an `error` and the request
gets a 500 InternalError rather than a 403, because that is what Kubernetes does (its webhook
authorizer returns NoOpinion with an error, and the authorization filter turns an error into an
internal error). A 403 would tell the caller, wrongly, that RBAC refused them. Errors are not
cached: the next request asks again.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from aiohttp import web

from apiserver.api.authn import UserInfo
from apiserver.kube.client import ApiError, failure
from apiserver.objects import Obj

log = logging.getLogger(__name__)

ALWAYS_ALLOWED = "system:masters"

SUBJECT_ACCESS_REVIEWS = "/apis/authorization.k8s.io/v1/subjectaccessreviews"

# Requests whose caller-controlled attributes are this long are not cached (a flood of unique
# huge names must not fill memory), as in Kubernetes' webhook authorizer.
MAX_CACHED_ATTRIBUTES_SIZE = 10000


@dataclass(frozen=True, kw_only=True)
class Attributes:
    """A resource request, as SubjectAccessReview's `resourceAttributes` ("" = not set)."""

    verb: str
    group: str = ""
    version: str = ""
    resource: str = ""
    subresource: str = ""
    namespace: str = ""
    name: str = ""


@dataclass(frozen=True, kw_only=True)
class NonResourceAttributes:
    """A request for a path that is no resource (`/apis`, `/openapi/v3`, …), as
    SubjectAccessReview's `nonResourceAttributes`; `verb` is the lower-case HTTP method."""

    path: str
    verb: str


AnyAttributes = Attributes | NonResourceAttributes


@dataclass(frozen=True)
class Decision:
    """The hub's answer. `error` set means there is no answer: the caller sends 500, not 403."""

    allowed: bool
    reason: str = ""
    error: str = ""


class SubjectAccessReviewer(Protocol):
    """What the authorizer needs of the hub client (`Kube` is one)."""

    async def create(self, path: str, body: Obj) -> Obj: ...


CacheKey = tuple[str, str, tuple[str, ...], tuple[tuple[str, tuple[str, ...]], ...], AnyAttributes]


class Authorizer:
    """Asks the hub whether a user may do something, with a short cache of the answers."""

    def __init__(
        self,
        hub: SubjectAccessReviewer,
        allowed_ttl: float = 10.0,
        denied_ttl: float = 5.0,
        max_entries: int = 10000,
        clock: Callable[[], float] = time.monotonic,
        who: str = "the hub",
    ) -> None:
        self.hub = hub
        self.who = who
        self.allowed_ttl = allowed_ttl
        self.denied_ttl = denied_ttl
        self.max_entries = max_entries
        self.clock = clock
        self._cache: OrderedDict[CacheKey, tuple[float, Decision]] = OrderedDict()
        self._inflight: dict[CacheKey, asyncio.Task[Decision]] = {}

    async def authorize(self, user: UserInfo, attrs: AnyAttributes) -> Decision:
        if ALWAYS_ALLOWED in user.groups:
            return Decision(True, f"{ALWAYS_ALLOWED} is always allowed")
        key = _key(user, attrs)
        cached = self._cached(key)
        if cached is not None:
            return cached
        task = self._inflight.get(key)
        if task is None:
            task = asyncio.create_task(self._review(key, user, attrs))
            self._inflight[key] = task
            task.add_done_callback(lambda done: self._forget(key, done))
        # One caller giving up (a client hanging up) must not cancel the others' review.
        return await asyncio.shield(task)

    def _cached(self, key: CacheKey) -> Decision | None:
        entry = self._cache.get(key)
        if entry is None:
            return None
        expires, decision = entry
        if self.clock() >= expires:
            del self._cache[key]
            return None
        self._cache.move_to_end(key)
        return decision

    def _forget(self, key: CacheKey, task: asyncio.Task[Decision]) -> None:
        if self._inflight.get(key) is task:
            del self._inflight[key]

    async def _review(self, key: CacheKey, user: UserInfo, attrs: AnyAttributes) -> Decision:
        try:
            answer = await self.hub.create(SUBJECT_ACCESS_REVIEWS, review(user, attrs))
        except ApiError as err:
            log.warning("SubjectAccessReview for %r failed on %s: %s", user.name, self.who, err)
            return Decision(
                False, error=f"the request could not be authorized by {self.who}: {err}"
            )
        status = answer.get("status") or {}
        allowed, denied = bool(status.get("allowed")), bool(status.get("denied"))
        reason = str(status.get("reason") or "")
        if allowed and denied:
            decision = Decision(
                False, reason, f"{self.who}'s SubjectAccessReview answered both allowed and denied"
            )
        else:
            decision = Decision(allowed, reason)
        if _cacheable(attrs):
            ttl = self.allowed_ttl if decision.allowed else self.denied_ttl
            self._cache[key] = (self.clock() + ttl, decision)
            self._cache.move_to_end(key)
            while len(self._cache) > self.max_entries:
                self._cache.popitem(last=False)
        return decision


def review(user: UserInfo, attrs: AnyAttributes) -> Obj:
    """The SubjectAccessReview asking whether `user` may do `attrs` (empty fields left out)."""
    spec: Obj = {"user": user.name}
    if user.uid:
        spec["uid"] = user.uid
    if user.groups:
        spec["groups"] = list(user.groups)
    if user.extra:
        spec["extra"] = {key: list(values) for key, values in user.extra.items()}
    if isinstance(attrs, Attributes):
        fields = {
            "namespace": attrs.namespace,
            "verb": attrs.verb,
            "group": attrs.group,
            "version": attrs.version,
            "resource": attrs.resource,
            "subresource": attrs.subresource,
            "name": attrs.name,
        }
        spec["resourceAttributes"] = {k: v for k, v in fields.items() if v}
    else:
        spec["nonResourceAttributes"] = {"path": attrs.path, "verb": attrs.verb}
    return {"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview", "spec": spec}


def _key(user: UserInfo, attrs: AnyAttributes) -> CacheKey:
    extra = tuple(sorted((k, tuple(v)) for k, v in user.extra.items()))
    return (user.name, user.uid, user.groups, extra, attrs)


def _cacheable(attrs: AnyAttributes) -> bool:
    return sum(len(value) for value in vars(attrs).values()) < MAX_CACHED_ATTRIBUTES_SIZE


def denial_status(decision: Decision, user: UserInfo, attrs: AnyAttributes) -> Obj:
    """The `Status` kube-apiserver would answer a request that was not allowed: 500
    InternalError when the hub could not decide, else 403 Forbidden with its exact message
    (`… is forbidden: User "u" cannot get resource "x" in API group "g" …: <reason>`)."""
    if decision.error:
        message = f"Internal error occurred: {decision.error}"
        return failure(500, "InternalError", message, {"causes": [{"message": decision.error}]})
    message = _forbidden_message(user, attrs)
    if decision.reason:
        message = f"{message}: {decision.reason}"
    group = resource = name = ""
    if isinstance(attrs, Attributes):
        group, resource, name = attrs.group, attrs.resource, attrs.name
    qualified = f"{resource}.{group}" if group else resource
    if not qualified:
        message = f"forbidden: {message}"
    elif not name:
        message = f"{qualified} is forbidden: {message}"
    else:
        message = f"{qualified} {_quote(name)} is forbidden: {message}"
    details = {k: v for k, v in (("name", name), ("group", group), ("kind", resource)) if v}
    return failure(403, "Forbidden", message, details)


def _forbidden_message(user: UserInfo, attrs: AnyAttributes) -> str:
    who = _quote(user.name)
    if isinstance(attrs, NonResourceAttributes):
        message = f"User {who} cannot {attrs.verb} path {_quote(attrs.path)}"
    else:
        resource = f"{attrs.resource}/{attrs.subresource}" if attrs.subresource else attrs.resource
        what = f"User {who} cannot {attrs.verb} resource {_quote(resource)}"
        what += f" in API group {_quote(attrs.group)}"
        if attrs.namespace:
            message = f"{what} in the namespace {_quote(attrs.namespace)}"
        else:
            message = f"{what} at the cluster scope"
    # kube-apiserver keeps error text from looking like HTML.
    return message.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _quote(text: str) -> str:
    """Go's %q for the printable strings Kubernetes names are."""
    return json.dumps(text, ensure_ascii=False)


AUTHORIZER = web.AppKey("authorizer", Authorizer)
