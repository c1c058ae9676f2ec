"""`kubectl mc describe`: one hub workload, where it runs and why, in kubectl-describe's shape.

Everything comes from the server, read concurrently: the `mc.kmc.dev` view (strategy,
placement, one row per location, conditions), its `strategy` sub-resource (each location's
verdict and the reason), its `locations` sub-resource (what went to each location with it:
its ConfigMaps, Services, namespace policy…), its `children` sub-resource (the override rules
each location gets; a section only when there are any), the hub's Events on the object, and
the children's Events through `events.remote.kmc.dev`. A child's Events are about objects
with other names — a Deployment's ReplicaSets `web-5d4f8b7c9` and pods `web-5d4f8b7c9-x2x4q`
— so they are matched by the names Kubernetes generates from the workload's name (random
suffixes use its safe alphabet, which is why `web-api`'s events do not show under `web`).
"""

from __future__ import annotations

import datetime
import json
import re
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from kubectl_mc.kube import Client, KubeError, Obj
from kubectl_mc.resources import REMOTE_KINDS, Resource

HUB = "(hub)"
# k8s.io/apimachinery/pkg/util/rand: generated suffixes and hashes use only these.
_SAFE = "[bcdfghjklmnpqrstvwxz2456789]"
_CHILD_NAMES = {
    "Deployment": rf"-{_SAFE}{{1,10}}(-{_SAFE}{{5}})?",  # ReplicaSet, pod
    "StatefulSet": r"-\d+",  # pod
    "ReplicaSet": rf"-{_SAFE}{{5}}",
    "DaemonSet": rf"-{_SAFE}{{5}}",
    "Job": rf"(-\d+)?-{_SAFE}{{5}}",  # pod (indexed: name-index-xxxxx)
}


def child_name_pattern(kind: str, name: str) -> re.Pattern[str]:
    """Names of the objects a child makes for a workload: itself and what it generates."""
    return re.compile(rf"^{re.escape(name)}({_CHILD_NAMES.get(kind, '')})?$")


def describe(client: Client, res: Resource, namespace: str, name: str) -> str:
    """The description of one object; KubeError if the object cannot be read."""
    from concurrent.futures import ThreadPoolExecutor

    def hub_events() -> list[Obj]:
        path = f"/api/v1/namespaces/{namespace}/events"
        items: list[Obj] = client.get(path, fieldSelector=f"involvedObject.name={name}")["items"]
        return items

    def child_events() -> list[Obj]:
        items: list[Obj] = client.get(REMOTE_KINDS["events"].path(namespace))["items"]
        return items

    def children() -> Obj | None:
        try:
            found: Obj = client.get(res.path(namespace, name, "children"))
        except KubeError as err:
            if err.code == 404:  # a kmc-apiserver from before overrides: nothing to show
                return None
            raise
        return found

    calls: list[Callable[[], Any]] = [
        lambda: client.get(res.path(namespace, name)),
        lambda: client.get(res.path(namespace, name, "strategy")),
        lambda: client.get(res.path(namespace, name, "locations")),
        hub_events,
        child_events,
        children,
    ]
    with ThreadPoolExecutor(max_workers=len(calls)) as pool:
        futures = [pool.submit(call) for call in calls]
    obj = futures[0].result()  # the object's own errors (NotFound…) are the command's
    extra: list[Any] = []
    notes: list[str] = []
    for future in futures[1:]:
        try:
            extra.append(future.result())
        except KubeError as err:  # the rest is best effort, as kubectl's describe is
            extra.append(None)
            notes.append(str(err))
    strategy, locations, hub_items, child_items, overrides = extra
    now = datetime.datetime.now(datetime.UTC)
    events = [(HUB, e) for e in hub_items or [] if _about(e, obj["kind"], name)]
    pattern = child_name_pattern(obj["kind"], name)
    for event in child_items or []:
        if pattern.match((event.get("involvedObject") or {}).get("name", "")):
            location = (event["metadata"].get("annotations") or {}).get("kmc.dev/location", "")
            events.append((location, event))
    return render(obj, strategy, events, now, notes, locations, overrides)


