"""The agent's hub identity: a client certificate for `kmc:location:<name>` (docs/pull.md).

`kubectl mc join NAME --mode pull` gives a one-use bootstrap token. With it the agent makes
an EC key here, asks the hub for a certificate (a CertificateSigningRequest of signer
`kubernetes.io/kube-apiserver-client`, CN `kmc:location:<name>`, O `kmc:locations` and
`kmc:join:<token id>`: its rights on the hub are bound to that join), which kmc-apiserver
approves for that join only, and waits for the hub's controller-manager to sign
it. Key and certificate are kept in a Secret in its own cluster (`kmc-system/kmc-agent-identity`,
type `kubernetes.io/tls`) — never on the hub — and used for everything after, across
restarts. Before it expires (at 70 to 80% of its life) the agent asks for the next one the same
way, as itself and for the same join, and switches the hub client to it once it is issued.
"""

from __future__ import annotations

import asyncio
import base64
import datetime
import logging
import random
import secrets
import ssl
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from apiserver.kube.client import ApiError, Credentials
from apiserver.locations import joins
from apiserver.models.location import SYSTEM_NAMESPACE
from apiserver.objects import Obj

log = logging.getLogger(__name__)

CSRS = "/apis/certificates.k8s.io/v1/certificatesigningrequests"
SECRET = "kmc-agent-identity"
RENEW_AT = (0.7, 0.8)  # share of a certificate's life after which the next one is asked for
WAIT_NOTE = 30.0  # seconds between log lines while a request waits for approval


class IdentityError(Exception):
    """What went wrong getting a certificate, and what to do, in one line."""


class Client(Protocol):
    """What is asked of a cluster (a `kube.client.Kube`)."""

    async def get(self, path: str, **params: str) -> Obj: ...

    async def create(self, path: str, body: Obj) -> Obj: ...

    async def request(self, method: str, path: str, *, body: Obj) -> Obj: ...


@dataclass(frozen=True)
class Identity:
    key: bytes  # PEM
    cert: bytes  # PEM
    not_before: datetime.datetime
    not_after: datetime.datetime
    common_name: str = ""
    join_id: str = ""  # the join it was issued for (its `kmc:join:<token id>` organization)
    serial: int = 0

    @classmethod
    def of(cls, key: bytes, cert: bytes) -> Identity:
        parsed = x509.load_pem_x509_certificate(cert)
        names = parsed.subject.get_attributes_for_oid(NameOID.COMMON_NAME)
        orgs = parsed.subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME)
        joined = [str(o.value) for o in orgs if str(o.value).startswith(joins.JOIN_GROUP_PREFIX)]
        return cls(
            key,
            cert,
            parsed.not_valid_before_utc,
            parsed.not_valid_after_utc,
            str(names[0].value) if names else "",
            joined[0].removeprefix(joins.JOIN_GROUP_PREFIX) if len(joined) == 1 else "",
            parsed.serial_number,
        )

    def renew_after(self, draw: float | None = None) -> datetime.datetime:
        """When to ask for the next one: 70 to 80% through its life (jittered, so a fleet
        joined at once does not renew at once)."""
        share = draw if draw is not None else random.uniform(*RENEW_AT)
        return self.not_before + (self.not_after - self.not_before) * share


def token_id(token: str) -> str:
    """A bootstrap token's id: what comes before its dot."""
    return token.partition(".")[0]


def reusable(kept: Identity | None, token: str | None, now: datetime.datetime) -> bool:
    """Whether to use the kept certificate: unexpired, and of the join of the bootstrap token
    given, if one is (a token of a newer join replaces it: how a revoked agent comes back)."""
    if kept is None or kept.not_after <= now:
        return False
    return token_id(token or "") in ("", kept.join_id)


def new_request(location: str, join_id: str) -> tuple[bytes, bytes]:
    """A fresh EC P-256 key and a CSR for `kmc:location:<location>` in `kmc:locations` and
    `kmc:join:<join_id>` (PEM)."""
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name(
        [
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, joins.GROUP),
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, joins.join_group(join_id)),
            x509.NameAttribute(NameOID.COMMON_NAME, joins.user(location)),
        ]
    )
    request = (
        x509.CertificateSigningRequestBuilder().subject_name(subject).sign(key, hashes.SHA256())
    )
    key_pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    return key_pem, request.public_bytes(serialization.Encoding.PEM)


def csr_object(location: str, request: bytes, seconds: int | None) -> Obj:
    spec: Obj = {
        "request": base64.b64encode(request).decode(),
        "signerName": joins.SIGNER,
        "usages": ["digital signature", "client auth"],
    }
    if seconds:
        spec["expirationSeconds"] = seconds
    return {
        "apiVersion": "certificates.k8s.io/v1",
        "kind": "CertificateSigningRequest",
        "metadata": {"name": f"kmc-agent-{location}-{secrets.token_hex(4)}"},
        "spec": spec,
    }


