"""A HorizontalPodAutoscaler goes where the workload it scales runs, its bounds divided.

A hub HPA follows its `scaleTargetRef` (a placed workload of its namespace) to every location
where that workload has replicas. `minReplicas` and `maxReplicas` are divided over those
locations by the workload's shares, each child at least 1 and its max at least its min, so
the children together scale between the hub's bounds whenever the placement allows it (a
hub minimum below the number of locations still gives each location 1). A workload run whole
in each location (Replicate) gets the bounds whole in each.

While a hub HPA targets a workload, each child's `spec.replicas` is its own HPA's to set: the
sync loop stops sending it there (see `loops/sync/apply.py`), the hub's `spec.replicas` is the
size new children start at, and the hub workload's status is still the sum of what the
children run.

The hub HPA's status is the children's: `currentReplicas` and `desiredReplicas` summed, the
conditions merged (AbleToScale and ScalingActive only where true everywhere, ScalingLimited
where limited anywhere), `lastScaleTime` the latest, and `currentMetrics` once per metric
with each current value averaged over the locations reporting it, weighed by the replicas
each runs (a plain average when none runs any). An average is what each location's own HPA
compares with the target it has, the hub's; it is not the fleet's total. Utilizations are
rounded to whole percents, quantities to thousandths.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from fractions import Fraction

from apiserver.contract import Placement
from apiserver.kinds.kind import Kind, Role, Target
from apiserver.objects import Obj, ReadOnly
from apiserver.placement.apportion import apportion
from apiserver.quantity import format_quantity, parse_quantity
from apiserver.sync.desired import mapping
from apiserver.sync.status import (
    Children,
    Condition,
    Rules,
    as_int,
    items_of,
    latest,
    located,
    merged,
    status_of,
)

_LIMITED = "ScalingLimited"  # True is news here: some location is held at a bound


def scale_target(hpa: ReadOnly) -> Target | None:
    return Target.of(mapping(hpa.get("spec")).get("scaleTargetRef"))


def divide_bounds(low: int, high: int, weights: Mapping[str, int]) -> dict[str, tuple[int, int]]:
    """`(minReplicas, maxReplicas)` per location, divided by `weights` (largest remainder,
    ties by name). Each minimum is at least 1; each maximum is its minimum plus a share of
    what the hub allows beyond the minimums, so it is never below it. The minimums sum to
    `low` when `low` is at least the number of locations, and the maximums to `high` when
    the minimums do."""
    if not weights:
        return {}
    lows = apportion(max(low, 0), weights, minimum=1).shares
    lows = {name: max(1, share) for name, share in lows.items()}
    extra = apportion(max(high - sum(lows.values()), 0), weights).shares
    return {name: (lows[name], lows[name] + extra[name]) for name in sorted(weights)}


def _bounds_share(child: Obj, location: str, placement: Placement) -> None:
    """The location's share of the bounds; whole where the workload runs whole."""
    spec = child.get("spec")
    if not isinstance(spec, dict) or placement[location] is None:
        return
    low, high = as_int(spec.get("minReplicas")), as_int(spec.get("maxReplicas"))
    if high is None:
        return  # the hub's apiserver requires it: not an HPA we can divide
    weights = {name: share or 0 for name, share in placement.items()}
    spec["minReplicas"], spec["maxReplicas"] = divide_bounds(
        1 if low is None else low, high, weights
    )[location]


# --- folding ----------------------------------------------------------------------------------


def _autoscaler_fields(status: Obj, hub: ReadOnly, seen: Children, previous: ReadOnly) -> None:
    scaled = latest(status_of(child).get("lastScaleTime") for child in seen.present.values())
    if scaled is not None:
        status["lastScaleTime"] = scaled
    metrics = averaged_metrics(seen.present.values())
    if metrics:
        status["currentMetrics"] = metrics


