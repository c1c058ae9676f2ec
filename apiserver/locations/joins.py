"""Joining a pull location: the names, and whether a CertificateSigningRequest may be approved.

`kubectl mc join NAME --mode pull` (the plugin, which cannot import this package: the same
names are in `kubectl_mc/join_pull.py`, and a unit test says they agree) makes a bootstrap
token whose extra group is `system:bootstrappers:kmc:<name>` and writes the token's id on the
Location. The agent uses the token once, to ask the hub for a client certificate for
`kmc:location:<name>` in groups `kmc:locations` and `kmc:join:<token id>`; kmc-apiserver's
join loop approves it when `judge` here says so, and marks the join used on the Location so
the token cannot be used again. Renewals are asked by the certificate's own identity, for the
same join. The agent's rights on the hub are bound to its join's group, so a new join (or
`kubectl mc revoke`) leaves an older certificate with nothing it may open. Pure: no I/O.
"""

from __future__ import annotations

import base64
from typing import NamedTuple

from cryptography import x509
from cryptography.x509.oid import NameOID

from apiserver.objects import Obj

SIGNER = "kubernetes.io/kube-apiserver-client"
USER_PREFIX = "kmc:location:"
GROUP = "kmc:locations"
BOOTSTRAP_GROUP_PREFIX = "system:bootstrappers:kmc:"
BOOTSTRAP_USER_PREFIX = "system:bootstrap:"
JOIN_GROUP_PREFIX = "kmc:join:"  # + the join's token id: the group its rights are bound to
# On the Location: the id of the token its latest join made, the join that used it
# ("<token id>:<CSR name>", written by kmc-apiserver as it approves), and a join revoked
# (its token id, written by `kubectl mc revoke`).
TOKEN_ANNOTATION = "kmc.dev/join-token-id"
USED_ANNOTATION = "kmc.dev/join-used"
REVOKED_ANNOTATION = "kmc.dev/join-revoked"
# What a client certificate may be used for (the signer allows no more).
USAGES = frozenset({"digital signature", "key encipherment", "client auth"})


def user(location: str) -> str:
    return f"{USER_PREFIX}{location}"


def bootstrap_group(location: str) -> str:
    return f"{BOOTSTRAP_GROUP_PREFIX}{location}"


def join_group(token_id: str) -> str:
    return f"{JOIN_GROUP_PREFIX}{token_id}"


def revoked(metadata: Obj) -> str:
    """The id of a Location's latest join (from its metadata) if `kubectl mc revoke` revoked
    it, else ""."""
    annotations = metadata.get("annotations") or {}
    current = str(annotations.get(TOKEN_ANNOTATION) or "")
    return current if current and annotations.get(REVOKED_ANNOTATION) == current else ""


def used_mark(token_id: str, csr: str) -> str:
    return f"{token_id}:{csr}"


class Verdict(NamedTuple):
    approve: bool
    reason: str  # the Event's reason when refused; the approval condition's when approved
    message: str
    first: bool = False  # a join's first certificate (its token is used up by it)
    token_id: str = ""


def refused(reason: str, message: str) -> Verdict:
    return Verdict(False, reason, message)


def subject(csr: Obj) -> tuple[str, list[str], bool] | None:
    """The common name and organizations the request asks for, and whether it asks for
    anything else (other subject fields, extensions); None when it cannot be read."""
    try:
        pem = base64.b64decode(str((csr.get("spec") or {}).get("request") or ""))
        request = x509.load_pem_x509_csr(pem)
    except ValueError:
        return None
    names = request.subject
    common = [str(a.value) for a in names.get_attributes_for_oid(NameOID.COMMON_NAME)]
    orgs = [str(a.value) for a in names.get_attributes_for_oid(NameOID.ORGANIZATION_NAME)]
    others = len(names) != len(common) + len(orgs) or len(request.extensions) > 0
    if len(common) != 1:
        return None
    return common[0], orgs, others


