"""`kubectl mc move`: change where a workload runs, by changing its strategy.

There is no separate "move" machinery on purpose. Where a workload runs is decided by the
placement loop from its strategy, and carried out by the sync loop make-before-break; a move
that bypassed them would be undone by the next decision. So a move is a strategy change,
written through the `strategy` sub-resource (validated by the server, 422 for unknown
locations), first as a dry run whose verdicts tell whether the destination would accept it.

What each form writes (everything else in the strategy stays as it is):

- `--to A[,B]`: `pin: [A, B]`, divided evenly between them (a per-location `weights` map is
  dropped; "capacity" stays), and A, B leave `avoid`.
- `--from A`: A joins `avoid` and leaves `pin`; its share spreads over the rest as the
  strategy divides it. Refused when A is the only pinned location: say where with `--to`.
- `--from A --to B [--replicas N]`: N (default: all) of A's replicas go to B, the others stay
  where they are. The strategy can say "exactly these counts" one way only: `pin` the
  locations of the new placement and weigh each by its count, so the quotas are whole and
  apportionment gives exactly that. Needs a Split strategy (Replicate and Single do not
  divide; for kinds copied whole and those strategies, A is swapped for B in `pin`), no
  `spreadBy`, and counts inside min/maxPerLocation. A Job moves whole per location: a child
  Job's completions cannot change.

Waiting is watching the workload's `locations` view until every location is Synced with all
its replicas ready and available, and (for exact counts) the placement is the one asked for.
"""

from __future__ import annotations

import json
import shlex
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kubectl_mc.drain import NoSuchLocation
from kubectl_mc.resources import WORKLOADS, Workload

if TYPE_CHECKING:
    from kubectl_mc.kube import Client, Obj
    from kubectl_mc.progress import Progress

VIEWS = "/apis/mc.kmc.dev/v1alpha1"
PLACEMENT = "kmc.dev/placement"


class MoveError(Exception):
    """What cannot be done and why, in one line (printed as `error: …`)."""


KINDS = WORKLOADS
SHORT = {short: plural for plural, w in WORKLOADS.items() for short in w.shorts}
# Kinds whose rows count ready and available pods against the desired replicas.
COUNTED = frozenset(plural for plural, w in WORKLOADS.items() if w.counted)


def parse_ref(text: str) -> tuple[Workload, str]:
    """`deployment/web`, `deploy/web`, `deployments.apps/web` … → (kind, name)."""
    resource, _, name = text.partition("/")
    if not resource or not name or "/" in name:
        raise MoveError(
            f"arguments in resource/name form must have a single resource and name, "
            f'like deployment/web; got "{text}"'
        )
    base, _, group = resource.lower().partition(".")
    plural = SHORT.get(base) or (base if base in KINDS else f"{base}s")
    kind = KINDS.get(plural)
    if kind is None or (group and group != kind.group):
        raise MoveError(
            "kubectl mc move moves deployments, statefulsets, replicasets, jobs and "
            f'daemonsets, not "{resource}"'
        )
    return kind, name


@dataclass(frozen=True)
class Request:
    """What the user asked for: `--to`, `--from`, `--replicas`."""

    to: tuple[str, ...] = ()
    source: str | None = None
    replicas: int | None = None

    def locations(self) -> list[str]:
        return [*self.to, *([self.source] if self.source else [])]


@dataclass(frozen=True)
class Plan:
    """The strategy to write, and what the move must end with."""

    strategy: Obj
    words: str  # "to eu-west", for `… moving to eu-west` / `… moved to eu-west`
    # Locations that must be eligible under the new strategy; none: at least one must be.
    needed: tuple[str, ...]
    # The exact placement to wait for (moves of a number of replicas), else None.
    expected: dict[str, int] | None = None


def plan(
    request: Request,
    kind: Workload,
    shown: str,
    current: Mapping[str, Any],
    placement: Mapping[str, int | None],
) -> Plan:
    """The strategy that says what `request` asks, derived from the one in force."""
    to = tuple(sorted(set(request.to)))
    source, count = request.source, request.replicas
    if not to and source is None:
        raise MoveError("say where: --to LOCATION[,LOCATION…], --from LOCATION, or both")
    if source is not None and source in to:
        raise MoveError(f"--from and --to both name {source}")
    if count is not None and (source is None or len(to) != 1):
        raise MoveError(
            "--replicas moves replicas from one location to another: give --from and --to"
        )
    if source is not None and len(to) > 1:
        raise MoveError("with --from, --to names the one location the replicas go to")
    if source is not None and source not in placement:
        raise MoveError(f"{shown} runs nothing in {source} (placed: {_placed(placement)})")
    new = dict(current)
    avoid = list(current.get("avoid") or [])
    if source is None:
        new["pin"] = list(to)
        new["avoid"] = [name for name in avoid if name not in to]
        if isinstance(new.get("weights"), dict):
            del new["weights"]
        return Plan(_clean(new), f"to {', '.join(to)}", to)
    if not to:
        pin = list(current.get("pin") or [])
        if pin and pin == [source]:
            raise MoveError(f"{shown} is pinned to {source} only: say where it goes with --to")
        new["pin"] = [name for name in pin if name != source]
        new["avoid"] = sorted({*avoid, source})
        return Plan(_clean(new), f"away from {source}", ())
    target = to[0]
    if not kind.divided or current.get("type") != "Split":
        if count is not None:
            how = (
                "is copied whole to every location it runs in"
                if not kind.divided
                else f"has a {current.get('type')} strategy, which does not divide replicas"
            )
            raise MoveError(f"--replicas needs replicas divided between locations; {shown} {how}")
        pin = sorted((set(placement) - {source}) | {target})
        new["pin"] = pin
        new["avoid"] = [name for name in avoid if name not in pin]
        return Plan(_clean(new), f"from {source} to {target}", (target,))
    return _exact(new, kind, shown, placement, source, target, count)


