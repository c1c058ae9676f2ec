"""`kubectl mc move` and `drain` without a cluster: the strategy each form writes (checked
against the real placement engine: the strategy must place exactly what the move promised),
the undo patch, when a move counts as done, and how progress is shown."""

from __future__ import annotations

import json
import shlex
import time
from collections.abc import Iterator, Mapping
from typing import Any, cast

import pytest
from hypothesis import given
from hypothesis import strategies as st

from apiserver.placement.engine import Candidate, decide
from apiserver.placement.strategy import Strategy
from apiserver.subresources.strategy import merge_patch
from kubectl_mc import drain
from kubectl_mc import move as moving
from kubectl_mc.kube import KubeError
from kubectl_mc.move import KINDS, MoveError, Plan, Request, plan
from kubectl_mc.progress import Progress, line, table
from tests.unit.shapes import shape

DEPLOYMENTS = KINDS["deployments"]
WEB = "deployment.apps/web"
LOCATIONS = ("eu-west", "us-east", "us-west")
SERVED = frozenset({"apps/v1/Deployment", "apps/v1/DaemonSet", "batch/v1/Job"})


def placed_by(strategy: Mapping[str, Any], current: Mapping[str, int], replicas: int) -> Any:
    """What the placement engine makes of `strategy` for a Deployment placed as `current`."""
    candidates = [
        Candidate(name, {}, (), False, True, 0.0, SERVED) for name in (*LOCATIONS, "ap-south")
    ]
    obj = {"apiVersion": "apps/v1", "kind": "Deployment", "spec": {"replicas": replicas}}
    decision = decide(
        obj, shape(obj), Strategy.model_validate(strategy), candidates, current, 10_000.0
    )
    return {loc: n for loc, n in decision.placement.items() if n}


def move(
    current: Mapping[str, Any],
    placement: Mapping[str, int | None],
    to: tuple[str, ...] = (),
    source: str | None = None,
    replicas: int | None = None,
    kind: str = "deployments",
) -> Plan:
    return plan(Request(to, source, replicas), KINDS[kind], WEB, current, placement)


# --- RESOURCE/NAME ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "plural"),
    [
        ("deployment/web", "deployments"),
        ("deployments/web", "deployments"),
        ("deploy/web", "deployments"),
        ("Deployment.apps/web", "deployments"),
        ("sts/web", "statefulsets"),
        ("replicaset/web", "replicasets"),
        ("rs/web", "replicasets"),
        ("job.batch/web", "jobs"),
        ("jobs/web", "jobs"),
        ("ds/web", "daemonsets"),
    ],
)
def test_resource_names_as_kubectl_takes_them(text: str, plural: str) -> None:
    kind, name = moving.parse_ref(text)
    assert (kind.plural, name) == (plural, "web")


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("web", "arguments in resource/name form must have a single resource and name"),
        ("deployment/", "arguments in resource/name form must have a single resource and name"),
        ("deployment/a/b", "arguments in resource/name form must have a single resource and name"),
        ("pods/web", 'daemonsets, not "pods"'),
        ("deployment.batch/web", 'not "deployment.batch"'),
    ],
)
def test_bad_resource_names_are_refused(text: str, error: str) -> None:
    with pytest.raises(MoveError, match=error):
        moving.parse_ref(text)


def test_shown_as_kubectl_names_objects() -> None:
    assert KINDS["jobs"].shown("x") == "job.batch/x"
    assert (
        DEPLOYMENTS.view("ns", "web") == "/apis/mc.kmc.dev/v1alpha1/namespaces/ns/deployments/web"
    )


# --- what each form writes --------------------------------------------------------------------

EVEN = {"eu-west": 2, "us-east": 2, "us-west": 2}


