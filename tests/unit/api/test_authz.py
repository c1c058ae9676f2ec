"""The hub decides every request; its answers are cached briefly and asked for once at a time."""

from __future__ import annotations

import asyncio

import pytest

from apiserver.api.authn import UserInfo
from apiserver.api.authz import (
    Attributes,
    Authorizer,
    Decision,
    NonResourceAttributes,
    denial_status,
    review,
)
from apiserver.kube.client import ApiError, Unreachable
from apiserver.objects import Obj

ALICE = UserInfo(
    name="alice",
    uid="uid-1",
    groups=("dev", "system:authenticated"),
    extra={"scopes": ("view", "edit")},
)
GET_WEB = Attributes(
    verb="get",
    group="apps",
    version="v1",
    resource="deployments",
    namespace="team-a",
    name="web",
)


class FakeHub:
    """Answers SubjectAccessReviews as told, and remembers every one it was asked."""

    def __init__(self, allowed: bool = True, reason: str = "") -> None:
        self.allowed = allowed
        self.denied = False
        self.reason = reason
        self.error: ApiError | None = None
        self.gate: asyncio.Event | None = None
        self.calls: list[tuple[str, Obj]] = []

    async def create(self, path: str, body: Obj) -> Obj:
        self.calls.append((path, body))
        if self.gate is not None:
            await self.gate.wait()
        if self.error is not None:
            raise self.error
        status = {"allowed": self.allowed, "denied": self.denied, "reason": self.reason}
        return {**body, "status": status}


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def authorizer(
    hub: FakeHub,
    clock: Clock | None = None,
    *,
    allowed_ttl: float = 10.0,
    denied_ttl: float = 5.0,
    max_entries: int = 10000,
) -> Authorizer:
    return Authorizer(hub, allowed_ttl, denied_ttl, max_entries, clock=clock or Clock())


def test_the_review_carries_the_whole_user_and_only_the_attributes_set() -> None:
    assert review(ALICE, GET_WEB) == {
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SubjectAccessReview",
        "spec": {
            "user": "alice",
            "uid": "uid-1",
            "groups": ["dev", "system:authenticated"],
            "extra": {"scopes": ["view", "edit"]},
            "resourceAttributes": {
                "namespace": "team-a",
                "verb": "get",
                "group": "apps",
                "version": "v1",
                "resource": "deployments",
                "name": "web",
            },
        },
    }
    scale = Attributes(verb="update", version="v1", resource="pods", subresource="status")
    spec = review(UserInfo("bob"), scale)["spec"]
    assert spec == {
        "user": "bob",
        "resourceAttributes": {
            "verb": "update",
            "version": "v1",
            "resource": "pods",
            "subresource": "status",
        },
    }
    discovery = NonResourceAttributes(path="/apis/kmc.dev/v1alpha1", verb="get")
    assert review(UserInfo("bob"), discovery)["spec"] == {
        "user": "bob",
        "nonResourceAttributes": {"path": "/apis/kmc.dev/v1alpha1", "verb": "get"},
    }


async def test_the_hub_is_asked_at_its_subjectaccessreviews_endpoint() -> None:
    hub = FakeHub(allowed=True, reason="RBAC: allowed by RoleBinding")
    decision = await authorizer(hub).authorize(ALICE, GET_WEB)
    assert decision == Decision(True, "RBAC: allowed by RoleBinding")
    assert hub.calls == [
        ("/apis/authorization.k8s.io/v1/subjectaccessreviews", review(ALICE, GET_WEB))
    ]


async def test_system_masters_is_allowed_without_asking_the_hub() -> None:
    """As Kubernetes' delegating authorizer (AlwaysAllowGroups): the hub's availability checks
    come as system:masters and must not wait on a busy hub."""
    hub = FakeHub(allowed=False)
    hub.error = ApiError.of(503, "ServiceUnavailable", "the hub is busy")
    checker = UserInfo("system:kube-aggregator", groups=("system:masters",))
    assert (await authorizer(hub).authorize(checker, GET_WEB)).allowed
    assert not (await authorizer(hub).authorize(ALICE, GET_WEB)).allowed
    assert len(hub.calls) == 1


