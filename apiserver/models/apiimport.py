"""The APIImport kind (kmc.dev/v1alpha1): one per imported group/resource, named like its CRD
(`<plural>.<group>`). Ours, so typed with pydantic; unknown fields are kept."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from apiserver.models.location import API_VERSION
from apiserver.objects import Obj
from apiserver.placement.strategy import LabelSelector

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
    verdict: Literal["Compatible", "Incompatible", "Missing"]  # negotiate.State
    digest: str = ""
    paths: list[str] = Field(default_factory=list)


class APIImportStatus(_Model):
    observed_generation: int | None = Field(default=None, alias="observedGeneration")
    # Imported (a hub CRD we made), User (the user's own, judged against), Pending, None.
    hub_crd: Literal["Imported", "User", "Pending", "None"] | None = Field(
        default=None, alias="hubCRD"
    )
    kind: str | None = None
    versions: str | None = None  # served versions, comma-separated (printer columns)
    storage_version: str | None = Field(default=None, alias="storageVersion")
    compatible: str | None = None  # "2/3"
    incompatible: str | None = None  # location names, comma-separated
    missing: str | None = None
    error: str | None = None
    message: str | None = None
    locations: list[LocationVerdict] = Field(default_factory=list)

    def row(self, name: str) -> LocationVerdict | None:
        return next((r for r in self.locations if r.name == name), None)


class APIImport(_Model):
    api_version: str = Field(default=API_VERSION, alias="apiVersion")
    kind: str = "APIImport"
    metadata: Obj
    spec: APIImportSpec = Field(default_factory=APIImportSpec)
    status: APIImportStatus = Field(default_factory=APIImportStatus)

    @classmethod
    def fresh(cls, name: str) -> APIImport:
        return cls(metadata={"name": name}, spec=APIImportSpec())

    def to_json(self) -> Obj:
        return self.model_dump(by_alias=True, exclude_none=True, mode="json")
