"""Negotiating a hub schema: the common subset of the locations' structural schemas.

The property that matters: any object the hub schema accepts, every participating location's
schema accepts unchanged (`validate.errors` is the strict structural check)."""

from __future__ import annotations

import copy
from typing import Any

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from apiserver.imports.schema import common, narrowed
from apiserver.imports.validate import errors

Schema = dict[str, Any]

FIELDS = ("a", "b", "c", "d", "e")
NAMES = st.sampled_from(FIELDS)
SCALARS = ("string", "integer", "number", "boolean")


def _scalar(kind: str) -> st.SearchStrategy[Schema]:
    base = {"type": st.just(kind)}
    if kind == "string":
        return st.fixed_dictionaries(
            base,
            optional={
                "minLength": st.integers(0, 3),
                "maxLength": st.integers(3, 6),
                "enum": st.lists(st.sampled_from(["x", "yy", "zzz", "wwww"]), min_size=1),
            },
        )
    if kind in ("integer", "number"):
        return st.fixed_dictionaries(
            base,
            optional={
                "minimum": st.integers(-5, 5),
                "maximum": st.integers(6, 10),
                "exclusiveMinimum": st.booleans(),
                "enum": st.lists(st.integers(-3, 8), min_size=1),
            },
        )
    return st.just({"type": kind})


def _schemas(depth: int = 3) -> st.SearchStrategy[Schema]:
    leaves = st.sampled_from(SCALARS).flatmap(_scalar) | st.just(
        {"x-kubernetes-int-or-string": True}
    )
    if depth == 0:
        return leaves
    inner = _schemas(depth - 1)
    objects = st.builds(
        _object,
        st.dictionaries(NAMES, inner, max_size=4),
        st.lists(NAMES, max_size=2),
        st.booleans(),
    )
    maps = st.builds(lambda v: {"type": "object", "additionalProperties": v}, inner)
    arrays = st.builds(_array, inner, st.sampled_from([None, "atomic", "set"]), st.integers(0, 2))
    return st.one_of(leaves, objects, maps, arrays)


def _object(properties: dict[str, Schema], required: list[str], preserve: bool) -> Schema:
    out: Schema = {"type": "object", "properties": properties}
    keep = sorted({r for r in required if r in properties})
    if keep:
        out["required"] = keep
    if preserve:
        out["x-kubernetes-preserve-unknown-fields"] = True
    return out


def _array(items: Schema, list_type: str | None, max_items: int) -> Schema:
    out: Schema = {"type": "array", "items": items, "maxItems": max_items + 1}
    if list_type == "set" and items.get("type") in SCALARS:
        out["x-kubernetes-list-type"] = list_type
    return out


@st.composite
def variant(draw: st.DrawFn, schema: Schema, root: bool = False) -> Schema:
    """A location's take on the same kind: fields dropped, types changed, bounds moved."""
    out = copy.deepcopy(schema)
    for key in list(out.get("properties") or {}):
        choice = draw(st.sampled_from(["same", "same", "drop", "other", "vary", "vary"]))
        if choice == "drop":
            del out["properties"][key]
        elif choice == "other":
            out["properties"][key] = draw(_schemas(1))
        elif choice == "vary":
            out["properties"][key] = draw(variant(out["properties"][key]))
    if isinstance(out.get("items"), dict) and draw(st.booleans()):
        out["items"] = draw(variant(out["items"]))
    if isinstance(out.get("additionalProperties"), dict) and draw(st.booleans()):
        out["additionalProperties"] = draw(variant(out["additionalProperties"]))
    kind = out.get("type")
    if kind in ("integer", "number", "string"):
        change = draw(st.sampled_from(["none", "low", "high", "enum", "type"]))
        low, high = ("minimum", "maximum") if kind != "string" else ("minLength", "maxLength")
        if change == "low":
            out[low] = draw(st.integers(-2, 4)) if kind != "string" else draw(st.integers(0, 3))
        elif change == "high":
            out[high] = draw(st.integers(3, 12))
        elif change == "enum" and "enum" in out:
            out["enum"] = out["enum"][1:] or out["enum"]
        elif change == "type" and kind != "string":
            out["type"] = "number" if kind == "integer" else "integer"
    if out.get("properties") and draw(st.integers(0, 3)) == 0:
        extra = draw(st.sampled_from(sorted(out["properties"])))
        out["required"] = sorted({*(out.get("required") or []), extra})
    if not root and draw(st.integers(0, 9)) == 0:
        out["x-kubernetes-preserve-unknown-fields"] = True
    return out


JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-10, 10) | st.text(max_size=4),
    lambda inner: st.lists(inner, max_size=2) | st.dictionaries(NAMES, inner, max_size=2),
    max_leaves=4,
)


