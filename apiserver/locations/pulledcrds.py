"""The CRDs pull locations serve, for API import: `LocationLoop.crds` reads them here.

A pull location's agent reports its probe, whose `apiDigests` say, per group/version/Kind it
serves from a CRD, that CRD's digest (`imports.negotiate.digest`). The CRDs themselves are
big (the Gateway API's run to hundreds of kilobytes), so they do not go with every report:
the hub keeps them here by digest, and the report's answer names the digests it lacks
(`missing`), which the agent then sends (`PUT …/locations/<name>/crds`). So a CRD crosses
once per change, and again only after kmc-apiserver restarts (memory only) or the agent
asks anew. A location's CRDs are known (`crds`) only while every digest of its last probe
is here; what its probe no longer names is forgotten. `changed` tells the import loop when
a location's known CRDs change. See docs/pull.md.
"""

from __future__ import annotations

from apiserver.imports.negotiate import digest
from apiserver.kinds import Key
from apiserver.locations.reports import Reports
from apiserver.objects import Obj
from apiserver.signals import Signal


class PulledCRDs:
    def __init__(self, reports: Reports) -> None:
        self.reports = reports
        self.kept: dict[str, dict[str, Obj]] = {}  # location -> digest -> its CRD
        self.changed: Signal[[str]] = Signal("pull locations' CRDs")
        self._known: dict[str, tuple[str, ...] | None] = {}  # what `crds` said last
        reports.subscribe(self._reported)

    def wanted(self, location: str) -> set[str] | None:
        """The digests of the CRDs its last report's probe names; None without one."""
        reported = self.reports.get(location)
        if reported is None or reported.probe is None:
            return None
        return set((reported.probe.get("apiDigests") or {}).values())

    def missing(self, location: str) -> list[str]:
        """The digests its last probe names whose CRDs the hub has not got."""
        wanted = self.wanted(location)
        if wanted is None:
            return []
        return sorted(wanted - self.kept.get(location, {}).keys())

    def crds(self, location: str) -> list[Obj] | None:
        """Its CRDs, once the hub has every one its last probe names; else None (not yet
        known: the import loop keeps what it saw last, as for a pushed location not yet
        probed)."""
        wanted = self.wanted(location)
        kept = self.kept.get(location, {})
        if wanted is None or not wanted <= kept.keys():
            return None
        return sorted((kept[d] for d in wanted), key=lambda c: str(c["metadata"]["name"]))

    def put(self, location: str, crds: list[Obj]) -> tuple[int, int]:
        """Keep the CRDs its last probe names; (kept, ignored: not named, or no report)."""
        wanted = self.wanted(location) or set()
        kept = self.kept.setdefault(location, {})
        taken = 0
        for crd in crds:
            found = digest(crd)
            if found in wanted:
                kept[found] = crd
                taken += 1
        self._check(location)
        return taken, len(crds) - taken

    def _reported(self, location: str, _: set[Key], __: bool) -> None:
        wanted = self.wanted(location)
        if wanted is None:
            if self.reports.get(location) is None:  # the Location gone, or turned Push
                self.kept.pop(location, None)
        elif location in self.kept:
            kept = self.kept[location]
            for gone in kept.keys() - wanted:
                del kept[gone]
        self._check(location)

    def _check(self, location: str) -> None:
        known = self.crds(location)
        said = tuple(sorted(versions_of(known))) if known is not None else None
        if said != self._known.get(location):
            self._known[location] = said
            if said is None and self.reports.get(location) is None:
                del self._known[location]
            self.changed.emit(location)


def versions_of(crds: list[Obj]) -> list[str]:
    """Each CRD's uid and resourceVersion: what the import loop knows a CRD by."""
    return [
        f"{(c.get('metadata') or {}).get('uid')}/{(c.get('metadata') or {}).get('resourceVersion')}"
        for c in crds
    ]
