"""Paging never skips or repeats an object that stays, and resourceVersions survive a round trip."""

from __future__ import annotations

import base64
import json
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from apiserver.api import paging
from apiserver.api.paging import Continue
from apiserver.kube.client import ApiError
from apiserver.objects import Obj


def item(namespace: str, name: str, location: str = "") -> Obj:
    metadata: Obj = {"name": name}
    if namespace:
        metadata["namespace"] = namespace
    if location:
        metadata["annotations"] = {"kmc.dev/location": location}
    return {"kind": "Pod", "metadata": metadata}


def keys(items: list[Obj]) -> list[tuple[str, str, str]]:
    return [paging.sort_key(obj) for obj in items]


def test_sort_key() -> None:
    assert paging.sort_key(item("demo", "web", "us-east")) == ("demo", "web", "us-east")
    assert paging.sort_key(item("", "node-1")) == ("", "node-1", "")
    assert paging.sort_key({}) == ("", "", "")


def test_no_limit_is_everything_sorted() -> None:
    items = [item("b", "x"), item("a", "y", "us-west"), item("a", "y", "eu-west")]
    for limit in (None, 0, -1):
        served, token, remaining = paging.page(items, limit, None, "rv")
        assert keys(served) == [("a", "y", "eu-west"), ("a", "y", "us-west"), ("b", "x", "")]
        assert (token, remaining) == ("", None)


def test_pages_walk_the_list_once() -> None:
    items = [item("demo", f"web-{i}", loc) for i in range(5) for loc in ("eu-west", "us-east")]
    first, token, remaining = paging.page(items, 4, None, "rv1")
    assert keys(first) == sorted(keys(items))[:4]
    assert token
    assert remaining == 6
    second, token, remaining = paging.page(items, 4, token, "rv2")
    assert keys(second) == sorted(keys(items))[4:8]
    assert remaining == 2
    third, token, remaining = paging.page(items, 4, token, "rv3")
    assert keys(third) == sorted(keys(items))[8:]
    assert (token, remaining) == ("", None)


def test_the_token_keeps_the_first_pages_resource_version() -> None:
    items = [item("demo", name) for name in "abcde"]
    _, token, _ = paging.page(items, 2, None, "first")
    assert paging.decode_continue(token).resource_version == "first"
    _, token, _ = paging.page(items, 2, token, "second")
    assert paging.decode_continue(token) == Continue("first", ("demo", "d", "\x00"))


def test_objects_created_or_deleted_between_pages() -> None:
    items = [item("demo", name) for name in ("a", "c", "e", "g")]
    first, token, _ = paging.page(items, 2, None, "rv")
    assert keys(first) == [("demo", "a", ""), ("demo", "c", "")]
    # "b" lands before the boundary (too late for this list), "d" right after it; "e" goes away.
    changed = [item("demo", name) for name in ("a", "b", "c", "d", "g")]
    rest, token, remaining = paging.page(changed, 10, token, "rv")
    assert keys(rest) == [("demo", "d", ""), ("demo", "g", "")]
    assert (token, remaining) == ("", None)


def test_the_same_name_in_another_location_right_after_the_boundary_is_served() -> None:
    items = [item("demo", "web", "us-east"), item("demo", "web", "us-west")]
    first, token, _ = paging.page(items, 1, None, "rv")
    assert keys(first) == [("demo", "web", "us-east")]
    grown = [*items, item("demo", "web", "us-east-2")]
    rest, _, _ = paging.page(grown, 5, token, "rv")
    assert keys(rest) == [("demo", "web", "us-east-2"), ("demo", "web", "us-west")]


def _encode(payload: object) -> str:
    return base64.urlsafe_b64encode(json.dumps(payload).encode()).decode().rstrip("=")


@pytest.mark.parametrize(
    "token",
    [
        "not a token!",
        "%%%",
        "a",
        base64.urlsafe_b64encode(b"not json").decode(),
        _encode({"v": 2, "rv": "1", "start": ["", "", ""]}),
        _encode({"v": 1, "rv": 5, "start": ["", "", ""]}),
        _encode({"v": 1, "rv": "1", "start": ["", ""]}),
        _encode({"v": 1, "rv": "1", "start": ["", "", 3]}),
        _encode(["v", 1]),
    ],
)
def test_a_malformed_token_is_a_bad_request(token: str) -> None:
    with pytest.raises(ApiError) as caught:
        paging.page([item("demo", "a")], 1, token, "rv")
    assert caught.value.code == 400
    assert str(caught.value).startswith("invalid continue token: continue key is not valid: ")


