"""Tables print like kubectl's: HumanDuration's rounding, Table shapes, Accept negotiation."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from apiserver.api import table
from apiserver.api.table import Column, Wanted
from apiserver.kube.client import ApiError

SECOND = timedelta(seconds=1)
MILLISECOND = timedelta(milliseconds=1)
MINUTE = timedelta(minutes=1)
HOUR = timedelta(hours=1)
DAY = timedelta(days=1)
YEAR = 365 * DAY


@pytest.mark.parametrize(
    ("duration", "text"),
    [
        # duration_test.go TestHumanDuration
        (SECOND, "1s"),
        (70 * SECOND, "70s"),
        (190 * SECOND, "3m10s"),
        (70 * MINUTE, "70m"),
        (47 * HOUR, "47h"),
        (49 * HOUR, "2d1h"),
        ((8 * 24 + 2) * HOUR, "8d"),
        (367 * DAY, "367d"),
        ((365 * 2 * 24 + 25) * HOUR, "2y1d"),
        ((365 * 8 * 24 + 2) * HOUR, "8y"),
        # duration_test.go TestHumanDurationBoundaries
        (-2 * SECOND, "<invalid>"),
        (-2 * SECOND + timedelta(microseconds=1), "0s"),
        (timedelta(0), "0s"),
        (SECOND - MILLISECOND, "0s"),
        (2 * MINUTE - MILLISECOND, "119s"),
        (2 * MINUTE, "2m"),
        (2 * MINUTE + SECOND, "2m1s"),
        (10 * MINUTE - MILLISECOND, "9m59s"),
        (10 * MINUTE, "10m"),
        (10 * MINUTE + SECOND, "10m"),
        (3 * HOUR - MILLISECOND, "179m"),
        (3 * HOUR, "3h"),
        (3 * HOUR + MINUTE, "3h1m"),
        (8 * HOUR - MILLISECOND, "7h59m"),
        (8 * HOUR, "8h"),
        (8 * HOUR + 59 * MINUTE, "8h"),
        (2 * DAY - MILLISECOND, "47h"),
        (2 * DAY, "2d"),
        (2 * DAY + HOUR, "2d1h"),
        (8 * DAY - MILLISECOND, "7d23h"),
        (8 * DAY, "8d"),
        (8 * DAY + 23 * HOUR, "8d"),
        (2 * YEAR - MILLISECOND, "729d"),
        (2 * YEAR, "2y"),
        (2 * YEAR + 23 * HOUR + 59 * MINUTE, "2y"),
        (2 * YEAR + DAY - MILLISECOND, "2y"),
        (2 * YEAR + DAY, "2y1d"),
        (3 * YEAR, "3y"),
        (7 * YEAR, "7y"),
        (8 * YEAR - MILLISECOND, "7y364d"),
        (8 * YEAR, "8y"),
        (8 * YEAR + 364 * DAY, "8y"),
        (9 * YEAR, "9y"),
        # ages people see every day
        (59 * SECOND, "59s"),
        (60 * SECOND, "60s"),
        (90 * SECOND, "90s"),
        (10 * MINUTE + 30 * SECOND, "10m"),
        (5 * HOUR + 30 * MINUTE, "5h30m"),
    ],
)
def test_human_duration_matches_apimachinery(duration: timedelta, text: str) -> None:
    assert table.human_duration(duration.total_seconds()) == text


NOW = datetime(2026, 12, 2, 10, 0, 0, tzinfo=UTC)


def test_age_like_kubectl() -> None:
    assert table.age("2026-12-02T09:54:30Z", NOW) == "5m30s"
    assert table.age("2026-11-30T07:00:00Z", NOW) == "2d3h"
    assert table.age("2026-12-02T09:59:59.500000Z", NOW) == "0s"
    assert table.age("2026-12-02T10:00:01Z", NOW) == "0s"  # a second of clock skew
    assert table.age("2026-12-02T10:00:05Z", NOW) == "<invalid>"
    assert table.age("2026-12-02T09:00:00", NOW.replace(tzinfo=None)) == "60m"


@pytest.mark.parametrize("timestamp", [None, "", "yesterday", "2026-13-40T00:00:00Z"])
def test_age_of_a_missing_or_broken_timestamp_is_unknown(timestamp: str | None) -> None:
    assert table.age(timestamp, NOW) == "<unknown>"


def test_column_definition() -> None:
    assert Column("Age").definition() == {
        "name": "Age",
        "type": "string",
        "format": "",
        "description": "",
        "priority": 0,
    }
    name = Column("Name", format="name", description="Name of the object", priority=1)
    assert name.definition()["format"] == "name"
    assert name.definition()["priority"] == 1


def test_include_object() -> None:
    assert table.include_object({}) == "Metadata"
    assert table.include_object({"includeObject": "None"}) == "None"
    assert table.include_object({"includeObject": "Object"}) == "Object"
    with pytest.raises(ApiError) as caught:
        table.include_object({"includeObject": "Everything"})
    assert caught.value.code == 400
    assert str(caught.value) == 'unrecognized includeObject value: "Everything"'


POD = {
    "kind": "Pod",
    "apiVersion": "v1",
    "metadata": {"name": "web-1", "namespace": "demo"},
    "spec": {"nodeName": "n1"},
}


def test_row_objects() -> None:
    assert table.row(["web-1"], POD, "None") == {"cells": ["web-1"]}
    assert table.row(["web-1"], POD, "Object") == {"cells": ["web-1"], "object": POD}
    assert table.row(["web-1"], POD, "Metadata") == {
        "cells": ["web-1"],
        "object": {
            "kind": "PartialObjectMetadata",
            "apiVersion": "meta.k8s.io/v1",
            "metadata": {"name": "web-1", "namespace": "demo"},
        },
    }
    beta = table.row(["web-1"], POD, "Metadata", version="v1beta1")
    assert beta["object"]["apiVersion"] == "meta.k8s.io/v1beta1"


def test_table_shape() -> None:
    columns = [Column("Name", format="name"), Column("Age")]
    rows = [table.row(["web-1", "5m"], POD, "None")]
    assert table.table(columns, rows) == {
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": {},
        "columnDefinitions": [column.definition() for column in columns],
        "rows": rows,
    }
    paged = table.table(
        columns, [], resource_version="e30", continue_="abc", remaining=0, version="v1beta1"
    )
    assert paged["apiVersion"] == "meta.k8s.io/v1beta1"
    assert paged["metadata"] == {
        "resourceVersion": "e30",
        "continue": "abc",
        "remainingItemCount": 0,
    }
    assert paged["rows"] == []


KUBECTL_GET = (
    "application/json;as=Table;v=v1;g=meta.k8s.io,"
    "application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json"
)
KUBECTL_DISCOVERY = (
    "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,"
    "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,"
    "application/json"
)


@pytest.mark.parametrize(
    ("accept", "wanted"),
    [
        (KUBECTL_GET, Wanted("table", "v1")),
        (KUBECTL_DISCOVERY, Wanted("discovery", "v2")),
        (None, Wanted("json")),
        ("", Wanted("json")),
        ("application/json", Wanted("json")),
        ("*/*", Wanted("json")),
        ("application/*", Wanted("json")),
        ("application/json;stream=watch", Wanted("json")),
        ("application/json; as=Table; v=v1beta1; g=meta.k8s.io", Wanted("table", "v1beta1")),
        (
            "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList",
            Wanted("discovery", "v2beta1"),
        ),
        # we serve JSON only: protobuf and YAML are passed over
        ("application/vnd.kubernetes.protobuf,application/json", Wanted("json")),
        (
            "application/vnd.kubernetes.protobuf;as=Table;v=v1;g=meta.k8s.io,"
            "application/json;as=Table;v=v1;g=meta.k8s.io",
            Wanted("table", "v1"),
        ),
        ("application/yaml, */*", Wanted("json")),
        # conversions we cannot do are passed over too
        ("application/json;as=Table;v=v2;g=meta.k8s.io,application/json", Wanted("json")),
        ("application/json;as=PartialObjectMetadataList;v=v1;g=meta.k8s.io,*/*", Wanted("json")),
        # quality: parsed, higher first, q=0 refused
        (
            "application/json;q=0.5,application/json;as=Table;v=v1;g=meta.k8s.io",
            Wanted("table", "v1"),
        ),
        ("application/json;as=Table;v=v1;g=meta.k8s.io;q=0,application/json", Wanted("json")),
    ],
)
def test_negotiate(accept: str | None, wanted: Wanted) -> None:
    assert table.negotiate(accept) == wanted


@pytest.mark.parametrize(
    "accept",
    [
        "application/yaml",
        "application/vnd.kubernetes.protobuf",
        "text/html",
        "application/json;as=Table;v=v2;g=meta.k8s.io",
        "application/json;q=0",
    ],
)
def test_nothing_servable_is_not_acceptable(accept: str) -> None:
    with pytest.raises(ApiError) as caught:
        table.negotiate(accept)
    assert caught.value.code == 406
    assert caught.value.status["reason"] == "NotAcceptable"
    assert str(caught.value) == (
        f"only the following media types are accepted: application/json (asked for: {accept})"
    )
