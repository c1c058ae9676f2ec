"""What routes outside traffic through a Gateway API gateway: an HTTPRoute goes where its
Services are, as an Ingress does (`ingress.py`).

The Gateway API is not built in: its kinds exist on the hub only where the locations serve
its CRDs and the import loop made them hub CRDs (`kmc.dev/imported`). So this entry joins
when the hub serves `httproutes.gateway.networking.k8s.io` (`of_crd` finds it here) instead
of being watched from the start. A route follows the Services its rules' `backendRefs` (and
their request mirrors) name in its own namespace, to every location any of them is placed
in; one naming no placed Service stays on the hub, and a Warning Event `NothingPlaced` says
so (a route's status has no top-level conditions to carry `kmc.dev/Placed`). A backend in
another namespace needs that namespace's ReferenceGrant in each child; it is not followed.

Its hub status is the union of the children's `status.parents`: one entry per parent and
controller, whose conditions are merged as every fold merges them (the worst status wins;
the message names the locations), each taking its `lastTransitionTime` from the child whose
condition won. A condition's `observedGeneration` is a child's generation, so it is left out.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

from apiserver.kinds.kind import Kind, Role
from apiserver.objects import Obj, ReadOnly
from apiserver.sync.status import (
    Children,
    Rules,
    items_of,
    mapping,
    merged_condition,
    status_of,
)

GROUP = "gateway.networking.k8s.io"
# What the CRD's schema allows in a route's status.
MAX_PARENTS = 32
MAX_CONDITIONS = 8


def _refs(route: ReadOnly) -> Iterator[ReadOnly]:
    """Every backend reference of its rules: the weighted backends and the mirrors of their
    filters (a mirror's traffic goes to its Service as well)."""
    for rule in items_of(mapping(route.get("spec")).get("rules")):
        filters = list(items_of(rule.get("filters")))
        for backend in items_of(rule.get("backendRefs")):
            yield backend
            filters.extend(items_of(backend.get("filters")))
        for each in filters:
            yield mapping(mapping(each.get("requestMirror")).get("backendRef"))


def services_of(route: ReadOnly) -> frozenset[tuple[str, str]]:
    """The Services of its own namespace its backends name (group "" and kind Service are a
    backend's defaults)."""
    namespace = mapping(route.get("metadata")).get("namespace")
    found = set()
    for ref in _refs(route):
        name = ref.get("name")
        if ref.get("group", "") != "" or ref.get("kind", "Service") != "Service":
            continue
        if ref.get("namespace") not in (None, namespace):
            continue
        if isinstance(name, str) and name:
            found.add(("Service", name))
    return frozenset(found)


def parents_fields(status: Obj, hub: ReadOnly, seen: Children, previous: ReadOnly) -> None:
    """`status.parents`: every child's, one entry per (parentRef, controllerName), with the
    conditions of the same type merged across the locations that report them."""
    groups: dict[tuple[str, str], tuple[ReadOnly, dict[str, list[tuple[str, ReadOnly]]]]] = {}
    for location, child in seen.present.items():
        for parent in items_of(status_of(child).get("parents")):
            ref, controller = mapping(parent.get("parentRef")), parent.get("controllerName")
            if not ref or not isinstance(controller, str):
                continue
            key = (json.dumps(ref, sort_keys=True), controller)
            _, by_type = groups.setdefault(key, (ref, {}))
            for condition in items_of(parent.get("conditions")):
                if isinstance(condition.get("type"), str):
                    by_type.setdefault(condition["type"], []).append((location, condition))
    parents: list[Obj] = []
    for (_, controller), (ref, by_type) in sorted(groups.items()):
        conditions = [_condition(type_, found) for type_, found in sorted(by_type.items())]
        if conditions:
            parents.append(
                {
                    "parentRef": dict(ref),
                    "controllerName": controller,
                    "conditions": conditions[:MAX_CONDITIONS],
                }
            )
    status["parents"] = parents[:MAX_PARENTS]


def _condition(type_: str, found: list[tuple[str, ReadOnly]]) -> Obj:
    merged = merged_condition(type_, found)
    # The time it last changed where it is as bad as the merge says.
    times = [c.get("lastTransitionTime") for _, c in found if c.get("status") == merged.status] or [
        c.get("lastTransitionTime") for _, c in found
    ]
    stamp = max((t for t in times if isinstance(t, str)), default="1970-01-01T00:00:00Z")
    return {
        "type": merged.type,
        "status": merged.status,
        "reason": merged.reason,
        "message": merged.message,
        "lastTransitionTime": stamp,
    }


HTTPROUTE = Kind(
    f"HTTPRoute.{GROUP}",
    "HTTPRoute",
    f"{GROUP}/v1",
    "httproutes",
    role=Role.REFERENCE_FOLLOWER,
    crd=True,
    follows=services_of,
    fold_rules=Rules(fields=parents_fields, observes_generation=False, conditions_in_status=False),
)

# Kinds served by CRDs, which join when the hub serves them (`of_crd`), never watched before.
ENTRIES = (HTTPROUTE,)