def describe_follower(client: Client, res: Resource, namespace: str, name: str) -> str:
    """The description of a hub object that goes with workloads (a Service, a ConfigMap):
    where it is placed, and which workloads it went there with. Those are read from the
    `locations` sub-resource of each workload of its namespace placed where it is (the server
    decides what follows what; the plugin does not guess), concurrently."""
    from concurrent.futures import ThreadPoolExecutor

    from kubectl_mc.resources import HUB_VIEWS

    obj = client.get(f"/api/v1/namespaces/{namespace}/{res.plural}/{name}")
    placed = _placement_of(obj)
    notes: list[str] = []

    def hub_events() -> list[Obj]:
        path = f"/api/v1/namespaces/{namespace}/events"
        items: list[Obj] = client.get(path, fieldSelector=f"involvedObject.name={name}")["items"]
        return [e for e in items if _about(e, res.kind, name)]

    def workloads(view: Resource) -> list[tuple[Resource, Obj]]:
        return [(view, item) for item in client.get(view.path(namespace))["items"]]

    with ThreadPoolExecutor(max_workers=len(HUB_VIEWS) + 1) as pool:
        events_future = pool.submit(hub_events)
        listed = [pool.submit(workloads, view) for view in HUB_VIEWS.values()]
        candidates: list[tuple[Resource, Obj]] = []
        for found in listed:
            try:
                candidates += found.result()
            except KubeError as err:
                notes.append(str(err))
        nearby = [
            (view, item)
            for view, item in candidates
            if placed & set((item.get("status") or {}).get("placement") or {})
        ]
        rows_of = [
            pool.submit(client.get, view.path(namespace, item["metadata"]["name"], "locations"))
            for view, item in nearby
        ]
        with_what: list[list[str]] = []
        for (view, _), answer in zip(nearby, rows_of, strict=True):
            try:
                with_what += goes_with_rows(view.plural, answer.result(), res.kind, name)
            except KubeError as err:
                notes.append(str(err))
        try:
            events = [(HUB, e) for e in events_future.result()]
        except KubeError as err:
            events, notes = [], [*notes, str(err)]
    return render_follower(obj, with_what, events, datetime.datetime.now(datetime.UTC), notes)


def _placement_of(obj: Obj) -> set[str]:
    text = ((obj.get("metadata") or {}).get("annotations") or {}).get("kmc.dev/placement")
    try:
        placement = json.loads(text) if text else {}
    except ValueError:
        return set()
    return set(placement) if isinstance(placement, dict) else set()


def goes_with_rows(plural: str, locations: Obj, kind: str, name: str) -> list[list[str]]:
    """(workload, location, present) for each location whose `along` lists the object."""
    workload = f"{plural}/{(locations.get('metadata') or {}).get('name', '')}"
    return [
        [workload, row.get("location", ""), "true" if item.get("present") else "false"]
        for row in locations.get("locations") or []
        for item in row.get("along") or []
        if item.get("kind") == kind and item.get("name") == name
    ]


def render_follower(
    obj: Obj,
    with_what: list[list[str]],
    events: list[tuple[str, Obj]],
    now: datetime.datetime,
    notes: Sequence[str] = (),
) -> str:
    meta, status = obj.get("metadata") or {}, obj.get("status") or {}
    placed = sorted(_placement_of(obj))
    fields = [
        ("Name", meta.get("name", "")),
        ("Namespace", meta.get("namespace", "")),
        ("Kind", str(obj.get("kind", ""))),
        ("CreationTimestamp", _timestamp(meta.get("creationTimestamp"))),
        ("Labels", _labels(meta.get("labels"))),
        ("Placement", ", ".join(placed) or "<none>: it stays on the hub"),
    ]
    width = max(len(key) for key, _ in fields) + 2
    lines = [f"{key + ':':<{width}}{value}" for key, value in fields]
    lines += _section("Goes With", ["Workload", "Location", "Present"], sorted(with_what), width)
    conditions = [c for c in status.get("conditions") or [] if c.get("type", "").startswith("kmc")]
    lines += _section(
        "Conditions",
        ["Type", "Status", "Reason", "Message"],
        [
            [c.get("type", ""), c.get("status", ""), c.get("reason", ""), c.get("message", "")]
            for c in conditions
        ],
        width,
    )
    lines += _events_section(events, now, width)
    lines += [f"Warning: {note}" for note in notes]
    return "\n".join(lines)


