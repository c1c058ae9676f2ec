"""What a kind of object is to kubectl-mc, said once: the `Kind` entry.

Every loop, view and handler asks the entry rather than testing a kind's name: where the
hub cache watches it, what role it plays in placement (`Role`), how its size is read for the
engine (`size`), how a location's share of it is cut (`share`), how its children's status
folds back (`fold`), how a move hands it over (`max_unavailable`), and whether the
`mc.kmc.dev` views (`view`) and `remote.kmc.dev` punch-through (`remote`) serve it.

The pure cores (`placement/`, `sync/`) know nothing of kinds: they take the entry's answers
as arguments. An entry's own functions live beside it, in this package.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from enum import Enum, StrEnum
from typing import NamedTuple

from apiserver.contract import Placement
from apiserver.objects import Obj, ReadOnly
from apiserver.placement.dependencies import pod_spec_at
from apiserver.placement.engine import Shape
from apiserver.placement.strategy import StrategyType
from apiserver.sync import status as fold


class Role(StrEnum):
    """How the placement loop places a kind's objects."""

    WORKLOAD = "workload"  # placed by its strategy, its replicas divided; status folded up
    DEPENDENCY = "dependency"  # follows the workloads whose pod templates name it
    NAMESPACE_FOLLOWER = "namespace-follower"  # wherever its namespace's workloads run
    # Where the workloads its selector matches run (a Service; without a selector, wherever
    # its namespace's workloads run).
    SELECTOR_FOLLOWER = "selector-follower"
    # Wherever any of the objects it names is placed (an Ingress: the Services its rules and
    # default backend name); kept on the hub, and saying why, while none of them is.
    REFERENCE_FOLLOWER = "reference-follower"
    # Where the workload it scales runs (an autoscaler's scaleTargetRef, `target`), its bounds
    # divided by that workload's shares; while it does, the size of that workload's children
    # is their autoscalers' to set, never sent by us.
    SCALER = "scaler"
    # Placed only when it carries a strategy (Replicate by default for its kind): a CRD's
    # kind, and the cluster-scoped built-ins an administrator places (a ClusterRole).
    ASKED = "asked"


class Change(Enum):
    """What applying a new desired object to an existing child takes."""

    APPLY = "apply"  # an apply changes it in place
    REPLACE = "replace"  # a field it sets cannot change in place: delete, then make anew
    KEEP = "keep"  # leave it as it is (its work there is done, and stays on record)


Share = Callable[[Obj, str, Placement], None]
"""Cut `placement[location]`'s share into the child object (a deep copy, changed in place)."""

Selects = Callable[[Mapping[str, str]], bool]
"""Does a selector match these pod labels?"""

Names = Callable[[ReadOnly], frozenset[tuple[str, str]]]
"""(kind key, name) of the objects in its own namespace an object names."""

Note = Callable[[ReadOnly, Placement], tuple[str, str] | None]
"""(reason, message) of a Warning Event worth posting about where an object is placed."""


@dataclass(frozen=True)
class View:
    """How `mc.kmc.dev` shows a workload kind: its resource, counters and their docs."""

    singular: str
    # view status field -> hub status field, and what each means
    counters: Mapping[str, str]
    counter_docs: Mapping[str, str]
    replicas_doc: str | None  # spec.replicas of the view; None: the kind has none
    ready: str  # the view counter the READY column counts
    short_names: tuple[str, ...] = ()


@dataclass(frozen=True)
class Remote:
    """How `remote.kmc.dev` serves the children's objects of a kind."""

    singular: str
    explain: str  # what `kubectl explain` takes for the kind's fields
    home: str  # where the kind lives, in words ("apps/v1", "core v1")
    # Sub-resources served through to the children by the same names (pods' streams).
    subresources: tuple[str, ...] = ()

    def resources(self, plural: str, asked: list[str]) -> list[str]:
        """What an RBAC rule's `resources` about this kind names in a child: the kind itself
        (`pods`, `*`) and the sub-resources it serves, as RBAC matches them (`pods/log`,
        `*/log`, `*`; RBAC has no `pods/*`)."""
        found = [plural] if "*" in asked or plural in asked else []
        for sub in self.subresources:
            if any(name in asked for name in (f"{plural}/{sub}", f"*/{sub}", "*")):
                found.append(f"{plural}/{sub}")
        return found


