"""What a pod template already says about where it may run, read at the level of locations.

People who know Kubernetes already say where pods go: a required node affinity or a
nodeSelector on `topology.kubernetes.io/region`, a `topologySpreadConstraint` over zones,
preferred terms with weights. Locations carry the same labels as the nodes in them, so the
same words can choose locations, and nobody has to learn our annotation for it.

A term speaks of locations when its key is a label some Location carries, or a hub-only key
under `location.kmc.dev/` (`location.kmc.dev/name` is the Location's name,
`location.kmc.dev/<label>` its label `<label>`). Every other key (`kubernetes.io/os`, a
node pool) is about nodes inside a cluster and is left to that cluster's scheduler: at this
level it holds everywhere. The constraints themselves still go to the children, where they
mean the same thing inside each cluster; only the hub-only terms are stripped (`strip_hub_only`).

Pure functions over the object and the locations' names and labels; the engine decides.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from apiserver.objects import Obj, ReadOnly

HUB_PREFIX = "location.kmc.dev/"
NAME_KEY = HUB_PREFIX + "name"


@dataclass(frozen=True)
class Steering:
    """What the template says, per location.

    `ruled_out`: location -> the term that rules it out, in words. `preferences`: location ->
    the summed weight of the preferred terms it matches, for every location (None when no
    preferred term speaks of locations). `spread_key` and `domains`: a DoNotSchedule
    topologySpreadConstraint on a location key, and each location's value of that key.
    """

    ruled_out: Mapping[str, str] = field(default_factory=dict)
    preferences: Mapping[str, int] | None = None
    spread_key: str | None = None
    max_skew: int = 1
    domains: Mapping[str, str] = field(default_factory=dict)


NOTHING = Steering()


def is_hub_only(key: str) -> bool:
    return key.startswith(HUB_PREFIX)


def steering(
    spec: ReadOnly | None, labels_of: Callable[[], Mapping[str, Mapping[str, str]]]
) -> Steering:
    """Read a pod template's `spec` against the locations `labels_of()` gives (name ->
    labels), asked only of a template that says something about nodes."""
    if not spec:
        return NOTHING
    affinity = _mapping(_mapping(spec.get("affinity")).get("nodeAffinity"))
    node_selector = _mapping(spec.get("nodeSelector"))
    spreads = spec.get("topologySpreadConstraints")
    if not (affinity or node_selector or spreads):
        return NOTHING
    locations = labels_of()
    carried = {key for labels in locations.values() for key in labels}

    def speaks_of_locations(key: object) -> bool:
        return isinstance(key, str) and (is_hub_only(key) or key in carried)

    ruled_out: dict[str, str] = {}
    required = _location_terms(
        _mapping(affinity.get("requiredDuringSchedulingIgnoredDuringExecution")).get(
            "nodeSelectorTerms"
        ),
        speaks_of_locations,
    )
    wanted = {k: v for k, v in node_selector.items() if speaks_of_locations(k)}
    for name, labels in sorted(locations.items()):
        reason = _selector_fails(wanted, name, labels)
        if reason is None and required:
            reason = _affinity_fails(required, name, labels)
        if reason is not None:
            ruled_out[name] = reason

    preferences = _preferences(affinity, speaks_of_locations, locations)

    spread_key, max_skew, domains = None, 1, {}
    for constraint in spreads if isinstance(spreads, list) else ():
        constraint = _mapping(constraint)
        key = constraint.get("topologyKey")
        if constraint.get("whenUnsatisfiable") != "DoNotSchedule" or not speaks_of_locations(key):
            continue
        assert isinstance(key, str)
        spread_key = key
        skew = constraint.get("maxSkew")
        max_skew = skew if isinstance(skew, int) and skew >= 1 else 1
        for name, labels in sorted(locations.items()):
            value = _value(key, name, labels)
            if value is None:
                ruled_out.setdefault(name, f"topologySpreadConstraints: no {key} label")
            else:
                domains[name] = value
        break  # the first one divides; the others still apply inside each cluster

    return Steering(ruled_out, preferences, spread_key, max_skew, domains)


# --- terms ------------------------------------------------------------------------------------

_Expression = ReadOnly


def _mapping(value: object) -> ReadOnly:
    return value if isinstance(value, Mapping) else {}


def _expressions(term: object) -> list[_Expression]:
    found = _mapping(term).get("matchExpressions")
    return [_mapping(e) for e in found] if isinstance(found, list) else []


def _location_terms(terms: object, speaks: Any) -> list[list[_Expression]]:
    """The terms' expressions on location keys; [] when no term has any (then the affinity
    is about nodes only). A term with none of them holds for every location."""
    if not isinstance(terms, list):
        return []
    found = [[e for e in _expressions(term) if speaks(e.get("key"))] for term in terms]
    return found if any(found) else []


def _value(key: str, name: str, labels: Mapping[str, str]) -> str | None:
    if key == NAME_KEY:
        return name
    if is_hub_only(key):
        return labels.get(key[len(HUB_PREFIX) :])
    return labels.get(key)


def holds(expression: _Expression, name: str, labels: Mapping[str, str]) -> bool:
    """A NodeSelectorRequirement against a location, as the scheduler reads one on a node."""
    key = str(expression.get("key", ""))
    value = _value(key, name, labels)
    values = [str(v) for v in expression.get("values") or []]
    match expression.get("operator"):
        case "In":
            return value is not None and value in values
        case "NotIn":
            return value is None or value not in values
        case "Exists":
            return value is not None
        case "DoesNotExist":
            return value is None
        case "Gt" | "Lt" as operator:
            try:
                have, bound = int(value or ""), int(values[0])
            except (ValueError, IndexError):
                return False
            return have > bound if operator == "Gt" else have < bound
        case _:
            return False


def describe(expression: _Expression) -> str:
    key, operator = expression.get("key"), expression.get("operator")
    values = ", ".join(str(v) for v in expression.get("values") or [])
    match operator:
        case "In":
            return f"{key} in [{values}]"
        case "NotIn":
            return f"{key} not in [{values}]"
        case "Exists":
            return f"{key} set"
        case "DoesNotExist":
            return f"{key} not set"
        case "Gt":
            return f"{key} > {values}"
        case "Lt":
            return f"{key} < {values}"
        case _:
            return f"{key} {json.dumps(operator)}"


def _selector_fails(wanted: ReadOnly, name: str, labels: Mapping[str, str]) -> str | None:
    for key, value in sorted(wanted.items()):
        if _value(key, name, labels) != value:
            return f"nodeSelector requires {key}={value}"
    return None


def _affinity_fails(
    terms: Sequence[Sequence[_Expression]], name: str, labels: Mapping[str, str]
) -> str | None:
    failing = []
    for term in terms:
        first = next((e for e in term if not holds(e, name, labels)), None)
        if first is None:
            return None  # terms are ORed: one that holds is enough
        failing.append(describe(first))
    return "nodeAffinity requires " + " or ".join(failing)


def _preferences(
    affinity: ReadOnly, speaks: Any, locations: Mapping[str, Mapping[str, str]]
) -> dict[str, int] | None:
    preferred = affinity.get("preferredDuringSchedulingIgnoredDuringExecution")
    weighted = []
    for entry in preferred if isinstance(preferred, list) else ():
        entry = _mapping(entry)
        weight = entry.get("weight")
        terms = [e for e in _expressions(entry.get("preference")) if speaks(e.get("key"))]
        if isinstance(weight, int) and weight > 0 and terms:
            weighted.append((weight, terms))
    if not weighted:
        return None
    return {
        name: sum(
            weight
            for weight, terms in weighted
            if all(holds(expression, name, labels) for expression in terms)
        )
        for name, labels in sorted(locations.items())
    }


# --- stripping hub-only terms -------------------------------------------------------------------


def strip_hub_only(pod_spec: Obj, location: str, labels: Mapping[str, str] | None) -> None:
    """Take every `location.kmc.dev/` term out of a child's pod spec (in place), keeping what
    the rest means in `location`: no node carries those keys, so a term left in would make the
    pods unschedulable there.

    A required term whose hub-only expressions hold in `location` keeps its other expressions;
    if it had no others it holds for every node, and the required affinity goes altogether. A
    term whose hub-only expressions fail is false here and goes. Without `labels` (unknown),
    expressions on Location labels count as holding; `location.kmc.dev/name` is always exact.
    """
    affinity = pod_spec.get("affinity")
    node_affinity = affinity.get("nodeAffinity") if isinstance(affinity, dict) else None
    if isinstance(node_affinity, dict):
        _strip_required(node_affinity, location, labels)
        _strip_preferred(node_affinity)
        if not node_affinity:
            del affinity["nodeAffinity"]  # type: ignore[union-attr]
        if not affinity:
            del pod_spec["affinity"]
    selector = pod_spec.get("nodeSelector")
    if isinstance(selector, dict):
        for key in [k for k in selector if is_hub_only(k)]:
            del selector[key]
        if not selector:
            del pod_spec["nodeSelector"]
    spreads = pod_spec.get("topologySpreadConstraints")
    if isinstance(spreads, list):
        kept = [c for c in spreads if not is_hub_only(str(_mapping(c).get("topologyKey", "")))]
        if len(kept) != len(spreads):
            if kept:
                pod_spec["topologySpreadConstraints"] = kept
            else:
                del pod_spec["topologySpreadConstraints"]


def _strip_required(node_affinity: Obj, location: str, labels: Mapping[str, str] | None) -> None:
    required = node_affinity.get("requiredDuringSchedulingIgnoredDuringExecution")
    terms = _mapping(required).get("nodeSelectorTerms")
    if not isinstance(terms, list):
        return
    kept: list[Any] = []
    changed = False
    for term in terms:
        expressions = _expressions(term)
        hub = [e for e in expressions if is_hub_only(str(e.get("key", "")))]
        if not hub:
            kept.append(term)
            continue
        changed = True
        if not all(_holds_here(e, location, labels) for e in hub):
            continue  # false in this location: the other terms decide
        rest = [e for e in expressions if not is_hub_only(str(e.get("key", "")))]
        if not rest and not _mapping(term).get("matchFields"):
            kept = []  # a term that holds for every node: nothing is required here
            break
        trimmed = {k: v for k, v in _mapping(term).items() if k != "matchExpressions"}
        if rest:
            trimmed["matchExpressions"] = rest
        kept.append(trimmed)
    if not changed:
        return
    if kept:
        node_affinity["requiredDuringSchedulingIgnoredDuringExecution"] = {
            **_mapping(required),
            "nodeSelectorTerms": kept,
        }
    else:
        del node_affinity["requiredDuringSchedulingIgnoredDuringExecution"]


def _strip_preferred(node_affinity: Obj) -> None:
    preferred = node_affinity.get("preferredDuringSchedulingIgnoredDuringExecution")
    if not isinstance(preferred, list):
        return
    kept: list[Any] = []
    for entry in preferred:
        term = _mapping(_mapping(entry).get("preference"))
        expressions = _expressions(term)
        rest = [e for e in expressions if not is_hub_only(str(e.get("key", "")))]
        if len(rest) == len(expressions):
            kept.append(entry)
        elif rest or term.get("matchFields"):
            preference = {k: v for k, v in term.items() if k != "matchExpressions"}
            if rest:
                preference["matchExpressions"] = rest
            kept.append({**_mapping(entry), "preference": preference})
        # else: only hub-only expressions; placement has weighed them already
    if kept:
        node_affinity["preferredDuringSchedulingIgnoredDuringExecution"] = kept
    else:
        del node_affinity["preferredDuringSchedulingIgnoredDuringExecution"]


def _holds_here(expression: _Expression, location: str, labels: Mapping[str, str] | None) -> bool:
    if labels is None and expression.get("key") != NAME_KEY:
        return True
    return holds(expression, location, labels or {})
