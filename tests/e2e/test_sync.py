"""The sync loop on the real test bed: children made to match, status folded up, moves made
before breaks, drift undone, cleanup on delete, outages survived.

A user's view is checked with the real kubectl (`rollout status`, `wait`); the make-before-
break guarantee is sampled every 100 ms straight from the children's apiservers.
"""

from __future__ import annotations

import http.client
import json
import ssl
import threading
import time
import uuid
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from kmc_testbed import bed
from kmc_testbed.apiclient import Client

from .conftest import CHILDREN, Kubectl, refused_since, run_testbed
from .test_locations import wait_until
from .test_placement import events_of, wait_locations_settled, wait_placement, with_strategy
from .test_testbed import deployment, job


def child_objects(
    kubectl: dict[str, Kubectl], kind: str, name: str, namespace: str
) -> dict[str, Any]:
    """The child that holds `kind/name`, by location, for every location that has one."""
    found = {}
    for child in CHILDREN:
        proc = kubectl[child].run("get", kind, name, "-n", namespace, "-o", "json", check=False)
        if proc.returncode == 0:
            found[child] = json.loads(proc.stdout)
    return found


def child_deployments(kubectl: dict[str, Kubectl], name: str, namespace: str) -> dict[str, Any]:
    return child_objects(kubectl, "deployment", name, namespace)


def wait_children(
    kubectl: dict[str, Kubectl], name: str, namespace: str, ok: Any, timeout: float = 60
) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        children = child_deployments(kubectl, name, namespace)
        if ok(children):
            return children
        assert time.monotonic() < deadline, {
            k: (v["spec"]["replicas"], v.get("status", {}).get("availableReplicas"))
            for k, v in children.items()
        }
        time.sleep(0.5)


def shares(children: dict[str, Any]) -> dict[str, int]:
    return {loc: child["spec"]["replicas"] for loc, child in children.items()}


def test_a_deployment_runs_in_the_children_and_the_hub_tells_the_truth(
    installed: bed.State, kubectl: dict[str, Kubectl], namespace: str
) -> None:
    hub = kubectl["hub"]
    wait_locations_settled(hub)
    hub.apply(deployment("web", 6), namespace)
    hub.run("rollout", "status", "deployment/web", "-n", namespace, "--timeout=120s")
    hub.run("wait", "--for=condition=Available", "deployment/web", "-n", namespace, "--timeout=60s")
    placement = wait_placement(hub, "deployment", "web", namespace)
    children = child_deployments(kubectl, "web", namespace)
    assert shares(children) == placement and sum(placement.values()) == 6  # type: ignore[arg-type]
    uid = hub.json("get", "deployment", "web", "-n", namespace)["metadata"]["uid"]
    for location, child in children.items():
        meta = child["metadata"]
        assert not [k for k in meta.get("annotations", {}) if k.startswith("kmc.dev/")]
        assert [k for k in meta.get("labels", {}) if k.startswith("kmc.dev/")] == [
            "kmc.dev/origin-uid"
        ]
        assert meta["labels"]["kmc.dev/origin-uid"] == uid
        pods = kubectl[location].json("get", "pods", "-n", namespace, "-l", "app=web")["items"]
        assert [p["status"]["phase"] for p in pods] == ["Running"] * placement[location]  # type: ignore[operator]
    status = hub.json("get", "deployment", "web", "-n", namespace)["status"]
    assert status["readyReplicas"] == status["availableReplicas"] == 6
    # A new image rolls out everywhere; the hub waits for every location to observe it.
    hub.run("set", "image", "deployment/web", "web=registry.example/web:2", "-n", namespace)
    generation = hub.json("get", "deployment", "web", "-n", namespace)["metadata"]["generation"]
    hub.run("rollout", "status", "deployment/web", "-n", namespace, "--timeout=120s")
    hub_obj = hub.json("get", "deployment", "web", "-n", namespace)
    assert hub_obj["status"]["observedGeneration"] == generation
    for child in child_deployments(kubectl, "web", namespace).values():
        image = child["spec"]["template"]["spec"]["containers"][0]["image"]
        assert image == "registry.example/web:2"
        assert child["status"]["updatedReplicas"] == child["spec"]["replicas"]


def web_of_three_in_every_child(kubectl: dict[str, Kubectl], namespace: str) -> dict[str, Any]:
    """A Deployment of 3 on the hub, placed one per child and synced there; its placement."""
    hub = kubectl["hub"]
    hub.apply(deployment("web", 3), namespace)
    placement = wait_placement(hub, "deployment", "web", namespace, lambda p: len(p) == 3)
    wait_children(kubectl, "web", namespace, lambda c: shares(c) == placement)
    return placement


