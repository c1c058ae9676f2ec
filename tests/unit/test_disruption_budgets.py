"""A PodDisruptionBudget follows the workloads its selector matches, weighed by the replicas
they run in each location; an integer budget is divided by them (a percentage kept), and
its status is folded from the children's."""

from __future__ import annotations

import asyncio
import json
from typing import cast

import aiohttp
from hypothesis import given
from hypothesis import strategies as st

from apiserver.contract import PLACEMENT, Placement
from apiserver.hubcache import HubCache
from apiserver.kinds import DEPLOYMENT, PODDISRUPTIONBUDGET, SERVICE, STATEFULSET, Key, Kind
from apiserver.kube.client import Credentials, Kube
from apiserver.leader import Leadership
from apiserver.loops.placement.follow import Follower
from apiserver.loops.placement.records import Records
from apiserver.loops.placement.writes import Writer
from apiserver.loops.sync.loop import SyncLoop
from apiserver.objects import Obj
from apiserver.sync.desired import child_object
from apiserver.sync.status import fold

from .follow_fakes import RecordingWriter

PDB = PODDISRUPTIONBUDGET


def pdb(**spec: object) -> Obj:
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": "web", "namespace": "shop", "uid": "pdb-uid"},
        "spec": {"selector": {"matchLabels": {"app": "web"}}, **spec},
    }


def pods(**labels: str) -> Obj:
    return {"spec": {"template": {"metadata": {"labels": labels}}}}


def test_the_selector_is_a_label_selector_and_a_missing_one_selects_nothing() -> None:
    selects = PDB.selector(pdb())
    assert selects is not None
    assert selects(DEPLOYMENT.pod_labels(pods(app="web", tier="front")))
    assert not selects(DEPLOYMENT.pod_labels(pods(app="db")))
    expressions = pdb(
        selector={"matchExpressions": [{"key": "app", "operator": "In", "values": ["web", "api"]}]}
    )
    by_expression = PDB.selector(expressions)
    assert by_expression is not None and by_expression({"app": "api"})
    everything = PDB.selector({"spec": {"selector": {}}})
    assert everything is not None and everything({"any": "pod"})
    nothing = PDB.selector({"spec": {}})
    assert nothing is not None and not nothing({"app": "web"})


def budget(obj: Obj, placement: Placement) -> dict[str, object]:
    out = {}
    for location in placement:
        spec = child_object(obj, PDB, location, placement)["spec"]
        out[location] = spec.get("minAvailable", spec.get("maxUnavailable"))
    return out


def test_an_integer_budget_is_divided_by_the_replicas_in_each_location() -> None:
    placement: Placement = {"eu-west": 1, "us-east": 4, "us-west": 1}
    # 4 x 1/6, 4/6, 1/6: 0.67, 2.67, 0.67; the two left over go to the largest remainders,
    # ties by name.
    assert budget(pdb(minAvailable=4), placement) == {"eu-west": 1, "us-east": 3, "us-west": 0}
    # One disruption across the fleet is one, somewhere: none in the others.
    assert budget(pdb(maxUnavailable=1), placement) == {"eu-west": 0, "us-east": 1, "us-west": 0}


def test_a_percentage_means_the_same_everywhere_and_is_kept() -> None:
    placement: Placement = {"eu-west": 1, "us-east": 4}
    assert budget(pdb(minAvailable="50%"), placement) == {"eu-west": "50%", "us-east": "50%"}
    assert budget(pdb(maxUnavailable="25%"), placement) == {"eu-west": "25%", "us-east": "25%"}


@given(
    value=st.integers(min_value=0, max_value=40),
    weights=st.dictionaries(st.sampled_from(["a", "b", "c", "d"]), st.integers(0, 12), min_size=1),
    field=st.sampled_from(["minAvailable", "maxUnavailable"]),
)
def test_divided_budgets_sum_to_the_hubs(value: int, weights: dict[str, int], field: str) -> None:
    divided = budget(pdb(**{field: value}), dict(weights))
    assert sum(cast(int, share) for share in divided.values()) == value
    assert all(cast(int, share) >= 0 for share in divided.values())


# --- following its pods (placement loop) --------------------------------------------------------


def workload(name: str, placement: Placement, **labels: str) -> Obj:
    return {
        "metadata": {
            "name": name,
            "namespace": "shop",
            "annotations": {PLACEMENT: json.dumps(placement)},
        },
        **pods(**labels),
    }


async def follow(kind: Kind, obj: Obj, *objects: tuple[Kind, Obj]) -> RecordingWriter:
    cache = HubCache(
        Kube(cast(aiohttp.ClientSession, None), Credentials("https://hub", False), "hub")
    )
    for k, o in objects:
        cache.objects[k.key].cache[f"shop/{o['metadata']['name']}"] = o
    writer = RecordingWriter()
    follower = Follower(cache, Records(lambda _: None), cast(Writer, writer))
    await follower.selector(kind, Key.of(kind.key, obj), obj)
    return writer


async def test_a_budget_carries_the_replicas_its_pods_run_in_each_location() -> None:
    objects = (
        (DEPLOYMENT, workload("web", {"us-east": 2, "us-west": 1, "eu-west": 0}, app="web")),
        (STATEFULSET, workload("web-cache", {"us-east": 1, "eu-west": 3}, app="web")),
        (DEPLOYMENT, workload("db", {"eu-west": 5}, app="db")),
    )
    writer = await follow(PDB, pdb(), *objects)
    assert writer.placements == [{"eu-west": 3, "us-east": 3, "us-west": 1}]
    assert writer.said() == [("True", "Placed")]
    # A Service selecting the same pods goes to the same places, copied whole.
    service = {
        "metadata": {"name": "web", "namespace": "shop"},
        "spec": {"selector": {"app": "web"}},
    }
    writer = await follow(SERVICE, service, *objects)
    assert writer.placements == [{"eu-west": None, "us-east": None, "us-west": None}]