def instances(schema: Schema) -> st.SearchStrategy[Any]:
    """Values meant to satisfy `schema` (callers still `assume` they do)."""
    if "enum" in schema:
        return st.sampled_from(schema["enum"])
    if schema.get("x-kubernetes-int-or-string"):
        return st.integers(-5, 5) | st.text(max_size=3)
    kind = schema.get("type")
    if kind == "string":
        shortest, longest = schema.get("minLength", 0), schema.get("maxLength", 6)
        edges = st.sampled_from([shortest, longest]).map(lambda n: "a" * n)
        return edges | st.text(alphabet="abc", min_size=shortest, max_size=longest)
    if kind in ("integer", "number"):
        low, high = schema.get("minimum", -20), schema.get("maximum", 20)
        ints = st.sampled_from([low, low + 1, high - 1, high]) | st.integers(low, high)
        return ints if kind == "integer" else ints | ints.map(lambda i: i + 0.5)
    if kind == "boolean":
        return st.booleans()
    if kind == "array":
        items = schema.get("items") or {}
        unique = schema.get("x-kubernetes-list-type") == "set"
        return st.lists(
            instances(items),
            max_size=schema.get("maxItems", 3),
            unique_by=(lambda v: repr(v)) if unique else None,
        )
    if kind == "object":
        properties = schema.get("properties") or {}
        if "additionalProperties" in schema and not properties:
            return st.dictionaries(NAMES, instances(schema["additionalProperties"]), max_size=3)
        required = set(schema.get("required") or [])
        extra: st.SearchStrategy[dict[str, Any]] = st.just({})
        if schema.get("x-kubernetes-preserve-unknown-fields"):
            # Keys no location names, and keys some location names but the hub left out.
            unknown = ["p", "q", *(name for name in FIELDS if name not in properties)]
            extra = st.dictionaries(st.sampled_from(unknown), JSON, max_size=2)
        every = st.fixed_dictionaries({k: instances(v) for k, v in properties.items()})
        fixed = every | st.fixed_dictionaries(
            {k: instances(v) for k, v in properties.items() if k in required},
            optional={k: instances(v) for k, v in properties.items() if k not in required},
        )
        return st.builds(lambda a, b: {**b, **a}, fixed, extra)
    return JSON


@st.composite
def fleets(draw: st.DrawFn) -> tuple[list[Schema], Schema | None]:
    properties = draw(st.dictionaries(NAMES, _schemas(2), min_size=2, max_size=5))
    base = _object(properties, draw(st.lists(NAMES, max_size=1)), False)
    locations = [draw(variant(base, root=True)) for _ in range(draw(st.integers(2, 4)))]
    return locations, common(locations)


@settings(max_examples=600, suppress_health_check=[HealthCheck.filter_too_much])
@given(st.data(), fleets())
def test_what_the_hub_accepts_every_location_accepts(
    data: st.DataObject, fleet: tuple[list[Schema], Schema | None]
) -> None:
    locations, hub = fleet
    assume(hub is not None)
    assert hub is not None
    obj = data.draw(instances(hub))
    assume(not errors(hub, obj))
    for location in locations:
        assert errors(location, obj) == [], (location, hub)


@settings(max_examples=200)
@given(fleets())
def test_every_location_is_compatible_with_the_negotiated_schema(
    fleet: tuple[list[Schema], Schema | None],
) -> None:
    locations, hub = fleet
    assume(hub is not None)
    assert hub is not None
    for location in locations:
        assert narrowed(hub, location) == []


@settings(max_examples=200)
@given(_schemas().filter(lambda s: s.get("type") == "object"))
def test_one_location_keeps_its_schema(schema: Schema) -> None:
    hub = common([schema])
    assert hub is not None
    assert narrowed(schema, hub) == []
    assert common([hub]) == hub


@given(fleets())
def test_negotiation_ignores_the_order_of_locations_but_for_descriptions(
    fleet: tuple[list[Schema], Schema | None],
) -> None:
    locations, hub = fleet
    again = common(list(reversed(locations)))
    assert (hub is None) == (again is None)
    if hub is not None and again is not None:
        assert narrowed(hub, again) == [] and narrowed(again, hub) == []


def _spec(**properties: Schema) -> Schema:
    return {"type": "object", "properties": {"spec": {"type": "object", "properties": properties}}}


def test_a_field_only_one_location_has_is_left_out() -> None:
    hub = common([_spec(a={"type": "string"}, b={"type": "integer"}), _spec(a={"type": "string"})])
    assert hub == _spec(a={"type": "string"})


def test_incompatible_types_leave_the_field_out_and_integer_meets_number() -> None:
    hub = common(
        [
            _spec(a={"type": "string"}, n={"type": "number"}),
            _spec(a={"type": "integer"}, n={"type": "integer"}),
        ]
    )
    assert hub == _spec(n={"type": "integer"})


def test_required_is_the_union_and_takes_the_parent_out_when_it_cannot_be_kept() -> None:
    one = _spec(a={"type": "string"}, b={"type": "string"})
    two = copy.deepcopy(one)
    two["properties"]["spec"]["required"] = ["b"]
    assert common([one, two])["properties"]["spec"]["required"] == ["b"]  # type: ignore[index]
    three = _spec(a={"type": "string"}, b={"type": "integer"})
    assert common([two, three]) == {"type": "object", "properties": {}}