def credentials(server: str, ca_file: str | None, identity: Identity) -> Credentials:
    """Hub credentials presenting `identity` (ssl wants files: written, loaded, removed)."""
    context = ssl.create_default_context(cafile=ca_file or None)
    with tempfile.TemporaryDirectory(prefix="kmc-agent-") as folder:
        cert, key = Path(folder) / "tls.crt", Path(folder) / "tls.key"
        key.touch(mode=0o600)
        key.write_bytes(identity.key)
        cert.write_bytes(identity.cert)
        context.load_cert_chain(str(cert), str(key))
    return Credentials(server=server.rstrip("/"), ssl=context)


def secret_path(name: str = SECRET) -> str:
    return f"/api/v1/namespaces/{SYSTEM_NAMESPACE}/secrets/{name}"


async def stored(cluster: Client, name: str = SECRET) -> Identity | None:
    """The identity kept in this cluster, if any and readable."""
    try:
        secret = await cluster.get(secret_path(name))
    except ApiError as err:
        if err.code == 404:
            return None
        raise
    data = secret.get("data") or {}
    try:
        return Identity.of(base64.b64decode(data["tls.key"]), base64.b64decode(data["tls.crt"]))
    except (KeyError, ValueError) as err:
        log.warning(
            "the identity in Secret %s cannot be read (%s): asking for a new one", name, err
        )
        return None


async def store(cluster: Client, identity: Identity, hub: str, name: str = SECRET) -> None:
    """Keep it in this cluster (replacing the one there), before it is used."""
    body: Obj = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {
            "name": name,
            "namespace": SYSTEM_NAMESPACE,
            "annotations": {"kmc.dev/hub": hub},
            "labels": {"app.kubernetes.io/part-of": "kubectl-mc"},
        },
        "type": "kubernetes.io/tls",
        "data": {
            "tls.crt": base64.b64encode(identity.cert).decode(),
            "tls.key": base64.b64encode(identity.key).decode(),
        },
    }
    secrets_path = f"/api/v1/namespaces/{SYSTEM_NAMESPACE}/secrets"
    try:
        await cluster.create(secrets_path, body)
    except ApiError as err:
        if err.code == 404:  # no kmc-system yet (an agent run outside a pod): make it
            namespace = {"apiVersion": "v1", "kind": "Namespace"}
            await cluster.create(
                "/api/v1/namespaces", {**namespace, "metadata": {"name": SYSTEM_NAMESPACE}}
            )
            await cluster.create(secrets_path, body)
        elif err.code == 409:
            await cluster.request("PUT", secret_path(name), body=body)
        else:
            raise


async def ask(
    hub: Client,
    location: str,
    join_id: str,
    seconds: int | None,
    poll: float = 1.0,
    timeout: float = 600.0,
) -> Identity:
    """Ask the hub for a certificate of join `join_id` as whoever `hub` is (the token, or
    the current certificate) and wait until it is issued."""
    key, request = new_request(location, join_id)
    body = csr_object(location, request, seconds)
    name = body["metadata"]["name"]
    try:
        await hub.create(CSRS, body)
    except ApiError as err:
        if err.code == 401:
            raise IdentityError(
                "the hub refused the bootstrap token (401 Unauthorized): it was used already, "
                "has expired, or is not one; run `kubectl mc join "
                f"{location} --mode pull` again for a new one"
            ) from err
        if err.code == 403:
            raise IdentityError(
                f"the hub refused the certificate request (403: {err}): the location's join "
                "was removed (`kubectl mc unjoin`), revoked (`kubectl mc revoke`), replaced by "
                f"a newer one, or never made; run `kubectl mc join {location} --mode pull` "
                "again and give this agent the new token"
            ) from err
        raise
    log.info("asked the hub for a certificate: CertificateSigningRequest %s", name)
    loop = asyncio.get_running_loop()
    started = noted = loop.time()
    while True:
        try:
            csr = await hub.get(f"{CSRS}/{name}")
        except ApiError as err:
            if err.code != 401:
                raise
            # kube-apiserver takes a token it accepted within 10 s as still good: a token
            # used just before was taken for the request, and is refused now.
            raise IdentityError(
                f"the hub refused the bootstrap token (401 Unauthorized) after taking request "
                f"{name} (left pending): it was used already; run `kubectl mc join "
                f"{location} --mode pull` again for a new one"
            ) from err
        status = csr.get("status") or {}
        for condition in status.get("conditions") or []:
            if condition.get("type") in ("Denied", "Failed") and condition.get("status") == "True":
                raise IdentityError(
                    f"CertificateSigningRequest {name} {condition['type'].lower()}: "
                    f"{condition.get('reason', '')} {condition.get('message', '')}".strip()
                )
        if status.get("certificate"):
            identity = Identity.of(key, base64.b64decode(status["certificate"]))
            log.info("certificate issued, valid until %s", identity.not_after.isoformat())
            return identity
        now = loop.time()
        if now - started > timeout:
            raise IdentityError(
                f"CertificateSigningRequest {name} was not approved within {timeout:g}s: "
                f"`kubectl describe csr {name}` on the hub says why"
            )
        if now - noted > WAIT_NOTE:
            noted = now
            log.info("CertificateSigningRequest %s waits for approval", name)
        await asyncio.sleep(poll)
