"""A mixed fleet on the real bed: the three push children and one pull child, added and removed
through the bed (`hack/testbed add NAME --pull`, here its Python API `install.add`), whose
agent is a component of the bed (`kmc-agent-NAME`) reaching the hub through a path the bed can
cut (`hub-path-NAME`).

- A Deployment spread over the push children spills over onto the pull location when it is
  added (its share arrives through the agent, its status is folded on the hub); `kubectl mc
  move` push to pull and pull to push ends with every replica in the target, none lost or
  doubled; removing the pull location (`remove`: unjoin, drained through its agent)
  coagulates its share back onto the push ones.
- The agent killed (SIGKILL) while 30 Deployments are being written to its cluster, and
  started again: each is there exactly once, none missing, none extra, statuses folded.
- The agent's path to the hub cut for a minute: its cluster keeps everything, the Location
  goes not Ready when its lease lapses, a change made on the hub meanwhile arrives once the
  path is back, and it is Ready again.
- The agent's watch of its feed (`workfeeds`, a real `watch` to the hub's aggregator) stays
  open for well over the aggregator's 60 s request timeout: kmc-apiserver counts no new
  watch of it for 110 s, while a change made on the hub meanwhile arrives through it.

A move between push and pull is not make-before-break yet (docs/pull.md, "Next steps" 1):
the moves here check where things end, not every step on the way.
"""

from __future__ import annotations

import base64
import json
import signal
import sys
import time
from collections.abc import Iterator
from typing import Any

import pytest

from bench.metrics import scrape
from kmc_testbed import bed, install

from .conftest import CHILDREN, Kubectl, run_testbed
from .test_agent import wait_until
from .test_placement import annotate, expect_placement, wait_locations_settled
from .test_pull_location import ready_is
from .test_testbed import deployment

NAME = "pull-fleet"
LABELS = {"topology.kubernetes.io/region": "edge"}
AGENT = f"{bed.AGENT}-{NAME}"
HUB_PATH = f"{bed.HUB_PATH}-{NAME}"
TIMEOUT = 240.0  # two cores shared by four clusters, kmc-apiserver, an agent and pytest
# Well past the hub's request timeout (60 s: what ended a feed watch while it was a `get` of
# `locations/<name>/work`), and well within the agent's own watch length (600 s).
OPEN_FOR = 110.0


def log(message: str) -> None:
    print(f"testbed: {message}", file=sys.stderr, flush=True)


class PullChild:
    """The pull child, added and removed through the bed's Python API."""

    def present(self) -> bool:
        state = bed.load()
        return state is not None and any(c.name == NAME for c in state.clusters)

    def add(self) -> None:
        if not self.present():
            install.add(NAME, dict(LABELS), log, pull=True)

    def remove(self) -> None:
        if self.present():
            install.remove(NAME, log)

    def ready(self, hub: Kubectl) -> None:
        """Added, and Ready from its agent's lease."""
        self.add()
        wait_until("Ready", ready_is(hub, NAME, "True", "AgentLease"), TIMEOUT)


@pytest.fixture(scope="module")
def pull_child(installed: bed.State) -> Iterator[PullChild]:
    """Removed before (a run that was killed) and after, however the tests end."""
    child = PullChild()
    child.remove()
    try:
        yield child
    finally:
        child.remove()


def fleet() -> dict[str, Kubectl]:
    return {name: Kubectl(name) for name in (*CHILDREN, NAME)}


def placement(hub: Kubectl, name: str, namespace: str) -> dict[str, int]:
    web = hub.json("get", "deployment", name, "-n", namespace)
    text = (web["metadata"].get("annotations") or {}).get("kmc.dev/placement") or "{}"
    return {k: v for k, v in json.loads(text).items() if v}


def held(clusters: dict[str, Kubectl], name: str, namespace: str) -> dict[str, int]:
    """spec.replicas of the child `name` in every cluster that holds one."""
    out = {}
    for location, cluster in clusters.items():
        found = cluster.run("get", "deployment", name, "-n", namespace, "-o", "json", check=False)
        if found.returncode == 0:
            out[location] = int(json.loads(found.stdout)["spec"]["replicas"])
    return out


