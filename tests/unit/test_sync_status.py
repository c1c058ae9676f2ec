"""Folding children's statuses into the hub object's: sums, generations, pessimistic conditions."""

from __future__ import annotations

import copy
from typing import Any

from apiserver.contract import SYNCED
from apiserver.kinds import PLACED
from apiserver.sync.status import Rules, fold

NOW = "2026-12-02T12:00:00Z"


def rules(kind: str) -> Rules:
    """The fold rules of a kind's entry, as the sync loop passes them."""
    found = PLACED[kind].fold_rules
    assert found is not None
    return found


EARLIER = "2026-12-02T08:00:00Z"
STALE_MESSAGE = "unreachable since 2026-12-02T10:00:00Z, showing its last known status"


def condition(
    type_: str, status: str = "True", reason: str = "", message: str = ""
) -> dict[str, Any]:
    return {
        "type": type_,
        "status": status,
        "reason": reason,
        "message": message,
        "lastTransitionTime": EARLIER,
    }


def by_type(status: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["type"]: c for c in status["conditions"]}


# --- Deployments ------------------------------------------------------------------------------


def hub_deployment(replicas: int = 6, generation: int = 3, **status: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": "web", "namespace": "shop", "uid": "u-1", "generation": generation},
        "spec": {"replicas": replicas},
        "status": status,
    }


def child_deployment(
    replicas: int,
    available: int | None = None,
    *,
    generation: int = 7,
    observed: int = 7,
    progressing: str = "NewReplicaSetAvailable",
) -> dict[str, Any]:
    available = replicas if available is None else available
    status: dict[str, Any] = {
        "observedGeneration": observed,
        "replicas": replicas,
        "updatedReplicas": replicas,
        "readyReplicas": available,
        "availableReplicas": available,
        "conditions": [
            condition(
                "Available",
                "True" if available == replicas else "False",
                "MinimumReplicasAvailable"
                if available == replicas
                else "MinimumReplicasUnavailable",
            ),
            condition("Progressing", "True", progressing),
        ],
    }
    if available < replicas:
        status["unavailableReplicas"] = replicas - available
    return {
        "metadata": {"name": "web", "namespace": "shop", "generation": generation},
        "spec": {"replicas": replicas},
        "status": status,
    }


PLACEMENT: dict[str, int | None] = {"us-east": 4, "us-west": 2}
APPLIED = {"us-east": (3, 7), "us-west": (3, 7)}


def fold_deployment(
    children: dict[str, Any],
    placement: dict[str, int | None] = PLACEMENT,
    stale: dict[str, str] | None = None,
    applied: dict[str, tuple[int, int]] = APPLIED,
    hub: dict[str, Any] | None = None,
) -> dict[str, Any]:
    return fold(
        hub or hub_deployment(), rules("Deployment"), children, placement, stale or {}, applied, NOW
    )


def test_counters_are_summed_over_every_child_including_those_handed_over() -> None:
    children = {
        "us-east": child_deployment(4),
        "us-west": child_deployment(2, 1),
        "eu-west": child_deployment(1),  # no longer placed: being scaled down
    }
    status = fold_deployment(children)
    assert status["replicas"] == 7
    assert status["updatedReplicas"] == 7
    assert status["readyReplicas"] == 6
    assert status["availableReplicas"] == 6
    assert status["unavailableReplicas"] == 0  # 6 wanted on the hub, 6 available
    assert "observedGeneration" in status
    assert "terminatingReplicas" not in status  # absent everywhere stays absent


def test_deployment_unavailable_replicas_are_the_hubs_shortfall() -> None:
    children = {"us-east": child_deployment(4, 2), "us-west": child_deployment(2, 1)}
    status = fold_deployment(children)
    assert status["availableReplicas"] == 3
    assert status["unavailableReplicas"] == 3


def test_no_child_yet_means_no_counters() -> None:
    status = fold_deployment({"us-east": None, "us-west": None})
    assert set(status) == {"conditions"}


def test_observed_generation_is_the_hubs_once_every_placed_location_observed_it() -> None:
    children = {"us-east": child_deployment(4), "us-west": child_deployment(2)}
    assert fold_deployment(children)["observedGeneration"] == 3


