"""RFC 6902 over RFC 6901, including the RFC's own examples that matter to us."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from apiserver.overrides.jsonpatch import PatchError, apply_patch, check_operation, parse_pointer


def test_pointers_unescape_and_refuse_bad_syntax() -> None:
    assert parse_pointer("") == []
    assert parse_pointer("/a~1b/c~0d/0") == ["a/b", "c~d", "0"]
    with pytest.raises(PatchError, match="start with"):
        parse_pointer("spec/replicas")
    with pytest.raises(PatchError, match="~0"):
        parse_pointer("/a~2")


@pytest.mark.parametrize(
    ("operation", "wanted"),
    [
        ({"op": "add", "path": "/baz", "value": "qux"}, {"foo": "bar", "baz": "qux", "l": [1, 2]}),
        ({"op": "add", "path": "/l/1", "value": 9}, {"foo": "bar", "l": [1, 9, 2]}),
        ({"op": "add", "path": "/l/-", "value": 9}, {"foo": "bar", "l": [1, 2, 9]}),
        ({"op": "remove", "path": "/l/0"}, {"foo": "bar", "l": [2]}),
        ({"op": "replace", "path": "/foo", "value": 1}, {"foo": 1, "l": [1, 2]}),
        ({"op": "replace", "path": "/l/1", "value": 3}, {"foo": "bar", "l": [1, 3]}),
        ({"op": "move", "path": "/moved", "from": "/foo"}, {"moved": "bar", "l": [1, 2]}),
        ({"op": "copy", "path": "/l/0", "from": "/foo"}, {"foo": "bar", "l": ["bar", 1, 2]}),
        ({"op": "test", "path": "/l", "value": [1, 2]}, {"foo": "bar", "l": [1, 2]}),
    ],
)
def test_operations(operation: dict[str, Any], wanted: dict[str, Any]) -> None:
    document = {"foo": "bar", "l": [1, 2]}
    kept = copy.deepcopy(document)
    assert apply_patch(document, [operation]) == wanted
    assert document == kept  # never changed in place


@pytest.mark.parametrize(
    ("operation", "message"),
    [
        ({"op": "replace", "path": "/nope", "value": 1}, r"replace /nope: no such path"),
        ({"op": "remove", "path": "/a/b"}, r"remove /a/b: no such path"),
        ({"op": "add", "path": "/l/5", "value": 1}, "out of range"),
        ({"op": "test", "path": "/foo", "value": "x"}, "not the one tested"),
        ({"op": "move", "path": "/foo/x", "from": "/foo"}, "into itself"),
    ],
)
def test_operations_that_cannot_apply(operation: dict[str, Any], message: str) -> None:
    with pytest.raises(PatchError, match=message):
        apply_patch({"foo": {"y": 1}, "l": [1]}, [operation])


@pytest.mark.parametrize(
    ("operation", "message"),
    [
        ({"op": "upsert", "path": "/a"}, "op must be one of"),
        ({"op": "add", "value": 1}, "path is required"),
        ({"op": "add", "path": "/a"}, "value is required"),
        ({"op": "move", "path": "/a"}, "from is required"),
        ({"op": "remove", "path": "/a", "vaule": 1}, "unknown field vaule"),
        ("add /a", "must be an object"),
    ],
)
def test_malformed_operations(operation: Any, message: str) -> None:
    with pytest.raises(PatchError, match=message):
        check_operation(operation)


def test_a_failing_operation_leaves_no_half_patch() -> None:
    document = {"a": 1}
    with pytest.raises(PatchError):
        apply_patch(
            document, [{"op": "add", "path": "/b", "value": 2}, {"op": "remove", "path": "/c"}]
        )
    assert document == {"a": 1}