def test_to_pins_everything_there_and_keeps_how() -> None:
    current = {
        "type": "Split",
        "avoid": ["eu-west", "ap-south"],
        "weights": {"us-east": 3},
        "tolerations": [{"key": "gpu", "operator": "Exists"}],
        "maxPerLocation": 10,
    }
    moved = move(current, EVEN, to=("eu-west",))
    assert moved.strategy == {
        "type": "Split",
        "avoid": ["ap-south"],
        "pin": ["eu-west"],
        "tolerations": [{"key": "gpu", "operator": "Exists"}],
        "maxPerLocation": 10,
    }
    assert (moved.words, moved.needed, moved.expected) == ("to eu-west", ("eu-west",), None)
    assert placed_by(moved.strategy, EVEN, 6) == {"eu-west": 6}


def test_to_several_divides_evenly_or_by_capacity() -> None:
    moved = move({"type": "Split", "weights": {"us-east": 5}}, EVEN, to=("us-west", "eu-west"))
    assert moved.strategy == {"type": "Split", "pin": ["eu-west", "us-west"]}
    assert moved.words == "to eu-west, us-west"
    assert placed_by(moved.strategy, EVEN, 6) == {"eu-west": 3, "us-west": 3}
    by_capacity = move({"type": "Split", "weights": "capacity"}, EVEN, to=("eu-west",))
    assert by_capacity.strategy == {"type": "Split", "weights": "capacity", "pin": ["eu-west"]}


def test_from_alone_avoids_and_the_rest_takes_its_share() -> None:
    moved = move({"type": "Split"}, EVEN, source="us-west")
    assert moved.strategy == {"type": "Split", "avoid": ["us-west"]}
    assert (moved.words, moved.needed) == ("away from us-west", ())
    # ap-south, eligible, takes its part: us-west's share spreads over the rest.
    assert placed_by(moved.strategy, EVEN, 6) == {"ap-south": 2, "eu-west": 2, "us-east": 2}
    pinned = move({"type": "Split", "pin": ["us-west", "eu-west"]}, EVEN, source="us-west")
    assert pinned.strategy == {"type": "Split", "pin": ["eu-west"], "avoid": ["us-west"]}


def test_from_the_only_pinned_location_needs_a_destination() -> None:
    with pytest.raises(MoveError, match="pinned to us-west only: say where it goes with --to"):
        move({"type": "Split", "pin": ["us-west"]}, {"us-west": 6}, source="us-west")


def test_from_to_moves_that_location_only_with_exact_weights() -> None:
    moved = move({"type": "Split", "avoid": ["eu-west"]}, EVEN, to=("eu-west",), source="us-west")
    assert moved.strategy == {
        "type": "Split",
        "pin": ["eu-west", "us-east"],
        "weights": {"eu-west": 4, "us-east": 2},
    }
    assert moved.expected == {"eu-west": 4, "us-east": 2}
    assert moved.words == "from us-west to eu-west"
    assert placed_by(moved.strategy, EVEN, 6) == moved.expected


def test_replicas_moves_that_many_and_nothing_else() -> None:
    moved = move({"type": "Split"}, EVEN, to=("eu-west",), source="us-west", replicas=1)
    assert moved.expected == {"eu-west": 3, "us-east": 2, "us-west": 1}
    assert moved.words == "1 replica from us-west to eu-west"
    assert placed_by(moved.strategy, EVEN, 6) == moved.expected
    two = move({"type": "Split"}, {"us-east": 5}, to=("ap-south",), source="us-east", replicas=2)
    assert two.words == "2 replicas from us-east to ap-south"
    assert two.needed == ("ap-south", "us-east")


@given(
    counts=st.lists(st.integers(0, 9), min_size=3, max_size=3),
    data=st.data(),
)
def test_the_engine_places_exactly_what_a_move_of_replicas_promised(
    counts: list[int], data: st.DataObject
) -> None:
    placement = {loc: n for loc, n in zip(LOCATIONS, counts, strict=True) if n or loc == "us-east"}
    source = data.draw(st.sampled_from(sorted(placement)))
    target = data.draw(st.sampled_from([loc for loc in (*LOCATIONS, "ap-south") if loc != source]))
    have = placement[source]
    if have == 0:
        with pytest.raises(MoveError, match="runs no replicas in"):
            move({"type": "Split"}, placement, to=(target,), source=source)
        return
    replicas = data.draw(st.integers(1, have))
    moved = move({"type": "Split"}, placement, to=(target,), source=source, replicas=replicas)
    assert moved.expected is not None
    assert sum(moved.expected.values()) == sum(placement.values())
    assert moved.expected.get(source, 0) == have - replicas
    assert placed_by(moved.strategy, placement, sum(placement.values())) == moved.expected


