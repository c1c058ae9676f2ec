"""Joining a pull location (docs/pull.md): the token Secret, the hub RBAC, and which
certificate requests kmc-apiserver approves (`locations/joins.judge`)."""

from __future__ import annotations

import base64
import datetime
from typing import Any

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from apiserver.agent import identity
from apiserver.agent.main import parse
from apiserver.locations import joins
from kubectl_mc import join_pull

NOW = datetime.datetime(2026, 12, 7, 0, 0, tzinfo=datetime.UTC)


def csr(
    location: str = "edge",
    username: str = "system:bootstrap:abc123",
    groups: tuple[str, ...] = ("system:bootstrappers", "system:bootstrappers:kmc:edge"),
    name: str = "kmc-agent-edge-1",
    request: bytes | None = None,
    usages: tuple[str, ...] = ("digital signature", "client auth"),
    join: str = "abc123",
) -> dict[str, Any]:
    if request is None:
        _, request = identity.new_request(location, join)
    return {
        "metadata": {"name": name},
        "spec": {
            "request": base64.b64encode(request).decode(),
            "signerName": joins.SIGNER,
            "usages": list(usages),
            "username": username,
            "groups": [*groups, "system:authenticated"],
        },
    }


def location(mode: str = "Pull", **annotations: str) -> dict[str, Any]:
    return {
        "metadata": {
            "name": "edge",
            "resourceVersion": "7",
            "annotations": {joins.TOKEN_ANNOTATION: "abc123", **annotations},
        },
        "spec": {"mode": mode},
    }


def test_a_joins_first_request_is_approved_and_marks_the_token() -> None:
    verdict = joins.judge(csr(), location())
    assert verdict.approve and verdict.first and verdict.token_id == "abc123"
    assert joins.location_of(csr()) == "edge"


RENEWAL: dict[str, Any] = {
    "username": "kmc:location:edge",
    "groups": ("kmc:locations", "kmc:join:abc123"),
}


def test_a_renewal_by_the_locations_own_identity_is_approved() -> None:
    verdict = joins.judge(csr(**RENEWAL), location(**{joins.USED_ANNOTATION: "abc123:old"}))
    assert verdict.approve and not verdict.first


@pytest.mark.parametrize(
    ("request_", "where", "reason"),
    [
        # the token used a second time, by another request
        ({}, location(**{joins.USED_ANNOTATION: "abc123:kmc-agent-edge-0"}), "JoinUsed"),
        # a token of an earlier join
        ({"username": "system:bootstrap:zzz999"}, location(), "StaleJoin"),
        # another location's join token asking for this location's name
        ({"groups": ("system:bootstrappers:kmc:other",)}, location(), "NotItsJoin"),
        # another location's agent renewing for this one
        (
            {"username": "kmc:location:other", "groups": ("kmc:locations", "kmc:join:abc123")},
            location(),
            "NotItsJoin",
        ),
        # the token of this join asking for a certificate of another
        ({"join": "zzz999"}, location(), "BadSubject"),
        # a certificate of an earlier join renewing (for that join, or for the latest)
        (
            {**RENEWAL, "join": "zzz999", "groups": ("kmc:locations", "kmc:join:zzz999")},
            location(),
            "StaleJoin",
        ),
        ({**RENEWAL, "groups": ("kmc:locations", "kmc:join:zzz999")}, location(), "StaleJoin"),
        # the latest join revoked: neither its renewal nor its token
        (RENEWAL, location(**{joins.REVOKED_ANNOTATION: "abc123"}), "JoinRevoked"),
        ({}, location(**{joins.REVOKED_ANNOTATION: "abc123"}), "JoinRevoked"),
        ({}, None, "NoLocation"),
        ({}, location(mode="Push"), "PushLocation"),
        ({"usages": ("client auth", "server auth")}, location(), "BadUsages"),
    ],
)
def test_other_requests_are_left_pending_saying_why(
    request_: dict[str, Any], where: dict[str, Any] | None, reason: str
) -> None:
    verdict = joins.judge(csr(**request_), where)
    assert not verdict.approve
    assert verdict.reason == reason, verdict.message


def test_the_same_request_judged_again_after_its_mark_is_still_approved() -> None:
    """The mark is written before the approval; a retry after a failed approval passes."""
    again = location(**{joins.USED_ANNOTATION: "abc123:kmc-agent-edge-1"})
    assert joins.judge(csr(), again).approve


def test_a_request_for_more_than_the_locations_identity_is_refused() -> None:
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name(
        [
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, "system:masters"),
            x509.NameAttribute(NameOID.COMMON_NAME, "kmc:location:edge"),
        ]
    )
    built = x509.CertificateSigningRequestBuilder().subject_name(subject).sign(key, hashes.SHA256())
    bad = csr(request=built.public_bytes(serialization.Encoding.PEM))
    assert joins.judge(bad, location()).reason == "BadSubject"
    assert joins.location_of({"spec": {"signerName": "kubernetes.io/kubelet-serving"}}) is None


