"""A PodDisruptionBudget goes where the pods it protects run, its budget divided.

A hub PDB follows the workloads whose pod templates its selector matches, like a Service,
and carries the replicas they run in each location (`weighed`). An integer `minAvailable`
or `maxUnavailable` is divided over those locations by those replicas (largest remainder,
ties by name), so the children together allow what the hub allows and no more: a budget of
one disruption over three locations allows one in one of them and none in the others, which
is what it allows across the fleet. A percentage means the same in every location and is
kept as written.

A move or a drain of the pods it selects honours it as it honours the workload's own
`maxUnavailable` (`allows`, read by the sync loop's make-before-break): the workload's
replicas count as the pods it expects, which is exact when it selects one workload's pods.

Its status is the children's: `currentHealthy`, `desiredHealthy`, `expectedPods` and
`disruptionsAllowed` summed (the shared fold sums every counter), `observedGeneration` once
every location has seen ours, and `DisruptionAllowed` true while the sum allows one anywhere,
naming how many each location allows; a child that could not compute its budget
(`SyncFailed`) is carried up. `disruptedPods` names the children's pods, and is not folded.
"""

from __future__ import annotations

from pydantic import ValidationError

from apiserver.contract import Placement
from apiserver.kinds.kind import Kind, Role, Selects
from apiserver.kinds.workloads import scaled
from apiserver.objects import Obj, ReadOnly
from apiserver.placement.apportion import apportion
from apiserver.placement.selector import matches
from apiserver.placement.strategy import LabelSelector
from apiserver.sync.desired import mapping
from apiserver.sync.status import Children, Condition, Rules, as_int, located, status_of

_ALLOWED = "DisruptionAllowed"


def _budget_selector(pdb: ReadOnly) -> Selects:
    """policy/v1: an empty selector selects every pod of the namespace, a missing one none."""
    wanted = mapping(pdb.get("spec")).get("selector")
    if wanted is None:
        return lambda _: False
    try:
        selector = LabelSelector.model_validate(wanted)
    except ValidationError:
        return lambda _: False  # the hub's apiserver validated it; nothing we can match
    return lambda labels: matches(selector, labels)


def divide_budget(value: int, weights: dict[str, int]) -> dict[str, int]:
    """An integer budget over the locations, in proportion to their replicas; the shares sum
    to `value` (equally when no location runs any)."""
    return apportion(max(value, 0), weights).shares if weights else {}


def _budget_share(child: Obj, location: str, placement: Placement) -> None:
    spec = child.get("spec")
    if not isinstance(spec, dict) or placement[location] is None:
        return
    weights = {name: share or 0 for name, share in placement.items()}
    for field in ("minAvailable", "maxUnavailable"):
        value = as_int(spec.get(field))
        if value is not None:  # an "N%" stays as written
            spec[field] = divide_budget(value, weights)[location]


def _allows(pdb: ReadOnly, pods: int) -> int:
    """How many of `pods` may be unavailable at once, as the disruption controller reckons
    (percentages rounded up); one that says neither asks no pod to stay (its desiredHealthy
    is 0)."""
    spec = mapping(pdb.get("spec"))
    if spec.get("maxUnavailable") is not None:
        return scaled(spec["maxUnavailable"], pods, round_up=True)
    if spec.get("minAvailable") is not None:
        return max(0, pods - scaled(spec["minAvailable"], pods, round_up=True))
    return pods


def _budget_conditions(
    hub: ReadOnly, seen: Children, status: ReadOnly, previous: ReadOnly
) -> list[Condition]:
    if not seen.present:
        return []
    failed = [
        loc
        for loc in seen.present
        if mapping(seen.condition(loc, _ALLOWED)).get("reason") == "SyncFailed"
    ]
    if failed:
        message = "; ".join(located(loc, seen.condition(loc, _ALLOWED)) for loc in failed)
        return [Condition(_ALLOWED, "False", "SyncFailed", message)]
    each = ", ".join(
        f"{loc}: {as_int(status_of(child).get('disruptionsAllowed')) or 0}"
        for loc, child in seen.present.items()
    )
    if (as_int(status.get("disruptionsAllowed")) or 0) > 0:
        return [Condition(_ALLOWED, "True", "SufficientPods", f"disruptions allowed ({each})")]
    return [Condition(_ALLOWED, "False", "InsufficientPods", f"no disruption allowed ({each})")]


PODDISRUPTIONBUDGET = Kind(
    "PodDisruptionBudget",
    "PodDisruptionBudget",
    "policy/v1",
    "poddisruptionbudgets",
    role=Role.SELECTOR_FOLLOWER,
    selector=_budget_selector,
    weighed=True,
    share=_budget_share,
    allows=_allows,
    fold_rules=Rules(conditions=_budget_conditions),
)

ENTRIES = (PODDISRUPTIONBUDGET,)