def _exact(
    new: Obj,
    kind: Workload,
    shown: str,
    placement: Mapping[str, int | None],
    source: str,
    target: str,
    count: int | None,
) -> Plan:
    """Move `count` (default: all) of `source`'s replicas to `target`, nothing else."""
    have = placement.get(source) or 0
    moved = have if count is None else count
    if have == 0:
        raise MoveError(f"{shown} runs no replicas in {source} (placed: {_placed(placement)})")
    if not 1 <= moved <= have:
        raise MoveError(f"{shown} runs {have} replicas in {source}: --replicas must be 1 to {have}")
    if kind.plural == "jobs" and moved < have:
        raise MoveError(
            f"a Job moves whole, location by location (a child Job's completions cannot "
            f"change): drop --replicas to move all {have} from {source}"
        )
    if new.get("spreadBy"):
        raise MoveError(
            f"the strategy of {shown} spreads by {new['spreadBy']}, which cannot hold exact "
            "counts: move whole locations with --to, or remove spreadBy first"
        )
    counts = {loc: value or 0 for loc, value in placement.items()}
    counts[source] -= moved
    counts[target] = counts.get(target, 0) + moved
    expected = {loc: value for loc, value in sorted(counts.items()) if value > 0}
    low, high = int(new.get("minPerLocation") or 0), new.get("maxPerLocation")
    for loc, value in expected.items():
        if value < low or (high is not None and value > high):
            raise MoveError(
                f"{loc} would run {value} replicas, outside the strategy's "
                f"minPerLocation..maxPerLocation ({low}..{high if high is not None else ''})"
            )
    new["pin"] = list(expected)
    new["weights"] = expected
    new["avoid"] = [name for name in new.get("avoid") or [] if name not in expected]
    plural = "" if moved == 1 else "s"
    words = (
        f"from {source} to {target}"
        if count is None
        else f"{moved} replica{plural} from {source} to {target}"
    )
    return Plan(_clean(new), words, tuple(expected), expected)


def _clean(strategy: Obj) -> Obj:
    """Without empty pin/avoid lists (an empty pin means "anywhere", the default)."""
    return {key: value for key, value in strategy.items() if value != []}


def _placed(placement: Mapping[str, int | None]) -> str:
    shown = [loc if n is None else f"{loc}={n}" for loc, n in sorted(placement.items())]
    return ", ".join(shown) or "nowhere"


def blockers(plan: Plan, verdicts: Sequence[Mapping[str, Any]]) -> list[str]:
    """Why the new strategy cannot do what the plan says, from the dry run's verdicts."""
    by_location = {v["location"]: v for v in verdicts}
    if not plan.needed:
        if any(v.get("eligible") for v in verdicts):
            return []
        return [f"{v['location']}: {v['reason']}" for v in verdicts] or ["no locations"]
    return [
        f"{loc}: {by_location[loc]['reason']}"
        for loc in plan.needed
        if loc in by_location and not by_location[loc].get("eligible")
    ]


def merge_patch_from(current: Mapping[str, Any], wanted: Mapping[str, Any]) -> Obj:
    """The RFC 7386 merge patch that turns `current` into `wanted`."""
    patch: Obj = {key: None for key in current if key not in wanted}
    for key, value in wanted.items():
        old = current.get(key)
        if key in current and old == value:
            continue
        if isinstance(value, dict) and isinstance(old, dict):
            patch[key] = merge_patch_from(old, value)
        else:
            patch[key] = value
    return patch


def undo_patch(previous: Mapping[str, Any], source: str, written: Mapping[str, Any]) -> Obj:
    """The patch of the strategy sub-resource that puts the previous strategy back: the
    object's own one, or none at all when it was inherited (namespace or default)."""
    if source != "object":
        return {"spec": None}
    return {"spec": merge_patch_from(written, previous)}


def undo_command(
    kind: Workload, name: str, namespace: str, patch: Obj, flags: Sequence[str]
) -> str:
    resource = f"{kind.plural}.mc.kmc.dev"
    args = ["kubectl", "patch", resource, name, "-n", namespace, "--subresource", "strategy"]
    text = json.dumps(patch, separators=(",", ":"))
    return shlex.join([*args, "--type=merge", "-p", text, *flags])


