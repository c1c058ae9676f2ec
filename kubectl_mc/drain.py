"""Cordon, uncordon and drain a location: shared by `kubectl mc drain` and `unjoin`.

A cordon is the Location's `spec.unschedulable`. The placement loop then finds the location
ineligible and gives its share to the others; the sync loop moves it make-before-break. So
"drained" is not something this module does but something it watches: the sync loop counts
our objects in every location (`status.objects`) together with the Location generation it
counted against, and only a count taken after the cordon's generation says the location is
empty — an older one may predate the cordon.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kubectl_mc.kube import Client

LOCATIONS = "/apis/kmc.dev/v1alpha1/locations"
MERGE_PATCH = "application/merge-patch+json"
NAMED = 10  # workloads named when a drain times out


class NoSuchLocation(Exception):
    """A location name the hub does not know; the message lists the ones it does."""

    def __init__(self, name: str, known: list[str]) -> None:
        listed = ", ".join(sorted(known)) or "none"
        super().__init__(f"no such location: {name} (locations: {listed})")


class StillThere(Exception):
    """The wait ran out with objects left; `left` is None when no count after the cordon came.
    `what` names the workloads still there, each with what holds it."""

    def __init__(self, left: int | None, what: list[str] | None = None) -> None:
        super().__init__(_left(left))
        self.left = left
        self.what = what or []

    @property
    def listed(self) -> str:
        """`what`, a line each, indented under the message's own line ("" when nothing)."""
        return "".join(f"\n  {line}" for line in self.what)


def get_location(hub: Client, name: str) -> dict[str, Any]:
    """The Location, or NoSuchLocation naming every location there is."""
    from kubectl_mc.kube import KubeError

    try:
        return hub.get(f"{LOCATIONS}/{name}")
    except KubeError as err:
        if err.code != 404:
            raise
    known = [item["metadata"]["name"] for item in hub.get(LOCATIONS).get("items", [])]
    raise NoSuchLocation(name, known)


def set_unschedulable(hub: Client, name: str, unschedulable: bool) -> tuple[int, bool]:
    """Cordon (or uncordon) a location: its generation afterwards, and whether it changed."""
    location = get_location(hub, name)
    if bool((location.get("spec") or {}).get("unschedulable")) == unschedulable:
        return int(location["metadata"].get("generation", 0)), False
    patched = hub.request(
        "PATCH",
        f"{LOCATIONS}/{name}",
        body={"spec": {"unschedulable": unschedulable}},
        content_type=MERGE_PATCH,
    )
    return int(patched["metadata"].get("generation", 0)), True


def objects_left(location: dict[str, Any], generation: int) -> int | None:
    """Our objects still in the location, by a count taken at `generation` or later."""
    status = location.get("status") or {}
    if int(status.get("observedGeneration") or 0) < generation:
        return None
    left = status.get("objects")
    return left if isinstance(left, int) else None


def wait_drained(
    hub: Client,
    name: str,
    generation: int,
    timeout: float,
    progress: Callable[[str], None],
    interval: float = 1.0,
) -> None:
    """Wait until a count taken after `generation` finds nothing of ours in the location,
    reporting every change of the count; StillThere when `timeout` runs out."""
    deadline = time.monotonic() + timeout
    last: object = None  # nothing to say until a count after the cordon comes
    while True:
        left = objects_left(get_location(hub, name), generation)
        if left != last:
            progress(f"draining {name}: {_left(left)}")
            last = left
        if left == 0:
            return
        if time.monotonic() > deadline:
            raise StillThere(left, still_there(hub, name))
        time.sleep(interval)


def _left(count: int | None) -> str:
    return f"{'?' if count is None else count} object{'' if count == 1 else 's'} left"


def still_there(hub: Client, name: str) -> list[str]:
    """Our workloads the location still runs, read through the punch-through lists, each with
    what its hub object says holds it (`kubectl mc drain` says it when it times out). What
    else of ours is there (ConfigMaps, Secrets, …) follows the workloads out."""
    from kubectl_mc.kube import KubeError
    from kubectl_mc.resources import REMOTE_KINDS, WORKLOADS

    found: list[str] = []
    try:
        for plural, kind in WORKLOADS.items():
            listed = hub.get(REMOTE_KINDS[plural].path(), labelSelector="kmc.dev/origin-uid")
            for item in listed.get("items") or []:
                meta = item.get("metadata") or {}
                if (meta.get("annotations") or {}).get("kmc.dev/location") != name:
                    continue
                if len(found) == NAMED:
                    return [*found, "…"]
                ns, obj = meta.get("namespace", ""), meta.get("name", "")
                said = _holding(hub, kind.path(ns, obj))
                found.append(f"{kind.shown(obj)} -n {ns}{': ' + said if said else ''}")
    except KubeError as err:
        return [*found, f"(could not list the rest: {err})"]
    return found


def _holding(hub: Client, path: str) -> str:
    """What the hub object says holds it: that it cannot be placed elsewhere, or what its move
    waits for ("moving: …"); "" when it says nothing is wrong."""
    from kubectl_mc.kube import KubeError

    try:
        status = hub.get(path).get("status") or {}
    except KubeError as err:
        return "gone from the hub" if err.code == 404 else str(err)
    conditions: list[dict[str, Any]] = status.get("conditions") or []
    for kind in ("kmc.dev/Placed", "kmc.dev/Synced"):
        found = next((c for c in conditions if c.get("type") == kind), {})
        if found.get("status") == "False":
            return str(found.get("message", ""))
    return ""
