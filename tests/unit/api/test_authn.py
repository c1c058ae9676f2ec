"""Only the hub's aggregator gets in, and the user it names is read as Kubernetes reads it.

Certificates are made here with `cryptography`; the last tests serve real TLS on 127.0.0.1 to
show what the handshake lets through and what `authenticate` then refuses.
"""

from __future__ import annotations

import asyncio
import datetime
import logging
import ssl
from collections.abc import AsyncIterator, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import aiohttp
import pytest
from aiohttp import web
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
from multidict import CIMultiDict, CIMultiDictProxy

from apiserver import certs
from apiserver.api.authn import (
    Authenticator,
    ConfigError,
    FrontProxyConfig,
    FrontProxyWatch,
    Unauthenticated,
    UserInfo,
    configure_client_auth,
    peer_certificate,
    trust_bundle,
)
from apiserver.kube.client import Kube
from apiserver.objects import Obj

NOW = datetime.datetime.now(datetime.UTC)
HOUR = datetime.timedelta(hours=1)
KEY = ec.generate_private_key(ec.SECP256R1())  # one key for every certificate: fast


@dataclass(frozen=True)
class CA:
    cert: x509.Certificate
    key: ec.EllipticCurvePrivateKey


def make_ca(common_name: str) -> CA:
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(NOW - HOUR)
        .not_valid_after(NOW + 24 * HOUR)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    return CA(cert, key)


def make_cert(
    ca: CA,
    common_name: str,
    usages: Iterable[x509.ObjectIdentifier] | None = (ExtendedKeyUsageOID.CLIENT_AUTH,),
    not_before: datetime.datetime = NOW - HOUR,
    not_after: datetime.datetime = NOW + HOUR,
) -> x509.Certificate:
    builder = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)]))
        .issuer_name(ca.cert.subject)
        .public_key(KEY.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(not_before)
        .not_valid_after(not_after)
    )
    if usages is not None:
        builder = builder.add_extension(x509.ExtendedKeyUsage(list(usages)), critical=False)
    return builder.sign(ca.key, hashes.SHA256())


def der(cert: x509.Certificate) -> bytes:
    return cert.public_bytes(serialization.Encoding.DER)


def pem(*cas: CA) -> str:
    return "".join(ca.cert.public_bytes(serialization.Encoding.PEM).decode() for ca in cas)


def headers(*pairs: tuple[str, str]) -> CIMultiDictProxy[str]:
    return CIMultiDictProxy(CIMultiDict(pairs))


FRONT_PROXY_CA = make_ca("front-proxy-ca")
CLIENT_CA = make_ca("kubernetes-ca")
FRONT_PROXY_CLIENT = make_cert(FRONT_PROXY_CA, "front-proxy-client")
USER = ("X-Remote-User", "alice")


def hub_data(**changes: str | None) -> dict[str, str]:
    """The ConfigMap as a hub with aggregation (and the uid header) configured writes it."""
    data: dict[str, str | None] = {
        "client-ca-file": pem(CLIENT_CA),
        "requestheader-client-ca-file": pem(FRONT_PROXY_CA),
        "requestheader-allowed-names": '["front-proxy-client"]',
        "requestheader-username-headers": '["X-Remote-User"]',
        "requestheader-group-headers": '["X-Remote-Group"]',
        "requestheader-extra-headers-prefix": '["X-Remote-Extra-"]',
        "requestheader-uid-headers": '["X-Remote-Uid"]',
    }
    data.update({k.replace("_", "-"): v for k, v in changes.items()})
    return {k: v for k, v in data.items() if v is not None}


def authenticator(**changes: str | None) -> Authenticator:
    """Judging validity at the module's NOW, which the certificates are made around: the
    suite runs its unit tests after its e2e ones, more than half an hour after import."""
    return Authenticator(FrontProxyConfig.from_configmap(hub_data(**changes)), clock=lambda: NOW)


def refusal(auth: Authenticator, cert: x509.Certificate | None, *pairs: tuple[str, str]) -> str:
    with pytest.raises(Unauthenticated) as caught:
        auth.authenticate(der(cert) if cert else None, headers(*pairs))
    return caught.value.reason


# --- the ConfigMap ---------------------------------------------------------------------------


def test_the_hubs_configmap_is_read_whole() -> None:
    config = FrontProxyConfig.from_configmap(hub_data())
    assert config.requestheader_cas == (FRONT_PROXY_CA.cert,)
    assert config.client_cas == (CLIENT_CA.cert,)
    assert config.allowed_names == ("front-proxy-client",)
    assert config.username_headers == ("X-Remote-User",)
    assert config.group_headers == ("X-Remote-Group",)
    assert config.extra_prefixes == ("X-Remote-Extra-",)
    assert config.uid_headers == ("X-Remote-Uid",)


