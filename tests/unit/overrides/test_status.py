"""An Override's status: objects per location, failures, conflicts; marked for a write only
when what it says changes."""

from __future__ import annotations

from typing import Any

from apiserver.kinds import Key
from apiserver.loops.sync.overridestatus import Failed, Tally
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
