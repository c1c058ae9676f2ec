"""A pull location's reported children are validated once each (`feed/children.py`): the
same as validating every one every time, for good and bad children alike."""

from __future__ import annotations

import copy

import pydantic
import pytest
from hypothesis import given
from hypothesis import strategies as st

from apiserver.feed.children import ReportedChildren, as_dumped
from apiserver.kinds import DEPLOYMENT, Key
from apiserver.locations.reports import Reports
from apiserver.models.report import Child
from apiserver.objects import Obj

from .test_pull_report import child


def plain(children: list[Obj]) -> list[Obj]:
    return [Child.model_validate(c).model_dump(exclude_none=True) for c in children]


def named(name: str, ready: int = 1) -> Obj:
    found = child(ready=ready)
    found["metadata"]["name"] = name
    return found


def test_children_come_out_as_validating_each_makes_them() -> None:
    memo = ReportedChildren(Reports())
    first = [named("a"), named("b"), {**named("c"), "spec": None}]
    assert memo.validated("edge", copy.deepcopy(first)) == plain(first)
    second = [named("a"), named("b", ready=2), named("d")]  # same, changed, new; c gone
    again = memo.validated("edge", copy.deepcopy(second))
    assert again == plain(second)
    assert memo.last["edge"].keys() == {
        ("apps/v1", "Deployment", "shop", n) for n in ("a", "b", "d")
    }


def test_an_unchanged_child_is_not_validated_again_a_changed_one_is() -> None:
    memo = ReportedChildren(Reports())
    before = memo.validated("edge", [named("a"), named("b")])
    after = memo.validated("edge", [named("a"), named("b", ready=2)])
    assert after[0] is before[0]  # taken as validated then
    assert after[1] is not before[1] and after[1]["status"]["readyReplicas"] == 2
    # Another location's children are its own.
    assert memo.validated("west", [named("a")])[0] is not before[0]


def test_a_bad_child_is_refused_even_when_it_equals_a_good_one() -> None:
    memo = ReportedChildren(Reports())
    memo.validated("edge", [named("a")])
    looks_same = named("a")
    looks_same["metadata"]["generation"] = True
    good = named("a")
    good["metadata"]["generation"] = 1
    memo.validated("edge", [good])
    assert looks_same == good  # Python's True == 1
    with pytest.raises(pydantic.ValidationError):
        memo.validated("edge", [looks_same])
    with pytest.raises(pydantic.ValidationError):
        memo.validated("edge", [{"kind": "Deployment", "metadata": {}}])
    with pytest.raises(pydantic.ValidationError):
        memo.validated("edge", ["not a child"])


def test_a_location_whose_report_is_dropped_is_forgotten() -> None:
    reports = Reports()
    memo = ReportedChildren(reports)
    memo.validated("edge", [named("a")])
    reports.put("edge", {Key(DEPLOYMENT.key, "shop", "a"): plain([named("a")])[0]}, frozenset(), {})
    assert "edge" in memo.last  # a report kept: its children stay known
    reports.drop("edge")
    assert "edge" not in memo.last


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=5),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3)
    ),
    max_leaves=8,
)
texts = st.dictionaries(st.text(max_size=4), st.text(max_size=4), max_size=2)


@st.composite
def children(draw: st.DrawFn) -> Obj:
    meta: Obj = {"name": draw(st.text(min_size=1, max_size=4))}
    for field, values in (
        ("namespace", st.text(max_size=4)),
        ("generation", st.none() | st.integers()),
        ("resourceVersion", st.none() | st.text(max_size=4)),
        ("labels", texts),
        ("annotations", texts),
    ):
        if draw(st.booleans()):
            meta[field] = draw(values)
    found: Obj = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": meta}
    for field in ("spec", "status"):
        if draw(st.booleans()):
            found[field] = draw(st.none() | st.dictionaries(st.text(max_size=4), json_values))
    return found


@given(children())
def test_a_child_comes_out_as_the_models_dump_makes_it(found: Obj) -> None:
    assert as_dumped(found) == Child.model_validate(found).model_dump(exclude_none=True)