def test_hand_edits_and_deletions_in_a_child_are_undone(
    installed: bed.State, kubectl: dict[str, Kubectl], namespace: str
) -> None:
    placement = web_of_three_in_every_child(kubectl, namespace)
    kubectl["us-east"].run("scale", "deployment/web", "-n", namespace, "--replicas=7")
    kubectl["eu-west"].run("delete", "deployment/web", "-n", namespace)
    started = time.monotonic()
    wait_children(kubectl, "web", namespace, lambda c: shares(c) == placement, timeout=20)
    assert time.monotonic() - started < 20


def test_a_configmap_is_exactly_where_its_deployment_runs(
    installed: bed.State, kubectl: dict[str, Kubectl], namespace: str
) -> None:
    hub = kubectl["hub"]
    hub.run("create", "configmap", "settings", "-n", namespace, "--from-literal=MODE=fast")
    web = deployment("web", 2)
    web["spec"]["template"]["spec"]["containers"][0]["envFrom"] = [
        {"configMapRef": {"name": "settings"}}
    ]
    us = {
        "type": "Split",
        "locationSelector": {"matchLabels": {"topology.kubernetes.io/region": "us"}},
    }
    hub.apply(with_strategy(web, us), namespace)
    hub.run("rollout", "status", "deployment/web", "-n", namespace, "--timeout=120s")
    for child in CHILDREN:
        found = kubectl[child].run("get", "configmap", "settings", "-n", namespace, check=False)
        assert (found.returncode == 0) == (child != "eu-west"), child
    cm = kubectl["us-east"].json("get", "configmap", "settings", "-n", namespace)
    assert cm["data"] == {"MODE": "fast"}


@dataclass(frozen=True)
class Sample:
    at: float  # time.monotonic() when the pass began
    total: int  # availableReplicas summed over every child
    spread: float  # seconds between the first child's answer and the last one's


class _Reader:
    """One child's Deployment, read over a kept-alive connection (no handshake per read, so
    the children's answers land close together)."""

    def __init__(self, client: Client, path: str) -> None:
        self.client, self.path = client, path
        self.conn: http.client.HTTPSConnection | None = None

    def _connect(self) -> http.client.HTTPSConnection:
        context = ssl.create_default_context(cafile=str(self.client.ca))
        context.load_cert_chain(str(self.client.cert), str(self.client.key))
        return http.client.HTTPSConnection(
            self.client.host, self.client.port, context=context, timeout=5
        )

    def read(self) -> tuple[int, float]:
        """(availableReplicas — 0 when the child does not exist —, when the answer came)."""
        for attempt in (1, 2):
            if self.conn is None:
                self.conn = self._connect()
            try:
                self.conn.request("GET", self.path)
                resp = self.conn.getresponse()
                body = resp.read()
                break
            except (OSError, http.client.HTTPException):
                self.conn.close()
                self.conn = None
                if attempt == 2:
                    raise
        answered = time.monotonic()
        if resp.status == 404:
            return 0, answered
        if resp.status != 200:
            raise OSError(f"GET {self.path}: {resp.status}")
        obj = json.loads(body)
        return int(obj.get("status", {}).get("availableReplicas") or 0), answered

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()


