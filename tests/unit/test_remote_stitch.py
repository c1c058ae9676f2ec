"""The fast stitching of children's Tables says exactly what the generic one says, but for
the rows' managedFields, which it drops."""

from __future__ import annotations

import copy
from typing import Any

import msgspec
import pytest

from apiserver.api import table
from apiserver.kube.client import ApiError, decode_answer
from apiserver.remote import handlers, stitch
from apiserver.remote.fanout import Answer

COLUMNS = [
    {"name": "Name", "type": "string", "format": "name", "description": "", "priority": 0},
    {"name": "Ready", "type": "string", "format": "", "description": "", "priority": 0},
]


def child_table(location: str, names: list[str]) -> dict[str, Any]:
    rows = []
    for i, name in enumerate(names):
        meta: dict[str, Any] = {
            "name": name,
            "namespace": "demo" if i % 2 else "apps",
            "uid": f"uid-{location}-{name}",
            "resourceVersion": str(100 + i),
            "creationTimestamp": "2026-12-02T20:05:19Z",
            "labels": {"app": "web"},
            "ownerReferences": [{"kind": "ReplicaSet", "name": "web-1", "uid": "u"}],
            "managedFields": [{"manager": "kube-controller-manager", "fieldsV1": {"f:a": {}}}],
        }
        if i % 3 == 0:
            meta["annotations"] = {"note": 'x "quoted" \u00e9'}
        rows.append(
            {
                "cells": [name, "1/1"],
                "object": {
                    "kind": "PartialObjectMetadata",
                    "apiVersion": "meta.k8s.io/v1",
                    "metadata": meta,
                },
            }
        )
    return {
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": {"resourceVersion": f"{len(names)}7"},
        "columnDefinitions": COLUMNS,
        "rows": rows,
    }


CHILDREN = {
    "us-east": child_table("us-east", ["web-b", "web-a", "db"]),
    "eu-west": child_table("eu-west", ["web-a", "cache"]),
    "empty": child_table("empty", []),
}


def without_managed_fields(tbl: dict[str, Any]) -> dict[str, Any]:
    tbl = copy.deepcopy(tbl)
    for row in tbl["rows"]:
        if "object" in row:
            row["object"]["metadata"].pop("managedFields", None)
    return tbl


def both(
    include: table.IncludeObject, limit: int | None, cont: str | None
) -> tuple[dict[str, Any], dict[str, Any]]:
    raw = {name: msgspec.json.encode(body) for name, body in CHILDREN.items()}
    wanted = table.negotiate(handlers.CHILD_TABLE)
    generic = handlers._stitched_table(
        [Answer(name, decode_answer(200, body, "GET", "/")) for name, body in raw.items()],
        wanted,
        include,
        limit,
        cont,
        "v0",
    )
    fast = stitch.stitched(
        [(name, decode_answer(200, body, "GET", "/", stitch.decode)) for name, body in raw.items()],
        handlers._LOCATION_DEFINITION,
        "meta.k8s.io/v1",
        include == "Metadata",
        limit,
        cont,
        "v0",
    )
    return without_managed_fields(generic), msgspec.json.decode(msgspec.json.encode(fast))


@pytest.mark.parametrize("include", ["Metadata", "None"])
def test_the_fast_table_is_the_generic_one_without_managed_fields(
    include: table.IncludeObject,
) -> None:
    generic, fast = both(include, None, None)
    assert fast == generic
    assert [row["cells"][:2] for row in fast["rows"]] == [
        ["us-east", "db"],  # namespace apps
        ["eu-west", "web-a"],
        ["us-east", "web-b"],
        ["eu-west", "cache"],  # namespace demo
        ["us-east", "web-a"],
    ]
    if include == "Metadata":
        meta = fast["rows"][0]["object"]["metadata"]
        assert meta["annotations"]["kmc.dev/location"] == "us-east"
        assert "managedFields" not in meta


def test_pages_resume_where_the_last_ended() -> None:
    generic, fast = both("Metadata", 2, None)
    assert fast == generic and fast["metadata"]["remainingItemCount"] == 3
    token = fast["metadata"]["continue"]
    generic, fast = both("Metadata", 2, token)
    assert fast == generic
    assert [row["cells"][:2] for row in fast["rows"]] == [
        ["us-east", "web-b"],
        ["eu-west", "cache"],
    ]


def test_what_is_not_a_table_is_a_bad_gateway_answer() -> None:
    with pytest.raises(ApiError) as failure:
        decode_answer(200, b'{"kind":"PodList","apiVersion":"v1"}', "GET", "/pods", stitch.decode)
    assert failure.value.code == 502 and "expected a Table" in str(failure.value)
    with pytest.raises(ApiError):
        decode_answer(200, b"[1,2", "GET", "/pods", stitch.decode)
