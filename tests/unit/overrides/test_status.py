"""An Override's status: objects per location, failures, conflicts; marked for a write only
when what it says changes."""

from __future__ import annotations

from typing import Any, cast

from apiserver.kinds import Key
from apiserver.loops.sync.overridestatus import Failed, Tally, Writer
from apiserver.models.override_index import Source, read

WEB, API = Key("Deployment", "shop", "web"), Key("Deployment", "shop", "api")


def source(name: str, rules: list[Any], priority: int = 0) -> Source:
    raw = {
        "metadata": {"name": name, "namespace": "shop"},
        "spec": {
            "targets": [{"apiVersion": "apps/v1", "kind": "Deployment"}],
            "priority": priority,
            "rules": rules,
        },
    }
    found = read(raw)
    assert found is not None
    return found


def test_counts_failures_and_conflicts() -> None:
    a = source("a", [{"env": {"set": {"SITE": "a"}}}])
    b = source("b", [{"env": {"set": {"SITE": "b", "X": "1"}}}])
    high = source("high", [{"env": {"set": {"SITE": "h"}}}], priority=1)
    tally = Tally()
    tally.saw(WEB, "eu-west", [a, b, high])
    tally.saw(API, "eu-west", [a])
    tally.saw(API, "us-west", [a], Failed(("shop", "a"), "spec.rules[0] (env)", "no container"))
    assert tally.dirty == {("shop", "a"), ("shop", "b"), ("shop", "high")}
    status = tally.status(("shop", "a"), 3).to_json()
    assert status["observedGeneration"] == 3
    assert status["locations"] == [
        {"name": "eu-west", "objects": 2},
        {"name": "us-west", "objects": 1},
    ]
    assert status["failures"] == [
        {
            "object": "Deployment shop/api",
            "location": "us-west",
            "rule": "spec.rules[0] (env)",
            "error": "no container",
        }
    ]
    # b at the same priority sets SITE too; high is above it: no conflict with high.
    assert status["conflicts"] == [
        {
            "object": "Deployment shop/web",
            "location": "eu-west",
            "path": "containers/*/env/SITE",
            "other": "Override shop/b",
        }
    ]
    assert tally.status(("shop", "high"), 1).to_json()["conflicts"] == []

    tally.dirty.clear()
    tally.saw(WEB, "eu-west", [a, b, high])  # nothing new: nothing to write
    assert tally.dirty == set()
    tally.drop(WEB)
    assert tally.dirty == {("shop", "a"), ("shop", "b"), ("shop", "high")}
    assert tally.status(("shop", "b"), 1).to_json()["locations"] == []
    assert tally.status(("shop", "a"), 1).to_json()["conflicts"] == []


class _Informer:
    def __init__(self, raw: dict[str, Any]) -> None:
        self.raw = raw

    def get(self, key: str) -> dict[str, Any] | None:
        return self.raw if key == "shop/a" else None

    async def observe(self, obj: dict[str, Any]) -> None:
        self.raw = obj


class _Hub:
    def __init__(self) -> None:
        self.patches: list[tuple[str, Any]] = []

    async def merge_patch(self, path: str, body: Any) -> dict[str, Any]:
        self.patches.append((path, body))
        return {"metadata": {"name": "a", "namespace": "shop", "generation": 1}, **body}


async def test_counts_alone_wait_their_quiet_a_failure_does_not() -> None:
    hub, informer = (
        _Hub(),
        _Informer({"metadata": {"name": "a", "namespace": "shop", "generation": 1}}),
    )
    cache: Any = type("Cache", (), {"hub": hub, "overrides": informer, "cluster_overrides": None})()
    tally = Tally()
    writer = Writer(cache, tally, cast(Any, None), interval=1.0, quiet=3600)
    a = source("a", [{"env": {"set": {"SITE": "a"}}}])
    tally.saw(WEB, "eu-west", [a])
    await writer.write_due()
    assert [p for p, _ in hub.patches] == [
        "/apis/kmc.dev/v1alpha1/namespaces/shop/overrides/a/status"
    ]
    tally.saw(API, "eu-west", [a])  # one more object: a count, held back
    await writer.write_due()
    assert len(hub.patches) == 1 and tally.dirty == {("shop", "a")}
    tally.saw(API, "us-west", [a], Failed(("shop", "a"), "spec.rules[0] (env)", "no container"))
    await writer.write_due()  # a failure: at once, with the counts that waited
    assert len(hub.patches) == 2
    written = hub.patches[-1][1]["status"]
    assert written["locations"] == [
        {"name": "eu-west", "objects": 2},
        {"name": "us-west", "objects": 1},
    ]
    await writer.write_due()
    assert len(hub.patches) == 2  # nothing new: nothing written
