"""Server-side tables: what `kubectl get` prints for our resources.

kubectl asks every server for a `meta.k8s.io` Table and prints its cells as given, so the
columns, the ages (`5m30s`, `2d3h`, exactly kubectl's rounding) and the row objects are ours
to get right. This module holds the Table shapes and the Accept negotiation that decides
between a Table, a plain object and aggregated discovery.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal

from apiserver.api import errors
from apiserver.objects import Obj

IncludeObject = Literal["None", "Metadata", "Object"]
INCLUDE_OBJECT_VALUES: tuple[IncludeObject, ...] = ("None", "Metadata", "Object")

TABLE_GROUP = "meta.k8s.io"
TABLE_VERSIONS = ("v1", "v1beta1")
DISCOVERY_GROUP = "apidiscovery.k8s.io"
DISCOVERY_VERSIONS = ("v2", "v2beta1")


def human_duration(seconds: float) -> str:
    """k8s.io/apimachinery/pkg/util/duration.HumanDuration: two or three significant figures."""
    nanos = round(seconds * 1e9)
    whole = int(nanos / 1e9) if nanos < 0 else nanos // 1_000_000_000  # Go truncates to zero
    if whole < -1:
        return "<invalid>"
    if whole < 0:
        return "0s"
    if whole < 120:
        return f"{whole}s"
    minutes = whole // 60
    if minutes < 10:
        rest = whole % 60
        return f"{minutes}m{rest}s" if rest else f"{minutes}m"
    if minutes < 60 * 3:
        return f"{minutes}m"
    hours = whole // 3600
    if hours < 8:
        rest = minutes % 60
        return f"{hours}h{rest}m" if rest else f"{hours}h"
    if hours < 48:
        return f"{hours}h"
    if hours < 24 * 8:
        rest = hours % 24
        return f"{hours // 24}d{rest}h" if rest else f"{hours // 24}d"
    if hours < 24 * 365 * 2:
        return f"{hours // 24}d"
    if hours < 24 * 365 * 8:
        rest = (hours // 24) % 365
        years = hours // 24 // 365
        return f"{years}y{rest}d" if rest else f"{years}y"
    return f"{hours // 24 // 365}y"


def parse_time(timestamp: str | None) -> datetime | None:
    """An RFC 3339 timestamp as Kubernetes writes them (`2026-12-02T10:00:00Z`), or None."""
    if not timestamp:
        return None
    try:
        parsed = datetime.fromisoformat(timestamp)
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def age(timestamp: str | None, now: datetime) -> str:
    """kubectl's translateTimestampSince: the AGE column."""
    then = parse_time(timestamp)
    if then is None:
        return "<unknown>"
    if now.tzinfo is None:
        now = now.replace(tzinfo=UTC)
    return human_duration((now - then).total_seconds())


@dataclass(frozen=True)
class Column:
    name: str
    type: str = "string"
    format: str = ""
    description: str = ""
    priority: int = 0  # 0: always shown; 1 and up: only with -o wide

    def definition(self) -> Obj:
        return {
            "name": self.name,
            "type": self.type,
            "format": self.format,
            "description": self.description,
            "priority": self.priority,
        }


def include_object(query: Mapping[str, str]) -> IncludeObject:
    """The `includeObject` parameter of a Table request (default Metadata)."""
    value = query.get("includeObject") or "Metadata"
    for known in INCLUDE_OBJECT_VALUES:
        if value == known:
            return known
    raise errors.bad_request(f"unrecognized includeObject value: {errors.quote(value)}")


def row(cells: list[Any], obj: Obj, include: IncludeObject, version: str = "v1") -> Obj:
    """One row; its `object` is what `includeObject` asked for, in the Table's version."""
    result: Obj = {"cells": cells}
    if include == "Metadata":
        result["object"] = {
            "kind": "PartialObjectMetadata",
            "apiVersion": f"{TABLE_GROUP}/{version}",
            "metadata": obj.get("metadata", {}),
        }
    elif include == "Object":
        result["object"] = obj
    return result


def table(
    columns: Sequence[Column],
    rows: list[Obj],
    *,
    resource_version: str = "",
    continue_: str = "",
    remaining: int | None = None,
    version: str = "v1",
) -> Obj:
    """A `meta.k8s.io/<version>` Table; list metadata fields are omitted when empty."""
    metadata: Obj = {}
    if resource_version:
        metadata["resourceVersion"] = resource_version
    if continue_:
        metadata["continue"] = continue_
    if remaining is not None:
        metadata["remainingItemCount"] = remaining
    return {
        "kind": "Table",
        "apiVersion": f"{TABLE_GROUP}/{version}",
        "metadata": metadata,
        "columnDefinitions": [column.definition() for column in columns],
        "rows": rows,
    }


# --- content negotiation ----------------------------------------------------------------------

Format = Literal["json", "table", "discovery"]
SERVED = "application/json"


@dataclass(frozen=True)
class Wanted:
    """What to answer: plain JSON, a Table (v1/v1beta1) or an APIGroupDiscoveryList (v2/v2beta1)."""

    format: Format = "json"
    version: str = ""


def negotiate(accept: str | None) -> Wanted:
    """The first media range of `Accept` (by quality, then order) that we can serve."""
    if not accept or not accept.strip():
        return Wanted()
    for media, params in _media_ranges(accept):
        wanted = _servable(media, params)
        if wanted is not None:
            return wanted
    raise errors.not_acceptable(
        f"only the following media types are accepted: {SERVED} (asked for: {accept.strip()})"
    )


def _servable(media: str, params: Mapping[str, str]) -> Wanted | None:
    if media not in ("application/json", "application/*", "*/*"):
        return None  # protobuf, yaml, cbor, anything else: not served here
    conversion = (params.get("as"), params.get("g"), params.get("v"))
    if conversion == (None, None, None):
        return Wanted()
    kind, group, version = conversion
    if kind == "Table" and group == TABLE_GROUP and version in TABLE_VERSIONS:
        return Wanted("table", version)
    if (
        kind == "APIGroupDiscoveryList"
        and group == DISCOVERY_GROUP
        and version in DISCOVERY_VERSIONS
    ):
        return Wanted("discovery", version)
    return None


def _media_ranges(accept: str) -> list[tuple[str, dict[str, str]]]:
    """Parse `Accept`: ranges sorted by quality (stable), q=0 ranges dropped."""
    ranges: list[tuple[float, int, str, dict[str, str]]] = []
    for index, clause in enumerate(accept.split(",")):
        media, *raw_params = (piece.strip() for piece in clause.split(";"))
        if not media:
            continue
        params: dict[str, str] = {}
        for raw in raw_params:
            key, _, value = raw.partition("=")
            params[key.strip().lower()] = value.strip().strip('"')
        quality = _quality(params.pop("q", "1"))
        if quality > 0:
            ranges.append((-quality, index, media.lower(), params))
    ranges.sort(key=lambda item: (item[0], item[1]))
    return [(media, params) for _, _, media, params in ranges]


def _quality(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        return 1.0
    return min(max(value, 0.0), 1.0)