def test_kinds_and_strategies_that_copy_whole_swap_locations() -> None:
    copies = {"eu-west": None, "us-west": None}
    daemons = move(
        {"type": "Replicate"}, copies, to=("us-east",), source="us-west", kind="daemonsets"
    )
    assert daemons.strategy == {"type": "Replicate", "pin": ["eu-west", "us-east"]}
    assert daemons.needed == ("us-east",)
    single = move({"type": "Single", "avoid": ["eu-west"]}, {"us-west": 6}, ("eu-west",), "us-west")
    assert single.strategy == {"type": "Single", "pin": ["eu-west"]}


@pytest.mark.parametrize(
    ("current", "placement", "kind", "error"),
    [
        ({"type": "Replicate"}, {"us-west": 6}, "deployments", "has a Replicate strategy"),
        ({"type": "Replicate"}, {"us-west": None}, "daemonsets", "is copied whole"),
        ({"type": "Split"}, {"us-west": 4}, "jobs", "a Job moves whole"),
        (
            {"type": "Split", "spreadBy": "topology.kubernetes.io/zone"},
            {"us-west": 4},
            "deployments",
            "spreads by topology.kubernetes.io/zone",
        ),
        (
            {"type": "Split", "maxPerLocation": 2},
            {"us-west": 4, "eu-west": 2},
            "deployments",
            r"eu-west would run 3 replicas, outside .*\(0..2\)",
        ),
    ],
)
def test_moves_of_replicas_the_strategy_cannot_say_are_refused(
    current: dict[str, Any], placement: dict[str, int | None], kind: str, error: str
) -> None:
    with pytest.raises(MoveError, match=error):
        move(current, placement, ("eu-west",), "us-west", 1, kind=kind)


@pytest.mark.parametrize(
    ("to", "source", "replicas", "error"),
    [
        ((), None, None, "say where"),
        (("us-west",), "us-west", None, "--from and --to both name us-west"),
        (("eu-west",), None, 2, "--replicas moves replicas from one location to another"),
        (("eu-west", "us-east"), "us-west", None, "--to names the one location"),
        (("eu-west",), "ap-south", None, r"runs nothing in ap-south \(placed: eu-west=2"),
        (("eu-west",), "us-west", 3, "runs 2 replicas in us-west: --replicas must be 1 to 2"),
    ],
)
def test_inconsistent_requests_are_refused(
    to: tuple[str, ...], source: str | None, replicas: int | None, error: str
) -> None:
    with pytest.raises(MoveError, match=error):
        move({"type": "Split"}, EVEN, to, source, replicas)


def test_blockers_are_the_verdicts_of_the_locations_the_move_needs() -> None:
    verdicts = [
        {"location": "eu-west", "eligible": False, "reason": "cordoned"},
        {"location": "us-east", "eligible": True, "reason": "eligible"},
        {"location": "us-west", "eligible": False, "reason": "avoided"},
    ]
    assert moving.blockers(Plan({}, "", ("eu-west",)), verdicts) == ["eu-west: cordoned"]
    assert moving.blockers(Plan({}, "", ("us-east",)), verdicts) == []
    assert moving.blockers(Plan({}, "", ()), verdicts) == []
    nowhere = [{**v, "eligible": False} for v in verdicts]
    assert moving.blockers(Plan({}, "", ()), nowhere) == [
        "eu-west: cordoned",
        "us-east: eligible",
        "us-west: avoided",
    ]


# --- undo -------------------------------------------------------------------------------------

