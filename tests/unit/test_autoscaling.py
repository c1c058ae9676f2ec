"""A HorizontalPodAutoscaler follows the workload it scales, its bounds divided by that
workload's shares; while it does, the children's size is their own autoscalers' (never sent
by us, and handed over first so that server-side apply does not reset it); its status is
folded from the children's."""

from __future__ import annotations

import asyncio
import json
from typing import cast

import aiohttp
import pytest
from hypothesis import given
from hypothesis import strategies as st

from apiserver.contract import PLACEMENT, SCALE_HANDOVER_MANAGER, SYNC_MANAGER, Placement
from apiserver.hubcache import HubCache
from apiserver.kinds import DEPLOYMENT, HORIZONTALPODAUTOSCALER, Key, Kind, Target
from apiserver.kube import events
from apiserver.kube.client import ApiError, Credentials, Kube
from apiserver.leader import Leadership
from apiserver.loops.placement.follow import Follower
from apiserver.loops.placement.records import Records as PlacementRecords
from apiserver.loops.placement.writes import Writer
from apiserver.loops.sync.apply import Applier
from apiserver.loops.sync.children import Children
from apiserver.loops.sync.loop import SyncLoop, held_by_scalers
from apiserver.loops.sync.records import Records
from apiserver.objects import Obj
from apiserver.sync.desired import child_object
from apiserver.sync.report import location_states
from apiserver.sync.status import fold

from .follow_fakes import RecordingWriter

HPA = HORIZONTALPODAUTOSCALER
WEB = Key("Deployment", "shop", "web")


def hpa(low: int | None = 3, high: int = 9, target: str = "web") -> Obj:
    spec: Obj = {
        "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": target},
        "maxReplicas": high,
        "metrics": [
            {
                "type": "Resource",
                "resource": {
                    "name": "cpu",
                    "target": {"type": "Utilization", "averageUtilization": 60},
                },
            }
        ],
    }
    if low is not None:
        spec["minReplicas"] = low
    return {
        "apiVersion": "autoscaling/v2",
        "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": "web", "namespace": "shop", "uid": "hpa-uid"},
        "spec": spec,
    }


def web(placement: Placement, replicas: int = 3) -> Obj:
    return {
        "metadata": {
            "name": "web",
            "namespace": "shop",
            "uid": "web-uid",
            "annotations": {PLACEMENT: json.dumps(placement)},
        },
        "spec": {"replicas": replicas, "template": {"metadata": {"labels": {"app": "web"}}}},
    }


# --- dividing the bounds ------------------------------------------------------------------------


def bounds(placement: Placement, obj: Obj | None = None) -> dict[str, tuple[int, int]]:
    out = {}
    for location in placement:
        spec = child_object(obj or hpa(), HPA, location, placement)["spec"]
        out[location] = (spec["minReplicas"], spec["maxReplicas"])
    return out


def test_the_bounds_are_divided_by_the_workloads_shares() -> None:
    assert bounds({"eu-west": 1, "us-east": 1, "us-west": 1}) == {
        "eu-west": (1, 3),
        "us-east": (1, 3),
        "us-west": (1, 3),
    }
    # Twice the replicas in us-east: twice the bounds, the sums the hub's.
    assert bounds({"us-east": 4, "us-west": 2}, hpa(3, 10)) == {
        "us-east": (2, 7),
        "us-west": (1, 3),
    }


def test_each_location_gets_at_least_one_when_the_hubs_minimum_is_smaller() -> None:
    assert bounds({"eu-west": 1, "us-east": 1, "us-west": 1}, hpa(None, 2)) == {
        "eu-west": (1, 1),
        "us-east": (1, 1),
        "us-west": (1, 1),
    }


def test_a_workload_run_whole_in_each_location_gets_the_bounds_whole() -> None:
    assert bounds({"us-east": None, "us-west": None}) == {"us-east": (3, 9), "us-west": (3, 9)}


@given(
    low=st.integers(min_value=1, max_value=50),
    extra=st.integers(min_value=0, max_value=50),
    weights=st.dictionaries(
        st.sampled_from(["a", "b", "c", "d", "e"]), st.integers(0, 20), min_size=1
    ),
)
def test_divided_bounds_keep_every_child_valid_and_sum_to_the_hubs(
    low: int, extra: int, weights: dict[str, int]
) -> None:
    placement: Placement = dict(weights)
    obj = hpa(low, low + extra)
    divided = bounds(placement, obj)
    assert all(1 <= lo <= hi for lo, hi in divided.values())
    if low >= len(weights):
        assert sum(lo for lo, _ in divided.values()) == low
        assert sum(hi for _, hi in divided.values()) == low + extra
    assert bounds(placement, obj) == divided  # the same placement, the same division


