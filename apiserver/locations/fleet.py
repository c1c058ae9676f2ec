"""The fleet: one HTTP client per child cluster, built from its Location's Secret.

Every loop that talks to children (location probes, placement schema checks, sync,
punch-through) takes its client from here, so credentials are read and turned into TLS
contexts once per Secret version. Secret contents never leave this module: errors name the
Secret and the problem, never the data.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Callable
from dataclasses import dataclass

import aiohttp

from apiserver.kube import config as kubeconfig
from apiserver.kube.client import ApiError, Kube
from apiserver.locations.model import Location


class CredentialsError(Exception):
    """The Location's credentials cannot be used; the message says which Secret and why."""


@dataclass(frozen=True)
class _Entry:
    secret_version: str
    kube: Kube


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

    def get(self, name: str) -> Kube | None:
        """The last client connected for a location (None before its first probe)."""
        entry = self._entries.get(name)
        return entry.kube if entry else None

    def names(self) -> list[str]:
        return sorted(self._entries)

    def forget(self, name: str) -> None:
        self._entries.pop(name, None)

    async def connect(self, location: Location) -> Kube:
        """A client for the location, rebuilt only when its Secret changed."""
        ref = location.spec.secret_ref
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
        self._entries[location.name] = _Entry(version, kube)
        return kube
