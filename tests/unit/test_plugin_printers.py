"""`-o` formats: server Tables with kubectl's extra columns, and objects as kubectl prints them."""

import json
from typing import Any

import pytest
import yaml

from kubectl_mc.printers import (
    Output,
    OutputError,
    TableView,
    as_list,
    name_of,
    parse_output,
    print_objects,
)

TABLE: dict[str, Any] = {
    "kind": "Table",
    "columnDefinitions": [
        {"name": "Name", "priority": 0},
        {"name": "Strategy", "priority": 0},
        {"name": "Placed", "priority": 1},
    ],
    "rows": [
        {
            "cells": ["web", "Split", "Placed"],
            "object": {
                "metadata": {"name": "web", "namespace": "demo", "labels": {"b": "2", "a": "1"}}
            },
        },
        {
            "cells": ["db", "Single", None],
            "object": {"metadata": {"name": "db", "namespace": "prod"}},
        },
    ],
}


def test_priority_columns_only_when_wide() -> None:
    view = TableView()
    assert view.print_rows(TABLE, view.rows(TABLE)).splitlines() == [
        "NAME   STRATEGY",
        "web    Split",
        "db     Single",
    ]
    wide = TableView(wide=True)
    assert wide.print_rows(TABLE, wide.rows(TABLE)).splitlines()[0] == "NAME   STRATEGY   PLACED"
    assert wide.print_rows(TABLE, []) == ""


def test_namespace_first_labels_last_and_no_headers() -> None:
    view = TableView(namespace_column=True, show_labels=True, no_headers=True)
    assert view.print_rows(TABLE, view.rows(TABLE)).splitlines() == [
        "demo   web   Split    a=1,b=2",
        "prod   db    Single   <none>",
    ]


def test_a_stream_keeps_its_header_once_and_its_widths() -> None:
    view = TableView()
    first = view.print_rows(TABLE, view.rows(TABLE))
    later = view.print_rows(TABLE, [["x", "Split"]])
    assert first.startswith("NAME") and later == "x      Split"


def test_json_and_yaml_lists_are_kubectls() -> None:
    items = [
        {"kind": "Deployment", "apiVersion": "mc.kmc.dev/v1alpha1", "metadata": {"name": "web"}}
    ]
    text = print_objects(Output("json"), as_list(items))
    assert text.startswith('{\n    "apiVersion": "v1",\n    "items": [')
    assert json.loads(text)["kind"] == "List"
    yaml_text = print_objects(Output("yaml"), as_list(items))
    assert yaml_text.splitlines()[:3] == [
        "apiVersion: v1",
        "items:",
        "- apiVersion: mc.kmc.dev/v1alpha1",
    ]
    assert yaml.safe_load(yaml_text)["items"][0]["metadata"]["name"] == "web"


def test_yaml_quotes_like_go_and_never_folds() -> None:
    long = "x " * 100
    text = print_objects(Output("yaml"), {"a": "2026-12-02T16:11:08Z", "b": long, "c": "true"})
    assert text.splitlines() == [
        'a: "2026-12-02T16:11:08Z"',
        f"b: '{long}'".replace("'", '"'),
        'c: "true"',
    ]


def test_names_are_kind_dot_group() -> None:
    assert (
        name_of(
            {"apiVersion": "mc.kmc.dev/v1alpha1", "kind": "Deployment", "metadata": {"name": "web"}}
        )
        == "deployment.mc.kmc.dev/web"
    )
    assert name_of({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}}) == "pod/p"


def test_custom_columns() -> None:
    items: list[dict[str, Any]] = [
        {"metadata": {"name": "a", "annotations": {"kmc.dev/location": "us-east"}}},
        {"metadata": {"name": "b"}},
    ]
    output = parse_output(
        "custom-columns=NAME:.metadata.name,WHERE:.metadata.annotations.kmc\\.dev/location"
    )
    assert print_objects(output, as_list(items)).splitlines() == [
        "NAME   WHERE",
        "a      us-east",
        "b      <none>",
    ]
    assert print_objects(output, as_list([])) == "NAME   WHERE"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("xml", 'unable to match a printer suitable for the output format "xml"'),
        ("jsonpath=", "template format specified but no template given"),
        ("jsonpath={.a", "error parsing jsonpath {.a, unclosed action"),
        ("custom-columns=NAME", "unexpected custom-columns spec: NAME"),
    ],
)
def test_bad_formats_fail_before_any_request(text: str, message: str) -> None:
    with pytest.raises(OutputError, match=message.replace("{", r"\{").replace(".", r"\.")):
        parse_output(text)
