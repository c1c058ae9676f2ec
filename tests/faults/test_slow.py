"""A slow location: a TCP proxy on loopback in front of one child adds seconds to every
chunk it forwards. While the location is still Ready, lists through the hub answer within
the per-location timeout, naming it as timed out (not as not Ready: that would skip the
timeout altogether); once its probes mark it not Ready it is left out at once; the other
locations keep syncing as fast as ever; restored, it recovers.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator

import pytest

from kmc_testbed import bed
from kmc_testbed.slowproxy import SlowProxy, pointed_at
from tests.e2e.conftest import Kubectl
from tests.e2e.test_placement import wait_placement, with_strategy
from tests.e2e.test_testbed import deployment

SLOW = "eu-west"


def secret(hub: Kubectl) -> dict[str, object]:
    data: dict[str, object] = hub.json("get", "secret", f"location-{SLOW}", "-n", "kmc-system")
    return data


def point_at(hub: Kubectl, port: int) -> None:
    """Rewrite the location's kubeconfig Secret to reach its apiserver through `port`."""
    data = secret(hub)["data"]
    assert isinstance(data, dict)
    patch = json.dumps({"data": pointed_at(data, port)})
    hub.run("patch", "secret", f"location-{SLOW}", "-n", "kmc-system", "--type=merge", "-p", patch)


@pytest.fixture
def slow(installed: bed.State, kubectl: dict[str, Kubectl]) -> Iterator[SlowProxy]:
    """The location behind the proxy, as soon as kmc-apiserver reaches it through it (still
    Ready: its probes take seconds to time out twice)."""
    hub = kubectl["hub"]
    port = installed.cluster(SLOW).ports["apiserver"]
    with SlowProxy(port) as proxy:
        point_at(hub, proxy.port)
        try:
            deadline = time.monotonic() + 30
            while not proxy.connections:  # its client is rebuilt at the next probe
                assert time.monotonic() < deadline, f"{SLOW} is not reached through the proxy"
                time.sleep(0.05)
            yield proxy
        finally:
            point_at(hub, port)
    deadline = time.monotonic() + 60
    while not _ready(hub):
        assert time.monotonic() < deadline, f"{SLOW} did not come back"
        time.sleep(1)


def _ready(hub: Kubectl) -> bool:
    location = hub.json("get", "location", SLOW)
    conditions = location.get("status", {}).get("conditions", [])
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)


def test_a_slow_location_slows_nothing_else(
    installed: bed.State, kubectl: dict[str, Kubectl], namespace: str, slow: SlowProxy
) -> None:
    hub = kubectl["hub"]
    # Still Ready: asked, and left out by the per-location timeout.
    assert _ready(hub)
    started = time.monotonic()
    out = hub.run("get", "pods.remote.kmc.dev", "-n", namespace)
    took = time.monotonic() - started
    assert took < 3 + 1.5, f"the list took {took:.1f}s"
    assert f"location {SLOW} left out: no answer 3s after another location" in out.stderr, (
        out.stderr
    )
    # Its probes find it too slow: not Ready, and left out without being asked.
    deadline = time.monotonic() + 30
    while _ready(hub):
        assert time.monotonic() < deadline, f"{SLOW} stayed Ready behind the proxy"
        time.sleep(0.5)
    hub.apply(deployment("before", 3), namespace)
    wait_placement(hub, "deployment", "before", namespace)
    started = time.monotonic()
    out = hub.run("get", "pods.remote.kmc.dev", "-n", namespace)
    took = time.monotonic() - started
    assert took < 3 + 1.5, f"the list took {took:.1f}s"
    assert "Warning:" in out.stderr and SLOW in out.stderr
    pinned = with_strategy(deployment("fast", 2), {"type": "Split", "pin": ["us-east"]})
    started = time.monotonic()
    hub.apply(pinned, namespace)
    wait_placement(hub, "deployment", "fast", namespace, lambda p: p == {"us-east": 2})
    deadline = time.monotonic() + 15
    while (
        not kubectl["us-east"].run("get", "deployment", "fast", "-n", namespace, check=False).stdout
    ):
        assert time.monotonic() < deadline, "us-east was held up by the slow location"
        time.sleep(0.2)
    assert time.monotonic() - started < 15
