"""Who is calling: only the hub's aggregator, speaking for a user it has authenticated.

kmc-apiserver is an aggregated API server. Every request we serve should come through the hub's
kube-apiserver, which authenticates the real user, then proxies the request to us over TLS with
its front-proxy client certificate and the user in `X-Remote-User`, `X-Remote-Group`,
`X-Remote-Extra-<key>` (and `X-Remote-Uid`). Those headers are only as trustworthy as the
certificate that carries them, so a request is authenticated when, and only when, the client
certificate was issued by the hub's request-header CA, is valid now, may be used for client
auth, and has a common name the hub allows (`requestheader-allowed-names`). Everything else is
401, as in Kubernetes' own `headerrequest` + `x509` authenticators, which this follows.

The hub publishes all of that in the ConfigMap `kube-system/extension-apiserver-authentication`
and rotates it there, so `FrontProxyWatch` keeps the configuration current from a watch.

Python's `ssl` cannot take an arbitrary client certificate and leave the judgement to us: with
`CERT_OPTIONAL` a presented certificate must chain to a CA loaded into the context, or the
handshake fails. So the serving context trusts the request-header CA *and* the hub's client CA
(`trust_bundle`): certificates of ordinary hub users complete the handshake and get a proper 401
from `Authenticator.authenticate`, while a certificate from a CA the hub does not know at all
fails the handshake. OpenSSL only adds to a context's trust store; a CA that is *removed* from the
ConfigMap stays trusted for the handshake until the process gets a new context, but it is no
longer accepted by `authenticate`, which reads the current configuration on every request.
"""

from __future__ import annotations

import asyncio
import datetime
import json
import logging
import re
import ssl
import urllib.parse
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from aiohttp import web
from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
from multidict import MultiMapping

from apiserver.kube.client import Kube, failure
from apiserver.kube.informer import Informer
from apiserver.objects import Obj

log = logging.getLogger(__name__)

CONFIGMAP_NAMESPACE = "kube-system"
CONFIGMAP_NAME = "extension-apiserver-authentication"
CONFIGMAP = f"{CONFIGMAP_NAMESPACE}/{CONFIGMAP_NAME}"

# What the aggregator sends (client-go's SetAuthProxyHeaders uses these literal names, and strips
# them from the caller's own request first), used when the ConfigMap leaves a list out.
DEFAULT_USERNAME_HEADERS = ("X-Remote-User",)
DEFAULT_GROUP_HEADERS = ("X-Remote-Group",)
DEFAULT_EXTRA_PREFIXES = ("X-Remote-Extra-",)


@dataclass(frozen=True)
class UserInfo:
    """The user the hub authenticated, as Kubernetes' `user.Info` (uid "" when not known).

    `extra` is not copied defensively: treat it as read-only.
    """

    name: str
    uid: str = ""
    groups: tuple[str, ...] = ()
    extra: Mapping[str, tuple[str, ...]] = field(default_factory=dict)


class Unauthenticated(Exception):
    """The request does not come from the hub's aggregator; the caller answers 401.

    `reason` is for our log only: like kube-apiserver, tell the client just "Unauthorized".
    """

    def __init__(self, reason: str) -> None:
        self.reason = reason
        super().__init__(reason)


class ConfigError(ValueError):
    """The hub's front-proxy ConfigMap cannot be used; the message says what to fix."""


