"""The Override and ClusterOverride kinds (kmc.dev/v1alpha1): per-location overrides said once
for many hub objects (issue #32, docs/overrides.md). Ours, so typed with pydantic; the CRDs in
`manifests/crds/` have the same shape (`tests/unit/test_crd_models.py`).

An Override (namespaced, short name `ovr`) targets objects of its own namespace; a
ClusterOverride (cluster-scoped) targets objects of the namespaces its `namespaceSelector`
selects (unset: every namespace, and cluster-scoped objects). `rules` are in the format of
`overrides/rules.py`, parsed there, not here: the CRD keeps them as written so that the
admission webhook, not a schema error, names what is wrong with one.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, StrictInt, StrictStr
from pydantic.alias_generators import to_camel

from apiserver.models.location import API_VERSION
from apiserver.placement.strategy import LabelSelector, LocationName

PLURAL = "overrides"
CLUSTER_PLURAL = "clusteroverrides"
PATH = f"/apis/{API_VERSION}/{PLURAL}"
CLUSTER_PATH = f"/apis/{API_VERSION}/{CLUSTER_PLURAL}"
KIND = "Override"
CLUSTER_KIND = "ClusterOverride"


class _Model(BaseModel):
    model_config = ConfigDict(
        extra="forbid", frozen=True, populate_by_name=True, alias_generator=to_camel
    )


class Target(_Model):
    """Which hub objects: of one kind, by name or by a selector on their labels (neither:
    every object of the kind in reach)."""

    api_version: StrictStr
    kind: StrictStr
    name: StrictStr | None = None
    label_selector: LabelSelector | None = None


class Locations(_Model):
    """Where: by name and/or by a selector on Location labels (both: both must hold; unset:
    every location)."""

    names: tuple[LocationName, ...] | None = None
    location_selector: LabelSelector | None = None


class OverrideSpec(_Model):
    targets: tuple[Target, ...] = Field(min_length=1)
    locations: Locations = Locations()
    priority: StrictInt = 0
    rules: tuple[dict[str, Any], ...] = Field(min_length=1)


class ClusterOverrideSpec(OverrideSpec):
    namespace_selector: LabelSelector | None = None


class LocationCount(_Model):
    name: StrictStr
    objects: StrictInt


class Failure(_Model):
    """One object in one location its rules could not apply to (its child left as it was)."""

    object: StrictStr  # `Deployment demo/web`
    location: StrictStr
    rule: StrictStr | None = None  # `spec.rules[1] (patch)`; unset: the child refused them all
    error: StrictStr


class Conflict(_Model):
    """Another override at the same priority that sets the same path of the same object in
    the same location: which one has the last word is only their names' order."""

    object: StrictStr
    location: StrictStr
    path: StrictStr
    other: StrictStr  # `Override demo/b`


class OverrideStatus(_Model):
    observed_generation: StrictInt | None = None
    locations: tuple[LocationCount, ...] = ()
    failures: tuple[Failure, ...] = ()
    conflicts: tuple[Conflict, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return self.model_dump(by_alias=True, exclude_none=True, mode="json")


class Override(BaseModel):
    model_config = ConfigDict(extra="allow", populate_by_name=True)

    api_version: str = Field(default=API_VERSION, alias="apiVersion")
    kind: str = KIND
    metadata: dict[str, Any]
    spec: OverrideSpec
    status: OverrideStatus = OverrideStatus()


class ClusterOverride(BaseModel):
    model_config = ConfigDict(extra="allow", populate_by_name=True)

    api_version: str = Field(default=API_VERSION, alias="apiVersion")
    kind: str = CLUSTER_KIND
    metadata: dict[str, Any]
    spec: ClusterOverrideSpec
    status: OverrideStatus = OverrideStatus()
