"""What a rule sets, as paths, for telling two overrides that set the same thing apart (an
Override's `status.conflicts`). Pure and approximate on the safe side: a container rule that
names no containers sets the field in every container, written `*`.

    image        containers/<name>/image
    env          containers/<name>/env/<NAME>
    args         containers/<name>/args        (command the same)
    labels       metadata/labels/<key>         (template/labels/<key> with on: template)
    resources    containers/<name>/resources/limits/<resource>
    patch        the operation's path (and from, for move)
    field        <path><the inner operation's path>
"""

from __future__ import annotations

from collections.abc import Sequence

from apiserver.overrides.rules import (
    EnvRule,
    FieldRule,
    ImageRule,
    ListRule,
    MetadataRule,
    ResourcesRule,
    Rule,
)


def sets(rule: Rule) -> frozenset[str]:
    """The paths `rule` sets or removes."""
    body = rule.body
    if isinstance(body, tuple):  # patch
        return frozenset(
            str(op[key]) for op in body for key in ("path", "from") if isinstance(op.get(key), str)
        )
    if isinstance(body, FieldRule):
        return frozenset(f"{body.path}{op.get('path', '')}" for op in body.patch)
    if isinstance(body, MetadataRule):
        where = "template" if body.on == "template" else "metadata"
        return frozenset(f"{where}/{rule.key}/{key}" for key in [*body.set, *body.remove])
    if isinstance(body, ImageRule):
        return _in_containers(body.containers, ["image"])
    if isinstance(body, EnvRule):
        return _in_containers(body.containers, [f"env/{n}" for n in [*body.set, *body.remove]])
    if isinstance(body, ListRule):
        return _in_containers(body.containers, [rule.key])
    if isinstance(body, ResourcesRule):
        named = [f"resources/limits/{n}" for n in body.limits]
        named += [f"resources/requests/{n}" for n in body.requests]
        return _in_containers(body.containers, named)
    return frozenset()


def overlap(ours: frozenset[str], theirs: frozenset[str]) -> list[str]:
    """The paths both set, by name (a `*` container matches every container), sorted."""
    found = set()
    for mine in ours:
        for other in theirs:
            if _same(mine, other):
                found.add(mine if "*" not in mine else other)
    return sorted(found)


def _in_containers(containers: Sequence[str] | None, fields: list[str]) -> frozenset[str]:
    names = containers if containers is not None else ["*"]
    return frozenset(f"containers/{name}/{field}" for name in names for field in fields)


def _same(a: str, b: str) -> bool:
    left, right = a.split("/"), b.split("/")
    if len(left) != len(right):
        return False
    return all(x == y or "*" in (x, y) for x, y in zip(left, right, strict=True))