@dataclass(frozen=True)
class FrontProxyConfig:
    """The parts of `kube-system/extension-apiserver-authentication` that authenticate us."""

    requestheader_cas: tuple[x509.Certificate, ...]
    allowed_names: tuple[str, ...] = ()  # empty: any common name the CA signed
    username_headers: tuple[str, ...] = DEFAULT_USERNAME_HEADERS
    group_headers: tuple[str, ...] = DEFAULT_GROUP_HEADERS
    extra_prefixes: tuple[str, ...] = DEFAULT_EXTRA_PREFIXES
    uid_headers: tuple[str, ...] = ()
    client_cas: tuple[x509.Certificate, ...] = ()

    @classmethod
    def from_configmap(cls, data: Mapping[str, str]) -> FrontProxyConfig:
        """Parse the ConfigMap's `data` (lists are JSON arrays there, CAs PEM bundles).

        A missing or empty header list takes the name the aggregator sends (client-go's
        SetAuthProxyHeaders always uses those, whatever the hub's flags), except the uid: the hub
        writes `requestheader-uid-headers` only when its kube-apiserver sets that flag, and an
        aggregator from before uid support passes a caller's own `X-Remote-Uid` on untouched, so
        without the key we read no uid at all (as Kubernetes' delegating authenticator does).
        """
        ca_pem = data.get("requestheader-client-ca-file", "")
        if not ca_pem.strip():
            raise ConfigError(
                f"{CONFIGMAP} has no requestheader-client-ca-file: API aggregation is not "
                "configured on the hub. Start its kube-apiserver with "
                "--requestheader-client-ca-file (the CA of its front-proxy client certificate), "
                "--proxy-client-cert-file, --proxy-client-key-file and "
                "--requestheader-allowed-names"
            )
        client_pem = data.get("client-ca-file", "")
        return cls(
            requestheader_cas=_certificates(ca_pem, "requestheader-client-ca-file"),
            allowed_names=_strings(data, "requestheader-allowed-names", ()),
            username_headers=_headers(
                data, "requestheader-username-headers", DEFAULT_USERNAME_HEADERS
            ),
            group_headers=_headers(data, "requestheader-group-headers", DEFAULT_GROUP_HEADERS),
            extra_prefixes=_headers(
                data, "requestheader-extra-headers-prefix", DEFAULT_EXTRA_PREFIXES
            ),
            uid_headers=_headers(data, "requestheader-uid-headers", ()),
            client_cas=_certificates(client_pem, "client-ca-file") if client_pem.strip() else (),
        )

    def lets_hub_users_proxy(self) -> bool:
        """True when any client certificate of the hub could pass as the front proxy: the
        request-header CA also signs user certificates and no common name is required."""
        return not self.allowed_names and bool(set(self.requestheader_cas) & set(self.client_cas))


def _strings(data: Mapping[str, str], key: str, default: tuple[str, ...]) -> tuple[str, ...]:
    raw = data.get(key, "")
    if not raw.strip():
        return default
    try:
        value = json.loads(raw)
    except json.JSONDecodeError as err:
        raise ConfigError(f"{CONFIGMAP}: {key} is not a JSON list: {err}") from err
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ConfigError(f"{CONFIGMAP}: {key} must be a JSON list of strings, not {raw!r}")
    return tuple(value)


def _headers(data: Mapping[str, str], key: str, default: tuple[str, ...]) -> tuple[str, ...]:
    names = _strings(data, key, default)
    if any(not n.strip() for n in names):
        raise ConfigError(f"{CONFIGMAP}: {key} names an empty header: {data.get(key)!r}")
    return tuple(n.strip() for n in names) or default


def _certificates(pem: str, key: str) -> tuple[x509.Certificate, ...]:
    try:
        return tuple(x509.load_pem_x509_certificates(pem.encode()))
    except ValueError as err:
        raise ConfigError(f"{CONFIGMAP}: {key} holds no readable PEM certificate: {err}") from err


def trust_bundle(config: FrontProxyConfig) -> str:
    """The PEM the serving context verifies client certificates against: the request-header
    CA(s), so the aggregator gets in, and the client CA(s), so a hub user's certificate is
    refused with a 401 (by `authenticate`) rather than a failed handshake."""
    unique = dict.fromkeys((*config.requestheader_cas, *config.client_cas))
    return "".join(c.public_bytes(serialization.Encoding.PEM).decode() for c in unique)


def configure_client_auth(context: ssl.SSLContext, config: FrontProxyConfig) -> None:
    """Ask for client certificates and trust `trust_bundle(config)` for the handshake.

    Call it again when the ConfigMap changes: loading adds CAs (known ones are ignored) and
    affects new connections at once. Nothing can be taken out of a context's trust store; to
    stop a removed CA from completing handshakes, serve from a new context.
    """
    context.verify_mode = ssl.CERT_OPTIONAL
    context.load_verify_locations(cadata=trust_bundle(config))


def peer_certificate(request: web.Request) -> bytes | None:
    """The DER of the client's certificate (already chain-checked by the handshake), or None
    on plain HTTP and when the client sent none."""
    transport = request.transport
    if transport is None:
        return None
    ssl_object = transport.get_extra_info("ssl_object")
    if not isinstance(ssl_object, ssl.SSLObject | ssl.SSLSocket):
        return None
    return ssl_object.getpeercert(binary_form=True)


def _utcnow() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


Window = tuple[datetime.datetime, datetime.datetime]

# The aggregator presents one certificate (two while it rotates): remembering the few that
# passed spares a signature check (~0.25 ms) on every request.
VERIFIED_CACHE_SIZE = 8