class AvailabilitySampler:
    """Sum of availableReplicas over every child, read every `period` seconds.

    Each pass reads all children at once (a thread each), and every pass is recorded with the
    spread of its read times: a sum is a snapshot to within that spread. (An earlier sampler
    kept a pass only when nothing had changed since the one before, so a dip in the middle of
    a move was never sampled.) `begin`/`end` mark the move; `during` is what was sampled
    between them, and a move counts as checked only with samples there.
    """

    def __init__(
        self,
        name: str,
        namespace: str,
        period: float = 0.1,
        clusters: Sequence[str] = CHILDREN,
    ) -> None:
        path = f"/apis/apps/v1/namespaces/{namespace}/deployments/{name}"
        state = bed.load()
        assert state is not None
        self.readers = [_Reader(bed.admin_client(state.cluster(c)), path) for c in clusters]
        self.period = period
        self.taken: list[Sample] = []
        self.failed = 0  # passes in which a child could not be read (not sampled)
        self.began: float | None = None
        self.ended: float | None = None
        self._stop = threading.Event()
        self._pool = ThreadPoolExecutor(max_workers=len(self.readers))
        self.thread = threading.Thread(target=self._run, daemon=True)

    @property
    def samples(self) -> list[int]:
        return [sample.total for sample in self.taken]

    def begin(self) -> None:
        self.began = time.monotonic()

    def end(self) -> None:
        self.ended = time.monotonic()

    @property
    def during(self) -> list[Sample]:
        assert self.began is not None and self.ended is not None, "begin() and end() the move"
        return [s for s in self.taken if self.began <= s.at <= self.ended]

    def report(self) -> str:
        during = self.during if self.began is not None and self.ended is not None else []
        spread = max((s.spread for s in self.taken), default=0.0)
        return (
            f"{len(self.taken)} samples ({len(during)} during the move, min "
            f"{min((s.total for s in during), default=None)}), read spread <= "
            f"{spread * 1000:.0f} ms, {self.failed} failed passes: {self.samples}"
        )

    def _run(self) -> None:
        start = time.monotonic()
        tick = 0
        while not self._stop.is_set():
            at = time.monotonic()
            try:
                answers = list(self._pool.map(lambda r: r.read(), self.readers))
            except (OSError, http.client.HTTPException, ValueError):
                self.failed += 1
            else:
                times = [answered for _, answered in answers]
                total = sum(count for count, _ in answers)
                self.taken.append(Sample(at, total, max(times) - min(times)))
            tick = max(tick + 1, int((time.monotonic() - start) / self.period) + 1)
            self._stop.wait(max(0.0, start + tick * self.period - time.monotonic()))

    def __enter__(self) -> AvailabilitySampler:
        if not self.thread.is_alive():  # already sampling when handed over by roll_out_then_pin
            self.thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self.thread.join()
        self._pool.shutdown()
        for reader in self.readers:
            reader.close()


def moving(replicas: int, max_unavailable: int) -> dict[str, Any]:
    web = deployment("web", replicas)
    web["spec"]["strategy"] = {
        "type": "RollingUpdate",
        "rollingUpdate": {"maxUnavailable": max_unavailable, "maxSurge": 1},
    }
    return web


def roll_out_then_pin(
    hub: Kubectl, namespace: str, max_unavailable: int, location: str
) -> AvailabilitySampler:
    """A Deployment of 6 running, then a sampler started and the Deployment pinned elsewhere."""
    wait_locations_settled(hub)
    hub.apply(moving(6, max_unavailable), namespace)
    hub.run("rollout", "status", "deployment/web", "-n", namespace, "--timeout=120s")
    # At 20 ms: with quiet hub writes a move on an idle bed takes well under a second.
    sampler = AvailabilitySampler("web", namespace, period=0.02).__enter__()
    pin = json.dumps({"type": "Split", "pin": [location]})
    sampler.begin()
    hub.run("annotate", "deployment/web", "-n", namespace, f"kmc.dev/strategy={pin}")
    return sampler


def test_a_move_never_drops_below_what_the_rollout_strategy_allows(
    installed: bed.State, kubectl: dict[str, Kubectl], namespace: str
) -> None:
    hub = kubectl["hub"]
    with roll_out_then_pin(hub, namespace, 1, "eu-west") as sampler:
        wait_children(kubectl, "web", namespace, lambda c: shares(c) == {"eu-west": 6}, timeout=120)
        sampler.end()
        hub.run("rollout", "status", "deployment/web", "-n", namespace, "--timeout=60s")
    # Checked only with samples taken while it moved: at 20 ms, a move of 0.1 s or more.
    assert len(sampler.during) >= 5, sampler.report()
    assert min(sampler.samples) >= 6 - 1, sampler.report()
    # The move showed on the hub object while it lasted, and ended.
    reasons = [
        e["reason"]
        for e in hub.json("get", "events", "-n", namespace)["items"]
        if e["involvedObject"]["name"] == "web"
    ]
    assert "Moving" in reasons and "Moved" in reasons, reasons
    synced = next(
        c
        for c in hub.json("get", "deployment", "web", "-n", namespace)["status"]["conditions"]
        if c["type"] == "kmc.dev/Synced"
    )
    assert synced["status"] == "True", synced
    assert hub.json("get", "deployment", "web", "-n", namespace)["status"]["availableReplicas"] == 6


