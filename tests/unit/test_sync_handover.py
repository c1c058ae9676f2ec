"""Make before break: the availability floor, convergence, unreachable children, determinism.

The properties run a small simulated cluster: after each plan the children are set to the planned
replicas (a scale-down is assumed to remove available pods first, the worst case) and deleted
where planned, and then some or all of the replicas that are not yet available become so.
"""

from __future__ import annotations

from collections.abc import Mapping

import pytest
from hypothesis import given
from hypothesis import strategies as st

from apiserver.sync.handover import Child, Plan, plan

Children = dict[str, Child]

names = st.sampled_from(["a", "b", "c", "d", "e"])


def up(replicas: int, available: int | None = None) -> Child:
    return Child(replicas, replicas if available is None else available, True)


def down(replicas: int, available: int | None = None) -> Child:
    return Child(replicas, replicas if available is None else available, False)


def available(children: Mapping[str, Child]) -> int:
    return sum(min(c.available, c.replicas) for c in children.values() if c.reachable)


def apply(children: Mapping[str, Child], result: Plan) -> Children:
    """The cluster after the plan: reachable children scaled or deleted, new ones created."""
    assert not result.delete & result.replicas.keys()
    after: Children = {}
    for name, child in children.items():
        if not child.reachable:
            after[name] = child
        elif name not in result.delete:
            replicas = result.replicas[name]
            lost = max(0, child.replicas - replicas)
            after[name] = up(replicas, max(0, min(child.available, child.replicas) - lost))
    for name, replicas in result.replicas.items():
        after.setdefault(name, up(replicas, 0))
    return after


def all_available(children: Mapping[str, Child]) -> Children:
    return {
        name: up(child.replicas) if child.reachable else child for name, child in children.items()
    }


def settle(target: Mapping[str, int], children: Children, total: int, unavailable: int) -> Children:
    """Rounds in which every new replica becomes available, until the plan changes nothing."""
    for _ in range(10):
        result = plan(target, children, total, unavailable)
        after = all_available(apply(children, result))
        if after == children:
            return children
        children = after
    raise AssertionError(f"no fixpoint after 10 rounds: {children}")


# -- hand examples ------------------------------------------------------------------------------


def test_move_three_with_no_unavailability_allowed() -> None:
    target = {"b": 3}
    start = plan(target, {"a": up(3)}, 3, 0)
    assert start == Plan(
        {"a": 3, "b": 3}, frozenset(), ("a: 3 -> 0 waits for 3 more available elsewhere",)
    )
    # b exists but nothing of it is available yet: a holds
    assert plan(target, {"a": up(3), "b": up(3, 0)}, 3, 0) == start
    # b partly available: a goes down by as much
    partly = plan(target, {"a": up(3), "b": up(3, 2)}, 3, 0)
    assert partly.replicas == {"a": 1, "b": 3}
    assert partly.waiting == ("a: 1 -> 0 waits for 1 more available elsewhere",)
    # b fully available: a drains, and once at 0 it is deleted
    assert plan(target, {"a": up(3), "b": up(3)}, 3, 0) == Plan({"a": 0, "b": 3}, frozenset(), ())
    assert plan(target, {"a": up(0), "b": up(3)}, 3, 0) == Plan({"b": 3}, frozenset({"a"}), ())
    assert plan(target, {"b": up(3)}, 3, 0) == Plan({"b": 3}, frozenset(), ())


def test_max_unavailable_allows_overlap() -> None:
    first = plan({"b": 3}, {"a": up(3)}, 3, 1)
    assert first.replicas == {"a": 2, "b": 3}
    assert first.waiting == ("a: 2 -> 0 waits for 2 more available elsewhere",)
    # b's first available replica pays for the next of a's, the second for the last
    assert plan({"b": 3}, {"a": up(2), "b": up(3, 1)}, 3, 1).replicas == {"a": 1, "b": 3}
    assert plan({"b": 3}, {"a": up(2), "b": up(3, 2)}, 3, 1).replicas == {"a": 0, "b": 3}


def test_hub_scale_down_does_not_deadlock() -> None:
    assert plan({"a": 3}, {"a": up(6)}, 3, 0) == Plan({"a": 3}, frozenset(), ())
    assert plan({"a": 2, "b": 1}, {"a": up(3), "b": up(3)}, 3, 0).replicas == {"a": 2, "b": 1}
    # moved and scaled down at once: the new total leaves half of a as budget
    moved = plan({"b": 3}, {"a": up(6)}, 3, 0)
    assert moved.replicas == {"a": 3, "b": 3}
    assert plan({"b": 3}, {"a": up(3), "b": up(3)}, 3, 0).replicas == {"a": 0, "b": 3}