def hub_ready(hub: Kubectl, name: str, namespace: str) -> int:
    web = hub.json("get", "deployment", name, "-n", namespace)
    return int((web.get("status") or {}).get("readyReplicas") or 0)


def pull_row(hub: Kubectl, name: str, namespace: str) -> dict[str, Any]:
    sub = ("deployments.mc.kmc.dev", name, "-n", namespace, "--subresource", "locations")
    rows = {row["location"]: row for row in hub.json("get", *sub)["locations"]}
    return rows.get(NAME) or {}


def settled_as(hub: Kubectl, namespace: str, replicas: int, where: Any) -> Any:
    """A check: the placement, what the clusters hold and the hub's folded status agree, with
    every replica ready and none doubled, and `where(placement)` holds."""
    clusters = fleet()

    def check() -> tuple[Any, str | None]:
        placed = placement(hub, "web", namespace)
        there = held(clusters, "web", namespace)
        ready = hub_ready(hub, "web", namespace)
        seen = {"placement": placed, "held": there, "hub ready": ready}
        if (
            where(placed)
            and there == placed
            and sum(there.values()) == replicas
            and ready == replicas
        ):
            return seen, None
        return seen, f"not settled: {seen}"

    return check


def assert_no_credential_on_the_hub(hub: Kubectl) -> None:
    """kmc-apiserver was given nothing of the pull child: no Secret names it, and none holds
    its server's address (its kubeconfig's) or any of its credentials."""
    state = bed.load()
    assert state is not None
    child = state.cluster(NAME)
    location = hub.json("get", "location", NAME)
    assert location["spec"].get("mode") == "Pull", location["spec"]
    assert "secretRef" not in location["spec"], location["spec"]
    admin_key = (child.folder / "pki" / "admin.key").read_text()
    for secret in hub.json("get", "secrets", "-A")["items"]:
        meta = secret["metadata"]
        labels = meta.get("labels") or {}
        if meta["namespace"] == "kmc-system":
            assert labels.get("kmc.dev/location") != NAME, meta
            assert NAME not in meta["name"], meta
        for value in (secret.get("data") or {}).values():
            text = base64.b64decode(value).decode(errors="replace")
            assert child.server not in text, meta
            assert admin_key not in text, meta
    kmc_config = bed.kmc_kubeconfig().read_text()
    assert child.server not in kmc_config and f"name: {NAME}" not in kmc_config


def test_a_deployment_spills_onto_a_pull_location_moves_to_it_and_back_and_coagulates(
    pull_child: PullChild, kubectl: dict[str, Kubectl], namespace: str
) -> None:
    hub = kubectl["hub"]
    pull_child.remove()  # (another test of this module may have added it)
    wait_locations_settled(hub)
    hub.apply(deployment("web", 6), namespace)
    expect_placement(
        hub, "deployment", "web", namespace, {"eu-west": 2, "us-east": 2, "us-west": 2}
    )

    # Added: joined in pull mode, its agent running as a component of the bed, and
    # kmc-apiserver given nothing of it.
    pull_child.add()
    state = bed.load()
    assert state is not None and state.cluster(NAME).mode == bed.PULL
    assert bed.alive(state, AGENT) and bed.alive(state, HUB_PATH)
    assert_no_credential_on_the_hub(hub)
    status = run_testbed("status").stdout
    assert any(line.split()[:1] == [AGENT] and "up" in line.split() for line in status.splitlines())

    # Spilled over onto it: its share there, written by its agent, folded on the hub.
    wait_until(
        "web spilled over onto the pull location",
        settled_as(hub, namespace, 6, lambda p: p.get(NAME, 0) > 0 and len(p) == 4),
        TIMEOUT,
    )

    def synced_row() -> tuple[Any, str | None]:
        row = pull_row(hub, "web", namespace)
        share = placement(hub, "web", namespace).get(NAME)
        seen = (row.get("state"), row.get("ready"), share)
        return seen, None if seen == ("Synced", share, share) else f"{NAME}'s row: {row}"

    wait_until("the pull location's row folded from its agent's report", synced_row, TIMEOUT)

    # Push to pull: everything ends in the pull location, nothing lost or doubled.
    hub.mc("move", "deployment/web", "--to", NAME, "-n", namespace)
    wait_until(
        "web moved to the pull location",
        settled_as(hub, namespace, 6, lambda p: p == {NAME: 6}),
        TIMEOUT,
    )
    # And back, pull to push.
    hub.mc("move", "deployment/web", "--to", "us-east", "-n", namespace)
    wait_until(
        "web moved back to us-east",
        settled_as(hub, namespace, 6, lambda p: p == {"us-east": 6}),
        TIMEOUT,
    )

    # Spread over all four again, then the pull location removed: its share coagulates onto
    # the push ones.
    annotate(hub, "deployment", "web", namespace, 'kmc.dev/strategy={"type": "Split"}')
    wait_until(
        "web spread over all four locations",
        settled_as(hub, namespace, 6, lambda p: p.get(NAME, 0) > 0 and len(p) == 4),
        TIMEOUT,
    )
    pull_child.remove()
    assert hub.run("get", "location", NAME, check=False).returncode != 0
    clusters = fleet()
    del clusters[NAME]

    def coagulated() -> tuple[Any, str | None]:
        placed = placement(hub, "web", namespace)
        there = held(clusters, "web", namespace)
        ready = hub_ready(hub, "web", namespace)
        seen = {"placement": placed, "held": there, "hub ready": ready}
        ok = set(placed) == set(CHILDREN) and there == placed and ready == 6
        return seen, None if ok and sum(there.values()) == 6 else f"not coagulated: {seen}"

    wait_until("web coagulated onto the push locations", coagulated, TIMEOUT)
    # Nothing of its join is left on the hub.
    assert hub.run("get", "clusterrole", f"kmc:location:{NAME}", check=False).returncode != 0
    lease = hub.run("get", "lease", f"kmc-agent-{NAME}", "-n", "kmc-system", check=False)
    assert lease.returncode != 0