def test_decided_requests_are_left_alone() -> None:
    approved = {**csr(), "status": {"conditions": [{"type": "Approved", "status": "True"}]}}
    assert joins.decided(approved) and not joins.decided(csr())


def test_the_bootstrap_token_secret() -> None:
    token_id, secret = join_pull.new_token()
    assert len(token_id) == 6 and len(secret) == 16
    assert (token_id + secret).isalnum() and (token_id + secret).islower()
    made = join_pull.token_secret("edge", token_id, secret, NOW + join_pull.TOKEN_TTL)
    assert made["type"] == "bootstrap.kubernetes.io/token"
    assert made["metadata"]["namespace"] == "kube-system"
    assert made["metadata"]["name"] == f"bootstrap-token-{token_id}"
    data = {k: base64.b64decode(v).decode() for k, v in made["data"].items()}
    assert data["expiration"] == "2026-12-07T01:00:00Z"
    assert data["usage-bootstrap-authentication"] == "true"
    assert "usage-bootstrap-signing" not in data
    assert data["auth-extra-groups"] == "system:bootstrappers:kmc:edge"
    assert (data["token-id"], data["token-secret"]) == (token_id, secret)


def test_a_revoked_join_is_the_latest_one_only() -> None:
    """A mark naming an older join says nothing about the latest (a new join after a
    revocation is not revoked)."""
    assert joins.revoked(location(**{joins.REVOKED_ANNOTATION: "abc123"})["metadata"]) == "abc123"
    assert joins.revoked(location(**{joins.REVOKED_ANNOTATION: "zzz999"})["metadata"]) == ""
    assert joins.revoked({}) == ""
    assert joins.judge(csr(), location(**{joins.REVOKED_ANNOTATION: "zzz999"})).approve


def test_the_agents_hub_rbac_names_its_own_location_only() -> None:
    objects = join_pull.rbac("edge", "abc123")
    rules = [
        r
        for o in objects
        if o["metadata"]["name"] == "kmc:location:edge"
        for r in o.get("rules", [])
    ]
    named = {
        (resource, tuple(r["verbs"])): r.get("resourceNames")
        for r in rules
        for resource in r["resources"]
    }
    assert named[("workfeeds", ("list", "watch"))] == ["edge"]
    assert named[("locations/proxy", ("get",))] == ["edge"]  # its reverse tunnel
    assert named[("locations/report", ("update",))] == ["edge"]
    assert named[("locations/crds", ("update",))] == ["edge"]
    assert named[("leases", ("get", "update"))] == ["kmc-agent-edge"]
    assert not any("create" in r["verbs"] and r["resources"] == ["leases"] for r in rules)
    bindings = [o for o in objects if o["kind"].endswith("Binding")]
    assert {s["name"] for b in bindings for s in b["subjects"]} == {
        "kmc:join:abc123",  # this join's certificates only: a new join binds its own
        "system:bootstrappers:kmc:edge",
    }


def test_the_plugin_and_the_server_agree_on_the_names() -> None:
    assert join_pull.user("edge") == joins.user("edge")
    assert join_pull.bootstrap_group("edge") == joins.bootstrap_group("edge")
    assert join_pull.TOKEN_ANNOTATION == joins.TOKEN_ANNOTATION
    assert join_pull.REVOKED_ANNOTATION == joins.REVOKED_ANNOTATION
    assert join_pull.join_group("abc123") == joins.join_group("abc123")
    assert join_pull.lease("edge")["metadata"]["name"] == "kmc-agent-edge"


def test_the_agents_request_and_when_it_renews() -> None:
    key, request = identity.new_request("edge", "abc123")
    assert joins.subject(csr(request=request)) == (
        "kmc:location:edge",
        ["kmc:locations", "kmc:join:abc123"],
        False,
    )
    assert identity.token_id("abc123.0123456789abcdef") == "abc123"
    assert b"PRIVATE KEY" in key
    body = identity.csr_object("edge", request, 3600)
    assert body["spec"]["signerName"] == joins.SIGNER and body["spec"]["expirationSeconds"] == 3600
    kept = identity.Identity(b"", b"", NOW, NOW + datetime.timedelta(hours=10))
    assert kept.renew_after(0.7) == NOW + datetime.timedelta(hours=7)
    assert (
        NOW + datetime.timedelta(hours=7) <= kept.renew_after() <= NOW + datetime.timedelta(hours=8)
    )