def test_increases_and_new_locations_apply_at_once() -> None:
    result = plan({"a": 5, "b": 2, "c": 0}, {"a": up(1, 0)}, 7, 0)
    assert result == Plan({"a": 5, "b": 2, "c": 0}, frozenset(), ())


def test_nothing_available_anywhere_waits_unless_allowed() -> None:
    # a brand-new Deployment re-placed before any pod came up: the floor is not met, so nothing
    # shrinks, even though removing a's pending pods would lose nothing available
    held = plan({"b": 3}, {"a": up(3, 0), "b": up(3, 0)}, 3, 0)
    assert held.replicas == {"a": 3, "b": 3}
    assert held.waiting == ("a: 3 -> 0 waits for 3 more available elsewhere",)
    # with every replica allowed to be unavailable the floor is 0 and the free decrease goes ahead
    assert plan({"b": 3}, {"a": up(3, 0), "b": up(3, 0)}, 3, 3).replicas == {"a": 0, "b": 3}
    # at the floor exactly, a decrease that loses nothing available goes ahead
    at_floor = plan({"a": 2, "c": 2}, {"a": up(4, 0), "c": up(2)}, 4, 2)
    assert at_floor == Plan({"a": 2, "c": 2}, frozenset(), ())


def test_new_copies_that_never_become_available_cost_nothing() -> None:
    children: Children = {"a": up(3)}
    for _ in range(5):
        children = apply(children, plan({"b": 3}, children, 3, 0))
        assert children == {"a": up(3), "b": up(3, 0)}


def test_budget_goes_to_removed_then_largest_decrease_then_name() -> None:
    children = {"r": up(1), "x": up(4), "y": up(3)}
    # available 8, floor 5: budget 3, of which r takes 1 and x the remaining 2 of its 3
    result = plan({"n": 3, "x": 1, "y": 1}, children, 5, 0)
    assert result.replicas == {"n": 3, "r": 0, "x": 2, "y": 3}
    assert result.waiting == (
        "x: 2 -> 1 waits for 1 more available elsewhere",
        "y: 3 -> 1 waits for 3 more available elsewhere",
    )
    # equal decreases: the first name is served first
    tie = plan({"n": 2, "p": 1, "q": 1}, {"p": up(2), "q": up(2), "n": up(2)}, 5, 0)
    assert tie.replicas == {"n": 2, "p": 1, "q": 2}


def test_unavailable_replicas_cost_nothing_to_remove() -> None:
    # a has 5 replicas, 1 available: going to 0 costs only that 1
    result = plan({"b": 4}, {"a": up(5, 1), "b": up(4)}, 4, 0)
    assert result.replicas == {"a": 0, "b": 4}


def test_available_replicas_are_assumed_to_go_first() -> None:
    # a goes 5 -> 2 with 3 of its 5 available: the child's controller may remove exactly those 3,
    # so with a budget of 1 (available 6, floor 5) a goes down by 1 only
    result = plan({"a": 2, "b": 3}, {"a": up(5, 3), "b": up(3)}, 5, 0)
    assert result.replicas == {"a": 4, "b": 3}
    assert result.waiting == ("a: 4 -> 2 waits for 2 more available elsewhere",)


def test_unreachable_child_is_kept_and_does_not_count() -> None:
    # u is unreachable: kept as it is, even though removed from the placement
    result = plan({"b": 3}, {"u": down(3), "b": up(3)}, 3, 0)
    assert result == Plan(
        {"b": 3, "u": 3},
        frozenset(),
        ("u: 3 -> 0 and delete waits for the location to become reachable",),
    )
    assert plan({"b": 3}, {"u": down(0, 0), "b": up(3)}, 3, 0).delete == frozenset()
    # u's 3 available are stale: without them a would be below the floor once drained
    held = plan({"u": 3, "b": 3}, {"u": down(3), "a": up(3), "b": up(3)}, 6, 0)
    assert held.replicas == {"a": 3, "b": 3, "u": 3}
    assert held.waiting == ("a: 3 -> 0 waits for 3 more available elsewhere",)
    assert plan({"u": 5}, {"u": down(3)}, 5, 0).waiting == (
        "u: 3 -> 5 waits for the location to become reachable",
    )


def test_stale_available_counts_only_up_to_replicas() -> None:
    # a was scaled down from 4 a moment ago and its status still says 4 available
    result = plan({"a": 1, "b": 1}, {"a": up(2, 4), "b": up(1, 0)}, 2, 0)
    assert result.replicas == {"a": 2, "b": 1}