def _about(event: Obj, kind: str, name: str) -> bool:
    involved = event.get("involvedObject") or {}
    return bool(involved.get("name") == name and involved.get("kind") == kind)


def render(
    obj: Obj,
    strategy: Obj | None,
    events: list[tuple[str, Obj]],
    now: datetime.datetime,
    notes: Sequence[str] = (),
    locations: Obj | None = None,
    children: Obj | None = None,
) -> str:
    meta, spec, status = obj.get("metadata") or {}, obj.get("spec") or {}, obj.get("status") or {}
    fields: list[tuple[str, str]] = [
        ("Name", meta.get("name", "")),
        ("Namespace", meta.get("namespace", "")),
        ("Kind", str(obj.get("kind", ""))),
        ("CreationTimestamp", _timestamp(meta.get("creationTimestamp"))),
        ("Labels", _labels(meta.get("labels"))),
    ]
    if "replicas" in spec:
        fields.append(("Replicas", str(spec["replicas"])))
    strategy_spec = spec.get("strategy")
    if strategy is not None and "error" in (strategy.get("status") or {}):
        fields.append(("Strategy", f"<invalid>: {strategy['status']['error']}"))
    else:
        shown = json.dumps(strategy_spec, separators=(",", ":")) if strategy_spec else "<none>"
        fields.append(("Strategy", shown))
    source = spec.get("strategySource") or ((strategy or {}).get("status") or {}).get("source")
    fields.append(("Source", source or "<none>"))
    placement = status.get("placement") or {}
    fields.append(
        (
            "Placement",
            ", ".join(
                loc if share is None else f"{loc}={share}"
                for loc, share in sorted(placement.items())
            )
            or "<none>",
        )
    )
    width = max(len(key) for key, _ in fields) + 2
    lines = [f"{key + ':':<{width}}{value}" for key, value in fields]

    lines += _section(
        "Locations",
        ["Location", "Desired", "Ready", "Available", "Synced Generation", "State", "Message"],
        [
            [
                row.get("location", ""),
                _shown(row.get("desired")),
                _shown(row.get("ready")),
                _shown(row.get("available")),
                _shown(row.get("syncedGeneration")),
                row.get("state", ""),
                row.get("message", ""),
            ]
            for row in status.get("locations") or []
        ],
        width,
    )
    if locations is not None:  # without the sub-resource (unreadable), the section is left out
        lines += _section(
            "Went Along",
            ["Location", "Object", "Role", "Present"],
            along_rows(locations),
            width,
        )
    verdicts = ((strategy or {}).get("status") or {}).get("verdicts") or []
    lines += _section(
        "Verdicts",
        ["Location", "Eligible", "Reason"],
        [
            [v.get("location", ""), "true" if v.get("eligible") else "false", v.get("reason", "")]
            for v in verdicts
        ],
        width,
    )
    entries = (children or {}).get("locations") or []
    if any(e.get("rules") or e.get("error") for e in entries):
        lines += _section(
            "Overrides",
            ["Location", "Rules", "Error"],
            [
                [
                    e.get("location", ""),
                    ", ".join(e.get("rules") or []) or "<none>",
                    e.get("error", ""),
                ]
                for e in entries
            ],
            width,
        )
    lines += _section(
        "Conditions",
        ["Type", "Status", "Reason", "Message"],
        [
            [c.get("type", ""), c.get("status", ""), c.get("reason", ""), c.get("message", "")]
            for c in status.get("conditions") or []
        ],
        width,
    )
    lines += _events_section(events, now, width)
    lines += [f"Warning: {note}" for note in notes]
    return "\n".join(lines)


def _events_section(events: list[tuple[str, Obj]], now: datetime.datetime, width: int) -> list[str]:
    ordered = sorted(events, key=lambda pair: _last_seen(pair[1]))
    return _section(
        "Events",
        ["Location", "Type", "Reason", "Age", "From", "Object", "Message"],
        [
            [
                location,
                e.get("type", ""),
                e.get("reason", ""),
                event_age(e, now),
                _source(e),
                _object(e),
                " ".join(str(e.get("message", "")).split()),
            ]
            for location, e in ordered
        ],
        width,
    )


