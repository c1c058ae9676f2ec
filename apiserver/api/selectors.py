"""`?labelSelector=` and `?fieldSelector=`, parsed and matched exactly as Kubernetes does.

The remote view filters objects from every child itself (and the placement views filter hub
workloads), so `kubectl get -l 'tier in (web),!canary'` or `--field-selector
status.phase!=Running` must select exactly what it would on one cluster — including the corners
(`notin` and `!=` match a missing label, `x in ()` means the empty value) — and refuse what the
hub refuses with the hub's words.

Labels follow k8s.io/apimachinery/pkg/labels/selector.go (its lexer and parser, key and value
validation); fields follow k8s.io/apimachinery/pkg/fields/selector.go (`\\,` `\\=` `\\\\` escapes).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from apiserver.api import errors
from apiserver.labels import LabelSelectorQuery, LabelSyntaxError, Requirement, parse_selector
from apiserver.objects import ReadOnly

__all__ = [
    "FieldRequirement",
    "FieldSelectorQuery",
    "LabelSelectorQuery",
    "Requirement",
    "field_paths",
    "field_value",
    "parse_fields",
    "parse_labels",
]

# --- label selectors ----------------------------------------------------------------------------


def parse_labels(selector: str | None) -> LabelSelectorQuery:
    """Parse a `labelSelector`; a malformed one raises a 400 worded like kube-apiserver's."""
    try:
        return parse_selector(selector)
    except LabelSyntaxError as err:
        raise errors.bad_request(str(err)) from None


# --- field selectors ----------------------------------------------------------------------------


@dataclass(frozen=True)
class FieldRequirement:
    path: str  # "metadata.name", "status.phase"…
    value: str
    negated: bool = False  # `!=`

    def matches(self, obj: ReadOnly) -> bool:
        return (field_value(obj, self.path) == self.value) != self.negated


@dataclass(frozen=True)
class FieldSelectorQuery:
    requirements: tuple[FieldRequirement, ...] = ()

    def matches(self, obj: ReadOnly) -> bool:
        return all(requirement.matches(obj) for requirement in self.requirements)

    @property
    def empty(self) -> bool:
        return not self.requirements

    def require_supported(self, supported: Iterable[str]) -> None:
        """Refuse paths this resource cannot select on, in the hub's words."""
        allowed = set(supported)
        for requirement in self.requirements:
            if requirement.path not in allowed:
                raise errors.bad_request(f"field label not supported: {requirement.path}")


def parse_fields(selector: str | None) -> FieldSelectorQuery:
    """Parse a `fieldSelector`; malformed input raises a 400 worded like kube-apiserver's."""
    if not selector:
        return FieldSelectorQuery()
    requirements: list[FieldRequirement] = []
    for term in sorted(_split_terms(selector)):
        if not term:
            continue
        split = _split_term(term)
        if split is None:
            raise errors.bad_request(f"invalid selector: '{selector}'; can't understand '{term}'")
        path, operator, raw = split
        requirements.append(FieldRequirement(path, _unescape(raw), negated=operator == "!="))
    return FieldSelectorQuery(tuple(requirements))


def field_paths(selector: FieldSelectorQuery) -> set[str]:
    """The object paths a field selector reads."""
    return {requirement.path for requirement in selector.requirements}


def field_value(obj: ReadOnly, path: str) -> str:
    """The value at a dotted path of a raw object as a field selector sees it ("" if absent)."""
    current: Any = obj
    for part in path.split("."):
        if not isinstance(current, Mapping):
            return ""
        current = current.get(part)
    if isinstance(current, bool):
        return "true" if current else "false"
    if isinstance(current, str | int | float):
        return str(current)
    return ""


def _split_terms(selector: str) -> list[str]:
    """Split on commas that are not escaped; escapes stay in the terms."""
    terms: list[str] = []
    start = 0
    escaped = False
    for index, char in enumerate(selector):
        if escaped:
            escaped = False
        elif char == "\\":
            escaped = True
        elif char == ",":
            terms.append(selector[start:index])
            start = index + 1
    terms.append(selector[start:])
    return terms


def _split_term(term: str) -> tuple[str, str, str] | None:
    """At the first operator (`!=` before `==` before `=`): path, operator, raw value."""
    for index in range(len(term)):
        for operator in ("!=", "==", "="):
            if term.startswith(operator, index):
                return term[:index], operator, term[index + len(operator) :]
    return None


def _unescape(value: str) -> str:
    if not any(char in value for char in "\\,="):
        return value
    out: list[str] = []
    escaped = False
    for char in value:
        if escaped:
            if char not in "\\,=":
                raise errors.bad_request(
                    f"invalid field selector: invalid escape sequence: \\{char}"
                )
            out.append(char)
            escaped = False
        elif char == "\\":
            escaped = True
        elif char in ",=":
            # Go prints the rune with %v: its code point.
            raise errors.bad_request(
                f"invalid field selector: unescaped character in value: {ord(char)}"
            )
        else:
            out.append(char)
    if escaped:
        raise errors.bad_request("invalid field selector: invalid escape sequence: \\")
    return "".join(out)
