"""The rule format: what one override rule says, parsed strictly.

A list of rules is written by hand (in a `kmc.dev/overrides` annotation today, in `Override`
objects later) and applied in order. Each rule has exactly one key:

    image        {registry, repository, tag, digest, containers}
    env          {set: {NAME: value}, remove: [NAME], containers}
    args         {append: [...]} or {replace: [...]}, and containers
    command      the same as args
    labels       {set: {key: value}, remove: [key], on: object | template}
    annotations  the same as labels
    resources    {containers, limits: {cpu: 500m}, requests: {...}}
    patch        [RFC 6902 operations]
    field        {path: /data/config.yaml, patch: [RFC 6902 operations]}

`containers` left out means every container, init containers included. Values may use the
variables of `variables.py`. Every mistake is one line naming the field and what to write
instead, as the admission webhook shows it; a valid list is a tuple of `Rule`s that carry
where they were written, so an error at apply time names the rule too.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, StrictStr, ValidationError, model_validator
from pydantic_core import ErrorDetails

from apiserver.contract import OURS
from apiserver.labels import label_key_errors, label_value_errors
from apiserver.overrides import variables
from apiserver.overrides.jsonpatch import PatchError, check_operation, parse_pointer
from apiserver.quantity import parse_quantity

RuleKey = Literal[
    "image", "env", "args", "command", "labels", "annotations", "resources", "patch", "field"
]
RULE_KEYS: tuple[RuleKey, ...] = get_args(RuleKey)
# The placement's, never an override's: a location's share is set by the strategy.
REPLICAS = "/spec/replicas"
_DIGEST = re.compile(r"[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,}")


class RuleError(ValueError):
    """A rule, or a list of rules, that does not parse: one line naming the field."""


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ImageRule(_Body):
    registry: StrictStr | None = None
    repository: StrictStr | None = None
    tag: StrictStr | None = None
    digest: StrictStr | None = None
    containers: tuple[StrictStr, ...] | None = None

    @model_validator(mode="after")
    def _says_something(self) -> ImageRule:
        if (self.registry, self.repository, self.tag, self.digest) == (None,) * 4:
            raise ValueError("write at least one of registry, repository, tag, digest")
        if (
            self.digest is not None
            and "${" not in self.digest
            and not _DIGEST.fullmatch(self.digest)
        ):
            raise ValueError(f"digest must look like sha256:<64 hex digits>, got {self.digest!r}")
        return self


class EnvRule(_Body):
    set: dict[StrictStr, StrictStr] = {}
    remove: tuple[StrictStr, ...] = ()
    containers: tuple[StrictStr, ...] | None = None

    @model_validator(mode="after")
    def _says_something(self) -> EnvRule:
        if not self.set and not self.remove:
            raise ValueError("write set: {NAME: value} and/or remove: [NAME]")
        return self


class ListRule(_Body):
    """`args` or `command`."""

    append: tuple[StrictStr, ...] | None = None
    replace: tuple[StrictStr, ...] | None = None
    containers: tuple[StrictStr, ...] | None = None

    @model_validator(mode="after")
    def _one_way(self) -> ListRule:
        if (self.append is None) == (self.replace is None):
            raise ValueError("write exactly one of append: [...] or replace: [...]")
        return self


class MetadataRule(_Body):
    """`labels` or `annotations`."""

    set: dict[StrictStr, StrictStr] = {}
    remove: tuple[StrictStr, ...] = ()
    on: Literal["object", "template"] = "object"

    @model_validator(mode="after")
    def _says_something(self) -> MetadataRule:
        if not self.set and not self.remove:
            raise ValueError("write set: {key: value} and/or remove: [key]")
        for key in [*self.set, *self.remove]:
            if key.startswith(OURS):
                raise ValueError(f"{key}: keys under {OURS} are kubectl-mc's own; choose another")
        return self


class ResourcesRule(_Body):
    limits: dict[StrictStr, StrictStr] = {}
    requests: dict[StrictStr, StrictStr] = {}
    containers: tuple[StrictStr, ...] | None = None

    @model_validator(mode="after")
    def _quantities(self) -> ResourcesRule:
        if not self.limits and not self.requests:
            raise ValueError("write limits: {cpu: 500m} and/or requests: {...}")
        for field, values in (("limits", self.limits), ("requests", self.requests)):
            for name, value in values.items():
                if "${" not in value:
                    check_quantity(value, f"{field}.{name}")
        return self


def check_quantity(value: str, where: str) -> None:
    try:
        parse_quantity(value)
    except ValueError:
        raise ValueError(
            f"{where}: {value!r} is not a quantity (write e.g. 500m, 2, 512Mi)"
        ) from None


class FieldRule(_Body):
    path: StrictStr
    patch: tuple[dict[StrictStr, Any], ...]

    @model_validator(mode="after")
    def _well_formed(self) -> FieldRule:
        try:
            if not parse_pointer(self.path):
                raise PatchError("path must name a string field, such as /data/config.yaml")
            _check_operations(self.patch, "patch")
        except PatchError as err:
            raise ValueError(str(err)) from None
        return self


Body = ImageRule | EnvRule | ListRule | MetadataRule | ResourcesRule | FieldRule
Operations = tuple[dict[str, Any], ...]
_MODELS: dict[str, type[_Body]] = {
    "image": ImageRule,
    "env": EnvRule,
    "args": ListRule,
    "command": ListRule,
    "labels": MetadataRule,
    "annotations": MetadataRule,
    "resources": ResourcesRule,
    "field": FieldRule,
}


@dataclass(frozen=True)
class Rule:
    """One parsed rule and where it was written (`kmc.dev/overrides["us-west"][1]`)."""

    key: RuleKey
    body: Body | Operations  # Operations for `patch`
    source: str

    @property
    def name(self) -> str:
        """How an error names it: where it was written and its key."""
        return f"{self.source} ({self.key})"


def parse_rules(value: Any, source: str) -> tuple[Rule, ...]:
    """A list of rules as written under `source`; any mistake raises a one-line `RuleError`."""
    if not isinstance(value, list):
        raise RuleError(f"{source}: must be a list of rules, got {_shown(value)}")
    return tuple(parse_rule(item, f"{source}[{index}]") for index, item in enumerate(value))


def parse_rule(value: Any, source: str) -> Rule:
    if not isinstance(value, dict) or not value:
        raise RuleError(
            f"{source}: a rule is an object with one key ({', '.join(RULE_KEYS)}), "
            f"got {_shown(value)}"
        )
    if len(value) > 1:
        raise RuleError(
            f"{source}: a rule has exactly one key, got {', '.join(value)}: "
            "write each as a rule of its own, in the order they should apply"
        )
    ((key, body),) = value.items()
    if key not in RULE_KEYS:
        raise RuleError(
            f"{source}: unknown rule {json.dumps(key)}: write one of {', '.join(RULE_KEYS)}"
        )
    where = f"{source}.{key}"
    try:
        variables.check_all(_values(key, body))
    except variables.VariableError as err:
        raise RuleError(f"{where}: {err}") from None
    if key == "patch":
        if not isinstance(body, list) or not body:
            raise RuleError(f"{where}: must be a list of RFC 6902 operations, got {_shown(body)}")
        try:
            _check_operations(body, "")
        except PatchError as err:
            raise RuleError(f"{where}{err}") from None
        return Rule("patch", tuple(body), source)
    try:
        parsed = _MODELS[key].model_validate(body)
    except ValidationError as error:
        problems = "; ".join(_describe(where, detail) for detail in error.errors())
        raise RuleError(problems) from None
    if isinstance(parsed, MetadataRule) and key == "labels":
        _check_labels(parsed, where)
    assert isinstance(parsed, Body)
    return Rule(key, parsed, source)


def _values(key: str, body: Any) -> Any:
    """What of a rule may hold variables: its values, not JSON Patch paths."""
    if key == "patch":
        operations = body
    elif key == "field":
        operations = body.get("patch") if isinstance(body, dict) else None
    else:
        return body
    if not isinstance(operations, list):
        return []  # refused below, by its shape
    return [op.get("value") for op in operations if isinstance(op, dict)]


def _check_operations(operations: Any, where: str) -> None:
    """Each operation well formed, and none on the placement's replicas."""
    for index, operation in enumerate(operations):
        try:
            check_operation(operation)
        except PatchError as err:
            raise PatchError(f"{where}[{index}]: {err}") from None
        for pointer in (operation.get("path"), operation.get("from")):
            if pointer is not None and parse_pointer(pointer)[:2] == ["spec", "replicas"]:
                raise PatchError(
                    f"{where}[{index}]: {pointer} is the placement's: a location's share of "
                    "the replicas is set by kmc.dev/strategy (weights, minPerLocation), "
                    "not by an override"
                )


