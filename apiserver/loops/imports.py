"""The import loop: every custom kind the locations serve gets an APIImport on the hub, and a
hub CRD negotiated from the locations' CRDs (apiserver/imports/negotiate.py).

Level-based: any change to a Location (its probe writes `apiDigests` when a child's CRDs
change), to a hub CRD or to an APIImport wakes one pass over every group/resource; a pass
reads only caches and writes only what differs. The hub CRD is written only when kmc created
it (label `kmc.dev/imported`); a user's CRD is only judged against. A location's CRDs are the
last ones its probe's watch saw, so an unreachable location neither widens nor narrows a kind.
Locations found Incompatible are handed to the placement loop as not serving the kind.

Policy `Narrow` shrinks the hub schema to the common subset of every location, but only once no
hub object uses what it would drop; until then the record's message lists those objects, and
any change to an object of the kind wakes the loop. A hub CRD we created that no selected
location serves any more is kept while the hub holds objects of it, and deleted after.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Mapping
from typing import Any, Literal, NamedTuple

from apiserver.contract import API_APPROVED, IMPORTED
from apiserver.hubcache import CRDS, HubCache
from apiserver.imports.negotiate import Decision, State, misfits, negotiate
from apiserver.imports.schema import canonical
from apiserver.kinds import Kind, of_crd
from apiserver.kube import events
from apiserver.kube.client import ApiError, Kube
from apiserver.kube.informer import Informer
from apiserver.leader import Leadership
from apiserver.models.apiimport import GROUP_PATH, APIImport, APIImportStatus, LocationVerdict
from apiserver.models.location import Location
from apiserver.objects import Obj
from apiserver.placement.selector import matches
from apiserver.signals import Signal

log = logging.getLogger(__name__)

COMPONENT = "kmc-import"
OUR_GROUPS = ("kmc.dev",)
SHOWN = 5  # objects named in a refusal; the rest are counted


class Note(NamedTuple):
    """What the record's message says beyond the verdicts, and the Event reason for it."""

    reason: str
    message: str


NO_NOTE = Note("", "")


def importable(crd: Obj) -> bool:
    """Kinds not of our own groups, namespaced or cluster-scoped: what the placement loop
    can place (an object of either carrying a strategy)."""
    spec = crd.get("spec") or {}
    group = str(spec.get("group") or "")
    ours = any(group == g or group.endswith("." + g) for g in OUR_GROUPS)
    return spec.get("scope") in ("Namespaced", "Cluster") and not ours


