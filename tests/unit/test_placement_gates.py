"""Placement gates: how `kmc.dev/placement-gates` is read, and how a gated object shows."""

from __future__ import annotations

import pytest

from apiserver.contract import PLACEMENT_GATES as ANNOTATION
from apiserver.kinds import DEPLOYMENT
from apiserver.mc.views import cells
from apiserver.placement.gates import GatesError, gated_message, placement_gates

WHERE = "deployments demo/web"


def test_no_annotation_and_an_empty_list_hold_nothing() -> None:
    assert placement_gates(None, WHERE) == ()
    assert placement_gates({}, WHERE) == ()
    assert placement_gates({ANNOTATION: "[]"}, WHERE) == ()


def test_gates_are_read_in_the_order_written() -> None:
    text = '["example.com/db-ready", "approved"]'
    assert placement_gates({ANNOTATION: text}, WHERE) == ("example.com/db-ready", "approved")
    assert gated_message(("a", "b")) == "waiting for placement gates: a, b"


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("not json", "not JSON"),
        ('"one"', 'must be a list of gate names, got "one"'),
        ("[1]", "[0]: must be a qualified name like example.com/ready, got 1"),
        ('["ok", ""]', '[1]: must be a qualified name like example.com/ready, got ""'),
        ('["a b"]', "[0]: must be a qualified name"),
        ('["Example.com/x"]', "[0]: must be a qualified name"),
        ('["x" ]'.replace("x", "x" * 64), "[0]: must be a qualified name"),
        ('["a", "a"]', '[1]: duplicate gate "a"'),
    ],
)
def test_a_malformed_annotation_is_a_one_line_error_naming_the_object(
    text: str, problem: str
) -> None:
    with pytest.raises(GatesError) as error:
        placement_gates({ANNOTATION: text}, WHERE)
    message = str(error.value)
    assert message.startswith(f"{ANNOTATION} on {WHERE}: ")
    assert problem in message
    assert "\n" not in message


def _view(placement: dict[str, int | None], reason: str) -> dict[str, object]:
    return {
        "kind": "Deployment",
        "metadata": {"name": "web"},
        "spec": {"replicas": 2, "strategy": {"type": "Split"}},
        "status": {
            "placement": placement,
            "conditions": [{"type": "kmc.dev/Placed", "status": "False", "reason": reason}],
        },
    }


def test_a_gated_object_shows_gated_where_its_locations_would_be() -> None:
    row = cells(DEPLOYMENT, _view({}, "Gated"), None)
    assert row[2] == "<gated>"
    assert row[5] == "Gated"
    assert cells(DEPLOYMENT, _view({}, "Unplaceable"), None)[2] == "<none>"
    assert cells(DEPLOYMENT, _view({"us-east": 2}, "Placed"), None)[2] == "us-east=2"