def pinned(name: str, replicas: int) -> dict[str, Any]:
    obj = deployment(name, replicas)
    obj["metadata"]["annotations"] = {
        "kmc.dev/strategy": json.dumps({"type": "Split", "pin": [NAME]})
    }
    return obj


def stop(component: str) -> None:
    """`hack/testbed stop COMPONENT` (SIGKILL), in this process: a new `hack/testbed` process
    takes a second to start, and the agent writes many objects in a second."""
    with bed.locked():
        state = bed.load()
        assert state is not None
        bed.kill(state, component, signal.SIGKILL)


def ours_in_child(namespace: str) -> dict[str, dict[str, Any]]:
    """Our Deployments in the pull child, straight from its API server (fast enough to catch
    the agent mid-sync)."""
    state = bed.load()
    assert state is not None
    path = f"/apis/apps/v1/namespaces/{namespace}/deployments?labelSelector=kmc.dev/origin-uid"
    resp = bed.admin_client(state.cluster(NAME)).request("GET", path, timeout=10.0)
    if resp.status == 404:
        return {}
    assert resp.status == 200, resp.body[:300]
    return {d["metadata"]["name"]: d for d in resp.json()["items"]}


def test_the_agent_killed_mid_sync_and_restarted_leaves_each_object_exactly_once(
    pull_child: PullChild, kubectl: dict[str, Kubectl], namespace: str
) -> None:
    hub = kubectl["hub"]
    pull_child.add()
    cluster = Kubectl(NAME)
    names = [f"web-{i:02d}" for i in range(30)]
    listing = {"apiVersion": "v1", "kind": "List", "items": [pinned(n, 1) for n in names]}
    hub.run("apply", "-n", namespace, "-f", "-", stdin=json.dumps(listing))

    # Killed as soon as the first of them is written there.
    deadline = time.monotonic() + TIMEOUT
    while not (written := ours_in_child(namespace)):
        assert time.monotonic() < deadline, "the agent wrote none of the 30 Deployments"
        time.sleep(0.05)
    stop(AGENT)
    at_kill = len(ours_in_child(namespace))
    assert 0 < at_kill < len(names), f"not killed mid-sync: {at_kill} of 30 written"
    log(f"agent killed with {at_kill} of 30 written ({sorted(written)[:3]}…)")

    # While it is down the hub changes: two removed, two added, one scaled.
    hub.run("delete", "deployment", names[0], names[-1], "-n", namespace, "--wait=false")
    extra = [pinned("late-a", 1), pinned("late-b", 1)]
    hub.run("apply", "-n", namespace, "-f", "-", stdin=json.dumps({**listing, "items": extra}))
    hub.run("scale", "deployment", names[5], "--replicas=2", "-n", namespace)
    wanted = {n: 1 for n in names[1:-1]} | {"late-a": 1, "late-b": 1, names[5]: 2}

    run_testbed("start", AGENT)

    def exactly_once() -> tuple[Any, str | None]:
        there = ours_in_child(namespace)
        replicas = {n: int(d["spec"]["replicas"]) for n, d in there.items()}
        missing = sorted(set(wanted) - set(replicas))
        extra_ = sorted(set(replicas) - set(wanted))
        wrong = {n: r for n, r in replicas.items() if n in wanted and r != wanted[n]}
        if missing or extra_ or wrong:
            return replicas, f"missing {missing}, extra {extra_}, wrong replicas {wrong}"
        # Exactly once: one ReplicaSet per Deployment and exactly the pods asked for.
        sets = cluster.json("get", "replicasets", "-n", namespace)["items"]
        owners = [s["metadata"]["ownerReferences"][0]["name"] for s in sets]
        doubled = sorted({o for o in owners if owners.count(o) > 1})
        pods = cluster.json("get", "pods", "-n", namespace)["items"]
        if doubled or len(pods) != sum(wanted.values()):
            return replicas, f"ReplicaSets doubled for {doubled}; {len(pods)} pods"
        return replicas, None

    wait_until("each Deployment exactly once in the pull child", exactly_once, TIMEOUT)

    def folded() -> tuple[Any, str | None]:
        items = hub.json("get", "deployments", "-n", namespace)["items"]
        ready = {d["metadata"]["name"]: (d.get("status") or {}).get("readyReplicas") for d in items}
        behind = {n: r for n, r in ready.items() if r != wanted.get(n)}
        return ready, None if not behind and set(ready) == set(wanted) else f"behind: {behind}"

    wait_until("every status folded on the hub", folded, TIMEOUT)