class ImportLoop:
    def __init__(
        self,
        hub: Kube,
        cache: HubCache,
        location_crds: Callable[[str], list[Obj] | None],
        leadership: Leadership,
        resync: float = 30.0,
    ) -> None:
        self.hub = hub
        self.cache = cache
        self.location_crds = location_crds
        self.leadership = leadership
        # (location -> group/version/Kinds found Incompatible there, the hub kinds imported):
        # told whenever a pass ends, for the placement loop to count those as not served.
        self.verdicts: Signal[[dict[str, frozenset[str]], set[str]]] = Signal("import verdicts")
        self.resync = resync
        self.imports = Informer(hub, GROUP_PATH, self._wake)
        self.events = events.Recorder(hub, COMPONENT)
        self._woken = asyncio.Event()
        self._seen: dict[str, list[Obj]] = {}  # location -> its CRDs as last seen
        self._waiting: set[str] = set()  # kinds whose narrowing waits for their objects
        # CRD name -> (the versions of its inputs, the decision, whether the hub CRD's spec
        # already says it): negotiating compares whole schemas, and a pass runs on every
        # Location change, while the CRDs it reads change seldom.
        self._negotiated: dict[str, tuple[Inputs, Decision, bool]] = {}
        cache.locations.subscribe(self._wake)
        cache.crds.subscribe(self._wake)
        cache.subscribe(self._object_changed)

    async def _object_changed(self, kind: str, *_: Any) -> None:
        if kind in self._waiting:
            self._woken.set()

    async def _wake(self, *_: Any) -> None:
        self._woken.set()

    def wake(self, *_: Any) -> None:
        """Something it reads changed outside the hub cache (a pull location's CRDs)."""
        self._woken.set()

    async def run(self) -> None:
        watch = asyncio.create_task(self.imports.run(), name="hub apiimports")
        try:
            await self.cache.wait_synced()
            while True:
                self._woken.clear()
                if self.leadership.leading.is_set():
                    try:
                        await self.reconcile()
                    except ApiError as err:
                        log.warning("api import pass failed: %s", err)
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(self.resync):  # never wait_for: see leader.py
                        await self._woken.wait()
                await asyncio.sleep(0.2)  # let a burst of changes land in one pass
        finally:
            watch.cancel()

    async def reconcile(self) -> None:
        """One pass over every group/resource any location serves or an APIImport names."""
        locations = [Location.model_validate(o) for o in self.cache.locations.items()]
        present = {location.name for location in locations}
        self._seen = {n: crds for n, crds in self._seen.items() if n in present}
        for location in locations:
            crds = self.location_crds(location.name)
            if crds is not None:
                self._seen[location.name] = [c for c in crds if importable(c)]
        names = {c["metadata"]["name"] for crds in self._seen.values() for c in crds}
        names |= {o["metadata"]["name"] for o in self.imports.items()}
        excluded: dict[str, set[str]] = {}
        kinds: set[str] = set()
        self._negotiated = {n: known for n, known in self._negotiated.items() if n in names}
        for name in sorted(names):
            for where, gvks in (await self._one(name, locations, kinds)).items():
                excluded.setdefault(where, set()).update(gvks)
        self.verdicts.emit({k: frozenset(v) for k, v in excluded.items()}, kinds)

    async def _one(
        self, name: str, locations: list[Location], kinds: set[str]
    ) -> dict[str, set[str]]:
        raw = self.imports.get(name)
        hub = self.cache.crds.get(name)
        if hub is None and not any(
            c["metadata"]["name"] == name for crds in self._seen.values() for c in crds
        ):
            # Served nowhere and not on the hub: nothing to record (never invented).
            if raw is not None:
                with contextlib.suppress(ApiError):
                    await self.hub.delete(f"{GROUP_PATH}/{name}")
            return {}
        if raw is None:
            raw = await self.hub.create(GROUP_PATH, APIImport.fresh(name).to_json())
            await self.imports.observe(raw)
        record = APIImport.model_validate(raw)
        selector = record.spec.location_selector
        crds: dict[str, Obj | None] = {}
        unseen = False  # a selected location whose CRDs the probe has not reported yet
        for location in locations:
            if not matches(selector, location.labels):
                continue
            if location.name not in self._seen:
                unseen = True
                continue
            found = [c for c in self._seen[location.name] if c["metadata"]["name"] == name]
            crds[location.name] = found[0] if found else None
        owned = hub is not None and (hub["metadata"].get("labels") or {}).get(IMPORTED) == "true"
        kind = of_crd(hub) if hub is not None else None
        # Objects may exist until the cache has listed the kind: never shrink before that.
        locked = kind is not None and (
            not self.cache.listed(kind.key)
            or next(iter(self.cache.list_keys(kind.key)), None) is not None
        )
        if kind is not None:
            kinds.add(kind.key)
            self._waiting.discard(kind.key)  # until `_narrow` finds objects in the way again
        decision, current = self._negotiate(name, crds, hub, owned, locked)
        note = NO_NOTE
        unserved = not unseen and all(v.state == State.MISSING for v in decision.verdicts.values())
        if hub is not None and kind is not None and owned and not locked and unserved:
            await self._retire(name, hub, kind)
            return {}
        if hub is not None and kind is not None and owned and locked:
            if record.spec.policy == "Narrow":
                narrowed, note = self._narrow(crds, hub, kind, decision)
                if narrowed is not decision:
                    decision, current = narrowed, _says(hub, narrowed)
            if unserved:
                count = sum(1 for _ in self.cache.list_keys(kind.key))
                note = Note(
                    "Unserved",
                    f"no selected location serves {kind.kind} any more; the hub CRD is kept "
                    f"while the hub holds objects of it ({count} now) and deleted after",
                )
        approval = _approval(crds, decision)
        written = await self._keep_crd(name, hub, owned, decision, approval, current)
        # A hub CRD made just now is ours: the status says Imported at once, not only after
        # the CRD's watch event brings it back.
        made = hub is None and decision.spec is not None and not written
        await self._status(record, raw, hub, owned or made, decision, written, note)
        return _excluded(hub, decision)

    def _negotiate(
        self, name: str, crds: Mapping[str, Obj | None], hub: Obj | None, owned: bool, locked: bool
    ) -> tuple[Decision, bool]:
        """`negotiate`, and whether the hub CRD already says its decision: remembered while
        the CRDs (by uid and resourceVersion) and the flags are the same."""
        inputs = _inputs(crds, hub, owned, locked)
        known = self._negotiated.get(name)
        if inputs is not None and known is not None and known[0] == inputs:
            return known[1], known[2]
        decision = negotiate(crds, hub, owned, locked)
        current = _says(hub, decision)
        if inputs is not None:
            self._negotiated[name] = (inputs, decision, current)
        return decision, current

    def _narrow(
        self, crds: dict[str, Obj | None], hub: Obj, kind: Kind, decision: Decision
    ) -> tuple[Decision, Note]:
        """Policy Narrow with objects on the hub: the common subset of every location, taken
        only when no hub object uses what it drops; else the Exclude decision and why."""
        if not any(v.state == State.INCOMPATIBLE for v in decision.verdicts.values()):
            return decision, NO_NOTE
        candidate = negotiate(crds, hub, owned=True, locked=False)
        if candidate.spec is None:
            return decision, Note("NarrowRefused", "the locations share no schema to narrow to")
        found = misfits(self.cache.items(kind.key), hub["spec"], candidate.spec)
        if not found:
            return candidate, NO_NOTE
        self._waiting.add(kind.key)
        shown = "; ".join(found[:SHOWN])
        if len(found) > SHOWN:
            shown += f"; and {len(found) - SHOWN} more"
        return decision, Note(
            "NarrowRefused",
            f"Narrow refused: {len(found)} hub object(s) use what the narrower schema drops: "
            f"{shown}. Change or delete them and the schema narrows by itself.",
        )

    async def _retire(self, name: str, hub: Obj, kind: Kind) -> None:
        """Delete the hub CRD we created for a kind no location serves, once the hub holds
        no objects of it: asked of the hub itself, and only that version of the CRD."""
        try:
            left = await self.hub.get(kind.collection, limit="1")
            if left.get("items"):
                return
            meta = hub["metadata"]
            conditions = {"uid": meta["uid"], "resourceVersion": meta["resourceVersion"]}
            options = {"apiVersion": "v1", "kind": "DeleteOptions", "preconditions": conditions}
            await self.hub.request("DELETE", f"{CRDS}/{name}", body=options)
            log.info("api import %s: no location serves it; hub CRD deleted", name)
        except ApiError as err:
            log.warning("api import %s: hub CRD not deleted: %s", name, err)

    async def _keep_crd(
        self,
        name: str,
        hub: Obj | None,
        owned: bool,
        decision: Decision,
        approval: str | None,
        current: bool,
    ) -> str:
        """Create or update the hub CRD we own; '' or the error that stopped it. `approval`:
        the locations' `api-approved.kubernetes.io`, which a CRD of a protected group
        (`*.k8s.io`, `*.kubernetes.io`: the Gateway API's) cannot be made without."""
        if decision.spec is None or (hub is not None and not owned) or current:
            return ""
        body: Obj = {
            "apiVersion": "apiextensions.k8s.io/v1",
            "kind": "CustomResourceDefinition",
            "metadata": {"name": name, "labels": {IMPORTED: "true"}},
            "spec": {**(hub or {}).get("spec", {}), **decision.spec},
        }
        if approval:
            body["metadata"]["annotations"] = {API_APPROVED: approval}
        try:
            if hub is None:
                await self.hub.create(CRDS, body)
                log.info("api import %s: hub CRD created", name)
            else:
                body["metadata"]["resourceVersion"] = hub["metadata"]["resourceVersion"]
                await self.hub.request("PUT", f"{CRDS}/{name}", body=body)
                log.info("api import %s: hub CRD updated", name)
        except ApiError as err:
            log.warning("api import %s: hub CRD not written: %s", name, err)
            return f"{err.reason}: {err}"
        return ""

    async def _status(
        self,
        record: APIImport,
        raw: Obj,
        hub: Obj | None,
        owned: bool,
        decision: Decision,
        error: str,
        note: Note,
    ) -> None:
        rows = [
            LocationVerdict(name=n, verdict=v.state.value, digest=v.digest, paths=list(v.paths))
            for n, v in sorted(decision.verdicts.items())
        ]
        status = _status_of(record, rows, hub, owned, decision, error, note.message)
        before = raw.get("status") or {}
        if canonical(status) == canonical(before):
            return
        if note.message and note.message != before.get("message"):
            self.events.post(raw, "Warning", note.reason, note.message)
        for row in rows:
            was = record.status.row(row.name)
            if was is None or was.verdict != row.verdict or was.paths != row.paths:
                kind = "Warning" if row.verdict == State.INCOMPATIBLE.value else "Normal"
                where = f": {'; '.join(row.paths)}" if row.paths else ""
                self.events.post(raw, kind, row.verdict, f"location {row.name}{where}")
        with contextlib.suppress(ApiError):
            path = f"{GROUP_PATH}/{record.metadata['name']}/status"
            cleared = dict.fromkeys(set(before) - set(status))  # null removes in a merge patch
            written = await self.hub.merge_patch(path, {"status": cleared | status})
            await self.imports.observe(written)