def test_limit_of() -> None:
    assert paging.limit_of({}) is None
    assert paging.limit_of({"limit": ""}) is None
    assert paging.limit_of({"limit": "500"}) == 500
    assert paging.limit_of({"limit": "+5"}) == 5
    assert paging.limit_of({"limit": "-1"}) == -1
    with pytest.raises(ApiError) as caught:
        paging.limit_of({"limit": "ten"})
    assert caught.value.code == 400
    assert str(caught.value) == 'strconv.ParseInt: parsing "ten": invalid syntax'
    with pytest.raises(ApiError) as caught:
        paging.limit_of({"limit": "99999999999999999999"})
    assert str(caught.value).endswith("value out of range")


def test_composite_version_round_trip() -> None:
    versions = {"us-east": "12345", "eu-west": "9", "us-west": "0"}
    text = paging.composite_version(versions)
    assert re.fullmatch(r"[A-Za-z0-9_-]+", text)
    assert paging.parse_composite(text) == versions
    assert paging.composite_version(dict(reversed(list(versions.items())))) == text


def test_composite_version_of_nothing_is_still_a_version() -> None:
    text = paging.composite_version({})
    assert text not in ("", "0")
    assert paging.parse_composite(text) == {}


@pytest.mark.parametrize("text", ["", "0"])
def test_empty_and_zero_mean_from_now(text: str) -> None:
    assert paging.parse_composite(text) == {}


@pytest.mark.parametrize(
    "text",
    ["12345", "not base64!", _encode(["a"]), _encode({"us-east": 5}), "e30=", "e30 "],
)
def test_a_foreign_resource_version_is_a_bad_request(text: str) -> None:
    with pytest.raises(ApiError) as caught:
        paging.parse_composite(text)
    assert caught.value.code == 400
    assert str(caught.value) == f'invalid resource version "{text}"'


# --- properties ---------------------------------------------------------------------------------

names = st.sampled_from(["a", "b", "web", "web-1", "x.y", "z"])
locations = st.sampled_from(["", "eu-west", "us-east", "us-west"])
namespaces = st.sampled_from(["", "demo", "kube-system"])
item_keys = st.sets(st.tuples(namespaces, names, locations), max_size=30)


@given(item_keys, st.integers(min_value=1, max_value=35))
def test_any_limit_returns_every_item_exactly_once(
    present: set[tuple[str, str, str]], limit: int
) -> None:
    items = [item(*key) for key in present]
    seen: list[tuple[str, str, str]] = []
    token: str | None = None
    pages = 0
    while True:
        served, token, remaining = paging.page(items, limit, token, "rv")
        assert len(served) <= limit
        seen.extend(keys(served))
        pages += 1
        if not token:
            assert remaining is None
            break
        assert remaining == len(present) - len(seen)
    assert seen == sorted(present)
    assert pages == max(1, -(-len(present) // limit))


@given(
    item_keys,
    st.integers(min_value=1, max_value=10),
    st.lists(st.tuples(item_keys, item_keys), max_size=6),
)
def test_objects_that_stay_are_served_once_whatever_changes_between_pages(
    initial: set[tuple[str, str, str]],
    limit: int,
    changes: list[tuple[set[tuple[str, str, str]], set[tuple[str, str, str]]]],
) -> None:
    current = set(initial)
    stayed = set(initial)
    seen: list[tuple[str, str, str]] = []
    token: str | None = None
    for step in range(len(changes) + 100):
        served, token, _ = paging.page([item(*key) for key in current], limit, token, "rv")
        seen.extend(keys(served))
        if not token:
            break
        if step < len(changes):
            added, removed = changes[step]
            current = (current | added) - removed
            stayed -= removed
    assert not token
    assert seen == sorted(set(seen))  # in order, no repeats
    assert stayed <= set(seen)
