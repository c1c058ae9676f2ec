"""The hub's write count, read from its `apiserver_request_total` (bench/hubwrites.py)."""

from __future__ import annotations

from bench.hubwrites import HubWrites, parse


def sample(
    group: str, resource: str, sub: str, verb: str, value: int, code: int = 200, dry: str = ""
) -> str:
    labels = f'code="{code}",component="apiserver",dry_run="{dry}",group="{group}"'
    labels += f',resource="{resource}",subresource="{sub}",verb="{verb}",version="v1"'
    return f"apiserver_request_total{{{labels}}} {value}"


METRICS = "\n".join(
    [
        "# HELP apiserver_request_total [STABLE] Counter of apiserver requests",
        "# TYPE apiserver_request_total counter",
        sample("apps", "deployments", "", "POST", 10, code=201),
        sample("apps", "deployments", "", "POST", 2, code=409),
        sample("apps", "deployments", "status", "APPLY", 7),
        sample("", "configmaps", "", "POST", 3, dry="All"),
        sample("coordination.k8s.io", "leases", "", "PUT", 99),
        sample("", "events", "", "PATCH", 4),
        sample("apps", "deployments", "", "LIST", 50),
        'apiserver_request_total_other{verb="POST"} 1',
    ]
)


def test_writes_are_summed_by_resource_and_verb_leases_and_dry_runs_apart() -> None:
    assert parse(METRICS) == {
        ("apps/deployments", "POST"): 12.0,
        ("apps/deployments/status", "APPLY"): 7.0,
        ("events", "PATCH"): 4.0,
    }


def test_per_create_rows_are_the_difference_between_two_scrapes() -> None:
    before = parse(METRICS)
    after = {**before, ("apps/deployments", "POST"): 22.0, ("events", "PATCH"): 9.0}
    writes = HubWrites(before, after)
    assert writes.by_kind() == {("apps/deployments", "POST"): 10.0, ("events", "PATCH"): 5.0}
    rows = {r["figure"]: r["value"] for r in writes.rows("hub.writes", "hub_writes", 10)}
    assert rows == {
        "hub_writes_per_create_10": 1.5,
        "hub_writes.apps/deployments.POST": 1.0,
        "hub_writes.events.PATCH": 0.5,
    }