def test_the_target_is_read_from_the_scale_target_ref() -> None:
    assert HPA.target(hpa()) == Target("apps", "Deployment", "web")
    assert Target("apps", "Deployment", "web").key([HPA, DEPLOYMENT], "shop") == WEB
    assert Target("", "Deployment", "web").key([DEPLOYMENT], "shop") is None  # not apps'
    assert HPA.target({"spec": {"scaleTargetRef": {"kind": "Deployment"}}}) is None


# --- folding ------------------------------------------------------------------------------------


def child_hpa(current: int, utilization: int | None, limited: bool = False) -> Obj:
    metrics = []
    if utilization is not None:
        metrics.append(
            {
                "type": "Resource",
                "resource": {
                    "name": "cpu",
                    "current": {
                        "averageUtilization": utilization,
                        "averageValue": f"{utilization}m",
                    },
                },
            }
        )
    return {
        "metadata": {"name": "web", "generation": 1},
        "status": {
            "currentReplicas": current,
            "desiredReplicas": current,
            "currentMetrics": metrics,
            "lastScaleTime": f"2026-12-06T09:0{current}:00Z",
            "conditions": [
                {"type": "AbleToScale", "status": "True", "reason": "SucceededGetScale"},
                {
                    "type": "ScalingActive",
                    "status": "True" if utilization is not None else "False",
                    "reason": "ValidMetricFound"
                    if utilization is not None
                    else "FailedGetResourceMetric",
                    "message": "" if utilization is not None else "no metrics returned",
                },
                {
                    "type": "ScalingLimited",
                    "status": "True" if limited else "False",
                    "reason": "TooFewReplicas" if limited else "DesiredWithinRange",
                    "message": "the desired count is below the minimum" if limited else "",
                },
            ],
        },
    }


def folded(children: dict[str, Obj]) -> Obj:
    assert HPA.fold_rules is not None
    placement: Placement = dict.fromkeys(children, 1)
    return fold(hpa(), HPA.fold_rules, children, placement, {}, {}, "now")


def test_replicas_are_summed_and_metrics_averaged_by_the_replicas_each_runs() -> None:
    status = folded({"us-east": child_hpa(3, 80), "us-west": child_hpa(1, 40)})
    assert (status["currentReplicas"], status["desiredReplicas"]) == (4, 4)
    assert status["lastScaleTime"] == "2026-12-06T09:03:00Z"
    assert status["currentMetrics"] == [
        {
            "type": "Resource",
            # (3 * 80 + 1 * 40) / 4 = 70
            "resource": {
                "name": "cpu",
                "current": {"averageUtilization": 70, "averageValue": "70m"},
            },
        }
    ]


def test_a_metric_only_some_locations_report_is_averaged_over_those() -> None:
    status = folded({"us-east": child_hpa(2, 50), "us-west": child_hpa(2, None)})
    assert status["currentMetrics"][0]["resource"]["current"]["averageUtilization"] == 50


def test_conditions_say_where_scaling_is_inactive_or_limited() -> None:
    status = folded({"us-east": child_hpa(2, 50, limited=True), "us-west": child_hpa(1, None)})
    conditions = {c["type"]: c for c in status["conditions"]}
    assert conditions["AbleToScale"]["status"] == "True"
    active = conditions["ScalingActive"]
    assert (active["status"], active["reason"]) == ("False", "FailedGetResourceMetric")
    assert "us-west" in active["message"]
    limited = conditions["ScalingLimited"]
    assert (limited["status"], limited["reason"]) == ("True", "TooFewReplicas")
    assert limited["message"].startswith("us-east:")
    calm = folded({"us-east": child_hpa(2, 50), "us-west": child_hpa(1, 50)})
    assert {c["type"]: c["status"] for c in calm["conditions"]}["ScalingLimited"] == "False"


# --- following the target (placement loop) -----------------------------------------------------


def hub_cache(*objects: tuple[Kind, Obj]) -> HubCache:
    cache = HubCache(
        Kube(cast(aiohttp.ClientSession, None), Credentials("https://hub", False), "hub")
    )
    for kind, obj in objects:
        meta = obj["metadata"]
        cache.objects[kind.key].cache[f"{meta['namespace']}/{meta['name']}"] = obj
    return cache