def test_observed_generation_waits_for_every_location() -> None:
    hub = hub_deployment(observedGeneration=2)
    cases: dict[str, tuple[dict[str, Any], dict[str, tuple[int, int]]]] = {
        "child controller behind": (
            {"us-east": child_deployment(4), "us-west": child_deployment(2, observed=6)},
            APPLIED,
        ),
        "older hub generation applied": (
            {"us-east": child_deployment(4), "us-west": child_deployment(2)},
            {"us-east": (3, 7), "us-west": (2, 7)},
        ),
        "child edited since our apply": (
            {
                "us-east": child_deployment(4),
                "us-west": child_deployment(2, generation=8, observed=8),
            },
            APPLIED,
        ),
        "nothing applied there": (
            {"us-east": child_deployment(4), "us-west": child_deployment(2)},
            {"us-east": (3, 7)},
        ),
        "child not created yet": ({"us-east": child_deployment(4), "us-west": None}, APPLIED),
    }
    for name, (children, applied) in cases.items():
        status = fold_deployment(children, applied=applied, hub=hub)
        assert status["observedGeneration"] == 2, name
        fresh = fold_deployment(children, applied=applied, hub=hub_deployment())
        assert "observedGeneration" not in fresh, name


def test_a_child_no_longer_placed_does_not_hold_back_observed_generation() -> None:
    children = {
        "us-east": child_deployment(4),
        "us-west": child_deployment(2),
        "eu-west": child_deployment(1, observed=1),
    }
    assert fold_deployment(children)["observedGeneration"] == 3


def test_available_when_available_everywhere_placed() -> None:
    children = {"us-east": child_deployment(4), "us-west": child_deployment(2)}
    available = by_type(fold_deployment(children))["Available"]
    assert available["status"] == "True"
    assert available["reason"] == "MinimumReplicasAvailable"
    assert available["message"] == "available in us-east, us-west"


def test_not_available_names_the_locations_that_are_not() -> None:
    children = {"us-east": child_deployment(4), "us-west": child_deployment(3, 2)}
    available = by_type(fold_deployment(children))["Available"]
    assert available["status"] == "False"
    assert available["reason"] == "MinimumReplicasUnavailable"
    assert available["message"] == "not available in us-west (2/3 available)"


def test_not_available_while_a_location_is_pending_or_stale() -> None:
    pending = by_type(fold_deployment({"us-east": child_deployment(4), "us-west": None}))
    assert pending["Available"]["status"] == "False"
    assert pending["Available"]["message"] == "not available in us-west (not created yet)"
    children = {"us-east": child_deployment(4), "us-west": child_deployment(2)}
    stale = by_type(fold_deployment(children, stale={"us-west": STALE_MESSAGE}))
    assert stale["Available"]["status"] == "False"
    assert stale["Available"]["message"] == "not available in us-west (stale)"


def test_an_unplaced_deployment_is_only_available_with_no_replicas() -> None:
    unplaced = by_type(fold_deployment({}, placement={}))["Available"]
    assert (unplaced["status"], unplaced["message"]) == ("False", "not placed in any location")
    empty = by_type(fold_deployment({}, placement={}, hub=hub_deployment(replicas=0)))
    assert empty["Available"]["status"] == "True"


def test_progressing_until_every_placed_location_rolled_out() -> None:
    children = {
        "eu-west": child_deployment(1, progressing="ReplicaSetUpdated"),
        "us-east": child_deployment(2, progressing="ReplicaSetUpdated"),
        "us-west": child_deployment(2),
    }
    placement: dict[str, int | None] = {"eu-west": 1, "us-east": 2, "us-west": 2}
    applied = dict.fromkeys(placement, (3, 7))
    progressing = by_type(fold_deployment(children, placement, applied=applied))["Progressing"]
    assert progressing["status"] == "True"
    assert progressing["reason"] == "ReplicaSetUpdated"
    assert progressing["message"] == "progressing in eu-west, us-east"
    done = {"us-east": child_deployment(4), "us-west": child_deployment(2)}
    progressing = by_type(fold_deployment(done))["Progressing"]
    assert (progressing["status"], progressing["reason"]) == ("True", "NewReplicaSetAvailable")


