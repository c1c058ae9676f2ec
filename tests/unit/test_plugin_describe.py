"""`kubectl mc describe`: the text, ages as kubectl prints them, and which child events belong."""

import datetime
from typing import Any

import pytest

from kubectl_mc.describe import (
    child_name_pattern,
    event_age,
    goes_with_rows,
    human_duration,
    render,
    render_follower,
)

NOW = datetime.datetime(2026, 12, 2, 16, 0, 0, tzinfo=datetime.UTC)
CREATED = (
    datetime.datetime(2026, 12, 2, 15, 0, tzinfo=datetime.UTC)
    .astimezone()
    .strftime("%a, %d %b %Y %H:%M:%S %z")
)

VIEW: dict[str, Any] = {
    "apiVersion": "mc.kmc.dev/v1alpha1",
    "kind": "Deployment",
    "metadata": {
        "name": "web",
        "namespace": "demo",
        "creationTimestamp": "2026-12-02T15:00:00Z",
        "labels": {"app": "web"},
    },
    "spec": {"replicas": 3, "strategy": {"type": "Split"}, "strategySource": "default"},
    "status": {
        "placement": {"us-east": 2, "eu-west": 1},
        "locations": [
            {
                "location": "eu-west",
                "desired": 1,
                "ready": 1,
                "available": 1,
                "syncedGeneration": 2,
                "state": "Synced",
                "message": "",
            },
            {
                "location": "us-east",
                "desired": 2,
                "ready": 1,
                "available": 1,
                "syncedGeneration": 1,
                "state": "Pending",
                "message": "waiting",
            },
        ],
        "conditions": [
            {
                "type": "kmc.dev/Placed",
                "status": "True",
                "reason": "Placed",
                "message": "eu-west=1, us-east=2",
            }
        ],
    },
}
STRATEGY: dict[str, Any] = {
    "kind": "Strategy",
    "spec": {"type": "Split"},
    "status": {
        "source": "default",
        "verdicts": [
            {"location": "eu-west", "eligible": True, "reason": "eligible"},
            {"location": "us-west", "eligible": False, "reason": "cordoned"},
        ],
    },
}


def event(
    reason: str, name: str, last: str, count: int = 1, first: str | None = None
) -> dict[str, Any]:
    return {
        "type": "Normal",
        "reason": reason,
        "message": f"{reason} happened",
        "involvedObject": {"kind": "Pod", "name": name},
        "source": {"component": "kubelet"},
        "firstTimestamp": first or last,
        "lastTimestamp": last,
        "count": count,
        "metadata": {"name": f"{name}.1"},
    }


def test_the_description_names_every_location_verdict_and_event() -> None:
    events = [
        ("us-east", event("Scheduled", "web-5d4f8b7c9-x2x4q", "2026-12-02T15:59:00Z")),
        ("(hub)", event("Placed", "web", "2026-12-02T15:58:00Z")),
    ]
    text = render(VIEW, STRATEGY, events, NOW)
    lines = text.splitlines()
    assert lines[:9] == [
        "Name:              web",
        "Namespace:         demo",
        "Kind:              Deployment",
        f"CreationTimestamp: {CREATED}",
        "Labels:            app=web",
        "Replicas:          3",
        'Strategy:          {"type":"Split"}',
        "Source:            default",
        "Placement:         eu-west=1, us-east=2",
    ]
    assert "Locations:" in lines and "Verdicts:" in lines and "Events:" in lines
    assert "  us-east   2        1      1          1                  Pending  waiting" in lines
    assert "  us-west   false     cordoned" in lines
    at = lines.index("Events:")
    assert lines[at + 1].split() == [
        "Location",
        "Type",
        "Reason",
        "Age",
        "From",
        "Object",
        "Message",
    ]
    assert lines[at + 3].split()[:4] == ["(hub)", "Normal", "Placed", "2m"]  # oldest first
    assert lines[at + 4].split()[:4] == ["us-east", "Normal", "Scheduled", "60s"]


def test_nothing_known_prints_none() -> None:
    bare = {
        "kind": "DaemonSet",
        "metadata": {"name": "d", "namespace": "n"},
        "spec": {},
        "status": {},
    }
    lines = render(bare, None, [], NOW).splitlines()
    assert "Replicas:" not in "\n".join(lines)
    assert lines[-1] == "Events:            <none>"
    assert "Strategy:          <none>" in lines


@pytest.mark.parametrize(
    ("seconds", "shown"),
    [
        (-5, "<invalid>"),
        (-1, "0s"),
        (0, "0s"),
        (119, "119s"),
        (120, "2m"),
        (150, "2m30s"),
        (600, "10m"),
        (3 * 3600, "3h"),
        (3 * 3600 + 60, "3h1m"),
        (8 * 3600, "8h"),
        (50 * 3600, "2d2h"),
        (10 * 86400, "10d"),
        (800 * 86400, "2y70d"),
        (3000 * 86400, "8y"),
    ],
)
def test_human_duration_is_apimachinerys(seconds: int, shown: str) -> None:
    assert human_duration(datetime.timedelta(seconds=seconds)) == shown


def test_a_repeated_event_says_how_often_and_over_how_long() -> None:
    e = event("BackOff", "web-1", "2026-12-02T15:59:00Z", count=4, first="2026-12-02T15:40:00Z")
    assert event_age(e, NOW) == "60s (x4 over 20m)"


