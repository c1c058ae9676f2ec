"""Jobs: their pods divided across locations, their outcome folded back as the hub allows.

A Job splits `parallelism` and `completions` by its placement (`split`), and uses no more
locations than its parallelism when it has completions: every location with completions needs
a pod running there. A child's completions cannot change in place, so its placement holds
while its locations stay eligible and its size holds; a running child whose share changes is
made anew, a finished one stays as it ended.

The hub's apiserver validates Job status transitions (terminal conditions never go away,
Complete needs SuccessCriteriaMet and a completionTime, a finished Job has no active or
terminating pods, counters never decrease, startTime and completionTime do not move). The
fold keeps to those rules, or the hub would refuse the whole status.
"""

from __future__ import annotations

from collections.abc import Mapping

from apiserver.contract import Placement
from apiserver.kinds.kind import Change, Kind, Remote, Role, View
from apiserver.objects import Obj, ReadOnly
from apiserver.placement.apportion import apportion
from apiserver.placement.engine import Shape
from apiserver.sync.desired import mapping, spec_of
from apiserver.sync.status import (
    Children,
    Condition,
    Rules,
    condition_from,
    earliest,
    has_true,
    is_int,
    is_true,
    items_of,
    latest,
    located,
    merged,
    status_of,
)

# Labels the Job strategy of every apiserver generates into the pod template from the Job's uid.
_GENERATED_LABELS = frozenset(
    {
        "batch.kubernetes.io/controller-uid",
        "controller-uid",
        "batch.kubernetes.io/job-name",
        "job-name",
    }
)


def _count(value: object, default: int) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else default


def _size(obj: ReadOnly) -> Shape:
    """What is divided: completions, else parallelism; no more locations than parallelism
    when there are completions."""
    spec = mapping(obj.get("spec"))
    completions = spec.get("completions")
    parallelism = _count(spec.get("parallelism"), 1)
    if completions is None:
        return Shape(total=parallelism, fixed_shares=True)
    limit = parallelism if parallelism >= 1 else None
    return Shape(total=_count(completions, 1), location_limit=limit, fixed_shares=True)


def split(spec: ReadOnly, placement: Mapping[str, int | None]) -> dict[str, dict[str, int]]:
    """Each location's parallelism and completions, in proportion to the Job's placement.

    Every location with a share runs at least one pod at a time when parallelism allows (the
    engine never places a Job with completions on more locations than its parallelism).
    `completions` is left out when the Job has none.
    """
    weights = {name: float(value or 0) for name, value in placement.items()}
    running = {name: weight for name, weight in weights.items() if weight > 0}
    parallelism = apportion(_count(spec.get("parallelism"), 1), running, minimum=1).shares
    completions = spec.get("completions")
    counts = apportion(_count(completions, 1), weights).shares if completions is not None else {}
    result: dict[str, dict[str, int]] = {}
    for name in sorted(weights):
        result[name] = {"parallelism": parallelism.get(name, 0)}
        if completions is not None:
            result[name]["completions"] = counts[name]
    return result


def _share(child: Obj, location: str, placement: Placement) -> None:
    spec = spec_of(child)
    spec.update(split(spec, placement)[location])
    if spec.get("manualSelector") is True:
        return
    # The hub's apiserver generated these from the hub Job's uid; the child's makes its own.
    spec.pop("selector", None)
    template = spec.get("template")
    template_metadata = template.get("metadata") if isinstance(template, dict) else None
    if not isinstance(template_metadata, dict):
        return
    labels = mapping(template_metadata.get("labels"))
    kept = {key: value for key, value in labels.items() if key not in _GENERATED_LABELS}
    if kept:
        template_metadata["labels"] = kept
    else:
        template_metadata.pop("labels", None)


def _change(current: ReadOnly, desired: ReadOnly) -> Change:
    """Completions, set from the share, cannot change in place: a running child is made anew;
    a finished one stays on record as it ended (its work there is done)."""
    if mapping(current.get("spec")).get("completions") == mapping(desired.get("spec")).get(
        "completions"
    ):
        return Change.APPLY
    return Change.KEEP if finished(current) else Change.REPLACE


def finished(job: ReadOnly) -> bool:
    return any(
        c.get("type") in ("Complete", "Failed") and c.get("status") == "True"
        for c in items_of(status_of(job).get("conditions"))
    )


# --- folding ----------------------------------------------------------------------------------


def _fields(status: Obj, hub: ReadOnly, seen: Children, previous: ReadOnly) -> None:
    """startTime, completionTime (dropped again unless Complete), monotonic counters."""
    suspended = mapping(hub.get("spec")).get("suspend") is True
    start = previous.get("startTime") if not suspended else None
    if start is None:
        start = earliest(status_of(child).get("startTime") for child in seen.present.values())
    if start is not None:
        status["startTime"] = start
    finish = previous.get("completionTime")
    if finish is None:
        times = [
            status_of(seen.present[loc]).get("completionTime") if loc in seen.present else None
            for loc in seen.placed
        ]
        if times and all(isinstance(time, str) for time in times):
            finish = latest(times)
    if finish is not None:
        status["completionTime"] = finish
    for counter in ("failed", "succeeded"):  # the hub refuses counters that go down
        earlier = previous.get(counter)
        if is_int(earlier) and earlier > status.get(counter, 0):
            status[counter] = earlier


