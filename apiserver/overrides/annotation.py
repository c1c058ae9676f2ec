"""The one-off form: the `kmc.dev/overrides` annotation on a hub object.

    {"<location name or label selector>": [rules], ...}

The key `*` (or "", the empty label selector) selects every location. A key that reads as a
label selector (it has one of `= ! ( ) , < >` or a space:
`topology.kubernetes.io/region=us`, `tier in (edge)`, `!gpu`) selects Locations by their
labels; any other key is a location's name. A location gets the rules of every key that
selects it, in the order the keys are written, each key's rules in their own order.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from apiserver.contract import OVERRIDES
from apiserver.labels import LabelSelectorQuery, LabelSyntaxError, parse_selector
from apiserver.overrides.rules import Rule, RuleError, parse_rules

_SELECTOR = re.compile(r"[=!(),<>\s]")
_LOCATION_NAME = re.compile(
    r"[a-z0-9](?:[-a-z0-9]*[a-z0-9])?(?:\.[a-z0-9](?:[-a-z0-9]*[a-z0-9])?)*"
)


@dataclass(frozen=True)
class Entry:
    key: str
    selector: LabelSelectorQuery | None  # None: the key is a location's name
    rules: tuple[Rule, ...]

    def selects(self, location: str, labels: Mapping[str, str]) -> bool:
        if self.selector is None:
            return self.key == location
        return self.selector.matches(labels)


def parse_overrides(text: str) -> tuple[Entry, ...]:
    """The annotation's entries, in the order written; a mistake raises a one-line
    `RuleError` naming the field and what to write instead."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError as err:
        raise RuleError(f"{OVERRIDES}: not JSON: {err}") from None
    if not isinstance(value, dict):
        raise RuleError(
            f'{OVERRIDES}: must be a JSON object {{"<location or label selector>": [rules]}}'
        )
    entries = []
    for key, rules in value.items():
        source = f"{OVERRIDES}[{json.dumps(key)}]"
        selector = None
        if key in ("*", ""):
            selector = LabelSelectorQuery()  # selects everything
        elif _SELECTOR.search(key):
            try:
                selector = parse_selector(key)
            except LabelSyntaxError as err:
                raise RuleError(f"{source}: not a label selector: {err}") from None
        elif not _LOCATION_NAME.fullmatch(key):
            raise RuleError(
                f"{source}: neither a location name (a lowercase RFC 1123 subdomain), nor a "
                'label selector (such as topology.kubernetes.io/region=us), nor "*" (every '
                "location)"
            )
        entries.append(Entry(key, selector, parse_rules(rules, source)))
    return tuple(entries)


def rules_for(
    entries: tuple[Entry, ...], location: str, labels: Mapping[str, str]
) -> tuple[Rule, ...]:
    """The rules `location` gets, in order."""
    return tuple(
        rule for entry in entries if entry.selects(location, labels) for rule in entry.rules
    )


def overrides_for(
    hub: Mapping[str, Any], location: str, labels: Mapping[str, str]
) -> tuple[Rule, ...]:
    """The rules of a hub object's `kmc.dev/overrides` for `location`, in order; a malformed
    annotation (one that got past the webhook) raises `RuleError`."""
    text = ((hub.get("metadata") or {}).get("annotations") or {}).get(OVERRIDES)
    if not text:
        return ()
    parsed = _parsed(text)
    if isinstance(parsed, str):
        raise RuleError(parsed)
    return rules_for(parsed, location, labels)


@functools.lru_cache(maxsize=1024)
def _parsed(text: str) -> tuple[Entry, ...] | str:
    """Annotations parse once, not once per location and look (a str: why it does not)."""
    try:
        return parse_overrides(text)
    except RuleError as err:
        return str(err)
