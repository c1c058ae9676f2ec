"""Answers in the shapes kubectl expects: objects, lists, Tables and watch streams.

Every handler ends here, so list metadata, Table versions and the watch framing (one JSON
`{"type","object"}` per line, Table events with column definitions only in the first) are
written one way for both API groups.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

import msgspec
from aiohttp import web
from multidict import CIMultiDict

from apiserver.api import table
from apiserver.api.table import Column, Wanted
from apiserver.objects import Obj


def json_response(
    obj: Obj | msgspec.Struct, headers: CIMultiDict[str] | None = None
) -> web.Response:
    return web.Response(
        body=msgspec.json.encode(obj),
        content_type="application/json",
        headers=headers,
    )


_BATCH = 500  # items encoded and written at a time


async def stream_list(
    request: web.Request,
    head: Obj,
    field: str,
    items: Iterable[Any],
    encode: Callable[[Any], bytes] = msgspec.json.encode,
    headers: CIMultiDict[str] | None = None,
) -> web.StreamResponse:
    """A list or Table written as it is encoded: `head` with its `field` array (items, rows)
    filled a batch at a time, so a big list is never held whole, encoded, in memory."""
    response = web.StreamResponse(headers=headers)
    response.content_type = "application/json"
    await response.prepare(request)
    opened = msgspec.json.encode({k: v for k, v in head.items() if k != field})
    await response.write(opened[:-1] + b',"' + field.encode() + b'":[')
    batch: list[bytes] = []
    first = True
    for item in items:
        batch.append(encode(item))
        if len(batch) == _BATCH:
            await response.write((b"" if first else b",") + b",".join(batch))
            batch, first = [], False
    if batch:
        await response.write((b"" if first else b",") + b",".join(batch))
    await response.write(b"]}")
    await response.write_eof()
    return response


def object_list(
    kind: str,
    api_version: str,
    items: list[Obj],
    resource_version: str,
    cont: str = "",
    left: int | None = None,
) -> Obj:
    metadata: Obj = {"resourceVersion": resource_version}
    if cont:
        metadata["continue"] = cont
    if left is not None:
        metadata["remainingItemCount"] = left
    return {"kind": kind, "apiVersion": api_version, "metadata": metadata, "items": items}


def table_of(
    wanted: Wanted,
    columns: Sequence[Column],
    rows: list[tuple[list[Any], Obj]],
    include: table.IncludeObject,
    *,
    resource_version: str = "",
    cont: str = "",
    left: int | None = None,
) -> Obj:
    version = wanted.version or "v1"
    return table.table(
        columns,
        [table.row(cells, obj, include, version) for cells, obj in rows],
        resource_version=resource_version,
        continue_=cont,
        remaining=left,
        version=version,
    )


class WatchStream:
    """A chunked stream of watch events; Table events carry column definitions only once."""

    def __init__(self, response: web.StreamResponse) -> None:
        self.response = response
        self._headers_sent = False

    @classmethod
    async def open(
        cls, request: web.Request, headers: CIMultiDict[str] | None = None
    ) -> WatchStream:
        response = web.StreamResponse(headers=headers)
        response.content_type = "application/json"
        response.enable_chunked_encoding()
        await response.prepare(request)
        return cls(response)

    async def send(self, event_type: str, obj: Obj) -> None:
        await self.response.write(msgspec.json.encode({"type": event_type, "object": obj}) + b"\n")

    def table_event(self, tbl: Obj) -> Obj:
        """The Table for one event: the first keeps its column definitions, later ones drop
        them, as kube-apiserver does."""
        if self._headers_sent:
            return {**tbl, "columnDefinitions": []}
        if tbl.get("columnDefinitions"):
            self._headers_sent = True
        return tbl
