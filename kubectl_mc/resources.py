"""The resource types `kubectl mc get` and `describe` know, and the names people type for them.

A fixed table rather than discovery: the plugin serves three known API groups, and asking the
hub what they hold would cost a round trip before every command.

The rule for names (also in `kubectl mc get --help`):

- a workload kind (`deployments`, `statefulsets`, `replicasets`, `jobs`, `daemonsets`, with
  kubectl's short names) is the hub's view of it, `<kind>.mc.kmc.dev`: where it runs;
- `pods`, `events`, `services`, `endpointslices`, `configmaps` are the children's objects,
  `<kind>.remote.kmc.dev`, one list with the location first (the hub runs no pods);
- `<kind>.remote` (or `.remote.kmc.dev`) is the children's own copies of any kind above, e.g.
  `deployments.remote`; `<kind>.mc` (or `.mc.kmc.dev`) says the hub view explicitly;
- `locations` (`loc`) are the Location objects (`locations.kmc.dev`).
"""

from __future__ import annotations

MC = "mc.kmc.dev"
REMOTE = "remote.kmc.dev"
KMC = "kmc.dev"
VERSION = "v1alpha1"
SUBRESOURCES = ("locations", "strategy")


class UnknownResource(Exception):
    """The type is not one we serve; the message is kubectl's."""

    def __init__(self, name: str) -> None:
        super().__init__(f'the server doesn\'t have a resource type "{name}"')


class Resource:
    """One resource type. Compared and hashed by its fields, like the frozen dataclass it
    would be if importing dataclasses did not cost milliseconds (it loads inspect)."""

    __slots__ = ("group", "kind", "namespaced", "plural")

    def __init__(self, plural: str, kind: str, group: str, namespaced: bool = True) -> None:
        self.plural, self.kind, self.group, self.namespaced = plural, kind, group, namespaced

    def _key(self) -> tuple[str, str, str, bool]:
        return (self.plural, self.kind, self.group, self.namespaced)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Resource) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __repr__(self) -> str:
        return f"Resource{self._key()!r}"

    @property
    def qualified(self) -> str:
        """`deployments.mc.kmc.dev`: how the server names it in messages."""
        return f"{self.plural}.{self.group}"

    @property
    def has_subresources(self) -> bool:
        return self.group == MC

    def path(
        self, namespace: str | None = None, name: str | None = None, subresource: str | None = None
    ) -> str:
        """The REST path; no namespace for all namespaces or a cluster-scoped resource."""
        path = f"/apis/{self.group}/{VERSION}"
        if self.namespaced and namespace:
            path += f"/namespaces/{namespace}"
        path += f"/{self.plural}"
        if name:
            path += f"/{name}"
        if subresource:
            path += f"/{subresource}"
        return path


class Workload:
    """A workload kind the hub places: what `get`, `move` and `drain` know of it."""

    __slots__ = (
        "counted",
        "divided",
        "group",
        "kind",
        "plural",
        "shorts",
        "singular",
        "version",
    )

    def __init__(
        self,
        plural: str,
        kind: str,
        singular: str,
        shorts: tuple[str, ...],
        api_version: str,
        divided: bool,  # replicas are divided between locations (else a whole copy in each)
        counted: bool,  # its rows count ready and available pods against desired replicas
    ) -> None:
        self.plural, self.kind, self.singular, self.shorts = plural, kind, singular, shorts
        self.group, _, self.version = api_version.partition("/")
        self.divided, self.counted = divided, counted

    def path(self, namespace: str, name: str) -> str:
        """The hub object's own path."""
        return f"/apis/{self.group}/{self.version}/namespaces/{namespace}/{self.plural}/{name}"

    def view(self, namespace: str, name: str) -> str:
        """Its `mc.kmc.dev` view's path."""
        return f"/apis/{MC}/{VERSION}/namespaces/{namespace}/{self.plural}/{name}"

    def shown(self, name: str) -> str:
        """kubectl's `-o name`: deployment.apps/web."""
        return f"{self.singular}.{self.group}/{name}"


# The one table of workload kinds, by plural.
WORKLOADS = {
    w.plural: w
    for w in (
        Workload("deployments", "Deployment", "deployment", ("deploy",), "apps/v1", True, True),
        Workload("statefulsets", "StatefulSet", "statefulset", ("sts",), "apps/v1", True, True),
        Workload("replicasets", "ReplicaSet", "replicaset", ("rs",), "apps/v1", True, True),
        Workload("jobs", "Job", "job", (), "batch/v1", True, False),
        Workload("daemonsets", "DaemonSet", "daemonset", ("ds",), "apps/v1", False, False),
    )
}
_WORKLOADS = {p: (w.kind, w.singular, w.shorts) for p, w in WORKLOADS.items()}
_CHILD_ONLY = {
    "pods": ("Pod", "pod", ("po",)),
    "events": ("Event", "event", ("ev",)),
    "services": ("Service", "service", ("svc",)),
    "endpointslices": ("EndpointSlice", "endpointslice", ()),
    "configmaps": ("ConfigMap", "configmap", ("cm",)),
}
LOCATIONS = Resource("locations", "Location", KMC, namespaced=False)
# Hub objects (core v1) that go with workloads rather than by a strategy of their own:
# `kubectl mc describe` says which workloads each goes with, and where.
FOLLOWERS = ("services", "configmaps")

HUB_VIEWS = {p: Resource(p, kind, MC) for p, (kind, _, _) in _WORKLOADS.items()}
REMOTE_KINDS = {
    p: Resource(p, kind, REMOTE) for p, (kind, _, _) in (_WORKLOADS | _CHILD_ONLY).items()
}


def _aliases(table: dict[str, tuple[str, str, tuple[str, ...]]]) -> dict[str, str]:
    out = {}
    for plural, (_, singular, shorts) in table.items():
        for alias in (plural, singular, *shorts):
            out[alias] = plural
    return out


_WORKLOAD_ALIASES = _aliases(_WORKLOADS) | {"mcdeploy": "deployments"}
_REMOTE_ALIASES = _aliases(_WORKLOADS | _CHILD_ONLY)
_CHILD_ALIASES = _aliases(_CHILD_ONLY)
_LOCATION_ALIASES = {"locations", "location", "loc", "locations.kmc.dev", "location.kmc.dev"}


def resolve(typed: str) -> Resource:
    """The resource a typed name means (see the module docstring for the rule)."""
    name = typed.lower()
    if name in _LOCATION_ALIASES:
        return LOCATIONS
    base, _, group = name.partition(".")
    if group in ("mc", MC) and base in _WORKLOAD_ALIASES:
        return HUB_VIEWS[_WORKLOAD_ALIASES[base]]
    if group in ("remote", REMOTE) and base in _REMOTE_ALIASES:
        return REMOTE_KINDS[_REMOTE_ALIASES[base]]
    if not group and base in _WORKLOAD_ALIASES:
        return HUB_VIEWS[_WORKLOAD_ALIASES[base]]
    if not group and base in _CHILD_ALIASES:
        return REMOTE_KINDS[_CHILD_ALIASES[base]]
    raise UnknownResource(typed)


def completions() -> list[str]:
    """The type names offered by shell completion: plurals and the `.remote` forms."""
    return [
        *HUB_VIEWS,
        *_CHILD_ONLY,
        "locations",
        *(f"{p}.remote" for p in _WORKLOADS),
        *(f"{p}.mc" for p in _WORKLOADS),
    ]