class Authenticator:
    """Turns a proxied request into the hub's user, or refuses it; the configuration can be
    replaced at any time (`update`), each request reading one consistent snapshot."""

    def __init__(
        self,
        config: FrontProxyConfig | None = None,
        clock: Callable[[], datetime.datetime] = _utcnow,
    ) -> None:
        self.config = config
        self.clock = clock
        self._verified: dict[bytes, Window] = {}  # DER → when it passes, under _verified_for
        self._verified_for: FrontProxyConfig | None = None

    def update(self, config: FrontProxyConfig) -> None:
        self.config = config

    def authenticate(self, peer_cert_der: bytes | None, headers: MultiMapping[str]) -> UserInfo:
        config = self.config
        if config is None:
            raise Unauthenticated(f"no front-proxy configuration read from the hub's {CONFIGMAP}")
        if peer_cert_der is None:
            raise Unauthenticated("no client certificate: only the hub's aggregator is served")
        self._check_certificate(peer_cert_der, config, self.clock())

        name = _first_value(headers, config.username_headers)
        if not name:
            wanted = "/".join(config.username_headers) or "(no username header configured)"
            raise Unauthenticated(f"front-proxy request without a user in {wanted}")
        return UserInfo(
            name=name,
            uid=_first_value(headers, config.uid_headers),
            groups=tuple(
                value
                for header in config.group_headers
                for value in headers.getall(header, ())
                if value
            ),
            extra=_extra(headers, config.extra_prefixes),
        )

    def authenticate_caller(self, peer_cert_der: bytes | None) -> str:
        """The hub's apiserver calling our admission webhook: the same certificate check as
        for proxied requests (the request-header CA, an allowed name), but no user is named —
        the caller is the hub itself. Returns the certificate's common name."""
        config = self.config
        if config is None:
            raise Unauthenticated(f"no front-proxy configuration read from the hub's {CONFIGMAP}")
        if peer_cert_der is None:
            raise Unauthenticated(
                "no client certificate: the admission webhook answers only the hub's apiserver"
            )
        self._check_certificate(peer_cert_der, config, self.clock())
        return _common_name(x509.load_der_x509_certificate(peer_cert_der))

    def _check_certificate(
        self, der: bytes, config: FrontProxyConfig, now: datetime.datetime
    ) -> None:
        if self._verified_for is not config:
            self._verified, self._verified_for = {}, config
        window = self._verified.get(der)
        if window is not None and window[0] <= now <= window[1]:
            return
        try:
            cert = x509.load_der_x509_certificate(der)
        except ValueError as err:
            raise Unauthenticated(f"unreadable client certificate: {err}") from err
        window = _verify_front_proxy(cert, config, now)
        if len(self._verified) >= VERIFIED_CACHE_SIZE:
            self._verified.clear()
        self._verified[der] = window


def _verify_front_proxy(
    cert: x509.Certificate, config: FrontProxyConfig, now: datetime.datetime
) -> Window:
    """Refuse `cert` unless it may speak for users now; return while it (and its CA) may."""
    cn = _common_name(cert)
    who = f"client certificate CN={cn!r}"
    if not _valid_at(cert, now):
        raise Unauthenticated(
            f"{who} is not valid now (valid from {cert.not_valid_before_utc:%Y-%m-%dT%H:%M:%SZ} "
            f"to {cert.not_valid_after_utc:%Y-%m-%dT%H:%M:%SZ})"
        )
    issuer = next(
        (ca for ca in config.requestheader_cas if _valid_at(ca, now) and _issued_by(cert, ca)),
        None,
    )
    if issuer is None:
        raise Unauthenticated(
            f"{who} (issuer {cert.issuer.rfc4514_string()}) is not signed by the hub's "
            "request-header CA"
        )
    try:
        usages = cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    except x509.ExtensionNotFound:
        usages = None
    if usages is not None and not {
        ExtendedKeyUsageOID.CLIENT_AUTH,
        ExtendedKeyUsageOID.ANY_EXTENDED_KEY_USAGE,
    } & set(usages):
        raise Unauthenticated(f"{who} may not be used for client authentication")
    if config.allowed_names and cn not in config.allowed_names:
        raise Unauthenticated(
            f"{who} is not in requestheader-allowed-names {list(config.allowed_names)}"
        )
    return (
        max(cert.not_valid_before_utc, issuer.not_valid_before_utc),
        min(cert.not_valid_after_utc, issuer.not_valid_after_utc),
    )


def _common_name(cert: x509.Certificate) -> str:
    # The last CN, as Go's pkix.Name.CommonName keeps it.
    names = cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)
    if not names:
        return ""
    value = names[-1].value
    return value if isinstance(value, str) else value.decode(errors="replace")


def _valid_at(cert: x509.Certificate, now: datetime.datetime) -> bool:
    return cert.not_valid_before_utc <= now <= cert.not_valid_after_utc