def along_rows(locations: Obj) -> list[list[str]]:
    """What went with the workload, a row per location and object, from its `locations`
    sub-resource (`kind/name` as kubectl names objects; a cluster-scoped one as it is)."""
    return [
        [
            row.get("location", ""),
            f"{str(item.get('kind', '')).lower()}/{item.get('name', '')}",
            str(item.get("role", "")),
            "true" if item.get("present") else "false",
        ]
        for row in locations.get("locations") or []
        for item in row.get("along") or []
    ]


def _section(title: str, headers: list[str], rows: Iterable[list[str]], width: int) -> list[str]:
    """A titled table as kubectl describe prints one: 2-space indent, dashes under headers."""
    body = [[str(cell) for cell in row] for row in rows]
    if not body:
        return [f"{title + ':':<{width}}<none>"]
    grid = [headers, ["-" * len(h) for h in headers], *body]
    widths = [max(len(row[i]) for row in grid) for i in range(len(headers))]
    out = [f"{title}:"]
    for row in grid:
        out.append("  " + "  ".join(c.ljust(widths[i]) for i, c in enumerate(row)).rstrip())
    return out


def _shown(value: Any) -> str:
    return "<none>" if value is None else str(value)


def _labels(labels: dict[str, str] | None) -> str:
    if not labels:
        return "<none>"
    return ",".join(f"{k}={v}" for k, v in sorted(labels.items()))


def _parse(text: str | None) -> datetime.datetime | None:
    if not text:
        return None
    try:
        return datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None


def _timestamp(text: str | None) -> str:
    """kubectl describe's RFC 1123 with a numeric zone, in local time."""
    when = _parse(text)
    return when.astimezone().strftime("%a, %d %b %Y %H:%M:%S %z") if when else "<unknown>"


def _first_seen(event: Obj) -> datetime.datetime | None:
    return (
        _parse(event.get("firstTimestamp"))
        or _parse(event.get("eventTime"))
        or _parse((event.get("metadata") or {}).get("creationTimestamp"))
    )


def _last_seen_or_none(event: Obj) -> datetime.datetime | None:
    series = event.get("series") or {}
    return (
        _parse(event.get("lastTimestamp"))
        or _parse(series.get("lastObservedTime"))
        or _first_seen(event)
    )


def _last_seen(event: Obj) -> datetime.datetime:
    return _last_seen_or_none(event) or datetime.datetime.min.replace(tzinfo=datetime.UTC)


def event_age(event: Obj, now: datetime.datetime) -> str:
    """kubectl describe's event age: `5m`, or `5m (x3 over 20m)` for a repeated event."""
    last, first = _last_seen_or_none(event), _first_seen(event)
    if last is None:
        return "<unknown>"
    count = (event.get("series") or {}).get("count") or event.get("count") or 1
    age = human_duration(now - last)
    if count > 1 and first is not None:
        return f"{age} (x{count} over {human_duration(now - first)})"
    return age


def _source(event: Obj) -> str:
    source = event.get("source") or {}
    return str(source.get("component") or event.get("reportingComponent") or "")


def _object(event: Obj) -> str:
    involved = event.get("involvedObject") or {}
    return f"{str(involved.get('kind', '')).lower()}/{involved.get('name', '')}"


def human_duration(delta: datetime.timedelta) -> str:
    """k8s.io/apimachinery's duration.HumanDuration, as kubectl describe prints ages."""
    seconds = int(delta.total_seconds())
    if seconds < -1:
        return "<invalid>"
    if seconds < 0:
        return "0s"
    if seconds < 60 * 2:
        return f"{seconds}s"
    minutes = seconds // 60
    if minutes < 10:
        rest = seconds % 60
        return f"{minutes}m{rest}s" if rest else f"{minutes}m"
    if minutes < 60 * 3:
        return f"{minutes}m"
    hours = minutes // 60
    if hours < 8:
        rest = minutes % 60
        return f"{hours}h{rest}m" if rest else f"{hours}h"
    if hours < 48:
        return f"{hours}h"
    if hours < 24 * 8:
        rest = hours % 24
        return f"{hours // 24}d{rest}h" if rest else f"{hours // 24}d"
    if hours < 24 * 365 * 2:
        return f"{hours // 24}d"
    if hours < 24 * 365 * 8:
        rest = (hours // 24) % 365
        years = hours // 24 // 365
        return f"{years}y{rest}d" if rest else f"{years}y"
    return f"{hours // 24 // 365}y"