def test_a_move_survives_kmc_apiserver_being_killed_midway(
    installed: bed.State, kubectl: dict[str, Kubectl], namespace: str
) -> None:
    hub = kubectl["hub"]
    with roll_out_then_pin(hub, namespace, 0, "us-west") as sampler:
        # Kill it as soon as the move has begun (us-west grew, others not yet gone).
        wait_children(
            kubectl,
            "web",
            namespace,
            lambda c: c.get("us-west", {}).get("spec", {}).get("replicas") == 6,
        )
        run_testbed("stop", bed.KMC)
        time.sleep(1)
        run_testbed("start", bed.KMC)
        wait_children(kubectl, "web", namespace, lambda c: shares(c) == {"us-west": 6}, timeout=120)
        sampler.end()
    assert len(sampler.during) >= 5, sampler.report()
    assert min(sampler.samples) >= 6, sampler.report()
    # Nothing lost, nothing doubled: one child, with the hub's uid, holding all 6.
    pods = kubectl["us-west"].json("get", "pods", "-n", namespace, "-l", "app=web")["items"]
    assert len(pods) == 6


def test_deleting_the_hub_object_removes_the_children_first(
    installed: bed.State, kubectl: dict[str, Kubectl], namespace: str
) -> None:
    hub = kubectl["hub"]
    web_of_three_in_every_child(kubectl, namespace)
    assert (
        "kmc.dev/cleanup"
        in hub.json("get", "deployment", "web", "-n", namespace)["metadata"]["finalizers"]
    )
    hub.run("delete", "deployment", "web", "-n", namespace, "--timeout=60s")
    assert child_deployments(kubectl, "web", namespace) == {}


def test_a_stopped_child_does_not_hold_up_the_others_and_catches_up(
    installed: bed.State, kubectl: dict[str, Kubectl], namespace: str
) -> None:
    hub = kubectl["hub"]
    wait_locations_settled(hub)
    run_testbed("stop", "us-west")
    try:
        hub.apply(deployment("web", 4), namespace)
        # The others converge while us-west is away.
        wait_children(
            kubectl,
            "web",
            namespace,
            lambda c: (
                {"us-east", "eu-west"} <= set(c)
                and all(
                    v.get("status", {}).get("availableReplicas") == v["spec"]["replicas"]
                    for v in c.values()
                )
            ),
        )
    finally:
        run_testbed("start", "us-west")

    # Back, it catches up: every placed location holds exactly its share.
    def converged(children: dict[str, Any]) -> bool:
        placement = json.loads(
            hub.json("get", "deployment", "web", "-n", namespace)["metadata"]["annotations"][
                "kmc.dev/placement"
            ]
        )
        return "us-west" in placement and shares(children) == placement

    wait_children(kubectl, "web", namespace, converged, timeout=90)
    # The child's own controller-manager takes up to a minute to resume after its apiserver
    # comes back (client-go's watch backoff); the hub reports it truthfully meanwhile.
    hub.run("rollout", "status", "deployment/web", "-n", namespace, "--timeout=150s")


def test_a_hub_restart_is_recovered_without_restarting_kmc_apiserver(
    installed: bed.State, kubectl: dict[str, Kubectl], namespace: str
) -> None:
    hub = kubectl["hub"]
    state = bed.load()
    assert state is not None
    kmc_pid = state.pids[bed.KMC]
    audit = bed.audit_log()
    start = audit.stat().st_size if audit.exists() else 0
    run_testbed("stop", "hub")
    time.sleep(2)  # every watch on the hub breaks
    run_testbed("start", "hub")
    hub.apply(deployment("after", 3), namespace)
    hub.run("rollout", "status", "deployment/after", "-n", namespace, "--timeout=90s")
    after = bed.load()
    assert after is not None and after.pids[bed.KMC] == kmc_pid
    assert bed.pid_running(kmc_pid)
    # The restarted hub refuses what it allows once its RBAC caches are filled; what it
    # refused kmc-apiserver then is allowed again by its next write of the kind (a Location's
    # status may wait for its minute's refresh).
    wait_until(
        "every write refused while the hub started allowed again",
        lambda: not refused_since(audit, start, bed.KMC_USER),
        timeout=180,
    )