def test_enums_intersect_and_bounds_tighten() -> None:
    hub = common(
        [
            _spec(
                e={"type": "string", "enum": ["x", "y", "z"]}, n={"type": "integer", "minimum": 1}
            ),
            _spec(
                e={"type": "string", "enum": ["z", "y"]},
                n={"type": "integer", "minimum": 0, "maximum": 5, "exclusiveMinimum": True},
            ),
        ]
    )
    assert hub == _spec(
        e={"type": "string", "enum": ["y", "z"]},
        n={"type": "integer", "minimum": 1, "maximum": 5},
    )
    assert (
        common(
            [_spec(e={"type": "string", "enum": ["x"]}), _spec(e={"type": "string", "enum": ["y"]})]
        )
        == _spec()
    )


def test_list_and_map_semantics_must_agree() -> None:
    atomic = {"type": "array", "items": {"type": "string"}}
    as_set = {**atomic, "x-kubernetes-list-type": "set"}
    assert common(
        [_spec(l=atomic), _spec(l={**atomic, "x-kubernetes-list-type": "atomic"})]
    ) == _spec(l=atomic)
    assert common([_spec(l=atomic), _spec(l=as_set)]) == _spec()
    free = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
    assert common([_spec(o=free), _spec(o={"type": "object"})]) == _spec()


def test_narrowed_names_the_paths() -> None:
    hub = _spec(
        a={"type": "string"},
        b={"type": "array", "items": {"type": "object", "properties": {"c": {"type": "string"}}}},
    )
    location = _spec(
        a={"type": "string", "maxLength": 3},
        b={"type": "array", "items": {"type": "object", "properties": {}}},
    )
    assert narrowed(hub, location) == ["spec.a (maxLength: null -> 3)", "spec.b[].c"]


def test_length_and_count_bounds_tighten() -> None:
    hub = common(
        [
            _spec(s={"type": "string", "minLength": 1, "maxLength": 9}),
            _spec(s={"type": "string", "minLength": 2, "maxLength": 5}),
        ]
    )
    assert hub == _spec(s={"type": "string", "minLength": 2, "maxLength": 5})
    assert errors(hub, {"spec": {"s": "a"}}) == ["spec.s: fewer than minLength"]
    empty = [
        _spec(s={"type": "string", "minLength": 6}),
        _spec(s={"type": "string", "maxLength": 5}),
    ]
    assert common(empty) == _spec()


def test_a_typed_map_and_preserved_unknown_fields_meet_at_the_typed_map() -> None:
    # Found by the property above: both keep unknown fields under `d`, but the first only as
    # strings (its additionalProperties), so the hub may not take any value there.
    preserve = {"x-kubernetes-preserve-unknown-fields": True}
    typed = _spec(d={"type": "object", "additionalProperties": {"type": "string"}, **preserve})
    free = _spec(d={"type": "object", "properties": {}, **preserve})
    for locations in ([typed, free], [free, typed]):
        hub = common(locations)
        assert hub == _spec(
            d={"type": "object", **preserve, "additionalProperties": {"type": "string"}}
        )
        assert errors(hub, {"spec": {"d": {"p": None}}}) == ["spec.d.p: null"]
        assert errors(hub, {"spec": {"d": {"p": "x"}}}) == []
        assert all(errors(location, {"spec": {"d": {"p": "x"}}}) == [] for location in locations)
        assert all(narrowed(hub, location) == [] for location in locations)


def test_a_field_left_out_under_preserved_unknown_fields_takes_its_parent_out() -> None:
    # The hub cannot refuse `a` alone while it keeps unknown fields: it would take `a: "x"`
    # that the second location refuses. Without preserve the parent stays, closed.
    preserve = {"x-kubernetes-preserve-unknown-fields": True}
    one = _spec(o={"type": "object", "properties": {"a": {"type": "string"}}, **preserve})
    two = _spec(o={"type": "object", "properties": {"a": {"type": "integer"}}, **preserve})
    assert common([one, two]) == _spec()
    maps = [
        _spec(o={"type": "object", "properties": {"a": {"type": "string"}}}),
        _spec(o={"type": "object", "additionalProperties": {"type": "integer"}}),
    ]
    assert common(maps) == _spec(o={"type": "object", "properties": {}})


def test_named_fields_and_a_typed_map_that_both_stay_open_meet_as_a_map() -> None:
    # A structural schema cannot have both properties and a typed additionalProperties, and
    # the node must keep unknown fields: one schema for every key, `x` included.
    preserve = {"x-kubernetes-preserve-unknown-fields": True}
    named = _spec(o={"type": "object", "properties": {"x": {"type": "string"}}, **preserve})
    short = {"type": "string", "maxLength": 3}
    typed = _spec(o={"type": "object", "additionalProperties": short, **preserve})
    hub = common([named, typed])
    assert hub == _spec(o={"type": "object", **preserve, "additionalProperties": short})
    assert errors(hub, {"spec": {"o": {"x": "abcd"}}}) == ["spec.o.x: more than maxLength"]
    assert narrowed(hub, named) == [] and narrowed(hub, typed) == []