def wait_command(kind: Workload, name: str, namespace: str, flags: Sequence[str]) -> str:
    args = ["kubectl", "mc", "move", f"{kind.singular}/{name}", "-n", namespace, "--wait"]
    return shlex.join([*args, *flags])


# --- talking to the hub -------------------------------------------------------------------


@dataclass(frozen=True)
class Started:
    plan: Plan
    undo: Obj  # the patch that undoes it


def start(hub: Client, kind: Workload, name: str, namespace: str, request: Request) -> Started:
    """Write the strategy for `request`; KubeError (NotFound…), NoSuchLocation, MoveError."""
    from kubectl_mc.kube import KubeError

    attempts = 5
    for attempt in range(attempts):
        try:
            return _start(hub, kind, name, namespace, request)
        except KubeError as err:
            # The hub object changed between our read and our write (its status churns
            # while things move): read again, decide again.
            if err.code != 409 or attempt == attempts - 1:
                raise
    raise AssertionError("unreachable")


def _start(hub: Client, kind: Workload, name: str, namespace: str, request: Request) -> Started:
    obj = hub.get(kind.path(namespace, name))
    meta = obj["metadata"]
    strategy_path = kind.view(namespace, name) + "/strategy"
    current = hub.get(strategy_path)
    status = current.get("status") or {}
    if status.get("error"):
        raise MoveError(
            f"the strategy of {kind.shown(name)} does not parse ({status['error']}): "
            "fix it first with kubectl patch --subresource strategy"
        )
    known = [v["location"] for v in status.get("verdicts") or []]
    for location in request.locations():
        if location not in known:
            raise NoSuchLocation(location, known)
    placement = _placement_of(obj)
    moving = plan(request, kind, kind.shown(name), current.get("spec") or {}, placement)
    body = {
        "apiVersion": "mc.kmc.dev/v1alpha1",
        "kind": "Strategy",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "resourceVersion": meta["resourceVersion"],
        },
        "spec": moving.strategy,
    }
    dry = hub.request("PUT", strategy_path, body=body, params={"dryRun": "All"})
    problems = blockers(moving, (dry.get("status") or {}).get("verdicts") or [])
    if problems:
        raise MoveError(f"cannot move {kind.shown(name)} {moving.words}: {'; '.join(problems)}")
    written = hub.request("PUT", strategy_path, body=body)
    previous = current.get("spec") or {}
    return Started(
        moving, undo_patch(previous, status.get("source", ""), written.get("spec") or {})
    )


def _placement_of(obj: Obj) -> dict[str, int | None]:
    text = (obj["metadata"].get("annotations") or {}).get(PLACEMENT)
    try:
        placement = json.loads(text) if text else {}
    except json.JSONDecodeError:
        return {}
    return placement if isinstance(placement, dict) else {}


def settled(kind: Workload, view: Mapping[str, Any], expected: Mapping[str, int] | None) -> bool:
    """Done: placed as asked, every location Synced, and (for kinds with replicas) every
    replica ready and available where it is placed. A location being left is never Synced:
    it shows as Evacuating until its child is gone."""
    status = view.get("status") or {}
    rows = status.get("locations") or []
    placement = status.get("placement") or {}
    if not rows or not placement:
        return False
    if expected is not None and {k: v for k, v in placement.items() if v} != dict(expected):
        return False
    for row in rows:
        if row.get("state") != "Synced":
            return False
        desired = row.get("desired")
        counted = kind.plural in COUNTED and isinstance(desired, int)
        if counted and (row.get("ready") != desired or row.get("available") != desired):
            return False
    return True


class Stopped(Exception):
    """The wait ended before the move did (`rows`: the last state seen)."""

    def __init__(self, why: str, rows: list[Obj]) -> None:
        super().__init__(why)
        self.rows = rows


def wait(
    hub: Client,
    kind: Workload,
    name: str,
    namespace: str,
    expected: Mapping[str, int] | None,
    timeout: float,
    progress: Progress,
    interval: float = 0.5,
    clock: Callable[[], float] = time.monotonic,
) -> list[Obj]:
    """Show progress until `settled`; the final rows. Stopped on timeout, Ctrl-C, or an
    error from the hub, with the last rows seen."""
    from kubectl_mc.kube import KubeError

    deadline = clock() + timeout
    rows: list[Obj] = []
    try:
        while True:
            view = hub.get(kind.view(namespace, name))
            rows = list((view.get("status") or {}).get("locations") or [])
            progress.show(rows)
            if settled(kind, view, expected):
                return rows
            if clock() > deadline:
                raise Stopped("timed out", rows)
            time.sleep(interval)
    except KeyboardInterrupt:
        raise Stopped("interrupted", rows) from None
    except KubeError as err:
        raise Stopped(str(err), rows) from None
