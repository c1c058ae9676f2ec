"""The workload kinds of `apps/v1`: placed by their strategy, their replicas divided, their
children's status folded back so `kubectl rollout status` and `kubectl wait` work on the hub.

A Deployment's fold says Available only where it is available everywhere it is placed and
Progressing while any location rolls out; a StatefulSet's carries the children's revisions
while one rolls out; a DaemonSet runs whole in every location it is placed in.
"""

from __future__ import annotations

from collections.abc import Callable

from apiserver.kinds.kind import Kind, Remote, Role, View
from apiserver.objects import Obj, ReadOnly
from apiserver.placement.engine import Shape
from apiserver.sync.desired import mapping, replicas_share
from apiserver.sync.status import (
    Children,
    Condition,
    Rules,
    located,
    replicas_of,
    status_of,
)

_TEMPLATE = ("spec", "template", "spec")
REPLICAS_DOC = (
    "Replicas the hub object asks for (its spec.replicas): the total divided across locations."
)
REPLICA_COUNTERS = {k: k for k in ("replicas", "readyReplicas", "availableReplicas")}
REPLICA_COUNTER_DOCS = {
    "replicas": "Pods, summed over every location the object is placed in.",
    "readyReplicas": "Ready pods, summed over every location.",
    "availableReplicas": "Available pods, summed over every location.",
}


def replicas(obj: ReadOnly) -> Shape:
    """`spec.replicas` divided (1 when unset)."""
    value = mapping(obj.get("spec")).get("replicas", 1)
    return Shape(total=value if isinstance(value, int) and not isinstance(value, bool) else 1)


def _view(singular: str, short_names: tuple[str, ...] = ()) -> View:
    return View(
        singular=singular,
        counters=REPLICA_COUNTERS,
        counter_docs=REPLICA_COUNTER_DOCS,
        replicas_doc=REPLICAS_DOC,
        ready="readyReplicas",
        short_names=short_names,
    )


# --- rollout budgets --------------------------------------------------------------------------


