"""Keep a Location's ServiceAccount token alive (`kubectl mc join` with a short-lived
credential, see kubectl_mc/location_account.py).

Such a Location's Secret says whose token it holds (annotation `kmc.dev/service-account`).
When a third of the token's lifetime is left, kmc-apiserver asks the child for a new one
(TokenRequest on the account's own `token` sub-resource, which the account may create for
itself and no one else), authenticating with the token still valid, and writes it into the
Secret; the fleet then rebuilds that child's client from the new Secret version. Pure
decisions here, I/O in the caller (`fleet.py`).
"""

from __future__ import annotations

import base64
import binascii
import json
import time

import yaml

from apiserver.contract import SERVICE_ACCOUNT
from apiserver.objects import Obj

TOKEN_SECONDS = 24 * 3600
LEFT = 1 / 3  # renew when this share of the token's lifetime is left


def account(secret: Obj) -> tuple[str, str] | None:
    """(namespace, name) of the ServiceAccount whose token the Secret holds, if it says so."""
    value = ((secret.get("metadata") or {}).get("annotations") or {}).get(SERVICE_ACCOUNT, "")
    namespace, _, name = str(value).partition("/")
    return (namespace, name) if namespace and name else None


def claims(token: str) -> Obj:
    """A JWT's claims, unverified ({} for anything else): only its times are read."""
    parts = token.split(".")
    if len(parts) != 3:
        return {}
    try:
        data = json.loads(base64.urlsafe_b64decode(parts[1] + "=" * (-len(parts[1]) % 4)))
    except (ValueError, binascii.Error):
        return {}
    return data if isinstance(data, dict) else {}


def due(token: str, now: float | None = None) -> bool:
    """Is a third or less of the token's lifetime left (or is its lifetime unknown)?"""
    found = claims(token)
    exp, iat = found.get("exp"), found.get("iat") or found.get("nbf")
    if not isinstance(exp, int | float) or not isinstance(iat, int | float) or exp <= iat:
        return True
    now = time.time() if now is None else now
    return exp - now <= (exp - iat) * LEFT


def token_of(config: Obj) -> str:
    users = config.get("users") or []
    return str(((users[0] if users else {}).get("user") or {}).get("token") or "")


def with_token(config: Obj, token: str) -> Obj:
    """The same kubeconfig, its (one) user's token replaced."""
    users = config.get("users") or [{"name": "location", "user": {}}]
    first = {**users[0], "user": {**(users[0].get("user") or {}), "token": token}}
    return {**config, "users": [first, *users[1:]]}


def token_path(namespace: str, name: str) -> str:
    return f"/api/v1/namespaces/{namespace}/serviceaccounts/{name}/token"


def token_request() -> Obj:
    return {
        "apiVersion": "authentication.k8s.io/v1",
        "kind": "TokenRequest",
        "spec": {"expirationSeconds": TOKEN_SECONDS},
    }


def secret_patch(key: str, config: Obj) -> Obj:
    text = yaml.safe_dump(config, default_flow_style=False)
    return {"data": {key: base64.b64encode(text.encode()).decode()}}