@pytest.mark.parametrize(
    ("kind", "name", "yes", "no"),
    [
        (
            "Deployment",
            "web",
            ["web", "web-5d4f8b7c9", "web-5d4f8b7c9-x2x4q"],
            ["web-api", "web-api-5d4f8b7c9", "webb"],
        ),
        ("StatefulSet", "db", ["db", "db-0", "db-12"], ["db-x", "dbx-0"]),
        ("Job", "pi", ["pi", "pi-x2x4q", "pi-3-x2x4q"], ["pi-abcde"]),
        ("DaemonSet", "agent", ["agent-x2x4q"], ["agent-x2x4q-x2x4q"]),
    ],
)
def test_child_events_match_the_names_kubernetes_generates(
    kind: str, name: str, yes: list[str], no: list[str]
) -> None:
    pattern = child_name_pattern(kind, name)
    assert all(pattern.match(n) for n in yes)
    assert not any(pattern.match(n) for n in no)


def test_what_went_along_is_listed_per_location_from_the_locations_subresource() -> None:
    placement = {
        "kind": "Placement",
        "locations": [
            {
                "location": "eu-west",
                "along": [
                    {
                        "kind": "ConfigMap",
                        "name": "web-config",
                        "role": "dependency",
                        "present": True,
                    },
                    {
                        "kind": "Service",
                        "name": "web",
                        "role": "selector-follower",
                        "present": False,
                    },
                ],
            },
            {"location": "us-east", "along": []},
        ],
    }
    lines = render(VIEW, STRATEGY, [], NOW, (), placement).splitlines()
    at = lines.index("Went Along:")
    assert lines.index("Locations:") < at < lines.index("Verdicts:")
    assert [line.split() for line in lines[at + 1 : at + 5]] == [
        ["Location", "Object", "Role", "Present"],
        ["--------", "------", "----", "-------"],
        ["eu-west", "configmap/web-config", "dependency", "true"],
        ["eu-west", "service/web", "selector-follower", "false"],
    ]
    nothing = {"locations": [{"location": "us-east", "along": []}]}
    assert "Went Along:        <none>" in render(VIEW, STRATEGY, [], NOW, (), nothing)
    assert "Went Along" not in render(VIEW, STRATEGY, [], NOW)  # unreadable: left out


def test_a_follower_says_which_workloads_it_goes_with_and_where() -> None:
    locations = {
        "metadata": {"name": "web"},
        "locations": [
            {
                "location": "eu-west",
                "along": [
                    {"kind": "ConfigMap", "name": "web", "present": True},  # same name, other kind
                    {"kind": "Service", "name": "web", "present": True},
                ],
            },
            {
                "location": "us-east",
                "along": [{"kind": "Service", "name": "web", "present": False}],
            },
        ],
    }
    rows = goes_with_rows("deployments", locations, "Service", "web")
    assert rows == [["deployments/web", "eu-west", "true"], ["deployments/web", "us-east", "false"]]
    service = {
        "kind": "Service",
        "metadata": {
            "name": "web",
            "namespace": "demo",
            "annotations": {"kmc.dev/placement": '{"us-east": null, "eu-west": null}'},
        },
        "status": {
            "conditions": [
                {"type": "kmc.dev/Placed", "status": "True", "reason": "Placed", "message": "m"},
                {"type": "Theirs", "status": "True"},  # not ours: kubectl describe shows it
            ]
        },
    }
    lines = render_follower(service, rows, [], NOW).splitlines()
    assert "Placement:         eu-west, us-east" in lines
    at = lines.index("Goes With:")
    assert lines[at + 3].split() == ["deployments/web", "eu-west", "true"]
    assert [line.split()[0] for line in lines if line.startswith("  kmc")] == ["kmc.dev/Placed"]
    alone = render_follower({"kind": "ConfigMap", "metadata": {"name": "c"}}, [], [], NOW)
    assert "Placement:         <none>: it stays on the hub" in alone.splitlines()
    assert "Goes With:         <none>" in alone.splitlines()


def test_overrides_are_listed_per_location_only_when_there_are_some() -> None:
    plain = {"locations": [{"location": "us-east", "rules": []}]}
    assert "Overrides" not in render(VIEW, STRATEGY, [], NOW, (), None, plain)
    children = {
        "locations": [
            {"location": "eu-west", "rules": []},
            {
                "location": "us-east",
                "rules": [
                    'kmc.dev/overrides["*"][0] (env)',
                    'kmc.dev/overrides["us-east"][0] (image)',
                ],
            },
            {"location": "us-west", "rules": [], "error": "no such path"},
        ]
    }
    text = render(VIEW, STRATEGY, [], NOW, (), None, children)
    section = text[text.index("Overrides:") :].splitlines()[:5]
    assert section == [
        "Overrides:",
        "  Location  Rules" + " " * 69 + "Error",
        "  --------  -----" + " " * 69 + "-----",
        "  eu-west   <none>",
        '  us-east   kmc.dev/overrides["*"][0] (env), kmc.dev/overrides["us-east"][0] (image)',
    ]
    assert text[text.index("Overrides:") :].splitlines()[5].endswith("no such path")