def _conditions(
    hub: ReadOnly, seen: Children, status: ReadOnly, previous: ReadOnly
) -> list[Condition]:
    return [*_outcome(seen, status, previous), *merged(seen, skip=_TERMINAL)]


def _settle(status: Obj, conditions: list[Condition]) -> None:
    """A completionTime only with Complete: the hub refuses one without it."""
    if "completionTime" in status and not has_true(conditions, "Complete"):
        del status["completionTime"]


_TERMINAL = frozenset({"Complete", "Failed", "FailureTarget", "SuccessCriteriaMet"})


def _outcome(seen: Children, status: ReadOnly, previous: ReadOnly) -> list[Condition]:
    """Success only when every placed child succeeded, failure when any child failed.

    As the Job controller does, the outcome is first announced (SuccessCriteriaMet or
    FailureTarget) and the Job only finishes (Complete or Failed) once no pod of it is active
    or terminating anywhere. Once reached, the hub keeps an outcome: it refuses to drop it.
    """
    kept = {
        str(c.get("type")): condition_from(c)
        for c in items_of(previous.get("conditions"))
        if c.get("type") in _TERMINAL and is_true(c)
    }
    idle = not status.get("active") and not status.get("terminating") and "startTime" in status
    if {"SuccessCriteriaMet", "Complete"} & kept.keys():
        return _success(seen, status, kept, idle)
    failing = [
        loc
        for loc in seen.present
        if seen.is_true(loc, "Failed") or seen.is_true(loc, "FailureTarget")
    ]
    if failing or {"FailureTarget", "Failed"} & kept.keys():
        return _failure(seen, failing, kept, idle)
    if seen.placed and all(
        seen.is_true(loc, "SuccessCriteriaMet") or seen.is_true(loc, "Complete")
        for loc in seen.placed
    ):
        return _success(seen, status, kept, idle)
    return []


def _success(
    seen: Children, status: ReadOnly, kept: Mapping[str, Condition], idle: bool
) -> list[Condition]:
    complete = kept.get("Complete")
    if complete is not None and "SuccessCriteriaMet" not in kept:
        return [complete]  # finished before SuccessCriteriaMet existed: the hub refuses adding it
    met = kept.get("SuccessCriteriaMet") or Condition(
        "SuccessCriteriaMet", "True", "CompletionsReached", "succeeded in " + ", ".join(seen.placed)
    )
    everywhere = all(seen.is_true(loc, "Complete") for loc in seen.placed)
    if complete is None and everywhere and idle and "completionTime" in status:
        complete = Condition(
            "Complete", "True", met.reason, "complete in " + ", ".join(seen.placed)
        )
    return [met, complete] if complete is not None else [met]


def _failure(
    seen: Children, failing: list[str], kept: Mapping[str, Condition], idle: bool
) -> list[Condition]:
    def described(type_: str, locations: list[str]) -> Condition:
        first = mapping(seen.condition(locations[0], type_))
        message = "failed in " + "; ".join(
            located(loc, seen.condition(loc, type_)) for loc in locations
        )
        return Condition(type_, "True", str(first.get("reason") or "Failed"), message)

    target = (
        kept.get("FailureTarget")
        or kept.get("Failed")
        or described(
            "FailureTarget" if seen.is_true(failing[0], "FailureTarget") else "Failed", failing
        )
    )
    target = Condition("FailureTarget", "True", target.reason, target.message)
    failed = kept.get("Failed")
    failed_at = [loc for loc in failing if seen.is_true(loc, "Failed")]
    if failed is None and failed_at and idle:
        failed = described("Failed", failed_at)
    return [target, failed] if failed is not None else [target]


JOB = Kind(
    "Job",
    "Job",
    "batch/v1",
    "jobs",
    role=Role.WORKLOAD,
    remote=Remote("job", "jobs.batch", "batch/v1"),
    pod_spec_path=("spec", "template", "spec"),
    default_type="Split",
    size=_size,
    share=_share,
    # A Job's status has no observedGeneration: a status of its own is its controller's word.
    fold_rules=Rules(
        fields=_fields, conditions=_conditions, settle=_settle, observes_generation=False
    ),
    counts=("ready", "succeeded"),
    change=_change,
    whole_conditions=True,
    owns_pods=True,
    view=View(
        singular="job",
        counters={"active": "active", "succeeded": "succeeded", "failed": "failed"},
        counter_docs={
            "active": "Pods of the Job running now, summed over every location.",
            "succeeded": "Pods of the Job that succeeded, summed over every location.",
            "failed": "Pods of the Job that failed, summed over every location.",
        },
        replicas_doc=(
            "What is divided across locations: the Job's spec.completions, or its "
            "spec.parallelism when it has no completions."
        ),
        ready="succeeded",
    ),
)

ENTRIES = (JOB,)