def _autoscaler_conditions(
    hub: ReadOnly, seen: Children, status: ReadOnly, previous: ReadOnly
) -> list[Condition]:
    conditions = merged(seen, skip=frozenset({_LIMITED}))
    reporting = [loc for loc in seen.present if seen.condition(loc, _LIMITED) is not None]
    if not reporting:
        return conditions
    limited = seen.with_condition(_LIMITED)
    if limited:
        first = mapping(seen.condition(limited[0], _LIMITED))
        message = "; ".join(located(loc, seen.condition(loc, _LIMITED)) for loc in limited)
        reason = str(first.get("reason") or "TooManyReplicas")
        return [*conditions, Condition(_LIMITED, "True", reason, message)]
    first = mapping(seen.condition(reporting[0], _LIMITED))
    message = "not limited in " + ", ".join(reporting)
    reason = str(first.get("reason") or "DesiredWithinRange")
    return [*conditions, Condition(_LIMITED, "False", reason, message)]


def averaged_metrics(children: Iterable[ReadOnly]) -> list[Obj]:
    """Each metric the children's HPAs report, once, in the order first seen, with its
    current values averaged over the children reporting it, weighed by their currentReplicas
    (equally when none of them runs any)."""
    found: dict[str, tuple[ReadOnly, str, list[tuple[ReadOnly, int]]]] = {}
    for child in children:
        status = status_of(child)
        weight = as_int(status.get("currentReplicas")) or 0
        for metric in items_of(status.get("currentMetrics")):
            source = _source(metric)
            if source is None:
                continue
            what = {**mapping(metric.get(source))}
            current = mapping(what.pop("current", None))
            identity = json.dumps({**metric, source: what}, sort_keys=True)
            if identity not in found:
                found[identity] = ({**metric, source: what}, source, [])
            found[identity][2].append((current, weight))
    averaged = []
    for shape, source, currents in found.values():
        section = {**mapping(shape.get(source)), "current": _average(currents)}
        averaged.append({**shape, source: section})
    return averaged


def _source(metric: ReadOnly) -> str | None:
    """The field holding a MetricStatus' values: `Resource` -> `resource`."""
    type_ = metric.get("type")
    if not isinstance(type_, str) or not type_:
        return None
    field = type_[0].lower() + type_[1:]
    return field if isinstance(metric.get(field), Mapping) else None


def _average(currents: list[tuple[ReadOnly, int]]) -> Obj:
    if not any(weight for _, weight in currents):
        currents = [(current, 1) for current, _ in currents]
    out: Obj = {}
    utilizations = [
        (value, weight)
        for current, weight in currents
        if (value := as_int(current.get("averageUtilization"))) is not None
    ]
    if utilizations and (total := sum(weight for _, weight in utilizations)):
        mean = Fraction(sum(value * weight for value, weight in utilizations), total)
        out["averageUtilization"] = int(mean + Fraction(1, 2))  # half up
    for field in ("averageValue", "value"):
        values = []
        for current, weight in currents:
            text = current.get(field)
            if isinstance(text, str):
                try:
                    values.append((parse_quantity(text), weight, text))
                except ValueError:
                    continue
        if values and (total := sum(weight for _, weight, _ in values)):
            mean = sum((value * weight for value, weight, _ in values), Fraction()) / total
            rounded = Fraction(round(mean * 1000), 1000)
            out[field] = format_quantity(rounded, like=values[0][2])
    return out


HORIZONTALPODAUTOSCALER = Kind(
    "HorizontalPodAutoscaler",
    "HorizontalPodAutoscaler",
    "autoscaling/v2",
    "horizontalpodautoscalers",
    role=Role.SCALER,
    share=_bounds_share,
    target=scale_target,
    # An HPA controller need not say which generation it saw (1.34's leaves it unset).
    fold_rules=Rules(
        fields=_autoscaler_fields,
        conditions=_autoscaler_conditions,
        observes_generation=False,
    ),
)

ENTRIES = (HORIZONTALPODAUTOSCALER,)