def _issued_by(cert: x509.Certificate, ca: x509.Certificate) -> bool:
    try:
        cert.verify_directly_issued_by(ca)
    except (ValueError, TypeError, InvalidSignature):
        return False
    return True


def _first_value(headers: MultiMapping[str], names: tuple[str, ...]) -> str:
    """The first value of the first listed header that has a non-empty one (Go's Header.Get)."""
    for name in names:
        value = headers.get(name, "")
        if value:
            return value
    return ""


def _extra(headers: MultiMapping[str], prefixes: tuple[str, ...]) -> dict[str, tuple[str, ...]]:
    """`<prefix><key>: value` headers, every value kept; the key lower-cased, then %-decoded
    (the aggregator escapes what a header name cannot hold, e.g. `/` in `example.org/scopes`)."""
    found: dict[str, list[str]] = {}
    for prefix in prefixes:
        for header, value in headers.items():
            if len(header) <= len(prefix) or header[: len(prefix)].lower() != prefix.lower():
                continue
            key = _unescape_extra_key(header[len(prefix) :].lower())
            found.setdefault(key, []).append(value)
    return {key: tuple(values) for key, values in found.items()}


_BAD_ESCAPE = re.compile(r"%(?![0-9A-Fa-f]{2})")


def _unescape_extra_key(encoded: str) -> str:
    """Go's url.PathUnescape, keeping the key as sent when it is not a valid escape."""
    if _BAD_ESCAPE.search(encoded):
        return encoded
    try:
        return urllib.parse.unquote_to_bytes(encoded).decode()
    except UnicodeDecodeError:
        return encoded


def unauthorized_status() -> Obj:
    """The body of a 401, as kube-apiserver sends it (the reason stays in our log)."""
    return failure(401, "Unauthorized", "Unauthorized")


class FrontProxyWatch:
    """Keeps an `Authenticator` (and, through `on_change`, the TLS trust) in step with the hub's
    `kube-system/extension-apiserver-authentication`.

    A ConfigMap we cannot use is logged and the previous configuration stays; so does a deleted
    one (kube-apiserver writes it again within seconds). `loaded` is set once a configuration is
    in place: until then every request is refused, so readiness should wait for it.
    """

    def __init__(
        self,
        hub: Kube,
        authenticator: Authenticator,
        on_change: Callable[[FrontProxyConfig], None] | None = None,
    ) -> None:
        self.authenticator = authenticator
        self.on_change = on_change
        self.loaded = asyncio.Event()
        self.informer = Informer(
            hub,
            f"/api/v1/namespaces/{CONFIGMAP_NAMESPACE}/configmaps",
            self._changed,
            params={"fieldSelector": f"metadata.name={CONFIGMAP_NAME}"},
        )

    async def run(self) -> None:
        missing = asyncio.create_task(self._report_missing())
        try:
            await self.informer.run()
        finally:
            missing.cancel()

    async def _report_missing(self) -> None:
        await self.informer.synced.wait()
        if not self.informer.cache:
            log.error(
                "the hub has no %s: API aggregation is not configured there, so every request "
                "is refused (401)",
                CONFIGMAP,
            )

    async def _changed(self, kind: str, obj: Obj, _: Obj | None) -> None:
        if kind == "DELETED":
            log.warning("%s was deleted on the hub; keeping the last configuration", CONFIGMAP)
            return
        try:
            config = FrontProxyConfig.from_configmap(obj.get("data") or {})
        except ConfigError as err:
            kept = (
                "keeping the previous configuration"
                if self.authenticator.config
                else "refusing every request (401) until it is fixed"
            )
            log.error("%s; %s", err, kept)
            return
        if config == self.authenticator.config:
            return
        if self.on_change is not None:
            self.on_change(config)  # trust new CAs for the handshake first
        self.authenticator.update(config)
        self.loaded.set()
        log.info(
            "front-proxy configuration from %s: %d request-header CA(s), allowed names %s",
            CONFIGMAP,
            len(config.requestheader_cas),
            list(config.allowed_names) or "(any)",
        )
        if config.lets_hub_users_proxy():
            log.warning(
                "%s: requestheader-allowed-names is empty and the request-header CA also signs "
                "client certificates, so any hub user with a certificate can act as any user; "
                "set --requestheader-allowed-names on the hub's kube-apiserver",
                CONFIGMAP,
            )


AUTHENTICATOR = web.AppKey("authenticator", Authenticator)
FRONT_PROXY = web.AppKey("front_proxy", FrontProxyWatch)
