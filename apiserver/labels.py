"""Label selectors as strings (`tier in (web),!canary`), parsed and matched exactly as
Kubernetes does, and label key and value syntax.

Plain values with no I/O, so the pure cores may use them as well as the API wings: the views'
`?labelSelector=` (`api/selectors.py`) and the keys of a `kmc.dev/overrides` annotation that
select Locations by their labels (`overrides/`). Follows k8s.io/apimachinery/pkg/labels/selector.go
(its lexer and parser, key and value validation).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass


def _invalid_value(value: str, detail: str) -> str:
    """The message of a FieldValueInvalid cause: `Invalid value: "x": detail`."""
    shown = json.dumps(value, ensure_ascii=False)
    return f"Invalid value: {shown}: {detail}" if detail else f"Invalid value: {shown}"


# --- label selectors ----------------------------------------------------------------------------

# Operators, spelled as k8s.io/apimachinery/pkg/selection spells them.
IN, NOT_IN, EQUALS, DOUBLE_EQUALS, NOT_EQUALS = "in", "notin", "=", "==", "!="
GREATER_THAN, LESS_THAN, EXISTS, DOES_NOT_EXIST = "gt", "lt", "exists", "!"
BINARY_OPERATORS = (IN, NOT_IN, EQUALS, DOUBLE_EQUALS, NOT_EQUALS, GREATER_THAN, LESS_THAN)


@dataclass(frozen=True)
class Requirement:
    key: str
    operator: str
    values: tuple[str, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        present = self.key in labels
        if self.operator in (IN, EQUALS, DOUBLE_EQUALS):
            return present and labels[self.key] in self.values
        if self.operator in (NOT_IN, NOT_EQUALS):
            return not present or labels[self.key] not in self.values
        if self.operator == EXISTS:
            return present
        if self.operator == DOES_NOT_EXIST:
            return not present
        # gt / lt: both sides must be integers
        if not present or len(self.values) != 1:
            return False
        mine, theirs = _parse_int(labels[self.key]), _parse_int(self.values[0])
        if mine is None or theirs is None:
            return False
        return mine > theirs if self.operator == GREATER_THAN else mine < theirs


@dataclass(frozen=True)
class LabelSelectorQuery:
    """Requirements ANDed together; none at all selects everything."""

    requirements: tuple[Requirement, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        return all(requirement.matches(labels) for requirement in self.requirements)

    @property
    def empty(self) -> bool:
        return not self.requirements


def parse_selector(selector: str | None) -> LabelSelectorQuery:
    """Parse a label selector string; a malformed one raises `LabelSyntaxError` worded like
    kube-apiserver's."""
    if not selector:
        return LabelSelectorQuery()
    requirements = _LabelParser(selector).parse()
    return LabelSelectorQuery(tuple(sorted(requirements, key=lambda r: r.key)))


class LabelSyntaxError(ValueError):
    """A label selector that does not parse, in kube-apiserver's words."""


# Tokens (the lexer's kinds); IDENTIFIER carries its text.
_END, _IDENTIFIER, _ERROR = "end", "identifier", "error"
_KEYWORDS = {"in": IN, "notin": NOT_IN}
_SYMBOLS = {")", ",", "!", "==", "=", ">", "<", "!=", "("}
_SPECIAL = frozenset("=!(),><")
_WHITESPACE = frozenset(" \t\r\n")


def _lex(text: str) -> list[tuple[str, str]]:
    """Every token with its literal; symbols are their own kind, keywords too."""
    tokens: list[tuple[str, str]] = []
    pos = 0
    while True:
        while pos < len(text) and text[pos] in _WHITESPACE:
            pos += 1
        if pos >= len(text):
            tokens.append((_END, ""))
            return tokens
        if text[pos] in _SPECIAL:
            # The longest run of special characters that is still a symbol ("!=", not "!").
            end = pos + 1
            while end < len(text) and text[end] in _SPECIAL and text[pos : end + 1] in _SYMBOLS:
                end += 1
            tokens.append((text[pos:end], text[pos:end]))
        else:
            end = pos
            while end < len(text) and text[end] not in _SPECIAL and text[end] not in _WHITESPACE:
                end += 1
            word = text[pos:end]
            tokens.append((word if word in _KEYWORDS else _IDENTIFIER, word))
        pos = end


