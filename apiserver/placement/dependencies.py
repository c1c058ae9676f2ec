"""Which objects a pod template needs, so that they follow the workloads that use them.

A Deployment placed in `us-east` is useless there without the ConfigMaps, Secrets and
ServiceAccount its pods mount, read or run as, the PersistentVolumeClaims they mount and the
PriorityClass they run at: the kubelet would keep the pods in ContainerCreating, the
scheduler would not place them, or admission would refuse them. So by default such objects
are placed exactly where their users are — no more (a Secret should not spread to clusters
that do not need it), no less.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from enum import StrEnum

from apiserver.objects import ReadOnly

Reference = tuple[str, str]
"""(kind, name) of an object the pod spec names: in the pod's own namespace, or cluster-scoped
(a PriorityClass); the kind's entry says which."""

_CONTAINER_LISTS = ("initContainers", "containers", "ephemeralContainers")

# Volume sources naming a Secret in the pod's namespace through a LocalObjectReference.
_VOLUME_SECRET_REFS = (
    ("cephfs", "secretRef"),
    ("cinder", "secretRef"),
    ("flexVolume", "secretRef"),
    ("iscsi", "secretRef"),
    ("rbd", "secretRef"),
    ("scaleIO", "secretRef"),
    ("storageos", "secretRef"),
    ("csi", "nodePublishSecretRef"),
)


def pod_spec_at(obj: ReadOnly, path: Iterable[str]) -> ReadOnly | None:
    """The mapping at `path` inside `obj` (a workload's pod spec); None if absent."""
    node: object = obj
    for key in path:
        node = node.get(key) if isinstance(node, Mapping) else None
    return node if isinstance(node, Mapping) else None


def references(pod_spec: ReadOnly) -> frozenset[Reference]:
    """(kind, name) of every ConfigMap, Secret, ServiceAccount, PersistentVolumeClaim and
    PriorityClass the pod spec refers to."""
    refs = set(_volume_refs(pod_spec))
    for container in _items(pod_spec, *_CONTAINER_LISTS):
        refs.update(_container_refs(container))
    for secret in _items(pod_spec, "imagePullSecrets"):
        refs.update(_named("Secret", secret.get("name")))
    account = pod_spec.get("serviceAccountName") or pod_spec.get("serviceAccount")
    if account != "default":
        refs.update(_named("ServiceAccount", account))
    refs.update(_named("PriorityClass", pod_spec.get("priorityClassName")))
    return frozenset(refs)


def follow(users: Iterable[Mapping[str, int | None]]) -> dict[str, None]:
    """A dependency's placement: every location any of its users is placed in, sorted."""
    locations = {location for placement in users for location in placement}
    return dict.fromkeys(sorted(locations))


class Went(StrEnum):
    """What a change of a follower's placement did, as its Event's reason."""

    FOLLOWED = "Followed"  # it went to new locations, with what it follows
    LEFT = "Left"  # it left locations where nothing it follows is any more


def went(
    current: Mapping[str, int | None], placement: Mapping[str, int | None], company: str
) -> tuple[tuple[Went, str], ...]:
    """A follower's Events for a new placement, as a workload's SpilledOver and Evacuated: at
    most one per reason, naming every location it concerns. A first placement has none (the
    annotation says where, as a workload's Placed condition does); `company` says what it
    follows (`deployments/web`)."""
    if not current:
        return ()
    came = sorted(set(placement) - set(current))
    gone = sorted(set(current) - set(placement))
    out: list[tuple[Went, str]] = []
    if came:
        out.append((Went.FOLLOWED, f"went to {', '.join(came)} with {company}"))
    if gone:
        still = f"; still with {company} in {', '.join(sorted(placement))}" if placement else ""
        out.append((Went.LEFT, f"left {', '.join(gone)}: nothing it goes with runs there{still}"))
    return tuple(out)


def _items(spec: ReadOnly, *keys: str) -> Iterator[ReadOnly]:
    """The mappings in the lists under `keys`, skipping whatever is not a mapping."""
    for key in keys:
        value = spec.get(key)
        if isinstance(value, list):
            yield from (item for item in value if isinstance(item, Mapping))


def _named(kind: str, name: object) -> Iterator[Reference]:
    if isinstance(name, str) and name:
        yield kind, name


def _get(obj: ReadOnly, key: str) -> ReadOnly:
    value = obj.get(key)
    return value if isinstance(value, Mapping) else {}


def _volume_refs(pod_spec: ReadOnly) -> Iterator[Reference]:
    for volume in _items(pod_spec, "volumes"):
        yield from _named("ConfigMap", _get(volume, "configMap").get("name"))
        claim = _get(volume, "persistentVolumeClaim").get("claimName")
        yield from _named("PersistentVolumeClaim", claim)
        yield from _named("Secret", _get(volume, "secret").get("secretName"))
        yield from _named("Secret", _get(volume, "azureFile").get("secretName"))
        for source, field in _VOLUME_SECRET_REFS:
            yield from _named("Secret", _get(_get(volume, source), field).get("name"))
        for projection in _items(_get(volume, "projected"), "sources"):
            yield from _named("ConfigMap", _get(projection, "configMap").get("name"))
            yield from _named("Secret", _get(projection, "secret").get("name"))


def _container_refs(container: ReadOnly) -> Iterator[Reference]:
    for env in _items(container, "env"):
        source = _get(env, "valueFrom")
        yield from _named("ConfigMap", _get(source, "configMapKeyRef").get("name"))
        yield from _named("Secret", _get(source, "secretKeyRef").get("name"))
    for env_from in _items(container, "envFrom"):
        yield from _named("ConfigMap", _get(env_from, "configMapRef").get("name"))
        yield from _named("Secret", _get(env_from, "secretRef").get("name"))