specs = st.fixed_dictionaries(
    {"type": st.sampled_from(["Split", "Replicate"])},
    optional={
        "pin": st.lists(st.sampled_from(LOCATIONS), unique=True, min_size=1),
        "avoid": st.lists(st.sampled_from(["ap-south"]), min_size=1, max_size=1),
        "weights": st.one_of(
            st.just("capacity"), st.dictionaries(st.sampled_from(LOCATIONS), st.integers(0, 5))
        ),
        "maxPerLocation": st.integers(1, 5),
    },
)


@given(previous=specs, written=specs)
def test_the_undo_patch_puts_the_previous_strategy_back(
    previous: dict[str, Any], written: dict[str, Any]
) -> None:
    patch = moving.undo_patch(previous, "object", written)
    current = {"kind": "Strategy", "spec": written}
    assert merge_patch(current, patch)["spec"] == previous


def test_an_inherited_strategy_is_undone_by_removing_the_objects_own() -> None:
    for source in ("namespace", "default"):
        assert moving.undo_patch({"type": "Split"}, source, {"pin": ["x"]}) == {"spec": None}


def test_printed_commands_run_as_printed() -> None:
    patch = {"spec": {"pin": None, "weights": {"us-east": 2}}}
    undo = moving.undo_command(DEPLOYMENTS, "web", "my ns", patch, ["--context", "hub"])
    assert undo == (
        "kubectl patch deployments.mc.kmc.dev web -n 'my ns' --subresource strategy "
        """--type=merge -p '{"spec":{"pin":null,"weights":{"us-east":2}}}' --context hub"""
    )
    assert json.loads(shlex.split(undo)[-3]) == patch
    again = moving.wait_command(KINDS["statefulsets"], "db", "prod", [])
    assert again == "kubectl mc move statefulset/db -n prod --wait"


# --- done -------------------------------------------------------------------------------------


def row(location: str, desired: int | None, ready: int | None, state: str = "Synced") -> Any:
    return {
        "location": location,
        "desired": desired,
        "ready": ready,
        "available": ready,
        "syncedGeneration": 2,
        "state": state,
        "message": "" if state == "Synced" else "not pinned",
    }


def view(placement: Mapping[str, int | None], *rows: Any) -> dict[str, Any]:
    return {"status": {"placement": dict(placement), "locations": list(rows)}}


def test_settled_when_every_location_is_synced_and_ready() -> None:
    done = view({"eu-west": 6}, row("eu-west", 6, 6))
    assert moving.settled(DEPLOYMENTS, done, None)
    assert not moving.settled(DEPLOYMENTS, view({"eu-west": 6}, row("eu-west", 6, 5)), None)
    leaving = view({"eu-west": 6}, row("eu-west", 6, 6), row("us-west", None, 2, "Evacuating"))
    assert not moving.settled(DEPLOYMENTS, leaving, None)
    assert not moving.settled(DEPLOYMENTS, view({}), None)
    # Copies without a replica count: Synced is all there is to say.
    daemons = view({"eu-west": None}, row("eu-west", None, 3))
    assert moving.settled(KINDS["daemonsets"], daemons, None)


def test_a_move_of_replicas_waits_for_the_placement_it_asked_for() -> None:
    before = view(EVEN, *(row(loc, 2, 2) for loc in sorted(EVEN)))
    expected = {"eu-west": 3, "us-east": 2, "us-west": 1}
    assert not moving.settled(DEPLOYMENTS, before, expected)
    after = view({**expected, "ap-south": 0}, *(row(loc, n, n) for loc, n in expected.items()))
    assert moving.settled(DEPLOYMENTS, after, expected)


class FakeHub:
    """Answers GETs from a list of views, one per call (the last one forever)."""

    def __init__(self, *answers: dict[str, Any]) -> None:
        self.answers = list(answers)
        self.paths: list[str] = []

    def get(self, path: str, **_: str) -> dict[str, Any]:
        self.paths.append(path)
        return self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]


def ticking() -> Iterator[float]:
    t = 0.0
    while True:
        yield t
        t += 1.0