def test_the_hub_unreachable_for_a_minute_deletes_nothing_and_catches_up_after(
    pull_child: PullChild, kubectl: dict[str, Kubectl], namespace: str
) -> None:
    hub = kubectl["hub"]
    pull_child.ready(hub)
    hub.apply(pinned("web", 2), namespace)
    wait_until("web in the pull child", settled_as(hub, namespace, 2, lambda p: p == {NAME: 2}))
    before = ours_in_child(namespace)["web"]["metadata"]["uid"]

    run_testbed("stop", HUB_PATH)  # the agent's way to the hub, cut; the agent keeps running
    cut = time.monotonic()
    try:
        wait_until(
            "not Ready once its lease lapses", ready_is(hub, NAME, "False", "AgentLeaseExpired")
        )
        # A change made on the hub meanwhile: scaled, and a new Deployment.
        hub.run("scale", "deployment", "web", "--replicas=3", "-n", namespace)
        hub.apply(pinned("late", 1), namespace)
        while time.monotonic() - cut < 60:
            there = ours_in_child(namespace)
            assert set(there) == {"web"}, sorted(there)
            assert there["web"]["metadata"]["uid"] == before
            assert there["web"]["spec"]["replicas"] == 2
            state = bed.load()
            assert state is not None and bed.alive(state, AGENT), "the agent exited"
            time.sleep(2)
    finally:
        run_testbed("start", HUB_PATH)

    wait_until("Ready again", ready_is(hub, NAME, "True", "AgentLease"), TIMEOUT)
    wait_until(
        "the change made meanwhile arrived",
        settled_as(hub, namespace, 3, lambda p: p == {NAME: 3}),
        TIMEOUT,
    )

    def late_arrived() -> tuple[Any, str | None]:
        there = ours_in_child(namespace)
        ready = hub_ready(hub, "late", namespace)
        ok = "late" in there and ready == 1
        return sorted(there), None if ok else f"late: {sorted(there)}, hub ready {ready}"

    wait_until("the new Deployment arrived", late_arrived, TIMEOUT)
    assert ours_in_child(namespace)["web"]["metadata"]["uid"] == before, "web was made anew"


