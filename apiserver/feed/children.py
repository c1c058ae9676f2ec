"""A pull location's reported children, validated once each (issue #34's hub CPU).

An agent sends its children whole with every report, at most once a second while anything
changes (`agent/report.py`), and during a rollout most of them are the same as in the last
one. Validating and dumping each through pydantic every time cost the hub more than its
reports' JSON: a child equal to the one the location's last report had under the same
identity is taken as it was validated then; a new or changed one is validated by the model
and taken as it came (`as_dumped`: what the model's dump gives, without its cost). Only the
children go through here; the report's envelope (kind, namespaces, probe) is validated whole
every time. See docs/pull.md.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from apiserver.kinds import Key
from apiserver.locations.reports import Reports
from apiserver.models.report import Child
from apiserver.objects import Obj

Ident = tuple[str, str, str, str]  # apiVersion, kind, namespace, name


class ReportedChildren:
    """Per location: its last report's children, raw and as validated."""

    def __init__(self, reports: Reports) -> None:
        self.reports = reports
        self.last: dict[str, dict[Ident, tuple[Obj, Obj]]] = {}
        reports.subscribe(self._reported)

    def _reported(self, location: str, _: set[Key], __: bool) -> None:
        if self.reports.get(location) is None:  # the Location gone, or turned Push
            self.forget(location)

    def validated(self, location: str, raw: Sequence[object]) -> list[Obj]:
        """Each child as `Child.model_validate(c).model_dump(exclude_none=True)` makes it;
        raises pydantic's `ValidationError` for a child that is not one (the caller validates
        the whole report again for its errors' full field names)."""
        before = self.last.get(location, {})
        now: dict[Ident, tuple[Obj, Obj]] = {}
        out: list[Obj] = []
        for child in raw:
            if not isinstance(child, dict):
                Child.model_validate(child)  # raises: a child is an object
                raise TypeError(f"not a child: {child!r}")  # not reached
            ident = _ident(child)
            known = before.get(ident) if ident is not None else None
            if known is not None and _same(known[0], child):
                dumped = known[1]
            else:
                Child.model_validate(child)  # raises for a child that is not one
                dumped = as_dumped(child)
            if ident is not None:
                now[ident] = (child, dumped)
            out.append(dumped)
        self.last[location] = now
        return out

    def forget(self, location: str) -> None:
        self.last.pop(location, None)


def _ident(child: object) -> Ident | None:
    if not isinstance(child, dict):
        return None
    meta = child.get("metadata")
    if not isinstance(meta, dict):
        return None
    api, kind = child.get("apiVersion"), child.get("kind")
    namespace, name = meta.get("namespace", ""), meta.get("name")
    if not isinstance(api, str) or not isinstance(kind, str) or not isinstance(name, str):
        return None
    return (api, kind, namespace, name) if isinstance(namespace, str) else None


def _same(before: Mapping[str, object], after: Mapping[str, object]) -> bool:
    """Equal as JSON. Python's `==` takes `1 == 1.0 == True`; the one strictly typed number
    of a child is `metadata.generation` (a `StrictInt`), so its type is compared too."""
    if before != after:
        return False
    was, now = before.get("metadata"), after.get("metadata")
    if not isinstance(was, dict) or not isinstance(now, dict):
        return False
    return type(was.get("generation")) is type(now.get("generation"))


def as_dumped(child: Obj) -> Obj:
    """What `Child.model_validate(child).model_dump(exclude_none=True)` gives, for a child
    that validates, without pydantic's dump (it infers the type of every value of `spec` and
    `status`, which are `Any`: most of a report's cost on the hub): the model's fields in its
    order, defaults filled, None left out at the top (not inside `Any` values, as the dump)."""
    meta = child["metadata"]
    slim: Obj = {"name": meta["name"], "namespace": meta.get("namespace", "")}
    for field in ("generation", "resourceVersion"):
        if meta.get(field) is not None:
            slim[field] = meta[field]
    slim["labels"] = meta.get("labels", {})
    slim["annotations"] = meta.get("annotations", {})
    out: Obj = {"apiVersion": child["apiVersion"], "kind": child["kind"], "metadata": slim}
    for field in ("spec", "status"):
        if child.get(field) is not None:
            out[field] = child[field]
    return out
