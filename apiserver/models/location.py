"""The Location kind (kmc.dev/v1alpha1), ours, so typed with pydantic.

Unknown fields are kept (extra="allow"): a newer writer's fields survive our round trip.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from apiserver.objects import Obj

GROUP = "kmc.dev"
VERSION = "v1alpha1"
API_VERSION = f"{GROUP}/{VERSION}"
PATH = f"/apis/{API_VERSION}/locations"
SYSTEM_NAMESPACE = "kmc-system"


class _Model(BaseModel):
    model_config = ConfigDict(extra="allow", populate_by_name=True)


class SecretRef(_Model):
    name: str
    namespace: str = SYSTEM_NAMESPACE
    key: str = "kubeconfig"


class Taint(_Model):
    key: str
    value: str = ""
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"]


Mode = Literal["Push", "Pull"]
PUSH: Mode = "Push"
PULL: Mode = "Pull"


class LocationSpec(_Model):
    # Push: kmc-apiserver dials the child with the kubeconfig in `secretRef`. Pull: an agent in
    # the child dials out to the hub and the hub holds no credential (docs/pull.md).
    mode: Mode = PUSH
    secret_ref: SecretRef | None = Field(default=None, alias="secretRef")
    taints: list[Taint] = Field(default_factory=list)
    unschedulable: bool = False


class Condition(_Model):
    type: str
    status: Literal["True", "False", "Unknown"]
    reason: str = ""
    message: str = ""
    last_transition_time: str | None = Field(default=None, alias="lastTransitionTime")


class LocationStatus(_Model):
    conditions: list[Condition] = Field(default_factory=list)
    kubernetes_version: str | None = Field(default=None, alias="kubernetesVersion")
    nodes: int | None = None
    ready_nodes: int | None = Field(default=None, alias="readyNodes")
    schedulable_nodes: int | None = Field(default=None, alias="schedulableNodes")
    capacity: dict[str, str] = Field(default_factory=dict)
    allocatable: dict[str, str] = Field(default_factory=dict)
    requested: dict[str, str] = Field(default_factory=dict)
    resources: list[str] = Field(default_factory=list)
    # group/version/Kind -> digest of the child's CRD (apiserver/imports/negotiate.py)
    api_digests: dict[str, str] = Field(default_factory=dict, alias="apiDigests")
    last_probe_time: str | None = Field(default=None, alias="lastProbeTime")
    objects: int | None = None  # written by the sync loop…
    observed_generation: int | None = Field(default=None, alias="observedGeneration")  # …with this

    def condition(self, type_: str) -> Condition | None:
        return next((c for c in self.conditions if c.type == type_), None)


class Location(_Model):
    api_version: str = Field(default=API_VERSION, alias="apiVersion")
    kind: str = "Location"
    metadata: Obj
    spec: LocationSpec
    status: LocationStatus = Field(default_factory=LocationStatus)

    @property
    def name(self) -> str:
        return str(self.metadata["name"])

    @property
    def pulled(self) -> bool:
        """A pull location: nothing on the hub side talks to its cluster."""
        return self.spec.mode == PULL

    @property
    def labels(self) -> dict[str, str]:
        return dict(self.metadata.get("labels") or {})

    def to_json(self) -> Obj:
        return self.model_dump(by_alias=True, exclude_none=True, mode="json")