def scaled(value: object, total: int, *, round_up: bool) -> int:
    """An IntOrString: an int as is, "N%" of `total` rounded as asked.

    The hub's apiserver validated the object, so anything else does not occur; it counts as 0.
    """
    if isinstance(value, int) and not isinstance(value, bool):
        return max(0, value)
    if isinstance(value, str) and value.endswith("%") and value[:-1].isdigit():
        count = int(value[:-1]) * total
        return -(-count // 100) if round_up else count // 100
    return 0


def _deployment_max_unavailable(hub: ReadOnly) -> int:
    """As the Deployment controller resolves maxSurge/maxUnavailable, capped at the replicas.

    Recreate takes every replica down at once, so all of them may be unavailable.
    """
    spec = mapping(hub.get("spec"))
    total = replicas_of(hub)
    strategy = mapping(spec.get("strategy"))
    if strategy.get("type") == "Recreate":
        return total
    rolling = mapping(strategy.get("rollingUpdate"))
    surge = scaled(rolling.get("maxSurge", "25%"), total, round_up=True)
    unavailable = scaled(rolling.get("maxUnavailable", "25%"), total, round_up=False)
    if surge == 0 and unavailable == 0:
        unavailable = 1
    return min(unavailable, total)


def _statefulset_max_unavailable(hub: ReadOnly) -> int:
    spec = mapping(hub.get("spec"))
    rolling = mapping(mapping(spec.get("updateStrategy")).get("rollingUpdate"))
    value = rolling.get("maxUnavailable")
    if value is None:
        return 1
    # As the StatefulSet controller: a percentage rounds down, and at least one goes.
    return max(1, scaled(value, replicas_of(hub), round_up=False))


def one_at_a_time(_: ReadOnly) -> int:
    return 1


# --- folding ----------------------------------------------------------------------------------


def _deployment_fields(status: Obj, hub: ReadOnly, seen: Children, previous: ReadOnly) -> None:
    if seen.present:
        available = status.get("availableReplicas", 0)
        status["unavailableReplicas"] = max(0, replicas_of(hub) - available)


def _deployment_conditions(
    hub: ReadOnly, seen: Children, status: ReadOnly, previous: ReadOnly
) -> list[Condition]:
    conditions = [_available(hub, seen), _progressing(seen)]
    failure = _replica_failure(seen)
    return [*conditions, failure] if failure is not None else conditions


def _available(hub: ReadOnly, seen: Children) -> Condition:
    """Available only where every placed location's child is Available and none is stale."""
    if not seen.placed and replicas_of(hub) > 0:
        message = "not placed in any location"
        return Condition("Available", "False", "MinimumReplicasUnavailable", message)
    lacking = []
    for loc in sorted({*seen.placed, *seen.stale}):
        child = seen.present.get(loc)
        if child is None:
            lacking.append(f"{loc} (not created yet)")
        elif loc in seen.stale:
            lacking.append(f"{loc} (stale)")
        elif not seen.is_true(loc, "Available"):
            want = replicas_of(child)
            have = status_of(child).get("availableReplicas", 0)
            lacking.append(f"{loc} ({have}/{want} available)")
    if lacking:
        message = "not available in " + ", ".join(lacking)
        return Condition("Available", "False", "MinimumReplicasUnavailable", message)
    message = "available in " + ", ".join(seen.placed) if seen.placed else "no replicas to run"
    return Condition("Available", "True", "MinimumReplicasAvailable", message)


def _progressing(seen: Children) -> Condition:
    """False once any child gave up; otherwise True, and settled only when all have rolled out."""
    exceeded = [
        loc
        for loc in seen.present
        if mapping(seen.condition(loc, "Progressing")).get("reason") == "ProgressDeadlineExceeded"
    ]
    if exceeded:
        message = "progress deadline exceeded in " + ", ".join(exceeded)
        return Condition("Progressing", "False", "ProgressDeadlineExceeded", message)
    moving = [
        loc
        for loc in seen.placed
        if loc not in seen.present
        or mapping(seen.condition(loc, "Progressing")).get("reason") != "NewReplicaSetAvailable"
    ]
    if moving:
        return Condition(
            "Progressing", "True", "ReplicaSetUpdated", "progressing in " + ", ".join(moving)
        )
    message = "rolled out in " + ", ".join(seen.placed) if seen.placed else "nothing to roll out"
    return Condition("Progressing", "True", "NewReplicaSetAvailable", message)


def _replica_failure(seen: Children) -> Condition | None:
    """Carried up from any child that has it, naming where."""
    failing = seen.with_condition("ReplicaFailure")
    if not failing:
        return None
    first = mapping(seen.condition(failing[0], "ReplicaFailure"))
    message = "; ".join(located(loc, seen.condition(loc, "ReplicaFailure")) for loc in failing)
    return Condition("ReplicaFailure", "True", str(first.get("reason") or "FailedCreate"), message)


def _statefulset_fields(status: Obj, hub: ReadOnly, seen: Children, previous: ReadOnly) -> None:
    status.update(_revisions(seen))


def _revisions(seen: Children) -> dict[str, str]:
    """A StatefulSet rolling out anywhere shows differing revisions, as on one cluster.

    Revisions are per-cluster hashes, so they are only carried up (as `location/revision`
    lists) while some child is mid-rollout; `kubectl rollout status` waits on them.
    """
    pairs = {
        loc: (
            str(status_of(child).get("currentRevision", "")),
            str(status_of(child).get("updateRevision", "")),
        )
        for loc, child in seen.present.items()
    }
    if all(current == update for current, update in pairs.values()):
        return {}
    return {
        "currentRevision": ",".join(f"{loc}/{current}" for loc, (current, _) in pairs.items()),
        "updateRevision": ",".join(f"{loc}/{update}" for loc, (_, update) in pairs.items()),
    }


def _divided(
    kind: str,
    fold_rules: Rules,
    max_unavailable: Callable[[ReadOnly], int],
    owns_pods: bool = True,
    pods_via: str | None = None,
    short_names: tuple[str, ...] = (),
) -> Kind:
    """An apps/v1 workload whose `spec.replicas` is divided across its locations and handed
    over make-before-break."""
    singular, plural = kind.lower(), f"{kind.lower()}s"
    return Kind(
        kind,
        kind,
        "apps/v1",
        plural,
        role=Role.WORKLOAD,
        pod_spec_path=_TEMPLATE,
        default_type="Split",
        size=replicas,
        share=replicas_share,
        fold_rules=fold_rules,
        max_unavailable=max_unavailable,
        owns_pods=owns_pods,
        pods_via=pods_via,
        view=_view(singular, short_names),
        remote=Remote(singular, f"{plural}.apps", "apps/v1"),
    )


DEPLOYMENT = _divided(
    "Deployment",
    Rules(fields=_deployment_fields, conditions=_deployment_conditions, update_time=True),
    _deployment_max_unavailable,
    owns_pods=False,  # its ReplicaSets own its pods
    pods_via="ReplicaSet",
    short_names=("mcdeploy",),
)
STATEFULSET = _divided(
    "StatefulSet", Rules(fields=_statefulset_fields), _statefulset_max_unavailable
)
REPLICASET = _divided("ReplicaSet", Rules(), one_at_a_time)

DAEMONSET = Kind(
    "DaemonSet",
    "DaemonSet",
    "apps/v1",
    "daemonsets",
    role=Role.WORKLOAD,
    remote=Remote("daemonset", "daemonsets.apps", "apps/v1"),
    pod_spec_path=_TEMPLATE,
    fold_rules=Rules(),
    counts=("numberReady", "numberAvailable"),
    owns_pods=True,
    view=View(
        singular="daemonset",
        counters={
            "replicas": "desiredNumberScheduled",
            "readyReplicas": "numberReady",
            "availableReplicas": "numberAvailable",
        },
        counter_docs={
            "replicas": "Daemon pods that should run, summed over every location.",
            "readyReplicas": "Ready daemon pods, summed over every location.",
            "availableReplicas": "Available daemon pods, summed over every location.",
        },
        replicas_doc=None,
        ready="readyReplicas",
    ),
)

ENTRIES = (DEPLOYMENT, STATEFULSET, REPLICASET, DAEMONSET)
