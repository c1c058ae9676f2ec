"""The fleet: one HTTP client per child cluster, built from its Location's Secret.

Every loop that talks to children (location probes, placement schema checks, sync,
punch-through) takes its client from here, so credentials are read and turned into TLS
contexts once per Secret version. Secret contents never leave this module: errors name the
Secret and the problem, never the data.
"""

from __future__ import annotations

import base64
import binascii
import logging
from collections.abc import Callable
from dataclasses import dataclass

import aiohttp
from aiohttp import web

from apiserver.kube import config as kubeconfig
from apiserver.kube.client import ApiError, Kube
from apiserver.locations import renew
from apiserver.models.location import Location
from apiserver.objects import Obj

log = logging.getLogger(__name__)


class CredentialsError(Exception):
    """The Location's credentials cannot be used; the message says which Secret and why."""


@dataclass(frozen=True)
class _Entry:
    secret_version: str
    kube: Kube
    token: str = ""  # a bearer token in the Secret, if any (renewed when it is an account's)


class Fleet:
    def __init__(
        self,
        hub: Kube,
        session: aiohttp.ClientSession,
        *,
        agent: str = "kmc-apiserver",
        guard: Callable[[], None] | None = None,
    ) -> None:
        self.hub = hub
        self.session = session
        self.agent = agent
        # Only the loops write to children, and only while leading: every child write passes
        # it (reads — probes, punch-through — never do).
        self.guard = guard
        self._entries: dict[str, _Entry] = {}
        # Pull locations whose agent's reverse tunnel is connected (`tunnels.py`): read-only
        # clients for punch-through, apart from `get`, which the loops use to write.
        self._tunnels: dict[str, Kube] = {}

    def tunnel(self, name: str) -> Kube | None:
        """A client through a pull location's reverse tunnel (None when not connected)."""
        return self._tunnels.get(name)

    def attach_tunnel(self, name: str, kube: Kube) -> None:
        self._tunnels[name] = kube

    def detach_tunnel(self, name: str, kube: Kube) -> None:
        if self._tunnels.get(name) is kube:
            del self._tunnels[name]

    def get(self, name: str) -> Kube | None:
        """The last client connected for a location (None before its first probe)."""
        entry = self._entries.get(name)
        return entry.kube if entry else None

    def names(self) -> list[str]:
        return sorted(self._entries)

    def forget(self, name: str) -> None:
        self._entries.pop(name, None)

    async def connect(self, location: Location) -> Kube:
        """A client for the location, rebuilt only when its Secret changed. A pull location
        has none: nothing on the hub side dials it (the location loop never asks)."""
        ref = location.spec.secret_ref
        if ref is None or location.pulled:
            raise CredentialsError(f"location {location.name} has no spec.secretRef")
        where = f"secret {ref.namespace}/{ref.name}"
        try:
            secret = await self.hub.get(f"/api/v1/namespaces/{ref.namespace}/secrets/{ref.name}")
        except ApiError as err:
            if err.code == 404:
                raise CredentialsError(f"{where} does not exist") from err
            raise
        version = str(secret["metadata"].get("resourceVersion", ""))
        entry = self._entries.get(location.name)
        if entry and entry.secret_version == version:
            await self._renew(location, secret, entry)
            return entry.kube
        encoded = (secret.get("data") or {}).get(ref.key)
        if not encoded:
            raise CredentialsError(f"{where} has no key {ref.key!r}")
        try:
            text = base64.b64decode(encoded).decode()
            creds = await kubeconfig.from_dict(kubeconfig.parse(text))
        except (binascii.Error, UnicodeDecodeError) as err:
            raise CredentialsError(f"{where} key {ref.key!r} is not text") from err
        except kubeconfig.KubeconfigError as err:
            raise CredentialsError(f"{where} key {ref.key!r}: {err}") from err
        kube = Kube(self.session, creds, location.name, agent=self.agent, guard=self.guard)
        entry = self._entries[location.name] = _Entry(version, kube, creds.token or "")
        await self._renew(location, secret, entry)
        return kube

    async def _renew(self, location: Location, secret: Obj, entry: _Entry) -> None:
        """A ServiceAccount token with a third of its life left is replaced in the Secret
        (`renew.py`); the next connect builds the client from it. Only the leader writes
        (both requests pass the guard); a failure is logged and tried at the next probe,
        while the old token still works."""
        who = renew.account(secret)
        if who is None or not entry.token or not renew.due(entry.token):
            return
        ref = location.spec.secret_ref
        if ref is None:
            return
        hub = self.hub.guarded(self.guard) if self.guard else self.hub
        try:
            answer = await entry.kube.create(renew.token_path(*who), renew.token_request())
            token = str((answer.get("status") or {}).get("token") or "")
            encoded = (secret.get("data") or {}).get(ref.key) or ""
            config = kubeconfig.parse(base64.b64decode(encoded).decode())
            patch = renew.secret_patch(ref.key, renew.with_token(config, token))
            await hub.merge_patch(f"/api/v1/namespaces/{ref.namespace}/secrets/{ref.name}", patch)
        except (ApiError, kubeconfig.KubeconfigError, ValueError, OSError) as err:
            log.warning("renewing the token of %s/%s failed: %s", who[0], who[1], err)
            return
        except Exception as err:  # the guard's refusal when not leading, among others
            log.info("token of %s/%s not renewed now: %s", who[0], who[1], err)
            return
        log.info("renewed the token of %s/%s for location %s", *who, location.name)


FLEET = web.AppKey("fleet", Fleet)