def _check_labels(rule: MetadataRule, where: str) -> None:
    for key, value in rule.set.items():
        if problems := label_key_errors(key):
            raise RuleError(f"{where}.set[{json.dumps(key)}]: {'; '.join(problems)}")
        if "${" not in value and (problems := label_value_errors(value)):
            raise RuleError(f"{where}.set[{json.dumps(key)}]: {'; '.join(problems)}")


def _describe(where: str, detail: ErrorDetails) -> str:
    path = "".join(
        f"[{part}]" if isinstance(part, int) else f".{part}"
        for part in detail["loc"]
        if part != "[key]"
    )
    kind = detail["type"]
    if kind == "extra_forbidden":
        message = "unknown field"
    elif kind == "missing":
        message = "required"
    elif kind == "value_error":
        message = str((detail.get("ctx") or {}).get("error", detail["msg"]))
    elif kind == "literal_error":
        message = f"{detail['msg'].lower()}, got {_shown(detail.get('input'))}"
    else:
        message = f"{detail['msg'].lower()}, got {_shown(detail.get('input'))}"
    return f"{where}{path}: {message}"


def _shown(value: Any) -> str:
    text = json.dumps(value, separators=(",", ":"), sort_keys=True, default=str)
    return text if len(text) <= 60 else text[:57] + "..."