def test_missing_lists_take_the_aggregators_header_names_but_never_the_uid() -> None:
    config = FrontProxyConfig.from_configmap(
        {"requestheader-client-ca-file": pem(FRONT_PROXY_CA), "requestheader-group-headers": "[]"}
    )
    assert config.username_headers == ("X-Remote-User",)
    assert config.group_headers == ("X-Remote-Group",)
    assert config.extra_prefixes == ("X-Remote-Extra-",)
    assert config.uid_headers == ()  # the hub did not say it strips a caller's own X-Remote-Uid
    assert config.allowed_names == ()
    assert config.client_cas == ()


def test_a_hub_without_aggregation_is_named_with_the_flag_to_set() -> None:
    with pytest.raises(ConfigError) as caught:
        FrontProxyConfig.from_configmap({"client-ca-file": pem(CLIENT_CA)})
    message = str(caught.value)
    assert "aggregation is not configured" in message
    assert "--requestheader-client-ca-file" in message
    assert "kube-system/extension-apiserver-authentication" in message


@pytest.mark.parametrize(
    ("key", "value", "words"),
    [
        ("requestheader-allowed-names", "front-proxy-client", "not a JSON list"),
        ("requestheader-group-headers", '"X-Remote-Group"', "JSON list of strings"),
        ("requestheader-username-headers", '["X-Remote-User", 3]', "JSON list of strings"),
        ("requestheader-username-headers", '[" "]', "empty header"),
        ("requestheader-client-ca-file", "-----BEGIN CERTIFICATE-----\nxx\n", "PEM"),
        ("client-ca-file", "not a certificate", "client-ca-file"),
    ],
)
def test_a_bad_configmap_says_which_key_is_wrong(key: str, value: str, words: str) -> None:
    with pytest.raises(ConfigError, match=words) as caught:
        FrontProxyConfig.from_configmap(hub_data(**{key: value}))
    assert key in str(caught.value)


def test_the_trust_bundle_holds_both_cas_once() -> None:
    bundle = trust_bundle(FrontProxyConfig.from_configmap(hub_data()))
    assert x509.load_pem_x509_certificates(bundle.encode()) == [FRONT_PROXY_CA.cert, CLIENT_CA.cert]
    same = FrontProxyConfig.from_configmap(hub_data(client_ca_file=pem(FRONT_PROXY_CA)))
    assert x509.load_pem_x509_certificates(trust_bundle(same).encode()) == [FRONT_PROXY_CA.cert]


def test_one_ca_for_users_and_proxy_without_allowed_names_is_flagged() -> None:
    shared = FrontProxyConfig.from_configmap(
        hub_data(client_ca_file=pem(FRONT_PROXY_CA), requestheader_allowed_names="[]")
    )
    assert shared.lets_hub_users_proxy()
    assert not FrontProxyConfig.from_configmap(hub_data()).lets_hub_users_proxy()


# --- the certificate -------------------------------------------------------------------------


def test_the_front_proxy_gets_in_as_the_user_it_names() -> None:
    user = authenticator().authenticate(der(FRONT_PROXY_CLIENT), headers(USER))
    assert user == UserInfo(name="alice")


def test_without_configuration_or_certificate_nobody_gets_in() -> None:
    assert "no front-proxy configuration" in refusal(Authenticator(), FRONT_PROXY_CLIENT, USER)
    assert "no client certificate" in refusal(authenticator(), None, USER)


def test_a_hub_users_own_certificate_is_refused() -> None:
    alice = make_cert(CLIENT_CA, "front-proxy-client")  # right name, wrong CA
    assert "not signed by the hub's request-header CA" in refusal(authenticator(), alice, USER)


def test_a_ca_that_only_copies_the_front_proxy_cas_name_is_refused() -> None:
    impostor = make_ca("front-proxy-ca")
    forged = make_cert(impostor, "front-proxy-client")
    assert forged.issuer == FRONT_PROXY_CA.cert.subject
    assert "not signed" in refusal(authenticator(), forged, USER)


def test_an_expired_or_not_yet_valid_certificate_is_refused() -> None:
    expired = make_cert(FRONT_PROXY_CA, "front-proxy-client", not_after=NOW - HOUR / 2)
    early = make_cert(FRONT_PROXY_CA, "front-proxy-client", not_before=NOW + HOUR / 2)
    assert "not valid now" in refusal(authenticator(), expired, USER)
    assert "not valid now" in refusal(authenticator(), early, USER)


