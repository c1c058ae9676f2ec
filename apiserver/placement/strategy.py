"""The `kmc.dev/strategy` annotation: its model, its parsing, and where it comes from.

A strategy is written by hand into an annotation, where nothing checks it before we read it.
So parsing is strict and every mistake is reported as one line that says which object, which
field and what is wrong, in the words `kubectl` users know from apiserver validation
(`.weights.us-east: must be >= 0, got -1`). A malformed annotation is an error, never a silent
fallback to a default: placing a workload somewhere the user tried to rule out is worse than
not moving it at all.
"""

from __future__ import annotations

import json
import re
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    StrictBool,
    StrictInt,
    StrictStr,
    Tag,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic.alias_generators import to_camel
from pydantic_core import ErrorDetails, PydanticCustomError

from apiserver.contract import STRATEGY

StrategyType = Literal["Split", "Replicate", "Single"]
SelectorOperator = Literal["In", "NotIn", "Exists", "DoesNotExist"]
TolerationOperator = Literal["Equal", "Exists"]
TaintEffect = Literal["NoSchedule", "PreferNoSchedule", "NoExecute"]


class StrategyError(ValueError):
    """A `kmc.dev/strategy` annotation that cannot be used, with a one-line reason."""


# --- Kubernetes name syntax -------------------------------------------------------------------

_DNS1123_LABEL = r"[a-z0-9](?:[-a-z0-9]*[a-z0-9])?"
_DNS1123_SUBDOMAIN = re.compile(rf"{_DNS1123_LABEL}(?:\.{_DNS1123_LABEL})*")
_QUALIFIED_NAME = re.compile(r"[A-Za-z0-9](?:[-A-Za-z0-9_.]*[A-Za-z0-9])?")


def _invalid(message: str) -> PydanticCustomError:
    return PydanticCustomError("kmc_invalid", "{message}", {"message": message})


def _location_name(name: str) -> str:
    if len(name) > 253 or not _DNS1123_SUBDOMAIN.fullmatch(name):
        raise _invalid(
            f"must be a location name (a lowercase RFC 1123 subdomain), got {json.dumps(name)}"
        )
    return name


def _label_key(key: str) -> str:
    prefix, slash, name = key.rpartition("/")
    prefix_ok = not slash or (len(prefix) <= 253 and _DNS1123_SUBDOMAIN.fullmatch(prefix))
    if not prefix_ok or len(name) > 63 or not _QUALIFIED_NAME.fullmatch(name):
        raise _invalid(f"must be a label key like example.com/name, got {json.dumps(key)}")
    return key


def _label_value(value: str) -> str:
    if value and (len(value) > 63 or not _QUALIFIED_NAME.fullmatch(value)):
        raise _invalid(f"must be a label value (at most 63 characters), got {json.dumps(value)}")
    return value


LocationName = Annotated[StrictStr, AfterValidator(_location_name)]
LabelKey = Annotated[StrictStr, AfterValidator(_label_key)]
LabelValue = Annotated[StrictStr, AfterValidator(_label_value)]
NonNegative = Annotated[StrictInt, Field(ge=0)]
Positive = Annotated[StrictInt, Field(ge=1)]


def _weights_tag(value: Any) -> str:
    return "capacity" if isinstance(value, str) else "map"


# "capacity" or {"<location>": weight}; the tags only route validation and are dropped from
# error paths by `_path`.
_WEIGHT_TAGS = frozenset({"map", "capacity"})
Weights = Annotated[
    Annotated[dict[LocationName, NonNegative], Tag("map")]
    | Annotated[Literal["capacity"], Tag("capacity")],
    Discriminator(_weights_tag),
]


# --- the model --------------------------------------------------------------------------------


class _Model(BaseModel):
    model_config = ConfigDict(
        extra="forbid", frozen=True, populate_by_name=True, alias_generator=to_camel
    )


class LabelSelectorRequirement(_Model):
    """One `matchExpressions` entry, as in a Kubernetes LabelSelector."""

    key: LabelKey
    operator: SelectorOperator
    values: tuple[LabelValue, ...] = ()

    @model_validator(mode="after")
    def _values_fit_operator(self) -> LabelSelectorRequirement:
        if self.operator in ("In", "NotIn") and not self.values:
            raise _invalid(f"operator {self.operator} needs at least one value")
        if self.operator in ("Exists", "DoesNotExist") and self.values:
            raise _invalid(f"operator {self.operator} takes no values")
        return self


class LabelSelector(_Model):
    """Which locations a strategy may use, by their labels (Kubernetes LabelSelector)."""

    match_labels: dict[LabelKey, LabelValue] = Field(default_factory=dict)
    match_expressions: tuple[LabelSelectorRequirement, ...] = ()

    @field_validator("match_labels")
    @classmethod
    def _sorted(cls, labels: dict[str, str]) -> dict[str, str]:
        return dict(sorted(labels.items()))


class Toleration(_Model):
    """Lets a strategy use locations with a matching taint (Kubernetes pod toleration)."""

    key: LabelKey | None = None
    operator: TolerationOperator = "Equal"
    value: LabelValue | None = None
    effect: TaintEffect | None = None

    @model_validator(mode="after")
    def _value_fits_operator(self) -> Toleration:
        if self.operator == "Exists" and self.value:
            raise _invalid("operator Exists takes no value")
        if not self.key and self.operator != "Exists":
            raise _invalid("a toleration without key needs operator Exists")
        return self