def issued(join: str, hours: float = 10.0) -> identity.Identity:
    """A certificate as the hub's signer would issue it for `edge` of `join` (self-signed)."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name(
        [
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, "kmc:locations"),
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, f"kmc:join:{join}"),
            x509.NameAttribute(NameOID.COMMON_NAME, "kmc:location:edge"),
        ]
    )
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(1)
        .not_valid_before(NOW)
        .not_valid_after(NOW + datetime.timedelta(hours=hours))
        .sign(key, hashes.SHA256())
    )
    return identity.Identity.of(b"", cert.public_bytes(serialization.Encoding.PEM))


def test_the_agent_keeps_its_certificate_until_a_newer_joins_token_is_given() -> None:
    kept = issued("abc123")
    assert kept.join_id == "abc123" and kept.common_name == "kmc:location:edge"
    later = NOW + datetime.timedelta(hours=1)
    assert identity.reusable(kept, None, later)  # a restart with no token
    assert identity.reusable(kept, "abc123.0123456789abcdef", later)  # its own join's, spent
    assert not identity.reusable(kept, "zzz999.0123456789abcdef", later)  # a new join
    assert not identity.reusable(kept, None, NOW + datetime.timedelta(hours=11))  # expired
    assert not identity.reusable(None, None, later)


def test_the_agent_needs_a_way_to_the_hub(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        parse(["--location", "edge"])
    assert "--hub-url" in capsys.readouterr().err
    args = parse(
        ["--location", "edge", "--hub-url", "https://hub:6443", "--bootstrap-token", "a.b"]
    )
    assert args.bootstrap_token == "a.b" and args.certificate_seconds == 86400


class FakeHub:
    """What the join loop writes, recorded; a Location patch answers the patched Location."""

    def __init__(self) -> None:
        self.writes: list[tuple[str, str, Any]] = []
        self.events: list[dict[str, Any]] = []

    async def create(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        self.events.append(body)
        return body

    async def merge_patch(self, path: str, patch: dict[str, Any]) -> dict[str, Any]:
        self.writes.append(("PATCH", path, patch))
        return {"metadata": {"name": "edge", "resourceVersion": "8", **patch.get("metadata", {})}}

    async def request(self, method: str, path: str, *, body: Any = None, **_: Any) -> Any:
        self.writes.append((method, path, body))
        return body


class FakeLocations:
    def __init__(self, *found: dict[str, Any]) -> None:
        self.found = {o["metadata"]["name"]: o for o in found}
        self.observed: list[dict[str, Any]] = []

    def get(self, name: str) -> dict[str, Any] | None:
        return self.found.get(name)

    def subscribe(self, _: Any) -> None:
        pass

    async def observe(self, obj: dict[str, Any]) -> None:
        self.observed.append(obj)


async def test_the_join_loop_marks_the_join_used_expires_the_token_then_approves() -> None:
    from typing import cast

    from apiserver.leader import Leadership
    from apiserver.loops.joins import CSRS, JoinLoop

    hub = FakeHub()
    places = FakeLocations(location())
    loop = JoinLoop(cast(Any, hub), cast(Any, places), Leadership.solo())
    loop.requests.cache["kmc-agent-edge-1"] = csr()
    await loop.reconcile("kmc-agent-edge-1")
    (mark, token, approval) = hub.writes
    assert mark[1].endswith("/locations/edge")
    assert mark[2]["metadata"]["resourceVersion"] == "7"  # of two racing, one wins
    assert mark[2]["metadata"]["annotations"] == {joins.USED_ANNOTATION: "abc123:kmc-agent-edge-1"}
    assert token[1] == "/api/v1/namespaces/kube-system/secrets/bootstrap-token-abc123"
    assert base64.b64decode(token[2]["data"]["usage-bootstrap-authentication"]) == b"false"
    assert approval[:2] == ("PUT", f"{CSRS}/kmc-agent-edge-1/approval")
    (condition,) = approval[2]["status"]["conditions"]
    assert (condition["type"], condition["reason"]) == ("Approved", "KmcLocationJoin")

    # A second request with the same token: nothing written (an Event says why).
    hub.writes.clear()
    places.found["edge"] = location(**{joins.USED_ANNOTATION: "abc123:kmc-agent-edge-1"})
    loop.requests.cache["kmc-agent-edge-2"] = csr(name="kmc-agent-edge-2")
    await loop.reconcile("kmc-agent-edge-2")
    assert hub.writes == []
    assert loop._refused == {"kmc-agent-edge-2": "JoinUsed"}
    await loop.events.flush()
    (event,) = hub.events
    assert (event["type"], event["reason"]) == ("Warning", "JoinUsed")
    assert event["involvedObject"]["name"] == "kmc-agent-edge-2"