def location_of(csr: Obj) -> str | None:
    """The location a request of our signer names (its CN), if it looks like ours at all."""
    if (csr.get("spec") or {}).get("signerName") != SIGNER:
        return None
    found = subject(csr)
    if found is None or not found[0].startswith(USER_PREFIX):
        return None
    return found[0].removeprefix(USER_PREFIX) or None


def decided(csr: Obj) -> bool:
    """Approved, denied or failed already, or issued: nothing left to decide."""
    status = csr.get("status") or {}
    if status.get("certificate"):
        return True
    return any(
        c.get("type") in ("Approved", "Denied", "Failed") for c in status.get("conditions") or []
    )


def judge(csr: Obj, location: Obj | None) -> Verdict:
    """Whether to approve `csr` (of our signer, naming a location) given that Location."""
    spec = csr.get("spec") or {}
    name = csr["metadata"]["name"]
    found = subject(csr)
    if found is None:
        return refused("BadRequest", "its request is not a readable PEM CSR with one CN")
    common, orgs, others = found
    where = common.removeprefix(USER_PREFIX)
    joined = [o.removeprefix(JOIN_GROUP_PREFIX) for o in orgs if o.startswith(JOIN_GROUP_PREFIX)]
    if sorted(orgs) != sorted([GROUP, *map(join_group, joined)]) or len(joined) != 1 or others:
        return refused(
            "BadSubject",
            f'a location\'s certificate is CN "{common}", O "{GROUP}" and O '
            f'"{JOIN_GROUP_PREFIX}<its join\'s token id>", and nothing else; this one asks '
            f"for O {orgs}{' and more' if others else ''}",
        )
    (join_id,) = joined
    usages = set(spec.get("usages") or [])
    if "client auth" not in usages or not usages <= USAGES:
        return refused(
            "BadUsages",
            f"usages must include client auth, within {sorted(USAGES)}: {sorted(usages)}",
        )
    if location is None:
        return refused("NoLocation", f"no Location {where} on the hub")
    if ((location.get("spec") or {}).get("mode") or "Push") != "Pull":
        return refused("PushLocation", f"location {where} is a push location: nothing joins it")
    annotations = (location.get("metadata") or {}).get("annotations") or {}
    current = str(annotations.get(TOKEN_ANNOTATION) or "")
    again = f"run `kubectl mc join {where} --mode pull` again"
    if revoked(location.get("metadata") or {}):
        return refused(
            "JoinRevoked", f"location {where}'s join (token {current}) was revoked: {again}"
        )
    username = str(spec.get("username") or "")
    groups = set(spec.get("groups") or [])
    if username == user(where) and GROUP in groups:
        if join_id != current or join_group(current) not in groups:
            return refused(
                "StaleJoin",
                f"a renewal for join {join_id} of location {where}, asked as join "
                f"{sorted(g for g in groups if g.startswith(JOIN_GROUP_PREFIX))}: its latest "
                f"join is {current or 'none'}; {again}",
            )
        return Verdict(True, "KmcLocationRenewal", f"renewal by location {where}'s agent")
    if not username.startswith(BOOTSTRAP_USER_PREFIX) or bootstrap_group(where) not in groups:
        return refused(
            "NotItsJoin",
            f"requested by {username or 'nobody'}: neither the bootstrap token of a join of "
            f"location {where} (group {bootstrap_group(where)}) nor its agent ({user(where)})",
        )
    token_id = username.removeprefix(BOOTSTRAP_USER_PREFIX)
    if current != token_id:
        return refused(
            "StaleJoin",
            f"bootstrap token {token_id} is not the one of location {where}'s latest join",
        )
    if join_id != token_id:
        return refused(
            "BadSubject",
            f"asked with the token of join {token_id}, for a certificate of join {join_id}",
        )
    used = str(annotations.get(USED_ANNOTATION) or "")
    if used.partition(":")[0] == token_id and used != used_mark(token_id, name):
        return refused(
            "JoinUsed",
            f"location {where}'s join (token {token_id}) was used already, by CSR "
            f"{used.partition(':')[2]}: {again}",
        )
    return Verdict(
        True, "KmcLocationJoin", f"join of location {where} (token {token_id})", True, token_id
    )