class Strategy(_Model):
    """Where a hub object runs: which locations qualify and how its replicas are divided."""

    type: StrategyType
    location_selector: LabelSelector | None = None
    tolerations: tuple[Toleration, ...] = ()
    spread_by: LabelKey | None = None
    weights: Weights | None = None
    min_per_location: NonNegative = 0
    max_per_location: Positive | None = None
    pin: tuple[LocationName, ...] = ()
    avoid: tuple[LocationName, ...] = ()
    # False: once placed, only a lost or incompatible location, or a strategy that says where
    # (a pin), moves it; never spill-over, rebalancing or missing capacity.
    movable: StrictBool = True

    @field_validator("weights")
    @classmethod
    def _sorted(cls, weights: dict[str, int] | str | None) -> dict[str, int] | str | None:
        return dict(sorted(weights.items())) if isinstance(weights, dict) else weights

    @model_validator(mode="after")
    def _consistent(self) -> Strategy:
        high = self.max_per_location
        if high is not None and self.min_per_location > high:
            raise _invalid(
                f"minPerLocation ({self.min_per_location}) must be <= maxPerLocation ({high})"
            )
        both = sorted(set(self.pin) & set(self.avoid))
        if both:
            raise _invalid(f"pinned and avoided at once: {', '.join(both)}")
        return self

    def weight_of(self, location: str) -> int | None:
        """The weight written for `location`: None when weighing by capacity, 1 by default."""
        if self.weights == "capacity":
            return None
        return (self.weights or {}).get(location, 1)

    def to_json(self) -> str:
        """Compact canonical JSON: aliases, sorted maps, nothing that equals its default."""
        return self.model_dump_json(by_alias=True, exclude_defaults=True, exclude_none=True)


# --- parsing ----------------------------------------------------------------------------------


def parse_strategy(text: str, where: str) -> Strategy:
    """Parse an annotation value; any problem becomes a one-line `StrategyError`."""
    prefix = f"{STRATEGY} on {where}: "
    try:
        data = json.loads(text)
    except json.JSONDecodeError as error:
        raise StrategyError(f"{prefix}not JSON: {error}") from None
    try:
        return Strategy.model_validate(data)
    except ValidationError as error:
        problems = "; ".join(_describe(detail) for detail in error.errors())
        raise StrategyError(prefix + problems) from None


def effective_strategy(
    object_annotation: str | None,
    namespace_annotation: str | None,
    default: StrategyType,
    where: str,
) -> tuple[Strategy, str]:
    """The strategy in force and where it came from: "object", "namespace" or "default" (of
    the `default` type: the kind's, Split for kinds with replicas, else Replicate)."""
    if object_annotation is not None:
        return parse_strategy(object_annotation, where), "object"
    if namespace_annotation is not None:
        return parse_strategy(namespace_annotation, f"the namespace of {where}"), "namespace"
    return Strategy(type=default), "default"


def validation_problems(error: ValidationError) -> list[tuple[str, str]]:
    """Each problem as (field path from the strategy's root, what is wrong)."""
    return [(_path(detail["loc"]), _message(detail)) for detail in error.errors()]


def _describe(detail: ErrorDetails) -> str:
    path = _path(detail["loc"])
    message = _message(detail)
    return f"{path}: {message}" if path else message


def _path(loc: tuple[int | str, ...]) -> str:
    parts: list[str] = []
    for index, part in enumerate(loc):
        if isinstance(part, int):
            parts.append(f"[{part}]")
        elif part == "[key]" or (index and loc[index - 1] == "weights" and part in _WEIGHT_TAGS):
            continue
        elif re.fullmatch(r"[A-Za-z_][-A-Za-z0-9_]*", part):
            parts.append(f".{part}")
        else:
            parts.append(f"[{json.dumps(part)}]")
    return "".join(parts)


_KINDS_OF_VALUE = {
    "int_type": "an integer",
    "string_type": "a string",
    "dict_type": "an object",
    "model_type": "an object",
    "model_attributes_type": "an object",
    "list_type": "a list",
    "tuple_type": "a list",
    "bool_type": "a boolean",
}


def _message(detail: ErrorDetails) -> str:
    kind, ctx = detail["type"], detail.get("ctx") or {}
    got = _shown(detail.get("input"))
    if kind == "missing":
        return "required"
    if kind == "extra_forbidden":
        return "unknown field"
    if detail["loc"][-2:] in (("weights", "map"), ("weights", "capacity")):
        return f'must be an object of location weights or "capacity", got {got}'
    if kind == "literal_error":
        choices = re.findall(r"'([^']*)'", str(ctx.get("expected", "")))
        return f"must be one of {', '.join(choices)}, got {got}"
    if kind == "greater_than_equal":
        return f"must be >= {ctx['ge']}, got {got}"
    if kind in _KINDS_OF_VALUE:
        return f"must be {_KINDS_OF_VALUE[kind]}, got {got}"
    return str(detail["msg"])


def _shown(value: object) -> str:
    try:
        return json.dumps(value)
    except (TypeError, ValueError):
        return repr(value)
