"""Label selectors and taint tolerations, with exactly Kubernetes' semantics.

Users already know how a Deployment's selector and a pod's tolerations behave; a strategy's
`locationSelector` and `tolerations` must behave the same way against a Location's labels and
taints, including the corners (`NotIn` matches a missing label, an empty selector matches
everything, a toleration without effect covers every effect).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from apiserver.placement.strategy import LabelSelector, LabelSelectorRequirement, Toleration

# Taint effects that keep new workloads away; PreferNoSchedule only discourages.
FILTERING_EFFECTS = frozenset({"NoSchedule", "NoExecute"})


def matches(selector: LabelSelector | None, labels: Mapping[str, str]) -> bool:
    """Does `labels` satisfy `selector`? None and the empty selector match everything."""
    if selector is None:
        return True
    if any(labels.get(key) != value for key, value in selector.match_labels.items()):
        return False
    return all(_requirement_holds(req, labels) for req in selector.match_expressions)


def _requirement_holds(requirement: LabelSelectorRequirement, labels: Mapping[str, str]) -> bool:
    present = requirement.key in labels
    match requirement.operator:
        case "In":
            return present and labels[requirement.key] in requirement.values
        case "NotIn":
            return not present or labels[requirement.key] not in requirement.values
        case "Exists":
            return present
        case "DoesNotExist":
            return not present


def tolerates(toleration: Toleration, key: str, value: str, effect: str) -> bool:
    """Does one toleration cover the taint `key=value:effect`?"""
    if toleration.effect is not None and toleration.effect != effect:
        return False
    if toleration.operator == "Exists":
        return not toleration.key or toleration.key == key
    return toleration.key == key and (toleration.value or "") == value


def tolerated(tolerations: Sequence[Toleration], key: str, value: str, effect: str) -> bool:
    """Is the taint harmless here: it only discourages, or some toleration covers it?"""
    if effect not in FILTERING_EFFECTS:
        return True
    return any(tolerates(toleration, key, value, effect) for toleration in tolerations)