async def follow(cache: HubCache, obj: Obj) -> RecordingWriter:
    writer = RecordingWriter()
    follower = Follower(cache, PlacementRecords(lambda _: None), cast(Writer, writer))
    await follower.target(HPA, Key.of(HPA.key, obj), obj)
    return writer


async def test_an_hpa_goes_where_its_target_has_replicas_with_its_shares() -> None:
    cache = hub_cache((DEPLOYMENT, web({"us-east": 2, "us-west": 1, "eu-west": 0})))
    writer = await follow(cache, hpa())
    assert writer.placements == [{"us-east": 2, "us-west": 1}]
    assert writer.conditions == [("True", "Placed", "with deployments/web: us-east=2, us-west=1")]


async def test_a_replicated_target_gives_whole_copies() -> None:
    cache = hub_cache((DEPLOYMENT, web({"us-east": 3, "us-west": 3})))
    writer = await follow(cache, hpa())
    assert writer.placements == [{"us-east": None, "us-west": None}]


@pytest.mark.parametrize(
    ("objects", "reason"),
    [((), "TargetNotFound"), (((DEPLOYMENT, web({})),), "TargetNotPlaced")],
)
async def test_an_hpa_whose_target_is_not_placed_stays_on_the_hub_and_says_why(
    objects: tuple[tuple[Kind, Obj], ...], reason: str
) -> None:
    writer = await follow(hub_cache(*objects), hpa())
    assert writer.placements == []  # nothing to write: it has no placement
    [(status, said, message)] = writer.conditions
    assert (status, said) == ("False", reason) and message.endswith("it stays on the hub")


# --- the children's size is theirs (sync loop) --------------------------------------------------


class ChildKube(Kube):
    """A child that records applies; `conflict` makes a non-forced apply answer 409."""

    def __init__(self) -> None:
        super().__init__(
            cast(aiohttp.ClientSession, None), Credentials("https://us-east", False), "us-east"
        )
        self.applies: list[tuple[str, Obj, bool]] = []
        self.conflict = False

    async def apply(
        self, path: str, body: Obj, manager: str, force: bool = True, dry_run: bool = False
    ) -> Obj:
        self.applies.append((manager, body, force))
        if self.conflict and not force:
            raise ApiError.of(409, "Conflict", "spec.replicas is owned by someone else")
        generation = 2 if manager == SYNC_MANAGER else 1
        return {**body, "metadata": {**body["metadata"], "generation": generation}}


class Watch:
    """What the applier asks of one location's watches."""

    def __init__(self, child: Obj | None) -> None:
        self.location = "us-east"
        self.kube = ChildKube()
        self.namespaces = {"shop"}
        self.child = child

    def ensure(self, kind: Kind) -> None:
        pass

    def get(self, key: Key) -> Obj | None:
        return self.child

    async def observe(self, kind: Kind, answer: Obj) -> None:
        pass


def applier(watch: Watch) -> tuple[Applier, Records]:
    cache = hub_cache()
    children = cast(Children, type("One", (), {"get": lambda self, _: watch})())
    records = Records()
    recorder = events.Recorder(cache.hub, "test")
    return Applier(cache, children, records, recorder), records


def hub_web() -> Obj:
    return {"kind": "Deployment", "apiVersion": "apps/v1", **web({"us-east": 2})}


async def test_a_held_childs_size_is_handed_over_once_and_never_sent() -> None:
    current: Obj = {
        "metadata": {"name": "web", "namespace": "shop", "generation": 1},
        "spec": {"replicas": 5},
    }
    watch = Watch(current)
    apply, records = applier(watch)
    assert await apply.apply(WEB, DEPLOYMENT, hub_web(), "us-east", {"us-east": 2}, (), held=True)
    (manager, stub, force), (ours, body, _) = watch.kube.applies
    assert (manager, force, stub["spec"]) == (SCALE_HANDOVER_MANAGER, False, {"replicas": 5})
    assert ours == SYNC_MANAGER and "replicas" not in body["spec"]
    assert records.of(WEB).released == {"us-east"}
    # The child's HPA scales it (a new generation): applied again, still without a size, and
    # without a second handover.
    watch.child = {**current, "metadata": {**current["metadata"], "generation": 3}}
    assert await apply.apply(WEB, DEPLOYMENT, hub_web(), "us-east", {"us-east": 2}, (), held=True)
    assert [m for m, _, _ in watch.kube.applies] == [
        SCALE_HANDOVER_MANAGER,
        SYNC_MANAGER,
        SYNC_MANAGER,
    ]
    assert "replicas" not in watch.kube.applies[-1][1]["spec"]