def _whole(_: Obj) -> Shape:
    return Shape(total=None)


def _always(_: Obj) -> bool:
    return True


def _in_place(_: Obj, __: Obj) -> Change:
    return Change.APPLY


def _no_selector(_: ReadOnly) -> Selects | None:
    return None


def _names_nothing(_: ReadOnly) -> frozenset[tuple[str, str]]:
    return frozenset()


def _nothing_to_note(_: ReadOnly, __: Placement) -> tuple[str, str] | None:
    return None


def _no_target(_: ReadOnly) -> Target | None:
    return None


@dataclass(frozen=True)
class Kind:
    """One kind of hub object; `key` is the Kind, or Kind.group for a CRD's."""

    key: str
    kind: str
    api_version: str
    plural: str
    role: Role | None = None  # None: not placed (only read through punch-through)
    namespaced: bool = True
    crd: bool = False  # served by the hub's apiextensions (no strategic merge patch)
    pod_spec_path: tuple[str, ...] | None = None  # where its pod template's spec is
    # Split (divide the replicas) or Replicate (a whole copy each) when nothing says otherwise.
    default_type: StrategyType = "Replicate"
    size: Callable[[Obj], Shape] = _whole  # what the engine divides, and its limits
    share: Share | None = None  # None: every location gets the object as written
    syncable: Callable[[Obj], bool] = _always  # False: the hub's own, never placed nor sent
    fold_rules: fold.Rules | None = None  # None: no status is folded up
    # Set for kinds whose replicas move make-before-break: how many may be unavailable.
    max_unavailable: Callable[[Obj], int] | None = None
    # Status fields a location's row counts as ready and available.
    counts: tuple[str, str] = ("readyReplicas", "availableReplicas")
    change: Callable[[Obj, Obj], Change] = _in_place  # (current child, desired) -> what it takes
    # The conditions list of its status is atomic: an apply replaces it whole.
    whole_conditions: bool = False
    # A namespace or selector follower whose placement carries the replicas the workloads it
    # follows run in each location (a quota or a disruption budget divided by them), not
    # just where.
    weighed: bool = False
    # A selector follower's selector, as a test of pod labels; None: it has none.
    selector: Callable[[ReadOnly], Selects | None] = _no_selector
    # A reference follower's objects it goes with (an Ingress: its Services).
    follows: Names = _names_nothing
    # Dependencies it names besides a pod template's, which follow it as they follow a
    # workload (an Ingress's TLS Secrets).
    uses: Names = _names_nothing
    # A word on where a dependency went, said once per change (a ReadWriteOnce claim in two
    # locations is two volumes).
    note: Note = _nothing_to_note
    # A scaler's target, as the object names it; None: it names none.
    target: Callable[[ReadOnly], Target | None] = _no_target
    # A disruption budget's allowance: of `pods` pods its selector matches, how many it lets
    # be unavailable at once (what a move of those pods honours as it honours maxUnavailable).
    allows: Callable[[ReadOnly, int], int] | None = None
    # Pods' controller: owners whose pods point at them directly (`direct`), or through an
    # intermediary of this kind whose name ends in the pod-template-hash (`via`).
    owns_pods: bool = False
    pods_via: str | None = None
    # Said after each Event of a placement that changed (a Pod cannot move: it is made anew).
    moved_note: str = ""
    view: View | None = field(default=None, compare=False)
    remote: Remote | None = field(default=None, compare=False)

    @property
    def group(self) -> str:
        return self.api_version.rpartition("/")[0]

    @property
    def version(self) -> str:
        return self.api_version.rpartition("/")[2]

    @property
    def custom(self) -> bool:
        """A CRD's kind (served by the hub's apiextensions, not built in)."""
        return self.crd

    @property
    def folds(self) -> bool:
        return self.fold_rules is not None

    @property
    def has_conditions(self) -> bool:
        """Does the hub object show our conditions (`kmc.dev/Placed`, `kmc.dev/Synced`)?"""
        return self.fold_rules is not None and self.fold_rules.conditions_in_status

    @property
    def collection(self) -> str:
        """The all-namespaces list path."""
        return f"{self._prefix}/{self.plural}"

    @property
    def _prefix(self) -> str:
        return "/api/v1" if self.api_version == "v1" else f"/apis/{self.api_version}"

    def path(self, namespace: str | None, name: str = "", subresource: str = "") -> str:
        """A collection (in one namespace, or all with None) or one object's path."""
        where = f"/namespaces/{namespace}" if namespace else ""
        path = f"{self._prefix}{where}/{self.plural}"
        if name:
            path += f"/{name}"
        return f"{path}/{subresource}" if subresource else path

    def shape(self, obj: Obj) -> Shape:
        """What the engine divides of `obj`, with its pod spec for steering."""
        return dataclasses.replace(self.size(obj), pod_spec=self.pod_spec(obj))

    def pod_labels(self, obj: ReadOnly) -> ReadOnly:
        """The labels its pods get (a template's, or a Pod's own); {} for kinds without pods."""
        if not self.pod_spec_path:
            return {}
        found = pod_spec_at(obj, (*self.pod_spec_path[:-1], "metadata", "labels"))
        return found or {}

    def pod_spec(self, obj: ReadOnly) -> ReadOnly | None:
        """The pod spec inside an object of this kind; None if it has none."""
        return pod_spec_at(obj, self.pod_spec_path) if self.pod_spec_path else None

    def named_by(self, target: Target) -> bool:
        """Is this the kind `target` names (its group and kind; any version)?"""
        return (self.group, self.kind) == (target.group, target.kind)

    def typed(self, obj: Obj) -> Obj:
        """The object with its kind and apiVersion (a list's items have neither). A new dict
        around the given one, which may be cached and is not changed."""
        return {"kind": self.kind, "apiVersion": self.api_version, **obj}