def test_a_pull_location_whose_agent_stops_is_evacuated_onto_a_push_one_and_gets_it_back(
    pull_child: PullChild, kubectl: dict[str, Kubectl], namespace: str
) -> None:
    hub = kubectl["hub"]
    pull_child.ready(hub)
    web = deployment("web", 4)
    web["metadata"]["annotations"] = {
        "kmc.dev/strategy": json.dumps({"type": "Split", "pin": [NAME, "us-east"]})
    }
    hub.apply(web, namespace)
    wait_until(
        "split 2+2 across pull and push",
        settled_as(hub, namespace, 4, lambda p: p == {NAME: 2, "us-east": 2}),
        TIMEOUT,
    )

    run_testbed("stop", AGENT)
    try:
        wait_until(
            "not Ready once its lease lapses", ready_is(hub, NAME, "False", "AgentLeaseExpired")
        )

        # Past the grace its share goes to us-east; its cluster, with no agent, keeps its copy.
        def evacuated() -> tuple[Any, str | None]:
            placed = placement(hub, "web", namespace)
            there = held({"us-east": kubectl["us-east"]}, "web", namespace)
            seen = (placed, there)
            return seen, None if placed == {"us-east": 4} == there else f"{seen}"

        wait_until("evacuated onto us-east", evacuated, TIMEOUT)
        assert ours_in_child(namespace)["web"]["spec"]["replicas"] == 2
    finally:
        run_testbed("start", AGENT)
    # Back: Ready, and after the cooldown its share returns, written by its agent.
    wait_until("Ready again", ready_is(hub, NAME, "True", "AgentLease"), TIMEOUT)
    wait_until(
        "the share back in the pull location",
        settled_as(hub, namespace, 4, lambda p: p == {NAME: 2, "us-east": 2}),
        TIMEOUT,
    )


def feed_watches() -> tuple[float, float]:
    """kmc-apiserver's count of the pull child's feed watches: (opened so far, open now)."""
    samples = scrape()
    label = f'{{location="{NAME}"}}'
    opened = samples.get(f"kmc_feed_watches_total{label}", 0.0)
    return opened, samples.get(f"kmc_feed_watches_open{label}", 0.0)


def test_the_agents_feed_watch_stays_open_past_the_hubs_request_timeout(
    pull_child: PullChild, kubectl: dict[str, Kubectl], namespace: str
) -> None:
    hub = kubectl["hub"]
    pull_child.ready(hub)
    hub.apply(pinned("web", 1), namespace)
    wait_until("web in the pull child", settled_as(hub, namespace, 1, lambda p: p == {NAME: 1}))
    # A fresh watch, at a known time: the agent restarted (it watches for 600 s at a time,
    # and this one must not reach its own end during the window).
    before, _ = feed_watches()
    run_testbed("stop", AGENT)
    run_testbed("start", AGENT)

    def one_open() -> tuple[Any, str | None]:
        opened, open_now = feed_watches()
        if opened > before and open_now == 1:
            return opened, None
        return opened, f"{opened - before:.0f} feed watches opened since, {open_now:.0f} open"

    # The restarted agent's watch opened, and the killed one's ended on the server (at its
    # next write: a bookmark, within 30 s).
    opened = wait_until("one feed watch open, the restarted agent's", one_open, TIMEOUT)
    wait_until("Ready from the restarted agent", ready_is(hub, NAME, "True", "AgentLease"))
    start = time.monotonic()
    scaled = False
    while (elapsed := time.monotonic() - start) < OPEN_FOR:
        now = feed_watches()
        assert now == (opened, 1), (
            f"{elapsed:.0f} s in: {now[0] - opened:.0f} new feed watches, {now[1]:.0f} open"
        )
        if not scaled and elapsed > 65:  # past the old timeout: the same watch carries it
            hub.run("scale", "deployment", "web", "--replicas=2", "-n", namespace)
            scaled = True
        time.sleep(5)
    wait_until("the change arrived", settled_as(hub, namespace, 2, lambda p: p == {NAME: 2}))
    assert feed_watches() == (opened, 1), "the change came over a new watch"
