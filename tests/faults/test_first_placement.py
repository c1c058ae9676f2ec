"""First placement is immediate and whole: every child's apiserver is stopped and started,
and a Deployment created within a second of the three locations turning Ready again is
placed over all three in one step — no `Unplaceable` ("cooling down"), no `SpilledOver` or
`Rebalanced` after. The cooldown damps moves of placed workloads; a new one has none."""

from __future__ import annotations

import time
from typing import Any

from kmc_testbed import bed
from tests.e2e.conftest import CHILDREN, Kubectl, run_testbed
from tests.e2e.test_placement import events_of, wait_locations_settled, wait_placement
from tests.e2e.test_testbed import deployment


def ready_since(hub: Kubectl) -> dict[str, Any]:
    """Each location's Ready transition time while Ready, else None."""
    found: dict[str, Any] = {}
    for location in hub.json("get", "locations")["items"]:
        conditions = location.get("status", {}).get("conditions", [])
        ready: dict[str, Any] = next((c for c in conditions if c["type"] == "Ready"), {})
        since = ready.get("lastTransitionTime") if ready.get("status") == "True" else None
        found[location["metadata"]["name"]] = since
    return found


def wait_until(what: str, check: Any, timeout: float, every: float = 0.5) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(every)


def test_a_workload_created_as_locations_turn_ready_is_placed_whole_at_once(
    installed: bed.State, kubectl: dict[str, Kubectl], namespace: str
) -> None:
    hub = kubectl["hub"]
    wait_locations_settled(hub)
    for child in CHILDREN:
        run_testbed("stop", child)
    try:
        wait_until(
            "every location not Ready",
            lambda: all(ready_since(hub)[c] is None for c in CHILDREN),
            60,
        )
    finally:
        for child in CHILDREN:
            run_testbed("start", child)
    wait_until(
        "every location Ready again",
        lambda: all(ready_since(hub)[c] is not None for c in CHILDREN),
        120,
        every=0.1,
    )
    hub.apply(deployment("web", 3), namespace)  # within a second of the last one
    placement = wait_placement(hub, "deployment", "web", namespace, timeout=30)
    assert placement == dict.fromkeys(CHILDREN, 1)
    # Past the cooldown nothing has moved, and nothing said it could not place it.
    wait_locations_settled(hub)
    assert wait_placement(hub, "deployment", "web", namespace) == placement
    reasons = {e["reason"] for e in events_of(hub, namespace, "web")}
    assert not reasons & {"Unplaceable", "SpilledOver", "Rebalanced"}, reasons
