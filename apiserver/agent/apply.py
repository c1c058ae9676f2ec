"""Writing the agent's own cluster: the feed's steps, as the push sync loop writes a child.

Server-side apply as `kmc-sync` (`contract.SYNC_MANAGER`, forced), so a location that moves
from push to pull keeps one owner of its fields. A Namespace is made when missing and then
applied only while it wears our origin label: one that was there before is left as it is,
as the push loop leaves it. Nothing is deleted that does not wear our origin label (a
same-named object someone else made stays). A kind is found in the kinds table by its
apiVersion and kind; one the table does not know (an imported CRD's kind) in the cluster's
own discovery of that group version, remembered once found (a kind it does not serve is an
error, and the step is tried again: its CRD may be on its way); `kind_of` then makes an
entry for it, as the hub makes one from its CRD, which the agent watches for drift.
"""

from __future__ import annotations

import logging
from typing import Protocol

from apiserver.agent.state import Apply, Delete, Step
from apiserver.contract import ORIGIN, SYNC_MANAGER
from apiserver.kinds import ALL, Kind, Role
from apiserver.kube.client import ApiError
from apiserver.objects import Obj
from apiserver.sync.work import WorkKey

log = logging.getLogger(__name__)

NAMESPACES = "/api/v1/namespaces"


class Cluster(Protocol):
    """What the agent asks of its cluster's API (a `kube.client.Kube`)."""

    async def get(self, path: str, **params: str) -> Obj: ...
    async def create(self, path: str, body: Obj) -> Obj: ...
    async def apply(
        self, path: str, body: Obj, manager: str, force: bool = True, dry_run: bool = False
    ) -> Obj: ...
    async def delete(self, path: str) -> Obj: ...


_KINDS: dict[tuple[str, str], Kind] = {(k.api_version, k.kind): k for k in ALL}


def path_of(key: WorkKey) -> str:
    """The object's path in the cluster, for the kinds of the kinds table; ApiError 400 for
    another kind (`Writer.path` asks the cluster's discovery for those)."""
    if key.is_namespace:
        return f"{NAMESPACES}/{key.name}"
    kind = _KINDS.get((key.api_version, key.kind))
    if kind is None:
        raise ApiError.of(
            400, "BadRequest", f"kmc-agent cannot write {key}: its kind is not one it knows"
        )
    return kind.path(key.namespace or None, key.name)


def imported_kind(api_version: str, kind: str, plural: str, namespaced: bool) -> Kind:
    """The entry of an imported CRD's kind, as the hub makes it (`kinds.of_crd`)."""
    group = api_version.rpartition("/")[0]
    return Kind(
        f"{kind}.{group}" if group else kind,
        kind,
        api_version,
        plural,
        role=Role.ASKED,
        namespaced=namespaced,
        crd=True,
    )


def _prefix(api_version: str) -> str:
    return "/api/v1" if api_version == "v1" else f"/apis/{api_version}"


class Writer:
    """Carries out feed steps in one cluster; failures are the caller's to retry."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        # (apiVersion, kind) -> (plural, namespaced), from the cluster's discovery
        self.discovered: dict[tuple[str, str], tuple[str, bool]] = {}

    async def path(self, key: WorkKey) -> str:
        """The object's path: from the kinds table, or the cluster's discovery."""
        if (key.api_version, key.kind) in _KINDS or key.is_namespace:
            return path_of(key)
        found = self.discovered.get((key.api_version, key.kind))
        if found is None:
            found = await self._discover(key)
        plural, namespaced = found
        where = f"/namespaces/{key.namespace}" if namespaced and key.namespace else ""
        return f"{_prefix(key.api_version)}{where}/{plural}/{key.name}"

    def kind_of(self, key: WorkKey) -> Kind | None:
        """The kinds-table entry of the object's kind, or for a kind found by discovery (an
        imported CRD's) one made as the hub makes it from the CRD (`kinds.of_crd`: key
        `Kind.group`, placed when asked), so the agent can watch it for drift and orphans
        (`ChildWatch.ensure`). None for a Namespace, or a kind not yet discovered."""
        known = _KINDS.get((key.api_version, key.kind))
        if known is not None or key.is_namespace:
            return known
        found = self.discovered.get((key.api_version, key.kind))
        if found is None:
            return None
        return imported_kind(key.api_version, key.kind, *found)

    def learn(self, api_version: str, kind: str, plural: str, namespaced: bool) -> Kind:
        """An imported kind as the feed names it: its plural needs no discovery then."""
        self.discovered[(api_version, kind)] = (plural, namespaced)
        return imported_kind(api_version, kind, plural, namespaced)

    async def _discover(self, key: WorkKey) -> tuple[str, bool]:
        try:
            listing = await self.cluster.get(_prefix(key.api_version))
        except ApiError as err:
            if err.code != 404:
                raise
            listing = {}
        for resource in listing.get("resources") or []:
            name = str(resource.get("name", ""))
            if resource.get("kind") == key.kind and name and "/" not in name:
                found = (name, bool(resource.get("namespaced")))
                self.discovered[(key.api_version, key.kind)] = found
                return found
        raise ApiError.of(
            404, "NotFound", f"kmc-agent cannot write {key}: this cluster does not serve its kind"
        )

    async def run(self, step: Step) -> Obj | None:
        """Carry out one step; an apply's answer (None: nothing was applied)."""
        if isinstance(step, Apply):
            return await self.apply(step.object)
        if isinstance(step, Delete):
            await self.delete(step.key)
        return None

    async def apply(self, obj: Obj) -> Obj | None:
        """Apply one object (None: a Namespace that is not ours, left as it is)."""
        key = WorkKey.of(obj)
        path = await self.path(key)
        if key.is_namespace:
            return await self._namespace(path, obj)
        return await self.cluster.apply(path, obj, SYNC_MANAGER)

    async def _namespace(self, path: str, obj: Obj) -> Obj | None:
        try:
            current = await self.cluster.get(path)
        except ApiError as err:
            if err.code != 404:
                raise
            try:
                await self.cluster.create(NAMESPACES, obj)
            except ApiError as made:
                if made.code != 409:
                    raise
            current = await self.cluster.get(path)
        if not _ours(current):
            return None
        return await self.cluster.apply(path, obj, SYNC_MANAGER)

    async def delete(self, key: WorkKey) -> bool:
        """Delete one object if it is ours; True if a delete was sent (or it was gone)."""
        path = await self.path(key)
        try:
            current = await self.cluster.get(path)
        except ApiError as err:
            if err.code == 404:
                return True
            raise
        if not _ours(current):
            log.info("%s is not ours (no %s label): left as it is", key, ORIGIN)
            return False
        try:
            await self.cluster.delete(path)
        except ApiError as err:
            if err.code != 404:
                raise
        return True


def _ours(obj: Obj) -> bool:
    return ORIGIN in (obj.get("metadata", {}).get("labels") or {})