def test_progress_deadline_exceeded_anywhere_is_carried_up() -> None:
    stuck = child_deployment(2, 0)
    stuck["status"]["conditions"][1] = condition(
        "Progressing", "False", "ProgressDeadlineExceeded", 'ReplicaSet "web-5d9" has timed out'
    )
    children = {"us-east": child_deployment(4), "us-west": stuck}
    progressing = by_type(fold_deployment(children))["Progressing"]
    assert progressing["status"] == "False"
    assert progressing["reason"] == "ProgressDeadlineExceeded"
    assert progressing["message"] == "progress deadline exceeded in us-west"


def test_replica_failure_is_carried_up_naming_the_location() -> None:
    failing = child_deployment(2, 0)
    failing["status"]["conditions"].append(
        condition("ReplicaFailure", "True", "FailedCreate", 'pods "web-x" is forbidden: quota')
    )
    status = fold_deployment({"us-east": child_deployment(4), "us-west": failing})
    failure = by_type(status)["ReplicaFailure"]
    assert failure["status"] == "True"
    assert failure["reason"] == "FailedCreate"
    assert failure["message"] == 'us-west: pods "web-x" is forbidden: quota'
    healthy = fold_deployment({"us-east": child_deployment(4), "us-west": child_deployment(2)})
    assert "ReplicaFailure" not in by_type(healthy)


def test_synced_when_every_placed_location_has_its_child() -> None:
    synced = by_type(
        fold_deployment({"us-east": child_deployment(4), "us-west": child_deployment(2)})
    )
    assert synced[SYNCED]["status"] == "True"
    assert synced[SYNCED]["reason"] == "Synced"
    assert synced[SYNCED]["message"] == "in sync in us-east, us-west"


def test_not_synced_while_pending_or_stale() -> None:
    pending = by_type(fold_deployment({"us-east": child_deployment(4), "us-west": None}))[SYNCED]
    assert (pending["status"], pending["reason"]) == ("False", "Pending")
    assert pending["message"] == "not created yet in us-west"
    children = {"us-east": child_deployment(4), "us-west": child_deployment(2)}
    stale = by_type(fold_deployment(children, stale={"us-west": STALE_MESSAGE}))[SYNCED]
    assert (stale["status"], stale["reason"]) == ("False", "Stale")
    assert stale["message"] == f"us-west: {STALE_MESSAGE}"


def test_a_stale_location_still_counts_with_its_last_known_status() -> None:
    children = {"us-east": child_deployment(4), "us-west": child_deployment(2)}
    status = fold_deployment(children, stale={"us-west": STALE_MESSAGE})
    assert status["availableReplicas"] == 6


def test_conditions_are_sorted_and_complete() -> None:
    status = fold_deployment({"us-east": child_deployment(4), "us-west": child_deployment(2)})
    assert [c["type"] for c in status["conditions"]] == ["Available", "Progressing", SYNCED]
    for item in status["conditions"]:
        assert set(item) == {
            "type",
            "status",
            "reason",
            "message",
            "lastTransitionTime",
            "lastUpdateTime",
        }


def test_transition_times_are_kept_while_the_status_holds() -> None:
    children = {"us-east": child_deployment(4), "us-west": child_deployment(2)}
    first = fold_deployment(children)
    assert {c["lastTransitionTime"] for c in first["conditions"]} == {NOW}
    later = "2026-12-02T13:00:00Z"
    hub = hub_deployment(**first)
    again = fold(hub, rules("Deployment"), children, PLACEMENT, {}, APPLIED, later)
    assert again == first  # an unchanged world gives an unchanged status
    children["us-west"] = child_deployment(2, 1)
    changed = by_type(fold(hub, rules("Deployment"), children, PLACEMENT, {}, APPLIED, later))
    assert changed["Available"]["lastTransitionTime"] == later
    assert changed["Available"]["lastUpdateTime"] == later
    assert changed["Progressing"]["lastTransitionTime"] == NOW
    assert changed[SYNCED]["lastTransitionTime"] == NOW


def test_inputs_are_not_modified() -> None:
    hub = hub_deployment(observedGeneration=2, conditions=[condition("Available")])
    children = {"us-east": child_deployment(4), "us-west": child_deployment(2, 1)}
    before = copy.deepcopy((hub, children))
    fold_deployment(children, hub=hub)
    assert (hub, children) == before