async def test_a_budget_selecting_nothing_placed_stays_on_the_hub() -> None:
    writer = await follow(PDB, pdb(), (DEPLOYMENT, workload("db", {"eu-west": 5}, app="db")))
    assert (writer.placements, writer.said()) == ([], [("False", "NothingSelected")])


# --- folding ------------------------------------------------------------------------------------


def child_pdb(healthy: int, desired: int, expected: int, allowed: int) -> Obj:
    reason = "SufficientPods" if allowed else "InsufficientPods"
    return {
        "metadata": {"name": "web", "generation": 1},
        "status": {
            "observedGeneration": 1,
            "currentHealthy": healthy,
            "desiredHealthy": desired,
            "expectedPods": expected,
            "disruptionsAllowed": allowed,
            "conditions": [
                {
                    "type": "DisruptionAllowed",
                    "status": "True" if allowed else "False",
                    "reason": reason,
                }
            ],
        },
    }


def folded(children: dict[str, Obj]) -> Obj:
    assert PDB.fold_rules is not None
    placement: Placement = dict.fromkeys(children, 1)
    applied = dict.fromkeys(children, (1, 1))
    hub = {**pdb(minAvailable=3), "metadata": {**pdb()["metadata"], "generation": 1}}
    return fold(hub, PDB.fold_rules, children, placement, {}, applied, "now")


def test_counters_are_summed_and_a_disruption_is_allowed_while_one_is_anywhere() -> None:
    status = folded({"us-east": child_pdb(3, 2, 3, 1), "us-west": child_pdb(1, 1, 1, 0)})
    counters = ("currentHealthy", "desiredHealthy", "expectedPods", "disruptionsAllowed")
    assert [status[c] for c in counters] == [4, 3, 4, 1]
    assert status["observedGeneration"] == 1
    [allowed] = [c for c in status["conditions"] if c["type"] == "DisruptionAllowed"]
    assert (allowed["status"], allowed["reason"]) == ("True", "SufficientPods")
    assert allowed["message"] == "disruptions allowed (us-east: 1, us-west: 0)"


def test_no_disruption_anywhere_and_a_failed_budget_are_said() -> None:
    status = folded({"us-east": child_pdb(2, 2, 2, 0), "us-west": child_pdb(1, 1, 1, 0)})
    [allowed] = [c for c in status["conditions"] if c["type"] == "DisruptionAllowed"]
    assert (allowed["status"], allowed["reason"]) == ("False", "InsufficientPods")
    failing = child_pdb(0, 0, 0, 0)
    failing["status"]["conditions"] = [
        {
            "type": "DisruptionAllowed",
            "status": "False",
            "reason": "SyncFailed",
            "message": "found no controllers for pod web-1",
        }
    ]
    status = folded({"us-east": child_pdb(2, 1, 2, 1), "us-west": failing})
    [allowed] = [c for c in status["conditions"] if c["type"] == "DisruptionAllowed"]
    assert (allowed["status"], allowed["reason"]) == ("False", "SyncFailed")
    assert allowed["message"] == "us-west: found no controllers for pod web-1"


# --- moves honour it (sync loop) ----------------------------------------------------------------


def test_a_budget_allows_what_the_disruption_controller_would() -> None:
    assert PDB.allows is not None
    assert PDB.allows(pdb(minAvailable=2), 3) == 1
    assert PDB.allows(pdb(minAvailable="50%"), 3) == 1  # 1.5 rounds up to 2 kept
    assert PDB.allows(pdb(maxUnavailable=0), 3) == 0
    assert PDB.allows(pdb(maxUnavailable="50%"), 3) == 2
    assert PDB.allows(pdb(minAvailable=5), 3) == 0
    assert PDB.allows(pdb(), 3) == 3  # neither: no pod asked to stay


async def test_a_move_waits_for_the_budget_as_for_max_unavailable() -> None:
    """A Recreate Deployment may lose all its pods at once; a PDB keeping both of its two
    pods makes its move from us-east to us-west wait for the new copies."""
    hub = workload("web", {"us-west": 2}, app="web")
    hub["metadata"]["uid"] = "web-uid"
    hub["spec"] |= {"replicas": 2, "strategy": {"type": "Recreate"}}
    children = {"us-east": {"spec": {"replicas": 2}, "status": {"availableReplicas": 2}}}

    def handover(*budgets: Obj) -> tuple[dict[str, int | None], tuple[str, ...]]:
        cache = HubCache(
            Kube(cast(aiohttp.ClientSession, None), Credentials("https://hub", False), "hub")
        )
        for budget in budgets:
            cache.objects[PDB.key].cache[f"shop/{budget['metadata']['name']}"] = budget
        none: dict[str, Kube] = {}
        sync = SyncLoop(cache, none.get, Leadership.solo())
        try:
            shares, _, waiting = sync._decide(
                Key.of(DEPLOYMENT.key, hub), DEPLOYMENT, hub, {"us-west": 2}, children, {}
            )
            return shares, waiting
        finally:
            sync.children.stop()

    assert handover() == ({"us-east": 0, "us-west": 2}, ())
    shares, waiting = handover(pdb(minAvailable=2))
    assert shares == {"us-east": 2, "us-west": 2}
    assert waiting == ("us-east: 2 -> 0 waits for 2 more available elsewhere",)
    other = pdb(minAvailable=2)
    other["spec"]["selector"] = {"matchLabels": {"app": "db"}}
    assert handover(other) == ({"us-east": 0, "us-west": 2}, ())  # not its pods
    await asyncio.sleep(0)