class Key(NamedTuple):
    """One hub object (or, with kind `Namespace` and no namespace, one namespace)."""

    kind: str  # a Kind's key
    namespace: str
    name: str

    @property
    def cache_key(self) -> str:
        """How informers file it."""
        return f"{self.namespace}/{self.name}" if self.namespace else self.name

    @property
    def lane(self) -> str:
        """Whose turn it is in a fair queue: its namespace."""
        return self.namespace or self.name

    def __str__(self) -> str:
        return f"{self.kind} {self.cache_key}"

    @classmethod
    def of(cls, kind: str, obj: Obj) -> Key:
        meta = obj["metadata"]
        return cls(kind, meta.get("namespace") or "", meta["name"])


class Target(NamedTuple):
    """The object a scaler names in its own namespace (an HPA's scaleTargetRef)."""

    group: str  # "" for the core group
    kind: str
    name: str

    @classmethod
    def of(cls, ref: object) -> Target | None:
        """From a `{apiVersion, kind, name}` reference; None if it is not one."""
        if not isinstance(ref, dict):
            return None
        version, kind, name = ref.get("apiVersion"), ref.get("kind"), ref.get("name")
        if not all(isinstance(value, str) and value for value in (version, kind, name)):
            return None
        return cls(str(version).rpartition("/")[0], str(kind), str(name))

    def key(self, kinds: Iterable[Kind], namespace: str) -> Key | None:
        """The hub object it names, if a kind placed by a strategy (a workload, a CRD's) is
        the one it names."""
        for kind in kinds:
            if kind.role in (Role.WORKLOAD, Role.ASKED) and kind.named_by(self):
                return Key(kind.key, namespace, self.name)
        return None
