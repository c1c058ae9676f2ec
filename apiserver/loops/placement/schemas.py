"""Each location's OpenAPI v3 schemas, fetched once per (location, group/version, server
version) and turned into SchemaIndex checkers for the placement engine.

A location we cannot ask (unreachable, no OpenAPI v3) gets no checker: the engine then does
not filter on fields, and the location's readiness decides on its own. A failed fetch is
retried after `retry` seconds, not on every decision.
"""

from __future__ import annotations

import asyncio
import time

from apiserver.kube.client import ApiError
from apiserver.locations.fleet import Fleet
from apiserver.objects import Obj
from apiserver.placement.engine import FieldChecker
from apiserver.placement.schema import SchemaIndex


class SchemaCache:
    def __init__(self, fleet: Fleet, retry: float = 30.0) -> None:
        self.fleet = fleet
        self.retry = retry
        self._docs: dict[tuple[str, str, str], Obj | float] = {}
        self._indexes: dict[tuple[str, str, str, str], SchemaIndex | None] = {}
        self._locks: dict[tuple[str, str, str], asyncio.Lock] = {}

    async def checker(
        self, location: str, server_version: str, api_version: str, kind: str
    ) -> FieldChecker | None:
        doc_key = (location, server_version, api_version)
        doc = await self._document(doc_key)
        if doc is None:
            return None
        index_key = (*doc_key, kind)
        if index_key not in self._indexes:
            self._indexes[index_key] = SchemaIndex.from_openapi(doc, api_version, kind)
        return self._indexes[index_key]

    async def _document(self, key: tuple[str, str, str]) -> Obj | None:
        async with self._locks.setdefault(key, asyncio.Lock()):
            cached = self._docs.get(key)
            if isinstance(cached, dict):
                return cached
            if isinstance(cached, float) and time.monotonic() - cached < self.retry:
                return None
            location, _, api_version = key
            kube = self.fleet.get(location)
            if kube is None:
                return None
            path = "/openapi/v3/" + ("api/v1" if api_version == "v1" else f"apis/{api_version}")
            try:
                doc = await kube.get(path)
            except ApiError:
                self._docs[key] = time.monotonic()
                return None
            self._docs[key] = doc
            return doc
