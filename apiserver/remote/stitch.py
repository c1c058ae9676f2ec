"""Stitching the children's Tables into one, without decoding what passes through unchanged.

A `kubectl get` of a few thousand pods through the hub brings several Tables of a megabyte
each, and most of every row is its object's `managedFields`, which nobody reads in a Table.
Decoding those rows into dicts and encoding them again was most of kmc-apiserver's CPU under
load. Here a child's Table is read into typed structs instead: cells, conditions and column
definitions stay raw JSON bytes and are copied through; a row's metadata keeps every
`ObjectMeta` field but `managedFields` (skipped while parsing, never built); the location is
spliced in as the first cell and as the `kmc.dev/location` annotation.

Only lists whose rows carry `PartialObjectMetadata` (what kubectl asks for by default,
`includeObject=Metadata`) or nothing take this path: children are asked for metadata then.
Whole objects (`includeObject=Object`) are decoded and kept whole by the caller.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import msgspec
from msgspec import UNSET, Raw, Struct, UnsetType

from apiserver.api import paging
from apiserver.contract import LOCATION as ANNOTATION


class Meta(Struct, omit_defaults=True):
    """`ObjectMeta` as a Table row carries it, minus `managedFields`. A field Kubernetes adds
    later would be dropped here: list it when it comes."""

    name: str | UnsetType = UNSET
    generateName: Raw | UnsetType = UNSET
    namespace: str | UnsetType = UNSET
    selfLink: Raw | UnsetType = UNSET
    uid: Raw | UnsetType = UNSET
    resourceVersion: Raw | UnsetType = UNSET
    generation: Raw | UnsetType = UNSET
    creationTimestamp: Raw | UnsetType = UNSET
    deletionTimestamp: Raw | UnsetType = UNSET
    deletionGracePeriodSeconds: Raw | UnsetType = UNSET
    labels: Raw | UnsetType = UNSET
    annotations: dict[str, str] | UnsetType = UNSET
    ownerReferences: Raw | UnsetType = UNSET
    finalizers: Raw | UnsetType = UNSET


class RowObject(Struct, omit_defaults=True):
    kind: str | UnsetType = UNSET
    apiVersion: Raw | UnsetType = UNSET
    metadata: Meta = msgspec.field(default_factory=Meta)


class Row(Struct, omit_defaults=True):
    cells: Raw
    conditions: Raw | UnsetType = UNSET
    object: RowObject | UnsetType = UNSET


class ListMeta(Struct, omit_defaults=True):
    resourceVersion: str = ""
    # kept for the output only; a child's own continue token is never passed on
    continue_: str | UnsetType = msgspec.field(default=UNSET, name="continue")
    remainingItemCount: int | UnsetType = UNSET


class ChildTable(Struct, omit_defaults=True):
    kind: str
    apiVersion: str
    metadata: ListMeta = msgspec.field(default_factory=ListMeta)
    columnDefinitions: Raw | UnsetType = UNSET
    rows: list[Row] = msgspec.field(default_factory=list)


_decoder = msgspec.json.Decoder(ChildTable)


def decode(raw: bytes) -> ChildTable:
    """A child's Table; raises msgspec.DecodeError for anything that is not one."""
    child = _decoder.decode(raw)
    if child.kind != "Table":
        raise msgspec.ValidationError(f"expected a Table, got kind {child.kind!r}")
    return child


@dataclass(frozen=True)
class _Unit:
    key: paging.Key
    row: Row


def prepend(array: Raw | UnsetType, first: bytes) -> Raw:
    """The JSON array `array` with the encoded value `first` put before its elements."""
    inner = bytes(array).strip()[1:-1].strip() if array is not UNSET else b""
    return Raw(b"[" + first + (b"," + inner if inner else b"") + b"]")


def stitched(
    answers: Sequence[tuple[str, ChildTable]],
    location_column: bytes,
    api_version: str,
    include_object: bool,
    limit: int | None,
    cont: str | None,
    version: str,
) -> ChildTable:
    """One Table of every child's rows, LOCATION first, sorted and paged like our lists."""
    columns: Raw | UnsetType = UNSET
    units: list[_Unit] = []
    for location, child in answers:
        if columns is UNSET and child.columnDefinitions is not UNSET:
            columns = prepend(child.columnDefinitions, location_column)
        cell = msgspec.json.encode(location)
        for row in child.rows:
            row.cells = prepend(row.cells, cell)
            namespace, name = "", ""
            if row.object is not UNSET:
                meta = row.object.metadata
                annotations = meta.annotations if meta.annotations is not UNSET else {}
                meta.annotations = {**annotations, ANNOTATION: location}
                namespace = meta.namespace if meta.namespace is not UNSET else ""
                name = meta.name if meta.name is not UNSET else ""
                if not include_object:
                    row.object = UNSET
            units.append(_Unit((namespace, name, location), row))
    served, next_token, left = paging.page(units, limit, cont, version, key=lambda u: u.key)
    metadata = ListMeta(resourceVersion=version)
    if next_token:
        metadata.continue_ = next_token
    if left is not None:
        metadata.remainingItemCount = left
    return ChildTable(
        kind="Table",
        apiVersion=api_version,
        metadata=metadata,
        columnDefinitions=columns if columns is not UNSET else Raw(b"[" + location_column + b"]"),
        rows=[unit.row for unit in served],
    )