# --- Jobs -------------------------------------------------------------------------------------


def hub_job(**status: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": "crunch", "namespace": "shop", "generation": 1},
        "spec": {"parallelism": 4, "completions": 10},
        "status": status,
    }


def child_job(
    start: str, *, active: int = 0, succeeded: int = 0, failed: int = 0, done: str | None = None
) -> dict[str, Any]:
    status: dict[str, Any] = {
        "startTime": start,
        "active": active,
        "ready": active,
        "terminating": 0,
    }
    if succeeded:
        status["succeeded"] = succeeded
    if failed:
        status["failed"] = failed
    if done is not None:
        status["completionTime"] = done
        status["conditions"] = [
            condition("SuccessCriteriaMet", reason="CompletionsReached"),
            condition("Complete", reason="CompletionsReached"),
        ]
    return {"metadata": {"name": "crunch", "generation": 1}, "status": status}


JOB_PLACEMENT: dict[str, int | None] = {"us-east": 6, "us-west": 4}


def fold_job(children: dict[str, Any], hub: dict[str, Any] | None = None) -> dict[str, Any]:
    return fold(hub or hub_job(), rules("Job"), children, JOB_PLACEMENT, {}, {}, NOW)


def test_a_running_job_sums_pods_and_starts_at_the_earliest_start() -> None:
    children = {
        "us-east": child_job("2026-12-02T09:00:05Z", active=2, succeeded=3),
        "us-west": child_job("2026-12-02T09:00:01Z", active=2, succeeded=1, failed=1),
    }
    status = fold_job(children)
    assert status["startTime"] == "2026-12-02T09:00:01Z"
    assert (status["active"], status["ready"], status["succeeded"], status["failed"]) == (
        4,
        4,
        4,
        1,
    )
    assert "completionTime" not in status
    assert "observedGeneration" not in status  # Jobs have none
    assert [c["type"] for c in status["conditions"]] == [SYNCED]


def test_a_job_is_complete_only_when_complete_everywhere_placed() -> None:
    half = {
        "us-east": child_job("2026-12-02T09:00:00Z", succeeded=6, done="2026-12-02T09:30:00Z"),
        "us-west": child_job("2026-12-02T09:00:00Z", active=1, succeeded=3),
    }
    status = fold_job(half)
    assert "Complete" not in by_type(status)
    assert "SuccessCriteriaMet" not in by_type(status)
    assert "completionTime" not in status
    both = {
        "us-east": half["us-east"],
        "us-west": child_job("2026-12-02T09:00:00Z", succeeded=4, done="2026-12-02T09:45:00Z"),
    }
    status = fold_job(both)
    conditions = by_type(status)
    assert conditions["Complete"]["status"] == "True"
    assert conditions["SuccessCriteriaMet"]["status"] == "True"  # the hub requires it
    assert status["completionTime"] == "2026-12-02T09:45:00Z"
    assert status["succeeded"] == 10


def test_a_job_is_not_complete_while_a_handed_over_child_still_runs_pods() -> None:
    children = {
        "us-east": child_job("2026-12-02T09:00:00Z", succeeded=6, done="2026-12-02T09:30:00Z"),
        "us-west": child_job("2026-12-02T09:00:00Z", succeeded=4, done="2026-12-02T09:45:00Z"),
        "eu-west": child_job("2026-12-02T09:00:00Z", active=1),
    }
    conditions = by_type(fold_job(children))
    assert conditions["SuccessCriteriaMet"]["status"] == "True"
    assert "Complete" not in conditions


def failed_child(active: int) -> dict[str, Any]:
    child = child_job("2026-12-02T09:00:00Z", active=active, failed=7)
    message = "Job has reached the specified backoff limit"
    child["status"]["conditions"] = [
        condition("FailureTarget", "True", "BackoffLimitExceeded", message)
    ]
    if not active:
        child["status"]["conditions"].append(
            condition("Failed", "True", "BackoffLimitExceeded", message)
        )
    return child