async def test_an_allowed_answer_is_reused_for_the_allowed_ttl() -> None:
    hub, clock = FakeHub(allowed=True), Clock()
    authz = authorizer(hub, clock, allowed_ttl=10.0, denied_ttl=5.0)
    assert (await authz.authorize(ALICE, GET_WEB)).allowed
    clock.now += 9.9
    assert (await authz.authorize(ALICE, GET_WEB)).allowed
    assert len(hub.calls) == 1
    clock.now += 0.1
    hub.allowed = False
    assert not (await authz.authorize(ALICE, GET_WEB)).allowed
    assert len(hub.calls) == 2


async def test_a_denied_answer_is_reused_for_the_shorter_denied_ttl() -> None:
    hub, clock = FakeHub(allowed=False, reason="no rule"), Clock()
    authz = authorizer(hub, clock, allowed_ttl=10.0, denied_ttl=5.0)
    assert await authz.authorize(ALICE, GET_WEB) == Decision(False, "no rule")
    clock.now += 4.9
    assert not (await authz.authorize(ALICE, GET_WEB)).allowed
    assert len(hub.calls) == 1
    clock.now += 0.1
    hub.allowed = True  # a RoleBinding was just created
    assert (await authz.authorize(ALICE, GET_WEB)).allowed
    assert len(hub.calls) == 2


@pytest.mark.parametrize(
    ("user", "attrs"),
    [
        (UserInfo("bob", "uid-1", ALICE.groups, ALICE.extra), GET_WEB),
        (UserInfo("alice", "uid-2", ALICE.groups, ALICE.extra), GET_WEB),
        (UserInfo("alice", "uid-1", ("dev",), ALICE.extra), GET_WEB),
        (UserInfo("alice", "uid-1", ALICE.groups, {"scopes": ("view",)}), GET_WEB),
        (UserInfo("alice", "uid-1", ALICE.groups, {}), GET_WEB),
        (ALICE, Attributes(verb="delete", group="apps", version="v1", resource="deployments")),
        (ALICE, Attributes(**{**vars(GET_WEB), "name": "db"})),
        (ALICE, Attributes(**{**vars(GET_WEB), "subresource": "scale"})),
        (ALICE, Attributes(**{**vars(GET_WEB), "namespace": "team-b"})),
        (ALICE, NonResourceAttributes(path="/apis", verb="get")),
    ],
)
async def test_any_difference_in_user_or_request_is_a_question_of_its_own(
    user: UserInfo, attrs: Attributes | NonResourceAttributes
) -> None:
    hub = FakeHub()
    authz = authorizer(hub)
    await authz.authorize(ALICE, GET_WEB)
    await authz.authorize(user, attrs)
    assert len(hub.calls) == 2


async def test_the_same_user_built_twice_hits_the_cache() -> None:
    hub = FakeHub()
    authz = authorizer(hub)
    await authz.authorize(ALICE, GET_WEB)
    again = UserInfo(
        "alice", "uid-1", ("dev", "system:authenticated"), {"scopes": ("view", "edit")}
    )
    await authz.authorize(again, Attributes(**vars(GET_WEB)))
    assert len(hub.calls) == 1


async def test_concurrent_identical_questions_share_one_review() -> None:
    hub = FakeHub()
    hub.gate = asyncio.Event()
    authz = authorizer(hub)
    waiting = [asyncio.create_task(authz.authorize(ALICE, GET_WEB)) for _ in range(5)]
    other = asyncio.create_task(authz.authorize(UserInfo("bob"), GET_WEB))
    await asyncio.sleep(0.01)
    assert len(hub.calls) == 2  # one for alice's five, one for bob
    hub.gate.set()
    decisions = await asyncio.gather(*waiting, other)
    assert all(d.allowed for d in decisions)
    assert len(hub.calls) == 2


async def test_a_caller_that_gives_up_does_not_cancel_the_others_review() -> None:
    hub = FakeHub()
    hub.gate = asyncio.Event()
    authz = authorizer(hub)
    quitter = asyncio.create_task(authz.authorize(ALICE, GET_WEB))
    patient = asyncio.create_task(authz.authorize(ALICE, GET_WEB))
    await asyncio.sleep(0.01)
    quitter.cancel()
    await asyncio.sleep(0.01)
    hub.gate.set()
    assert (await patient).allowed
    assert quitter.cancelled()
    assert len(hub.calls) == 1