class _LabelParser:
    """A recursive-descent parser over the tokens, with the reference parser's messages."""

    def __init__(self, text: str) -> None:
        self.tokens = _lex(text)
        self.position = 0

    def _peek(self, values: bool = True) -> tuple[str, str]:
        kind, literal = self.tokens[min(self.position, len(self.tokens) - 1)]
        # Where values are expected, "in" and "notin" are plain identifiers.
        return (_IDENTIFIER if values and kind in _KEYWORDS else kind), literal

    def _next(self, values: bool = True) -> tuple[str, str]:
        token = self._peek(values)
        self.position += 1
        return token

    def parse(self) -> list[Requirement]:
        requirements: list[Requirement] = []
        while True:
            kind, literal = self._peek()
            if kind == _END:
                return requirements
            if kind not in (_IDENTIFIER, "!"):
                raise LabelSyntaxError(
                    f"found '{literal}', expected: !, identifier, or 'end of string'"
                )
            try:
                requirements.append(self._requirement())
            except LabelSyntaxError as err:
                raise LabelSyntaxError(f"unable to parse requirement: {err}") from None
            kind, literal = self._next()
            if kind == _END:
                return requirements
            if kind != ",":
                raise LabelSyntaxError(f"found '{literal}', expected: ',' or 'end of string'")
            kind, literal = self._peek()
            if kind not in (_IDENTIFIER, "!"):
                raise LabelSyntaxError(f"found '{literal}', expected: identifier after ','")

    def _requirement(self) -> Requirement:
        operator = ""
        kind, key = self._next()
        if kind == "!":
            operator = DOES_NOT_EXIST
            kind, key = self._next()
        if kind != _IDENTIFIER:
            raise LabelSyntaxError(f"found '{key}', expected: identifier")
        if problems := label_key_errors(key):
            raise LabelSyntaxError(f"<nil>: {_invalid_value(key, '; '.join(problems))}")
        if operator == DOES_NOT_EXIST:
            return Requirement(key, DOES_NOT_EXIST)
        if self._peek()[0] in (_END, ","):
            return Requirement(key, EXISTS)
        operator = self._operator()
        values = self._set_values() if operator in (IN, NOT_IN) else self._exact_value()
        ordered = tuple(sorted(values))
        _validate_values(key, operator, ordered)
        return Requirement(key, operator, ordered)

    def _operator(self) -> str:
        kind, literal = self._next(values=False)
        operators = {
            IN: IN,
            NOT_IN: NOT_IN,
            "=": EQUALS,
            "==": DOUBLE_EQUALS,
            "!=": NOT_EQUALS,
            ">": GREATER_THAN,
            "<": LESS_THAN,
        }
        if kind not in operators:
            raise LabelSyntaxError(f"found '{literal}', expected: {', '.join(BINARY_OPERATORS)}")
        return operators[kind]

    def _set_values(self) -> set[str]:
        kind, literal = self._next()
        if kind != "(":
            raise LabelSyntaxError(f"found '{literal}' expected: '('")
        kind, literal = self._peek()
        if kind == ")":
            self._next()
            return {""}  # "()" is the empty value
        if kind not in (_IDENTIFIER, ","):
            raise LabelSyntaxError(f"found '{literal}', expected: ',', ')' or identifier")
        values: set[str] = set()
        while True:
            kind, literal = self._next()
            if kind == _IDENTIFIER:
                values.add(literal)
                after, after_literal = self._peek()
                if after == ")":
                    break
                if after != ",":
                    raise LabelSyntaxError(f"found '{after_literal}', expected: ',' or ')'")
            elif kind == ",":
                # Empty items: "(,a)", "(a,,b)" and "(a,)" all contain "".
                if not values:
                    values.add("")
                after = self._peek()[0]
                if after == ")":
                    values.add("")
                    break
                if after == ",":
                    values.add("")
            else:
                raise LabelSyntaxError(f"found '{literal}', expected: ',', or identifier")
        self._next()  # the ")"
        return values

    def _exact_value(self) -> set[str]:
        if self._peek()[0] in (_END, ","):
            return {""}
        kind, literal = self._next()
        if kind != _IDENTIFIER:
            raise LabelSyntaxError(f"found '{literal}', expected: identifier")
        return {literal}


