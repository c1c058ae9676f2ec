"""A full fleet: every child filled to its pod slots (3 kwok nodes of 110 pods) by pods made
directly in the children, then a Deployment scaled up on the hub. Its new replicas cannot run
anywhere, and moving them from one full location to another only makes them as stuck there
(#16 measured one Deployment changing placement 44 times in ten minutes). So: its placement
changes at most once in five minutes — the scale-up itself —, the `kmc.dev/Placed`
condition says `Unplaceable: no location has room for 3 replicas` with each location's
shortfall, and once a location frees room the waiting replicas go there, and stay there past
the capacity hold (moving back into a location still full is the flapping again).

Five minutes (`WINDOW`) is the issue's figure: on the bed it covers ten capacity holds
(30 s) and 37 grace periods (8 s), each of which once made a full fleet flap.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

from kmc_testbed import bed
from tests.e2e.conftest import CHILDREN, Kubectl
from tests.e2e.test_locations import wait_until
from tests.e2e.test_placement import events_of, placed_condition, placement_of, wait_placement
from tests.e2e.test_testbed import deployment

WINDOW = 300.0
FREED = "us-east"
MOVES = {"SpilledOver", "Evacuated", "Rebalanced"}


def pods_of(location: dict[str, Any]) -> tuple[int, int]:
    """(pod slots, pods running there) as its Location status counts them."""
    status = location.get("status", {})
    return int(status["allocatable"]["pods"]), int(status.get("requested", {}).get("pods", 0))


def assigned_pods(child: Kubectl) -> int:
    """Pods bound to the child's nodes and not finished, counted in the child itself: what
    its scheduler counts against the nodes' pod slots. The Location status counts the same
    but may be seconds old (a change of requests alone is written at most every 10 s), and
    topping up from an old count overfills: the extra fillers wait Pending, and a scale-down
    of the fill then removes those first and frees no slot."""
    names = child.run(
        "get",
        "pods",
        "-A",
        "--field-selector=spec.nodeName!=,status.phase!=Succeeded,status.phase!=Failed",
        "-o",
        "name",
    ).stdout.split()
    return len(names)


def locations(hub: Kubectl) -> dict[str, dict[str, Any]]:
    return {loc["metadata"]["name"]: loc for loc in hub.json("get", "locations")["items"]}


def filler(replicas: int) -> dict[str, Any]:
    """Pods that ask for nothing but a pod slot."""
    labels = {"app": "fill"}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "fill"},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {"containers": [{"name": "fill", "image": "registry.example/fill:1"}]},
            },
        },
    }


def nothing_terminating(kubectl: dict[str, Kubectl]) -> bool:
    """No namespace on its way out on the hub or in any child: an earlier test's pods that
    go during the window would free the room the test keeps full."""
    for cluster in ("hub", *CHILDREN):
        for ns in kubectl[cluster].json("get", "namespaces")["items"]:
            if ns.get("status", {}).get("phase") == "Terminating":
                return False
    return True


def top_up(child: Kubectl, fill: str, slots: int) -> bool:
    """Whether the child is full; if not, and the fill has settled, add the pods it is short.

    The first fill counts the pods running at that moment, some of which may be an earlier
    test's on their way out; once they are gone the child has room again. Adding only to a
    settled fill never overshoots: a Pending filler would take the room the test frees."""
    deployment = child.json("get", "deployment", "fill", "-n", fill)
    wanted = deployment["spec"]["replicas"]
    status = deployment.get("status", {})
    settled = (
        status.get("observedGeneration") == deployment["metadata"]["generation"]
        and status.get("replicas") == wanted
        and status.get("availableReplicas") == wanted
    )
    if not settled:
        return False
    running = assigned_pods(child)
    if running >= slots:
        return True
    child.run("scale", "deployment", "fill", "-n", fill, f"--replicas={wanted + slots - running}")
    return False


@pytest.fixture
def fill(namespace: str, kubectl: dict[str, Kubectl]) -> Iterator[str]:
    """A namespace of the children's own (not on the hub) for the fill, deleted with all its
    pods before the next test (the hub namespace's workload goes with it, checked at the end
    of the session like every test's)."""
    name = f"{namespace}-fill"
    for child in CHILDREN:
        kubectl[child].run("create", "namespace", name)
    try:
        yield name
    finally:
        for child in CHILDREN:
            kubectl[child].run("delete", "namespace", name, "--wait=false", check=False)
        for child in CHILDREN:
            kubectl[child].run("wait", "--for=delete", f"namespace/{name}", "--timeout=300s")


def test_a_full_fleet_holds_the_placement_and_says_what_is_short(
    installed: bed.State, kubectl: dict[str, Kubectl], namespace: str, fill: str
) -> None:
    hub = kubectl["hub"]
    wait_until("earlier tests' namespaces gone", lambda: nothing_terminating(kubectl), 600)
    hub.apply(deployment("web", 3), namespace)
    wait_placement(hub, "deployment", "web", namespace, lambda p: p == dict.fromkeys(CHILDREN, 1))
    wait_until(
        "web running in every child",
        lambda: all(pods_of(locations(hub)[child])[1] >= 1 for child in CHILDREN),
        timeout=60,
    )
    slots = {child: pods_of(locations(hub)[child])[0] for child in CHILDREN}
    for child in CHILDREN:
        kubectl[child].apply(filler(slots[child] - assigned_pods(kubectl[child])), fill)
    wait_until(
        "every child full",
        lambda: all([top_up(kubectl[child], fill, slots[child]) for child in CHILDREN]),
        timeout=600,
    )
    # Placement reads room from the Location status, which a change of requests alone reaches
    # up to 10 s later: scaled up before it says full, a stuck replica is moved after the
    # grace into room that is no longer there (a second change, CI stop 40).
    wait_until(
        "every Location's status full",
        lambda: all(
            (counts := pods_of(locations(hub)[child]))[1] >= counts[0] for child in CHILDREN
        ),
        timeout=120,
    )

    seen = [placement_of(hub, "deployment", "web", namespace)]
    hub.run("scale", "deployment", "web", "-n", namespace, "--replicas=6")
    messages: set[str] = set()
    started = time.monotonic()
    while time.monotonic() - started < WINDOW:
        placement = placement_of(hub, "deployment", "web", namespace)
        if placement != seen[-1]:
            seen.append(placement)
        condition = placed_condition(hub, "deployment", "web", namespace)
        if condition.get("reason") == "Unplaceable":
            messages.add(condition["message"])
        time.sleep(1)
    changes = len(seen) - 1
    print(f"placements over {WINDOW:.0f}s: {seen} ({changes} changes)")
    assert changes <= 1, f"the placement changed {changes} times: {seen}"
    assert seen[-1] == dict.fromkeys(CHILDREN, 2)  # the scale-up, pending everywhere
    moves = [e for e in events_of(hub, namespace, "web") if e["reason"] in MOVES]
    assert sum(e.get("count") or 1 for e in moves) <= len(CHILDREN), moves
    condition = placed_condition(hub, "deployment", "web", namespace)
    assert condition["status"] == "False" and condition["reason"] == "Unplaceable", condition
    message = condition["message"]
    assert message.startswith("no location has room for 3 replicas: "), message
    for child in CHILDREN:
        assert f"{child}: short of pods" in message, message
    print(f"condition messages seen: {sorted(messages)}")

    # Room freed in one location: the replicas waiting elsewhere go there…
    filled = kubectl[FREED].json("get", "deployment", "fill", "-n", fill)["spec"]["replicas"]
    kubectl[FREED].run("scale", "deployment", "fill", "-n", fill, f"--replicas={filled - 10}")
    expected = {name: 4 if name == FREED else 1 for name in CHILDREN}
    wait_placement(hub, "deployment", "web", namespace, lambda p: p == expected, timeout=120)
    wait_until(
        "web available",
        lambda: (
            hub.json("get", "deployment", "web", "-n", namespace)
            .get("status", {})
            .get("availableReplicas")
            == 6
        ),
        timeout=120,
    )
    condition = placed_condition(hub, "deployment", "web", namespace)
    assert condition["status"] == "True", condition
    # …and stay there past the hold of the locations they left, which are still full.
    held_until = time.monotonic() + bed.CAPACITY_HOLD + 2 * bed.GRACE + 5
    while time.monotonic() < held_until:
        assert placement_of(hub, "deployment", "web", namespace) == expected
        time.sleep(1)