async def test_a_hub_error_is_no_decision_and_is_not_cached() -> None:
    hub = FakeHub()
    hub.error = Unreachable(
        ApiError.of(503, "ServiceUnavailable", "hub (https://127.0.0.1:6443) is unreachable").status
    )
    authz = authorizer(hub)
    decision = await authz.authorize(ALICE, GET_WEB)
    assert not decision.allowed
    assert "could not be authorized" in decision.error
    assert "hub (https://127.0.0.1:6443) is unreachable" in decision.error
    status = denial_status(decision, ALICE, GET_WEB)
    assert status["code"] == 500 and status["reason"] == "InternalError"
    assert status["message"] == f"Internal error occurred: {decision.error}"

    hub.error = None
    assert (await authz.authorize(ALICE, GET_WEB)).allowed  # asked again, not served the error
    assert len(hub.calls) == 2


async def test_concurrent_questions_share_the_hub_error_too() -> None:
    hub = FakeHub()
    hub.error = ApiError.of(403, "Forbidden", "cannot create subjectaccessreviews")
    hub.gate = asyncio.Event()
    authz = authorizer(hub)
    waiting = [asyncio.create_task(authz.authorize(ALICE, GET_WEB)) for _ in range(3)]
    await asyncio.sleep(0.01)
    hub.gate.set()
    decisions = await asyncio.gather(*waiting)
    assert len(hub.calls) == 1
    assert all("cannot create subjectaccessreviews" in d.error for d in decisions)


async def test_an_answer_both_allowed_and_denied_is_an_error() -> None:
    hub = FakeHub(allowed=True, reason="confused")
    hub.denied = True
    decision = await authorizer(hub).authorize(ALICE, GET_WEB)
    assert not decision.allowed and "both allowed and denied" in decision.error


async def test_the_oldest_entry_goes_when_the_cache_is_full() -> None:
    hub = FakeHub()
    authz = authorizer(hub, max_entries=2)
    a, b, c = (Attributes(verb="get", resource="pods", name=n) for n in "abc")
    await authz.authorize(ALICE, a)
    await authz.authorize(ALICE, b)
    await authz.authorize(ALICE, a)  # a is now the most recently used
    await authz.authorize(ALICE, c)  # b goes
    assert len(hub.calls) == 3
    await authz.authorize(ALICE, a)
    assert len(hub.calls) == 3
    await authz.authorize(ALICE, b)
    assert len(hub.calls) == 4


async def test_huge_caller_controlled_attributes_are_not_cached() -> None:
    hub = FakeHub()
    authz = authorizer(hub)
    huge = Attributes(verb="get", resource="pods", name="x" * 10000)
    await authz.authorize(ALICE, huge)
    await authz.authorize(ALICE, huge)
    assert len(hub.calls) == 2


@pytest.mark.parametrize(
    ("attrs", "reason", "message", "details"),
    [
        (
            GET_WEB,
            "no RBAC policy matched",
            'deployments.apps "web" is forbidden: User "alice" cannot get resource "deployments"'
            ' in API group "apps" in the namespace "team-a": no RBAC policy matched',
            {"name": "web", "group": "apps", "kind": "deployments"},
        ),
        (
            Attributes(verb="list", version="v1", resource="pods"),
            "",
            'pods is forbidden: User "alice" cannot list resource "pods" in API group ""'
            " at the cluster scope",
            {"kind": "pods"},
        ),
        (
            Attributes(**{**vars(GET_WEB), "subresource": "locations"}),
            "",
            'deployments.apps "web" is forbidden: User "alice" cannot get resource'
            ' "deployments/locations" in API group "apps" in the namespace "team-a"',
            {"name": "web", "group": "apps", "kind": "deployments"},
        ),
        (
            NonResourceAttributes(path="/apis/<x>", verb="get"),
            "",
            'forbidden: User "alice" cannot get path "/apis/&lt;x&gt;"',
            {},
        ),
    ],
)
def test_a_denial_reads_exactly_like_kube_apiservers(
    attrs: Attributes | NonResourceAttributes, reason: str, message: str, details: Obj
) -> None:
    status = denial_status(Decision(False, reason), ALICE, attrs)
    assert status == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": "Forbidden",
        "details": details,
        "code": 403,
    }
