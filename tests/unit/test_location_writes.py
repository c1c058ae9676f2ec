"""A Location's status is a write on the shared hub: what placement needs at once (Ready,
nodes, capacity, the APIs served) goes at once; the pods' requests, which move whenever a
pod starts, at most every `usage_quiet` seconds; and everything once per `refresh`."""

from __future__ import annotations

from apiserver.loops.locations import Settings, status_due

SETTINGS = Settings(usage_quiet=10.0, refresh=60.0)


def status(requested_cpu: str = "1", ready: str = "True", nodes: int = 3) -> dict[str, object]:
    return {
        "nodes": nodes,
        "requested": {"cpu": requested_cpu},
        "conditions": [{"type": "Ready", "status": ready}],
    }


def test_the_first_status_and_a_change_of_ready_or_nodes_go_at_once() -> None:
    assert status_due(None, status(), 0.0, SETTINGS)
    written = (status(), 100.0)
    assert status_due(written, status(ready="False"), 100.5, SETTINGS)
    assert status_due(written, status(nodes=4), 100.5, SETTINGS)


def test_requests_alone_wait_the_quiet_and_nothing_new_waits_the_refresh() -> None:
    written = (status("1"), 100.0)
    assert not status_due(written, status("2"), 105.0, SETTINGS)
    assert status_due(written, status("2"), 110.0, SETTINGS)
    assert not status_due(written, status("1"), 150.0, SETTINGS)
    assert status_due(written, status("1"), 160.0, SETTINGS)
