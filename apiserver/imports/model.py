"""The APIImport kind (kmc.dev/v1alpha1): one per imported group/resource, named like its CRD
(`<plural>.<group>`). Ours, so typed with pydantic; unknown fields are kept."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from apiserver.locations.model import API_VERSION
from apiserver.placement.strategy import LabelSelector

if TYPE_CHECKING:
    from apiserver.imports.negotiate import Decision

GROUP_PATH = f"/apis/{API_VERSION}/apiimports"


class _Model(BaseModel):
    model_config = ConfigDict(extra="allow", populate_by_name=True)


class APIImportSpec(_Model):
    # Exclude: an incompatible location takes no part. Narrow: the hub schema shrinks to let it
    # in, once no hub object uses what it would drop.
    policy: Literal["Exclude", "Narrow"] = "Exclude"
    location_selector: LabelSelector | None = Field(default=None, alias="locationSelector")


class LocationVerdict(_Model):
    name: str
    verdict: str  # negotiate.State
    digest: str = ""
    paths: list[str] = Field(default_factory=list)


class APIImportStatus(_Model):
    locations: list[LocationVerdict] = Field(default_factory=list)

    def row(self, name: str) -> LocationVerdict | None:
        return next((r for r in self.locations if r.name == name), None)


class APIImport(_Model):
    api_version: str = Field(default=API_VERSION, alias="apiVersion")
    kind: str = "APIImport"
    metadata: dict[str, Any]
    spec: APIImportSpec = Field(default_factory=APIImportSpec)
    status: APIImportStatus = Field(default_factory=APIImportStatus)

    @classmethod
    def fresh(cls, name: str) -> APIImport:
        return cls(metadata={"name": name}, spec=APIImportSpec())

    def to_json(self) -> dict[str, Any]:
        return self.model_dump(by_alias=True, exclude_none=True, mode="json")

    def status_for(
        self,
        rows: list[LocationVerdict],
        hub: dict[str, Any] | None,
        owned: bool,
        decision: Decision,
        error: str,
        message: str,
    ) -> dict[str, Any]:
        """The status to write: rows plus the one-line fields the printer columns show."""

        def named(verdict: str) -> str:
            return ",".join(r.name for r in rows if r.verdict == verdict)

        compatible = sum(r.verdict == "Compatible" for r in rows)
        if hub is None:
            crd = "Pending" if decision.spec is not None else "None"
        else:
            crd = "Imported" if owned else "User"
        spec = (hub or {}).get("spec") or decision.spec or {}
        status: dict[str, Any] = {
            "hubCRD": crd,
            "kind": (spec.get("names") or {}).get("kind", ""),
            "versions": ",".join(decision.versions),
            "storageVersion": decision.storage or "",
            "compatible": f"{compatible}/{len(rows)}",
            "incompatible": named("Incompatible"),
            "missing": named("Missing"),
            "locations": [r.model_dump(by_alias=True, mode="json") for r in rows],
            "observedGeneration": self.metadata.get("generation"),
        }
        if error:
            status["error"] = error
        if message:
            status["message"] = message
        return status