def test_a_failure_anywhere_fails_the_job_once_no_pod_runs() -> None:
    running = {"us-east": child_job("2026-12-02T09:00:00Z", active=2), "us-west": failed_child(0)}
    conditions = by_type(fold_job(running))
    assert conditions["FailureTarget"]["status"] == "True"
    assert conditions["FailureTarget"]["message"] == (
        "failed in us-west: Job has reached the specified backoff limit"
    )
    assert "Failed" not in conditions  # the hub refuses Failed with active pods
    idle = {"us-east": child_job("2026-12-02T09:00:00Z", succeeded=2), "us-west": failed_child(0)}
    conditions = by_type(fold_job(idle))
    assert conditions["Failed"]["status"] == "True"
    assert conditions["Failed"]["reason"] == "BackoffLimitExceeded"
    assert "us-west" in conditions["Failed"]["message"]
    assert "Complete" not in conditions


def test_a_finished_job_stays_finished_and_keeps_its_times_and_counts() -> None:
    done = {
        "us-east": child_job("2026-12-02T09:00:02Z", succeeded=6, done="2026-12-02T09:30:00Z"),
        "us-west": child_job("2026-12-02T09:00:00Z", succeeded=4, done="2026-12-02T09:45:00Z"),
    }
    first = fold_job(done)
    # us-west's child deleted by hand and recreated: it starts over.
    again = {
        "us-east": done["us-east"],
        "us-west": child_job("2026-12-02T11:00:00Z", active=2),
    }
    status = fold_job(again, hub_job(**first))
    assert by_type(status)["Complete"] == by_type(first)["Complete"]
    assert status["startTime"] == first["startTime"] == "2026-12-02T09:00:00Z"
    assert status["completionTime"] == first["completionTime"]
    assert status["succeeded"] == 10  # never decreases


# --- other kinds ------------------------------------------------------------------------------


def test_statefulset_sums_and_merges_conditions_pessimistically() -> None:
    def sts(ready: int, *conditions: dict[str, Any], revision: str = "db-7c9") -> dict[str, Any]:
        return {
            "metadata": {"generation": 2},
            "status": {
                "observedGeneration": 2,
                "replicas": 3,
                "readyReplicas": ready,
                "currentReplicas": 3,
                "updatedReplicas": 3,
                "availableReplicas": ready,
                "currentRevision": "db-7c9",
                "updateRevision": revision,
                "collisionCount": 0,
                "conditions": list(conditions),
            },
        }

    hub = {"metadata": {"generation": 5}, "spec": {"replicas": 9}, "status": {}}
    children = {
        "eu-west": sts(3, condition("Healthy", "Unknown", "Probing")),
        "us-east": sts(3, condition("Healthy", "True", "AllGood")),
        "us-west": sts(1, condition("Healthy", "False", "Degraded", "2 pods crash-looping")),
    }
    placement: dict[str, int | None] = dict.fromkeys(children, 3)
    applied = dict.fromkeys(children, (5, 2))
    status = fold(hub, rules("StatefulSet"), children, placement, {}, applied, NOW)
    assert status["readyReplicas"] == 7
    assert status["replicas"] == 9
    assert status["observedGeneration"] == 5
    assert "currentRevision" not in status  # no rollout in progress anywhere
    healthy = by_type(status)["Healthy"]
    assert (healthy["status"], healthy["reason"]) == ("False", "Degraded")
    assert healthy["message"] == "Unknown in eu-west; False in us-west: 2 pods crash-looping"
    del children["us-west"]
    placement.pop("us-west")
    healthy = by_type(fold(hub, rules("StatefulSet"), children, placement, {}, applied, NOW))[
        "Healthy"
    ]
    assert (healthy["status"], healthy["reason"]) == ("Unknown", "Probing")


def test_a_statefulset_rolling_out_anywhere_shows_differing_revisions() -> None:
    def sts(current: str, update: str) -> dict[str, Any]:
        return {"status": {"replicas": 2, "currentRevision": current, "updateRevision": update}}

    children = {"us-east": sts("db-1", "db-1"), "us-west": sts("db-1", "db-2")}
    status = fold(
        {"spec": {}}, rules("StatefulSet"), children, {"us-east": 2, "us-west": 2}, {}, {}, NOW
    )
    assert status["currentRevision"] == "us-east/db-1,us-west/db-1"
    assert status["updateRevision"] == "us-east/db-1,us-west/db-2"