async def test_a_size_someone_else_owns_already_needs_no_handover() -> None:
    watch = Watch({"metadata": {"name": "web", "namespace": "shop"}, "spec": {"replicas": 5}})
    watch.kube.conflict = True
    apply, records = applier(watch)
    assert await apply.apply(WEB, DEPLOYMENT, hub_web(), "us-east", {"us-east": 2}, (), held=True)
    assert [m for m, _, _ in watch.kube.applies] == [SCALE_HANDOVER_MANAGER, SYNC_MANAGER]
    assert records.of(WEB).released == {"us-east"}


async def test_a_new_child_starts_at_its_share_and_an_unheld_one_is_sized_by_us_again() -> None:
    watch = Watch(None)
    apply, records = applier(watch)
    assert await apply.apply(WEB, DEPLOYMENT, hub_web(), "us-east", {"us-east": 2}, (), held=True)
    [(manager, body, _)] = watch.kube.applies
    assert (manager, body["spec"]["replicas"]) == (SYNC_MANAGER, 2)
    records.of(WEB).released.add("us-east")
    watch.child = {"metadata": {"name": "web", "namespace": "shop"}, "spec": {"replicas": 5}}
    assert await apply.apply(WEB, DEPLOYMENT, hub_web(), "us-east", {"us-east": 2}, (), held=False)
    assert watch.kube.applies[-1][1]["spec"]["replicas"] == 2
    assert records.of(WEB).released == set()  # a later autoscaler hands it over anew


async def test_the_handover_takes_a_held_childs_size_as_it_is() -> None:
    def child(replicas: int) -> Obj:
        return {"spec": {"replicas": replicas}, "status": {"availableReplicas": replicas}}

    cache = hub_cache((HPA, hpa()), (DEPLOYMENT, web({"us-east": 2, "us-west": 1})))
    none: dict[str, Kube] = {}
    sync = SyncLoop(cache, none.get, Leadership.solo())
    try:
        placement: Placement = {"us-east": 2, "us-west": 1}
        held = held_by_scalers(cache, WEB, DEPLOYMENT, placement)
        assert held == {"us-east", "us-west"}
        children = {"us-east": child(5), "us-west": child(1), "eu-west": child(2)}
        shares, deletable, waiting = sync._decide(
            WEB, DEPLOYMENT, web(placement), placement, children, {}, held
        )
        # us-east keeps its autoscaler's 5; eu-west, left, goes down with us-east's surplus.
        assert shares == {"eu-west": 0, "us-east": 5, "us-west": 1}
        assert (deletable, waiting) == (set(), ())
        # Without the HPA (or with one being deleted) the size is ours again.
        deleting = hpa()
        deleting["metadata"]["deletionTimestamp"] = "2026-12-06T09:00:00Z"
        cache.objects[HPA.key].cache["shop/web"] = deleting
        assert held_by_scalers(cache, WEB, DEPLOYMENT, placement) == frozenset()
        assert (
            held_by_scalers(cache, Key("Deployment", "shop", "db"), DEPLOYMENT, placement)
            == frozenset()
        )
    finally:
        sync.children.stop()
        await asyncio.sleep(0)


def test_a_held_child_shows_its_autoscalers_size_as_desired_not_a_move() -> None:
    hub = {**web({"us-east": 1}), "metadata": {**web({})["metadata"], "generation": 2}}
    child = {
        "metadata": {"generation": 4},
        "spec": {"replicas": 3},
        "status": {"observedGeneration": 4, "readyReplicas": 3, "availableReplicas": 3},
    }
    placement: Placement = {"us-east": 1}
    children, applied = {"us-east": child}, {"us-east": (2, 4)}
    [row] = location_states(hub, DEPLOYMENT.counts, placement, children, applied, {})
    assert (row["state"], row["desired"]) == ("Moving", 1)  # ours to size: 3 -> 1
    [row] = location_states(
        hub, DEPLOYMENT.counts, placement, children, applied, {}, held={"us-east"}
    )
    assert (row["state"], row["desired"], row["ready"]) == ("Synced", 3, 3)