def test_placing_fewer_than_the_floor_keeps_the_difference_where_it_was() -> None:
    children = settle({"b": 3}, {"a": up(6)}, 6, 1)
    # 5 available is the floor: a keeps what b cannot take
    assert children == {"a": up(2), "b": up(3)}
    assert plan({"b": 3}, children, 6, 1).waiting == (
        "a: 2 -> 0 waits for 2 more available elsewhere",
    )


def test_bad_input_is_refused() -> None:
    with pytest.raises(ValueError, match="max_unavailable"):
        plan({}, {}, 3, -1)
    with pytest.raises(ValueError, match="total"):
        plan({}, {}, -1, 0)
    with pytest.raises(ValueError, match="a, c"):
        plan({"c": -1, "b": 1, "a": -2}, {}, 0, 0)


# -- properties ---------------------------------------------------------------------------------

targets = st.dictionaries(names, st.integers(0, 6), max_size=4)


@st.composite
def child_maps(draw: st.DrawFn, unreachable: bool = True) -> Children:
    """Children, some unreachable, some reporting a stale available count above replicas."""
    result: Children = {}
    for name in draw(st.lists(names, unique=True, max_size=5)):
        replicas = draw(st.integers(0, 6))
        reachable = draw(st.booleans()) if unreachable else True
        result[name] = Child(replicas, draw(st.integers(0, replicas + 2)), reachable)
    return result


def progress(data: st.DataObject, children: Mapping[str, Child], flip: bool) -> Children:
    """Some not yet available replicas become available; with `flip`, reachability may change."""
    after: Children = {}
    for name, child in sorted(children.items()):
        ready = child.available
        if child.reachable:
            ready = min(child.replicas, child.available + data.draw(st.integers(0, child.replicas)))
        reachable = child.reachable ^ (flip and data.draw(st.integers(0, 4)) == 0)
        after[name] = Child(child.replicas, ready, reachable)
    return after


def check_sane(target: Mapping[str, int], children: Mapping[str, Child], result: Plan) -> None:
    for name, child in children.items():
        if not child.reachable:
            assert result.replicas[name] == child.replicas
            assert name not in result.delete
        elif name in result.delete:
            assert name not in target and child.replicas == 0
        else:
            goal = target.get(name, 0)
            assert goal <= result.replicas[name] <= max(goal, child.replicas)
    for name, goal in target.items():
        if name not in children:
            assert result.replicas[name] == goal
    assert result.replicas.keys() <= target.keys() | children.keys()


@given(
    st.data(),
    targets,
    child_maps(),
    st.integers(0, 12),
    st.integers(0, 3),
    st.booleans(),
)
def test_available_never_drops_below_the_floor(
    data: st.DataObject,
    target: dict[str, int],
    children: Children,
    total: int,
    unavailable: int,
    flip: bool,
) -> None:
    floor = total - unavailable
    for _ in range(6):
        result = plan(target, children, total, unavailable)
        check_sane(target, children, result)
        before = available(children)
        children = apply(children, result)
        assert available(children) >= min(before, floor)
        children = progress(data, children, flip)


@given(st.data(), targets, child_maps(unreachable=False), st.integers(0, 3), st.integers(0, 4))
def test_converges_to_the_target_once_replicas_become_available(
    data: st.DataObject,
    target: dict[str, int],
    children: Children,
    unavailable: int,
    slow_rounds: int,
) -> None:
    total = data.draw(st.integers(0, sum(target.values()) + unavailable))
    for _ in range(slow_rounds):
        children = progress(
            data, apply(children, plan(target, children, total, unavailable)), False
        )
    for _ in range(3):
        children = all_available(apply(children, plan(target, children, total, unavailable)))
    assert children == {name: up(replicas) for name, replicas in target.items()}
    assert plan(target, children, total, unavailable) == Plan(
        dict(sorted(target.items())), frozenset(), ()
    )


@given(st.data(), targets, child_maps(), st.integers(0, 12), st.integers(0, 3))
def test_unreachable_children_are_never_touched(
    data: st.DataObject,
    target: dict[str, int],
    children: Children,
    total: int,
    unavailable: int,
) -> None:
    for _ in range(4):
        result = plan(target, children, total, unavailable)
        for name, child in children.items():
            if not child.reachable:
                assert result.replicas[name] == child.replicas
                assert name not in result.delete
        children = progress(data, apply(children, result), True)


@given(targets, child_maps(), st.integers(0, 12), st.integers(0, 3))
def test_deterministic_whatever_the_order(
    target: dict[str, int], children: Children, total: int, unavailable: int
) -> None:
    result = plan(target, children, total, unavailable)
    reordered = plan(
        dict(reversed(target.items())), dict(reversed(children.items())), total, unavailable
    )
    assert reordered == result
    assert reordered.waiting == result.waiting
    assert list(reordered.replicas) == sorted(reordered.replicas)
