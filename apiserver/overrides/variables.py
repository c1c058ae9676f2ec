"""The variables a rule's values may use: `${location.name}` and
`${location.labels['<key>']}` (double quotes work too).

Checked when a rule is parsed (an unknown variable is refused at the door, with the two that
exist), filled in when it is applied to one location. A label the location does not carry is
an error then, never an empty string: an image registry that silently became "" is worse than
a child left as it was with a condition that says why.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

_VARIABLE = re.compile(r"\$\{([^}]*)\}")
_NAME = "location.name"
_LABEL = re.compile(r"""location\.labels\[(?:'([^']*)'|"([^"]*)")\]""")
KNOWN = "${location.name} or ${location.labels['<key>']}"


class VariableError(ValueError):
    """A variable that is unknown, or that this location cannot fill in."""


def check(text: str) -> None:
    """Raise `VariableError` if `text` uses a variable that does not exist."""
    for match in _VARIABLE.finditer(text):
        inside = match.group(1).strip()
        if inside != _NAME and not _LABEL.fullmatch(inside):
            raise VariableError(f"unknown variable {match.group(0)}: write {KNOWN}")
    if "${" in _VARIABLE.sub("", text):
        raise VariableError(f"a variable is not closed with '}}' in {json.dumps(text)}")


def check_all(value: Any) -> None:
    """`check` every string inside a JSON value."""
    for text in _strings(value):
        check(text)


def fill(text: str, location: str, labels: Mapping[str, str]) -> str:
    """`text` with its variables filled in for `location`."""

    def one(match: re.Match[str]) -> str:
        inside = match.group(1).strip()
        if inside == _NAME:
            return location
        label = _LABEL.fullmatch(inside)
        if label is None:
            raise VariableError(f"unknown variable {match.group(0)}: write {KNOWN}")
        key = label.group(1) if label.group(1) is not None else label.group(2)
        if key not in labels:
            raise VariableError(f"location {location} has no label {key!r} for {match.group(0)}")
        return labels[key]

    return _VARIABLE.sub(one, text)


def fill_all(value: Any, location: str, labels: Mapping[str, str]) -> Any:
    """A copy of a JSON value with every string's variables filled in (keys stay as written)."""
    if isinstance(value, str):
        return fill(value, location, labels)
    if isinstance(value, list):
        return [fill_all(item, location, labels) for item in value]
    if isinstance(value, dict):
        return {key: fill_all(item, location, labels) for key, item in value.items()}
    return value


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, list):
        return [text for item in value for text in _strings(item)]
    if isinstance(value, dict):
        return [text for item in value.values() for text in _strings(item)]
    return []