def _validate_values(key: str, operator: str, values: tuple[str, ...]) -> None:
    """NewRequirement's checks on the values, aggregated like field.ErrorList."""
    problems: list[str] = []
    if operator in (GREATER_THAN, LESS_THAN):
        for index, value in enumerate(values):
            if _parse_int(value) is None:
                detail = "for 'Gt', 'Lt' operators, the value must be an integer"
                problems.append(f"values[{index}]: {_invalid_value(value, detail)}")
    for index, value in enumerate(values):
        if value_problems := label_value_errors(value):
            detail = "; ".join(value_problems)
            problems.append(f"values[{index}][{key}]: {_invalid_value(value, detail)}")
    problems = list(dict.fromkeys(problems))
    if len(problems) == 1:
        raise LabelSyntaxError(problems[0])
    if problems:
        raise LabelSyntaxError(f"[{', '.join(problems)}]")


_INT = re.compile(r"[+-]?[0-9]+")


def _parse_int(text: str) -> int | None:
    """Go's strconv.ParseInt(text, 10, 64)."""
    if not _INT.fullmatch(text):
        return None
    value = int(text)
    return value if -(2**63) <= value < 2**63 else None


# --- label key and value syntax (k8s.io/apimachinery/pkg/api/validate/content) -----------------

_NAME_FMT = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
_NAME = re.compile(_NAME_FMT)
_NAME_MSG = (
    "must consist of alphanumeric characters, '-', '_' or '.', "
    "and must start and end with an alphanumeric character"
)
_VALUE_FMT = f"({_NAME_FMT})?"
_VALUE = re.compile(_VALUE_FMT)
_VALUE_MSG = (
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' "
    "or '.', and must start and end with an alphanumeric character"
)
_DNS_LABEL_FMT = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_SUBDOMAIN_FMT = _DNS_LABEL_FMT + r"(\." + _DNS_LABEL_FMT + ")*"
_SUBDOMAIN = re.compile(_SUBDOMAIN_FMT)
_SUBDOMAIN_MSG = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' "
    "or '.', and must start and end with an alphanumeric character"
)


def _regex_error(message: str, fmt: str, *examples: str) -> str:
    shown = " or ".join(f"'{example}', " for example in examples)
    return f"{message} (e.g. {shown}regex used for validation is '{fmt}')"


def _max_len_error(length: int) -> str:
    return f"must be no more than {length} bytes"


def label_key_errors(key: str) -> list[str]:
    """content.IsLabelKey: an optional DNS-subdomain prefix and `/`, then a name."""
    problems: list[str] = []
    parts = key.split("/")
    if len(parts) > 2:
        return [
            "a valid label key "
            + _regex_error(_NAME_MSG, _NAME_FMT, "MyName", "my.name", "123-abc")
            + " with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
        ]
    name = parts[-1]
    if len(parts) == 2:
        prefix = parts[0]
        if not prefix:
            problems.append("prefix part must be non-empty")
        else:
            if len(prefix.encode()) > 253:
                problems.append("prefix part " + _max_len_error(253))
            if not _SUBDOMAIN.fullmatch(prefix):
                problems.append(
                    "prefix part " + _regex_error(_SUBDOMAIN_MSG, _SUBDOMAIN_FMT, "example.com")
                )
    if not name:
        problems.append("name part must be non-empty")
    elif len(name.encode()) > 63:
        problems.append("name part " + _max_len_error(63))
    if not _NAME.fullmatch(name):
        problems.append(
            "name part " + _regex_error(_NAME_MSG, _NAME_FMT, "MyName", "my.name", "123-abc")
        )
    return problems


def label_value_errors(value: str) -> list[str]:
    """content.IsLabelValue: at most 63 bytes of name characters, or empty."""
    problems: list[str] = []
    if len(value.encode()) > 63:
        problems.append(_max_len_error(63))
    if not _VALUE.fullmatch(value):
        problems.append(_regex_error(_VALUE_MSG, _VALUE_FMT, "MyValue", "my_value", "12345"))
    return problems