def test_wait_shows_each_change_and_returns_the_final_rows(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(time, "sleep", lambda _: None)
    first = view(EVEN, row("eu-west", 6, 2, "Moving"), row("us-west", None, 2, "Evacuating"))
    done = view({"eu-west": 6}, row("eu-west", 6, 6))
    hub = FakeHub(first, first, done)
    out: list[str] = []
    clock = ticking()
    rows = moving.wait(
        hub,  # type: ignore[arg-type]
        DEPLOYMENTS,
        "web",
        "ns",
        None,
        60,
        Progress(out.append, tty=False, divided=True),
        clock=lambda: next(clock),
    )
    assert rows == [row("eu-west", 6, 6)]
    assert out == [
        "eu-west 2/6 ready (Moving: not pinned), us-west 2/0 ready (Evacuating: not pinned)\n",
        "eu-west 6/6 ready\n",
    ]
    assert hub.paths == ["/apis/mc.kmc.dev/v1alpha1/namespaces/ns/deployments/web"] * 3


def test_wait_stops_at_the_timeout_with_the_last_rows(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(time, "sleep", lambda _: None)
    stuck = view(EVEN, row("eu-west", 6, 2, "Moving"))
    clock = ticking()
    with pytest.raises(moving.Stopped, match="timed out") as stopped:
        moving.wait(
            FakeHub(stuck),  # type: ignore[arg-type]
            DEPLOYMENTS,
            "web",
            "ns",
            None,
            5,
            Progress(lambda _: None, tty=False, divided=True),
            clock=lambda: next(clock),
        )
    assert stopped.value.rows == [row("eu-west", 6, 2, "Moving")]


# --- progress ---------------------------------------------------------------------------------


def test_a_progress_line_says_ready_over_desired_and_what_is_not_synced() -> None:
    rows = [row("eu-west", 6, 4, "Moving"), row("us-west", None, 2, "Evacuating"), row("x", 1, 1)]
    assert line(rows, divided=True) == (
        "eu-west 4/6 ready (Moving: not pinned), us-west 2/0 ready (Evacuating: not pinned), "
        "x 1/1 ready"
    )
    assert line([row("eu-west", None, 3)], divided=False) == "eu-west 3 ready"
    assert line([{**row("eu-west", 2, None, "Pending"), "message": ""}], True) == (
        "eu-west -/2 ready (Pending)"
    )
    assert line([], divided=True) == "placed nowhere yet"


def test_the_table_is_the_locations_view() -> None:
    rows = [row("eu-west", 6, 4, "Moving"), row("us-west", None, 2, "Evacuating")]
    assert table(rows).splitlines() == [
        "LOCATION   DESIRED   READY   AVAILABLE   STATE        MESSAGE",
        "eu-west    6         4       4           Moving       not pinned",
        "us-west    <none>    2       2           Evacuating   not pinned",
    ]


def test_without_a_tty_one_line_per_change_then_the_final_table() -> None:
    out: list[str] = []
    progress = Progress(out.append, tty=False, divided=True)
    moving_rows = [row("eu-west", 6, 4, "Moving")]
    progress.show(moving_rows)
    progress.show(moving_rows)
    progress.show([row("eu-west", 6, 6)])
    progress.finish([row("eu-west", 6, 6)])
    assert out == [
        "eu-west 4/6 ready (Moving: not pinned)\n",
        "eu-west 6/6 ready\n",
        table([row("eu-west", 6, 6)]) + "\n",
    ]


def test_on_a_tty_the_table_is_redrawn_in_place() -> None:
    out: list[str] = []
    progress = Progress(out.append, tty=True, divided=True)
    two = [row("eu-west", 6, 4, "Moving"), row("us-west", None, 2, "Evacuating")]
    progress.show(two)
    progress.show(two)
    progress.show([row("eu-west", 6, 6)])
    progress.finish([row("eu-west", 6, 6)])
    assert out == [
        table(two) + "\n",
        "\x1b[3F\x1b[J" + table([row("eu-west", 6, 6)]) + "\n",
    ]


# --- drain ------------------------------------------------------------------------------------


def location(generation: int, observed: int, objects: int) -> dict[str, Any]:
    return {
        "metadata": {"name": "us-west", "generation": generation},
        "status": {"observedGeneration": observed, "objects": objects},
    }


def test_only_a_count_taken_after_the_cordon_is_believed() -> None:
    assert drain.objects_left(location(3, 2, 0), 3) is None
    assert drain.objects_left(location(3, 3, 4), 3) == 4
    assert drain.objects_left({"metadata": {}}, 1) is None


def test_wait_drained_reports_each_count_until_none(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(time, "sleep", lambda _: None)
    hub = FakeHub(
        location(3, 2, 0),
        location(3, 3, 4),
        location(3, 3, 4),
        location(3, 3, 1),
        location(3, 3, 0),
    )
    said: list[str] = []
    drain.wait_drained(hub, "us-west", 3, 60, said.append)  # type: ignore[arg-type]
    assert said == [
        "draining us-west: 4 objects left",
        "draining us-west: 1 object left",
        "draining us-west: 0 objects left",
    ]


def test_wait_drained_times_out_with_what_is_left(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(time, "sleep", lambda _: None)
    with pytest.raises(drain.StillThere, match="2 objects left"):
        drain.wait_drained(FakeHub(location(3, 3, 2)), "us-west", 3, 0, lambda _: None)  # type: ignore[arg-type]


class RemoteHub:
    """A hub whose punch-through lists and workloads answer by path."""

    def __init__(self, answers: dict[str, Any]) -> None:
        self.answers = answers

    def get(self, path: str, **_: str) -> dict[str, Any]:
        answer = self.answers.get(path, {"items": []})
        if isinstance(answer, Exception):
            raise answer
        return cast(dict[str, Any], answer)


def remote(name: str, namespace: str, location: str) -> dict[str, Any]:
    meta = {"name": name, "namespace": namespace, "annotations": {"kmc.dev/location": location}}
    return {"metadata": meta}


def test_a_drain_that_times_out_names_the_workloads_left_and_what_they_wait_for(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(time, "sleep", lambda _: None)
    synced = {
        "type": "kmc.dev/Synced",
        "status": "False",
        "message": "moving: us-west: 1 -> 0 waits",
    }
    hub = RemoteHub(
        {
            f"{drain.LOCATIONS}/us-west": location(3, 3, 2),
            "/apis/remote.kmc.dev/v1alpha1/deployments": {
                "items": [remote("web", "shop", "us-west"), remote("web", "shop", "eu-west")]
            },
            "/apis/remote.kmc.dev/v1alpha1/jobs": {"items": [remote("once", "ops", "us-west")]},
            "/apis/apps/v1/namespaces/shop/deployments/web": {"status": {"conditions": [synced]}},
            "/apis/batch/v1/namespaces/ops/jobs/once": KubeError("gone", {"code": 404}),
        }
    )
    with pytest.raises(drain.StillThere) as raised:
        drain.wait_drained(hub, "us-west", 3, 0, lambda _: None)  # type: ignore[arg-type]
    assert raised.value.what == [
        "deployment.apps/web -n shop: moving: us-west: 1 -> 0 waits",
        "job.batch/once -n ops: gone from the hub",
    ]
    # Listing what is left is a courtesy: when it fails, the count still stands, and says so.
    hub.answers["/apis/remote.kmc.dev/v1alpha1/statefulsets"] = KubeError(
        "forbidden", {"code": 403}
    )
    assert drain.still_there(hub, "us-west")[1:] == ["(could not list the rest: forbidden)"]  # type: ignore[arg-type]


def test_an_unknown_location_is_named_with_the_ones_there_are() -> None:
    err = drain.NoSuchLocation("nope", ["us-west", "eu-west"])
    assert str(err) == "no such location: nope (locations: eu-west, us-west)"


def test_on_a_tty_lines_are_cut_to_the_width_so_none_wraps() -> None:
    out: list[str] = []
    Progress(out.append, tty=True, divided=True, width=30).show([row("eu-west", 6, 4, "Moving")])
    assert [len(text) for text in out[0].splitlines()] == [29, 29]


# --- the writes -------------------------------------------------------------------------------


class FakeKube:
    """A hub with one Deployment `web` placed 2/2/2 and its strategy sub-resource."""

    def __init__(self, verdicts: dict[str, str] | None = None, conflicts: int = 0) -> None:
        self.verdicts = verdicts or {loc: "eligible" for loc in LOCATIONS}
        self.conflicts = conflicts
        self.writes: list[tuple[str, dict[str, str] | None, Any]] = []

    def _strategy(self, spec: Any) -> dict[str, Any]:
        verdicts = [
            {"location": loc, "eligible": reason == "eligible", "reason": reason}
            for loc, reason in self.verdicts.items()
        ]
        meta = {"name": "web", "resourceVersion": "7"}
        return {
            "metadata": meta,
            "spec": spec,
            "status": {"source": "default", "verdicts": verdicts},
        }

    def get(self, path: str, **_: str) -> dict[str, Any]:
        if path.endswith("/strategy"):
            return self._strategy({"type": "Split"})
        annotations = {"kmc.dev/placement": json.dumps(EVEN)}
        return {"metadata": {"name": "web", "resourceVersion": "7", "annotations": annotations}}

    def request(
        self, method: str, path: str, body: Any = None, params: dict[str, str] | None = None
    ) -> dict[str, Any]:
        from kubectl_mc.kube import KubeError

        self.writes.append((method, params, body))
        if self.conflicts and not params:
            self.conflicts -= 1
            raise KubeError("Error from server (Conflict): modified", {"code": 409})
        if params and body["spec"].get("pin"):  # the dry run judges the new strategy
            self.verdicts = {
                loc: reason if loc in body["spec"]["pin"] else "not pinned"
                for loc, reason in self.verdicts.items()
            }
        return self._strategy(body["spec"])


def test_a_move_is_a_dry_run_then_a_write_on_the_version_read() -> None:
    hub = FakeKube()
    started = moving.start(hub, DEPLOYMENTS, "web", "ns", Request(("eu-west",)))  # type: ignore[arg-type]
    path_params = [(method, params) for method, params, _ in hub.writes]
    assert path_params == [("PUT", {"dryRun": "All"}), ("PUT", None)]
    body = hub.writes[-1][2]
    assert body["metadata"] == {"name": "web", "namespace": "ns", "resourceVersion": "7"}
    assert body["spec"] == {"type": "Split", "pin": ["eu-west"]}
    assert started.undo == {"spec": None}  # it was the default: undo removes the object's own


def test_a_destination_the_new_strategy_refuses_is_not_written() -> None:
    hub = FakeKube({"eu-west": "cordoned", "us-east": "eligible", "us-west": "eligible"})
    with pytest.raises(
        MoveError, match=r"cannot move deployment\.apps/web to eu-west: eu-west: cordoned"
    ):
        moving.start(hub, DEPLOYMENTS, "web", "ns", Request(("eu-west",)))  # type: ignore[arg-type]
    assert [params for _, params, _ in hub.writes] == [{"dryRun": "All"}]


def test_unknown_locations_are_refused_before_anything_is_written() -> None:
    hub = FakeKube()
    with pytest.raises(drain.NoSuchLocation, match=r"nowhere \(locations: eu-west, us-east"):
        moving.start(hub, DEPLOYMENTS, "web", "ns", Request(("nowhere",)))  # type: ignore[arg-type]
    assert hub.writes == []


def test_a_conflict_is_read_and_decided_again() -> None:
    hub = FakeKube(conflicts=1)
    moving.start(hub, DEPLOYMENTS, "web", "ns", Request((), "us-west"))  # type: ignore[arg-type]
    assert [params for _, params, _ in hub.writes] == [{"dryRun": "All"}, None] * 2