def test_daemonset_counts_are_summed_over_replicated_children() -> None:
    def ds(nodes: int, ready: int) -> dict[str, Any]:
        return {
            "metadata": {"generation": 1},
            "status": {
                "observedGeneration": 1,
                "desiredNumberScheduled": nodes,
                "currentNumberScheduled": nodes,
                "updatedNumberScheduled": nodes,
                "numberReady": ready,
                "numberAvailable": ready,
                "numberMisscheduled": 0,
            },
        }

    children = {"eu-west": ds(2, 2), "us-east": ds(3, 3), "us-west": ds(4, 3)}
    placement: dict[str, int | None] = dict.fromkeys(children)
    applied = dict.fromkeys(children, (1, 1))
    hub = {"metadata": {"generation": 1}, "spec": {}}
    status = fold(hub, rules("DaemonSet"), children, placement, {}, applied, NOW)
    assert status["desiredNumberScheduled"] == 9
    assert status["numberReady"] == 8
    assert status["numberMisscheduled"] == 0
    assert "numberUnavailable" not in status
    assert status["observedGeneration"] == 1
    assert by_type(status)[SYNCED]["message"] == "in sync in eu-west, us-east, us-west"


def test_a_resumed_job_starts_again_from_its_children() -> None:
    children = {
        "us-east": child_job("2026-12-02T11:00:00Z", active=2),
        "us-west": child_job("2026-12-02T11:00:03Z", active=2),
    }
    running = fold_job(children, hub_job(startTime="2026-12-02T09:00:00Z"))
    assert running["startTime"] == "2026-12-02T09:00:00Z"  # the hub refuses moving it
    suspended = hub_job(startTime="2026-12-02T09:00:00Z")
    suspended["spec"]["suspend"] = True
    assert fold_job(children, suspended)["startTime"] == "2026-12-02T11:00:00Z"


def test_a_job_finished_before_success_criteria_existed_gets_none_added() -> None:
    complete = condition("Complete", reason="CompletionsReached")
    hub = hub_job(
        startTime="2026-12-02T09:00:00Z",
        completionTime="2026-12-02T09:45:00Z",
        succeeded=10,
        conditions=[complete],
    )
    children = {
        "us-east": child_job("2026-12-02T09:00:00Z", succeeded=6, done="2026-12-02T09:30:00Z"),
        "us-west": child_job("2026-12-02T09:00:00Z", succeeded=4, done="2026-12-02T09:45:00Z"),
    }
    status = fold_job(children, hub)
    assert [c["type"] for c in status["conditions"]] == ["Complete", SYNCED]
    assert status["completionTime"] == "2026-12-02T09:45:00Z"


def test_replica_failure_of_replicasets_is_true_if_any_child_has_it() -> None:
    def rs(*conditions: dict[str, Any]) -> dict[str, Any]:
        return {"status": {"replicas": 1, "conditions": list(conditions)}}

    children = {
        "eu-west": rs(condition("ReplicaFailure", "False", "Recovered")),
        "us-east": rs(),
        "us-west": rs(condition("ReplicaFailure", "True", "FailedCreate", "quota exceeded")),
    }
    placement: dict[str, int | None] = dict.fromkeys(children, 1)
    status = fold({"spec": {"replicas": 3}}, rules("ReplicaSet"), children, placement, {}, {}, NOW)
    failure = by_type(status)["ReplicaFailure"]
    assert (failure["status"], failure["reason"]) == ("True", "FailedCreate")
    assert failure["message"] == "True in us-west: quota exceeded"


def test_a_job_needs_every_placed_completion_time_to_complete() -> None:
    lacking = child_job("2026-12-02T09:00:00Z", succeeded=4, done="2026-12-02T09:45:00Z")
    del lacking["status"]["completionTime"]
    children = {
        "us-east": child_job("2026-12-02T09:00:00Z", succeeded=6, done="2026-12-02T09:30:00Z"),
        "us-west": lacking,
    }
    status = fold_job(children)
    assert "completionTime" not in status
    assert "Complete" not in by_type(status)  # the hub refuses Complete without completionTime