def test_unjoin_drains_the_location_first(
    installed: bed.State, kubectl: dict[str, Kubectl], namespace: str
) -> None:
    hub = kubectl["hub"]
    run_testbed("add", "ap-east", "--labels", "topology.kubernetes.io/region=ap")
    try:
        run_testbed("install")
        wait_locations_settled(hub)
        pinned = {"type": "Split", "pin": ["ap-east", "us-east"]}
        hub.apply(with_strategy(moving(4, 0), pinned), namespace)
        hub.run("rollout", "status", "deployment/web", "-n", namespace, "--timeout=90s")
        ap_east = Kubectl("ap-east")
        assert ap_east.json("get", "deployment", "web", "-n", namespace)["spec"]["replicas"] == 2
        out = hub.mc("unjoin", "ap-east", "--timeout=90s")
        lines = out.stdout.splitlines()
        assert lines[0] == "location.kmc.dev/ap-east cordoned"
        assert lines[-1] == "location.kmc.dev/ap-east unjoined"
        assert "draining ap-east: 0 objects left" in lines
        # Everything moved out before the location was let go, and the hub never lost it.
        gone = ap_east.run("get", "deployment", "web", "-n", namespace, check=False)
        assert gone.returncode == 1 and "NotFound" in gone.stderr
        assert (
            kubectl["us-east"].json("get", "deployment", "web", "-n", namespace)["spec"]["replicas"]
            == 4
        )
        hub.run(
            "wait", "--for=condition=Available", "deployment/web", "-n", namespace, "--timeout=30s"
        )
    finally:
        run_testbed("remove", "ap-east")


def test_a_child_namespace_deleted_by_hand_comes_back_with_its_objects(
    installed: bed.State, kubectl: dict[str, Kubectl], namespace: str
) -> None:
    placement = web_of_three_in_every_child(kubectl, namespace)
    kubectl["us-east"].run("delete", "namespace", namespace, "--timeout=60s")
    wait_children(kubectl, "web", namespace, lambda c: shares(c) == placement, timeout=60)


def test_deleting_the_hub_namespace_removes_the_child_namespaces_we_made(
    installed: bed.State, kubectl: dict[str, Kubectl]
) -> None:
    """A namespace the sync loop made in a child goes with the hub's; one that a person made
    there first stays (its objects of ours go all the same)."""
    hub = kubectl["hub"]
    name = f"test-namespace-cleanup-{uuid.uuid4().hex[:5]}"
    hub.run("create", "namespace", name)
    kubectl["us-east"].run("create", "namespace", name)
    try:
        wait_locations_settled(hub)
        hub.apply(deployment("web", 3), name)
        wait_children(kubectl, "web", name, lambda c: len(c) == 3)
        uid = hub.json("get", "namespace", name)["metadata"]["uid"]
        labels = {
            child: kubectl[child].json("get", "namespace", name)["metadata"].get("labels", {})
            for child in CHILDREN
        }
        assert labels["us-west"]["kmc.dev/origin-uid"] == uid
        assert labels["eu-west"]["kmc.dev/origin-uid"] == uid
        assert "kmc.dev/origin-uid" not in labels["us-east"]
        # The hub waits for our finalizer on the Deployment, so the children go first.
        hub.run("delete", "namespace", name, "--timeout=120s")
        deadline = time.monotonic() + 90
        while left := [
            child
            for child in ("us-west", "eu-west")
            if kubectl[child].run("get", "namespace", name, check=False).returncode == 0
        ]:
            assert time.monotonic() < deadline, f"namespace {name} still in {left}"
            time.sleep(1)
        east = kubectl["us-east"].json("get", "namespace", name)
        assert east["status"]["phase"] == "Active"
        assert kubectl["us-east"].json("get", "deployments", "-n", name)["items"] == []
    finally:
        for k in kubectl.values():
            k.run("delete", "namespace", name, "--wait=false", "--ignore-not-found", check=False)


def test_a_strategy_change_that_moves_nothing_still_completes_the_rollout(
    installed: bed.State, kubectl: dict[str, Kubectl], namespace: str
) -> None:
    hub = kubectl["hub"]
    wait_locations_settled(hub)
    hub.apply(deployment("web", 6), namespace)
    hub.run("rollout", "status", "deployment/web", "-n", namespace, "--timeout=120s")
    before = hub.json("get", "deployment", "web", "-n", namespace)["metadata"]["generation"]
    # An annotation change bumps a Deployment's generation, though no child has to change.
    hub.run(
        "annotate",
        "deployment/web",
        "-n",
        namespace,
        'kmc.dev/strategy={"type":"Split","weights":{"us-east":1}}',
    )
    after = hub.json("get", "deployment", "web", "-n", namespace)
    assert after["metadata"]["generation"] > before
    hub.run("rollout", "status", "deployment/web", "-n", namespace, "--timeout=30s")
    status = hub.json("get", "deployment", "web", "-n", namespace)["status"]
    assert status["observedGeneration"] == after["metadata"]["generation"]