Inputs = tuple[tuple[tuple[str, tuple[str, str] | None], ...], tuple[str, str] | None, bool, bool]


def _inputs(
    crds: Mapping[str, Obj | None], hub: Obj | None, owned: bool, locked: bool
) -> Inputs | None:
    """What a negotiation read, by uid and resourceVersion; None when a CRD has neither
    (nothing to know it by)."""
    versions = []
    for location, crd in sorted(crds.items()):
        version = _version(crd)
        if crd is not None and version is None:
            return None
        versions.append((location, version))
    hub_version = _version(hub)
    if hub is not None and hub_version is None:
        return None
    return tuple(versions), hub_version, owned, locked


def _version(obj: Obj | None) -> tuple[str, str] | None:
    meta = (obj or {}).get("metadata") or {}
    uid, version = meta.get("uid"), meta.get("resourceVersion")
    return (str(uid), str(version)) if uid and version else None


def _says(hub: Obj | None, decision: Decision) -> bool:
    """Whether the hub CRD's spec already is what the decision would write."""
    if hub is None or decision.spec is None:
        return False
    return canonical(_comparable(hub["spec"])) == canonical(decision.spec)


def _approval(crds: dict[str, Obj | None], decision: Decision) -> str | None:
    """The API review approval the locations that take part carry (the first by name): the
    hub CRD of a protected group is refused without one, and the upstream CRD has it."""
    for location, crd in sorted(crds.items()):
        verdict = decision.verdicts.get(location)
        if crd is None or verdict is None or verdict.state != State.COMPATIBLE:
            continue
        value = (crd["metadata"].get("annotations") or {}).get(API_APPROVED)
        if isinstance(value, str) and value:
            return value
    return None


