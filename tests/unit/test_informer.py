"""The informer's cache stays the server's view: a late answer to our own write does not bring
back an object the watch saw deleted, the watch does not take the cache back past an answer
already taken, and a watch that fails in a way nobody foresaw relists
instead of leaving the cache frozen."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from typing import Any, cast

import pytest

from apiserver.kube.client import ApiError, Kube
from apiserver.kube.informer import Informer
from apiserver.objects import Obj


def obj(name: str, version: int) -> Obj:
    return {"metadata": {"name": name, "namespace": "ns", "resourceVersion": str(version)}}


class FakeKube:
    """A list, then one scripted watch per round: events, exceptions to raise, and gates
    (asyncio.Event) to wait at."""

    name = "fake"

    def __init__(self, items: list[Obj], rounds: list[list[Any]]) -> None:
        self.items, self.rounds, self.lists = items, rounds, 0

    async def get(self, path: str, **params: str) -> Obj:
        self.lists += 1
        return {"metadata": {"resourceVersion": "10"}, "items": self.items}

    async def watch(
        self, path: str, resource_version: str, params: Any = None
    ) -> AsyncIterator[Obj]:
        script = self.rounds.pop(0) if self.rounds else []
        for step in script:
            if isinstance(step, BaseException):
                raise step
            if isinstance(step, asyncio.Event):
                await step.wait()
                continue
            yield step
        await asyncio.Event().wait()  # then quiet, as a real watch between events


async def started(
    kube: FakeKube, seen: list[tuple[str, str]]
) -> tuple[Informer, asyncio.Task[None]]:
    async def handler(kind: str, o: Obj, _: Obj | None) -> None:
        seen.append((kind, o["metadata"]["resourceVersion"]))

    informer = Informer(cast(Kube, kube), "/things", handler, backoff_cap=0.01)
    task = asyncio.create_task(informer.run())
    await asyncio.sleep(0.05)
    return informer, task


async def test_a_late_answer_does_not_bring_back_a_deleted_object() -> None:
    # Our patch made version 11; the object was deleted (12) before we read the answer.
    kube = FakeKube([obj("web", 10)], [[{"type": "DELETED", "object": obj("web", 12)}]])
    seen: list[tuple[str, str]] = []
    informer, task = await started(kube, seen)
    try:
        await informer.observe(obj("web", 11))
        assert informer.get("ns/web") is None
        assert seen == [("ADDED", "10"), ("DELETED", "12")]
        # Made again under the same name: its own answer is news, and is taken.
        await informer.observe(obj("web", 13))
        assert informer.get("ns/web") == obj("web", 13)
    finally:
        task.cancel()


async def test_an_answer_taken_early_is_not_undone_by_the_watch() -> None:
    """Two of our writes cross: the answer to the second (12) is taken before the watch
    brings the first (11). The cache keeps 12; then the watch's own 12 is not news."""
    gate = asyncio.Event()
    events = [{"type": "MODIFIED", "object": obj("web", v)} for v in (11, 12, 13)]
    kube = FakeKube([obj("web", 10)], [[gate, *events]])
    seen: list[tuple[str, str]] = []
    informer, task = await started(kube, seen)
    try:
        await informer.observe(obj("web", 12))
        gate.set()
        await asyncio.sleep(0.05)
        assert seen == [("ADDED", "10"), ("MODIFIED", "12"), ("MODIFIED", "13")]
        assert informer.get("ns/web") == obj("web", 13)
    finally:
        task.cancel()


async def test_an_unforeseen_watch_failure_relists() -> None:
    gate = asyncio.Event()
    kube = FakeKube([obj("web", 10)], [[gate, RuntimeError("surprise")]])
    informer, task = await started(kube, [])
    try:
        kube.items = [obj("web", 14)]  # changed while the watch was failing
        gate.set()
        deadline = asyncio.get_running_loop().time() + 2
        while kube.lists < 2:
            assert asyncio.get_running_loop().time() < deadline, "the informer stopped"
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.01)
        assert not task.done()
        assert informer.get("ns/web") == obj("web", 14)
    finally:
        task.cancel()


async def test_a_failure_that_repeats_is_a_warning_once(caplog: pytest.LogCaptureFixture) -> None:
    tried = asyncio.Event()

    class Unserved(FakeKube):
        async def get(self, path: str, **params: str) -> Obj:
            self.lists += 1
            if self.lists == 4:
                tried.set()
            raise ApiError.of(404, "NotFound", "GET /things: 404 page not found")

    caplog.set_level(logging.DEBUG, logger="apiserver.kube.informer")
    _, task = await started(Unserved([], []), [])
    try:
        await asyncio.wait_for(tried.wait(), 2)
    finally:
        task.cancel()
    said = [r.levelno for r in caplog.records if "404 page not found" in r.getMessage()]
    assert said[0] == logging.WARNING and set(said[1:]) == {logging.DEBUG}, said


async def test_a_resource_no_longer_served_empties_the_cache() -> None:
    gone = asyncio.Event()

    class Unserved(FakeKube):
        async def get(self, path: str, **params: str) -> Obj:
            self.lists += 1
            if self.lists == 1:
                return await super().get(path, **params)
            gone.set()
            raise ApiError.of(404, "NotFound", "GET /things: 404 page not found")

    seen: list[tuple[str, str]] = []
    # The watch fails at once, as a watch of a CRD being deleted does: the informer relists.
    informer, task = await started(
        Unserved([obj("web", 10)], [[ApiError.of(410, "Gone", "")]]), seen
    )
    try:
        await asyncio.wait_for(gone.wait(), 2)
        await asyncio.sleep(0.01)
        assert informer.cache == {} and informer.synced.is_set()
        assert seen == [("ADDED", "10"), ("DELETED", "10")]
    finally:
        task.cancel()