def test_validity_is_judged_by_the_authenticators_clock_even_for_a_known_certificate() -> None:
    auth = authenticator()
    assert auth.authenticate(der(FRONT_PROXY_CLIENT), headers(USER)).name == "alice"
    auth.clock = lambda: NOW + 2 * HOUR
    assert "not valid now" in refusal(auth, FRONT_PROXY_CLIENT, USER)


def test_a_name_outside_the_allowed_names_is_refused() -> None:
    other = make_cert(FRONT_PROXY_CA, "someone-else")
    assert "not in requestheader-allowed-names" in refusal(authenticator(), other, USER)


def test_empty_allowed_names_let_any_name_the_ca_signed_in() -> None:
    other = make_cert(FRONT_PROXY_CA, "someone-else")
    auth = authenticator(requestheader_allowed_names="[]")
    assert auth.authenticate(der(other), headers(USER)).name == "alice"


def test_a_certificate_for_servers_only_is_refused_and_one_without_usages_accepted() -> None:
    server = make_cert(FRONT_PROXY_CA, "front-proxy-client", [ExtendedKeyUsageOID.SERVER_AUTH])
    assert "client authentication" in refusal(authenticator(), server, USER)
    bare = make_cert(FRONT_PROXY_CA, "front-proxy-client", usages=None)
    assert authenticator().authenticate(der(bare), headers(USER)).name == "alice"


def test_garbage_instead_of_a_certificate_is_refused() -> None:
    with pytest.raises(Unauthenticated, match="unreadable"):
        authenticator().authenticate(b"\x30\x03junk", headers(USER))


def test_after_a_ca_rotation_only_the_new_cas_certificates_get_in() -> None:
    auth = authenticator()
    assert auth.authenticate(der(FRONT_PROXY_CLIENT), headers(USER)).name == "alice"
    rotated = make_ca("front-proxy-ca-2")
    auth.update(
        FrontProxyConfig.from_configmap(hub_data(requestheader_client_ca_file=pem(rotated)))
    )
    assert "not signed" in refusal(auth, FRONT_PROXY_CLIENT, USER)
    fresh = make_cert(rotated, "front-proxy-client")
    assert auth.authenticate(der(fresh), headers(USER)).name == "alice"


def test_during_a_rotation_both_cas_of_the_bundle_are_accepted() -> None:
    rotated = make_ca("front-proxy-ca-2")
    auth = authenticator(requestheader_client_ca_file=pem(FRONT_PROXY_CA, rotated))
    for ca in (FRONT_PROXY_CA, rotated):
        assert auth.authenticate(der(make_cert(ca, "front-proxy-client")), headers(USER))


# --- the headers -----------------------------------------------------------------------------


def test_the_user_is_read_as_kubernetes_reads_it() -> None:
    user = authenticator().authenticate(
        der(FRONT_PROXY_CLIENT),
        headers(
            ("x-remote-user", "alice"),
            ("X-Remote-Uid", "4f1c-uid"),
            ("X-Remote-Group", "system:authenticated"),
            ("X-Remote-Group", "team a, team b"),  # one value, one group: commas are not split
            ("X-Remote-Group", ""),
            ("X-Remote-Extra-Scopes", "view"),
            ("x-remote-extra-scopes", "edit"),
            ("X-Remote-Extra-Example.org%2fProject", "kmc"),
            ("X-Remote-Extra-Authentication.Kubernetes.Io%2FCredential-Id", "X509SHA256=ab"),
            ("X-Remote-Extra-Bad%zzKey", "kept"),
            ("X-Remote-Extra-", "no key"),
            ("Authorization", "Bearer ignored"),
        ),
    )
    assert user.name == "alice"
    assert user.uid == "4f1c-uid"
    assert user.groups == ("system:authenticated", "team a, team b")
    assert dict(user.extra) == {
        "scopes": ("view", "edit"),
        "example.org/project": ("kmc",),
        "authentication.kubernetes.io/credential-id": ("X509SHA256=ab",),
        "bad%zzkey": ("kept",),
    }


def test_the_first_username_header_with_a_value_wins() -> None:
    auth = authenticator(requestheader_username_headers='["X-Proxy-User", "X-Remote-User"]')
    user = auth.authenticate(
        der(FRONT_PROXY_CLIENT), headers(("X-Proxy-User", ""), ("X-Remote-User", "bob"))
    )
    assert user.name == "bob"


def test_a_request_without_a_user_is_refused() -> None:
    assert "without a user in X-Remote-User" in refusal(authenticator(), FRONT_PROXY_CLIENT)
    reason = refusal(authenticator(), FRONT_PROXY_CLIENT, ("X-Remote-User", ""))
    assert "without a user" in reason