def test_deleting_a_hub_job_deletes_its_pods_in_the_children(
    installed: bed.State, kubectl: dict[str, Kubectl], namespace: str
) -> None:
    """A child Job is deleted as kubectl deletes one, with its pods: left to the API's own
    default (orphan, for Jobs) its pods would stay, and the Job would wait on the child's
    garbage collector."""
    hub = kubectl["hub"]
    wait_locations_settled(hub)
    hub.apply(job("crunch", 3, 3), namespace)

    def pods() -> dict[str, int]:
        found = {}
        for child in CHILDREN:
            listed = kubectl[child].json("get", "pods", "-n", namespace, "-l", "job-name=crunch")
            if listed["items"]:
                found[child] = len(listed["items"])
        return found

    deadline = time.monotonic() + 120
    while sum(pods().values()) < 3:
        assert time.monotonic() < deadline, pods()
        time.sleep(0.5)
    hub.run("delete", "job", "crunch", "-n", namespace, "--timeout=60s")
    deadline = time.monotonic() + 60
    while left := pods():
        assert time.monotonic() < deadline, f"pods of the deleted Job left behind: {left}"
        time.sleep(0.5)
    for child in CHILDREN:
        assert kubectl[child].json("get", "jobs", "-n", namespace)["items"] == []


def test_a_finished_job_is_complete_on_the_hub_and_keeps_its_placed_condition(
    installed: bed.State, kubectl: dict[str, Kubectl], namespace: str
) -> None:
    """A Job's conditions are one atomic list: the placement loop's condition and the status
    fold's must each be written with the other's, or one drops the other."""
    hub = kubectl["hub"]
    wait_locations_settled(hub)
    hub.apply(job("crunch", 3, 3), namespace)
    hub.run("wait", "--for=condition=Complete", "job/crunch", "-n", namespace, "--timeout=90s")
    deadline = time.monotonic() + 30
    while True:
        status = hub.json("get", "job", "crunch", "-n", namespace)["status"]
        conditions = {c["type"]: c["status"] for c in status.get("conditions", [])}
        if conditions.get("kmc.dev/Placed") == "True":
            break
        assert time.monotonic() < deadline, conditions
        time.sleep(0.5)
    assert conditions["Complete"] == conditions["kmc.dev/Synced"] == "True", conditions
    assert status["succeeded"] == 3


def test_a_job_whose_share_changes_is_replaced_there_and_a_finished_one_is_left(
    installed: bed.State, kubectl: dict[str, Kubectl], namespace: str
) -> None:
    """A child Job's completions cannot change in place: an unfinished child is made anew with
    its new share (an Event says so), a finished one keeps its record."""
    hub = kubectl["hub"]
    wait_locations_settled(hub)
    two = {"type": "Split", "pin": ["eu-west", "us-east"]}
    waiting = with_strategy(job("held", 2, 4), two)
    waiting["spec"]["suspend"] = True  # never finishes while the test runs
    hub.apply(waiting, namespace)
    hub.apply(with_strategy(job("done", 2, 2), two), namespace)
    hub.run("wait", "--for=condition=Complete", "job/done", "-n", namespace, "--timeout=90s")

    def completions(name: str) -> dict[str, int]:
        jobs = child_objects(kubectl, "job", name, namespace)
        return {child: copy["spec"]["completions"] for child, copy in jobs.items()}

    def wait_completions(name: str, expected: dict[str, int]) -> None:
        deadline = time.monotonic() + 60
        while (now := completions(name)) != expected:
            assert time.monotonic() < deadline, now
            time.sleep(0.5)

    wait_completions("held", {"eu-west": 2, "us-east": 2})
    one = json.dumps({"type": "Split", "pin": ["eu-west"]})
    for name in ("held", "done"):
        hub.run(
            "annotate", f"job/{name}", "-n", namespace, f"kmc.dev/strategy={one}", "--overwrite"
        )
    wait_completions("held", {"eu-west": 4})
    messages = [e["message"] for e in events_of(hub, namespace, "held")]
    assert (
        "replaced the Job in eu-west: its new share cannot be set in place (completions are "
        "immutable); its pods there start again"
    ) in messages
    # The finished one: us-east's child goes with the placement; eu-west's keeps its record.
    wait_completions("done", {"eu-west": 1})
    conditions = {
        c["type"]: c["status"]
        for c in hub.json("get", "job", "done", "-n", namespace)["status"]["conditions"]
    }
    assert conditions["Complete"] == "True", conditions
    assert not [e for e in events_of(hub, namespace, "done") if e["reason"] == "Replaced"]