def _comparable(spec: Obj) -> Obj:
    """The parts of a hub CRD's spec that negotiation decides (the server adds defaults)."""
    return {k: spec.get(k) for k in ("group", "names", "scope", "versions")} | {
        "versions": [
            {
                k: v[k]
                for k in (
                    "name",
                    "served",
                    "storage",
                    "schema",
                    "subresources",
                    "additionalPrinterColumns",
                )
                if k in v
            }
            for v in spec.get("versions") or []
        ]
    }


def _excluded(hub: Obj | None, decision: Decision) -> dict[str, set[str]]:
    """location -> group/version/Kind the placement engine must treat as not served there."""
    if hub is None:
        return {}
    spec = hub["spec"]
    gvks = {f"{spec['group']}/{v['name']}/{spec['names']['kind']}" for v in spec["versions"]}
    return {name: gvks for name, v in decision.verdicts.items() if v.state == State.INCOMPATIBLE}


def _status_of(
    record: APIImport,
    rows: list[LocationVerdict],
    hub: Obj | None,
    owned: bool,
    decision: Decision,
    error: str,
    message: str,
) -> Obj:
    """The status to write: rows plus the one-line fields the printer columns show."""

    def named(verdict: str) -> str:
        return ",".join(r.name for r in rows if r.verdict == verdict)

    compatible = sum(r.verdict == "Compatible" for r in rows)
    crd: Literal["Imported", "User", "Pending", "None"]
    if hub is None and not owned:
        crd = "Pending" if decision.spec is not None else "None"
    else:
        crd = "Imported" if owned else "User"
    spec = (hub or {}).get("spec") or decision.spec or {}
    status = APIImportStatus(
        hubCRD=crd,
        kind=(spec.get("names") or {}).get("kind", ""),
        versions=",".join(decision.versions),
        storageVersion=decision.storage or "",
        compatible=f"{compatible}/{len(rows)}",
        incompatible=named("Incompatible"),
        missing=named("Missing"),
        locations=rows,
        observedGeneration=record.metadata.get("generation"),
        error=error or None,
        message=message or None,
    )
    return status.model_dump(by_alias=True, exclude_none=True, mode="json")