def test_without_a_uid_header_in_the_configmap_no_uid_is_read() -> None:
    auth = authenticator(requestheader_uid_headers=None)
    user = auth.authenticate(der(FRONT_PROXY_CLIENT), headers(USER, ("X-Remote-Uid", "forged")))
    assert user.uid == ""


def test_configured_header_names_and_prefixes_are_used() -> None:
    auth = authenticator(
        requestheader_group_headers='["X-Groups", "X-More-Groups"]',
        requestheader_extra_headers_prefix='["X-Extra-", "X-Also-"]',
    )
    user = auth.authenticate(
        der(FRONT_PROXY_CLIENT),
        headers(
            USER,
            ("X-More-Groups", "b"),
            ("X-Groups", "a"),
            ("X-Remote-Group", "ignored"),
            ("X-Also-K", "2"),
            ("X-Extra-K", "1"),
        ),
    )
    assert user.groups == ("a", "b")
    assert dict(user.extra) == {"k": ("1", "2")}


# --- keeping the configuration current -------------------------------------------------------


class FakeHub:
    """Lists one ConfigMap, then streams the watch events a test puts in `events`."""

    name = "hub"

    def __init__(self, data: dict[str, str] | None) -> None:
        self.items = [] if data is None else [configmap(data, "1")]
        self.events: asyncio.Queue[Obj] = asyncio.Queue()
        self.asked: list[tuple[str, dict[str, str]]] = []

    async def get(self, path: str, **params: str) -> Obj:
        self.asked.append((path, params))
        return {"items": self.items, "metadata": {"resourceVersion": "1"}}

    async def watch(
        self, path: str, resource_version: str, params: dict[str, str] | None = None
    ) -> AsyncIterator[Obj]:
        while True:
            yield await self.events.get()


def configmap(data: dict[str, str], version: str) -> Obj:
    meta = {
        "name": "extension-apiserver-authentication",
        "namespace": "kube-system",
        "resourceVersion": version,
    }
    return {"metadata": meta, "data": data}


async def settle() -> None:
    for _ in range(20):
        await asyncio.sleep(0)


async def test_the_watch_follows_the_configmap_and_keeps_the_last_good_one(
    caplog: pytest.LogCaptureFixture,
) -> None:
    hub = FakeHub(hub_data())
    auth = Authenticator(clock=lambda: NOW)
    seen: list[FrontProxyConfig] = []
    watch = FrontProxyWatch(cast(Kube, hub), auth, seen.append)
    task = asyncio.create_task(watch.run())
    try:
        await asyncio.wait_for(watch.loaded.wait(), 1)
        assert hub.asked == [
            (
                "/api/v1/namespaces/kube-system/configmaps",
                {"fieldSelector": "metadata.name=extension-apiserver-authentication"},
            )
        ]
        first = auth.config
        assert first is not None and seen == [first]

        with caplog.at_level(logging.ERROR):
            bad = hub_data(requestheader_client_ca_file=None)
            hub.events.put_nowait({"type": "MODIFIED", "object": configmap(bad, "2")})
            await settle()
        assert auth.config is first
        assert "aggregation is not configured" in caplog.text
        assert "keeping the previous configuration" in caplog.text

        rotated = make_ca("front-proxy-ca-2")
        data = hub_data(requestheader_client_ca_file=pem(FRONT_PROXY_CA, rotated))
        hub.events.put_nowait({"type": "MODIFIED", "object": configmap(data, "3")})
        await settle()
        assert auth.config is not None and auth.config.requestheader_cas[1] == rotated.cert
        assert seen[-1] is auth.config and len(seen) == 2

        hub.events.put_nowait({"type": "MODIFIED", "object": configmap(data, "4")})
        await settle()
        assert len(seen) == 2  # same content, nothing to redo

        hub.events.put_nowait({"type": "DELETED", "object": configmap(data, "5")})
        await settle()
        assert auth.config is seen[-1]
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def test_a_hub_without_the_configmap_is_reported(caplog: pytest.LogCaptureFixture) -> None:
    watch = FrontProxyWatch(cast(Kube, FakeHub(None)), Authenticator())
    with caplog.at_level(logging.ERROR):
        task = asyncio.create_task(watch.run())
        await settle()
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    assert "the hub has no kube-system/extension-apiserver-authentication" in caplog.text
    assert not watch.loaded.is_set()


# --- real TLS --------------------------------------------------------------------------------


@dataclass
class Served:
    url: str
    serving_ca: Path
    context: ssl.SSLContext
    auth: Authenticator
    reached: list[bool]


@dataclass(frozen=True)
class Pki:
    folder: Path
    front_proxy_ca: certs.Pair
    client_ca: certs.Pair


@pytest.fixture
def pki(tmp_path: Path) -> Pki:
    return Pki(
        tmp_path,
        certs.ensure_ca(tmp_path, "front-proxy-ca", "front-proxy-ca"),
        certs.ensure_ca(tmp_path, "client-ca", "kubernetes-ca"),
    )


def pair_data(pki: Pki) -> dict[str, str]:
    return hub_data(
        requestheader_client_ca_file=pki.front_proxy_ca.cert.read_text(),
        client_ca_file=pki.client_ca.cert.read_text(),
    )


@pytest.fixture
async def served(pki: Pki) -> AsyncIterator[Served]:
    serving_ca = certs.ensure_ca(pki.folder, "serving-ca", "kmc-apiserver-ca")
    serving = certs.ensure_cert(pki.folder, "serving", serving_ca, "kmc", hosts=("127.0.0.1",))
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)  # as serving.context
    context.load_cert_chain(serving.cert, serving.key)
    config = FrontProxyConfig.from_configmap(pair_data(pki))
    configure_client_auth(context, config)
    auth = Authenticator(config)
    reached: list[bool] = []

    async def handler(request: web.Request) -> web.Response:
        cert = peer_certificate(request)
        reached.append(cert is not None)
        try:
            user = auth.authenticate(cert, request.headers)
        except Unauthenticated as err:
            return web.json_response({"refused": err.reason}, status=401)
        return web.json_response({"user": user.name, "groups": list(user.groups)})

    app = web.Application()
    app.router.add_get("/", handler)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=context)
    await site.start()
    port = runner.addresses[0][1]
    try:
        yield Served(f"https://127.0.0.1:{port}/", serving_ca.cert, context, auth, reached)
    finally:
        await runner.cleanup()


async def call(served: Served, client: certs.Pair | None) -> tuple[int, Any]:
    context = ssl.create_default_context(cafile=served.serving_ca)
    if client is not None:
        context.load_cert_chain(client.cert, client.key)
    async with (
        aiohttp.ClientSession() as session,
        session.get(
            served.url,
            ssl=context,
            headers={"X-Remote-User": "alice", "X-Remote-Group": "dev"},
        ) as resp,
    ):
        return resp.status, await resp.json()


async def test_the_front_proxy_certificate_reaches_the_handler_and_authenticates(
    served: Served, pki: Pki
) -> None:
    proxy = certs.ensure_cert(
        pki.folder, "front-proxy-client", pki.front_proxy_ca, "front-proxy-client"
    )
    assert await call(served, proxy) == (200, {"user": "alice", "groups": ["dev"]})
    assert served.reached == [True]


async def test_a_hub_users_certificate_passes_the_handshake_and_gets_401(
    served: Served, pki: Pki
) -> None:
    alice = certs.ensure_cert(pki.folder, "alice", pki.client_ca, "alice", ("system:masters",))
    status, body = await call(served, alice)
    assert status == 401 and "not signed by the hub's request-header CA" in body["refused"]
    assert served.reached == [True]


async def test_a_certificate_from_an_unknown_ca_fails_the_handshake(
    served: Served, pki: Pki
) -> None:
    unknown = certs.ensure_ca(pki.folder, "unknown-ca", "front-proxy-ca")
    stranger = certs.ensure_cert(pki.folder, "stranger", unknown, "front-proxy-client")
    with pytest.raises(aiohttp.ClientError):
        await call(served, stranger)
    assert served.reached == []


async def test_no_certificate_passes_the_handshake_and_gets_401(served: Served) -> None:
    status, body = await call(served, None)
    assert status == 401 and "no client certificate" in body["refused"]
    assert served.reached == [False]


async def test_a_ca_added_to_the_live_context_is_trusted_by_new_connections(
    served: Served, pki: Pki
) -> None:
    rotated = certs.ensure_ca(pki.folder, "front-proxy-ca-2", "front-proxy-ca-2")
    proxy = certs.ensure_cert(pki.folder, "front-proxy-client-2", rotated, "front-proxy-client")
    with pytest.raises(aiohttp.ClientError):
        await call(served, proxy)

    data = pair_data(pki)
    data["requestheader-client-ca-file"] += rotated.cert.read_text()
    config = FrontProxyConfig.from_configmap(data)
    configure_client_auth(served.context, config)  # again, on the context already serving
    served.auth.update(config)
    assert await call(served, proxy) == (200, {"user": "alice", "groups": ["dev"]})
