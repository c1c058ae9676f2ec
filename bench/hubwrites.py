"""Writes the hub served during a benchmark, read from its own `apiserver_request_total`.

The hub's etcd and API server are everyone's: what kubectl-mc costs them per object a person
creates is the figure (issue 35). The counter is the hub's, not ours, so it counts every
writer the same way (the person's creates, our placement marks, status folds and Events,
anything else running against the hub) by resource, sub-resource and verb, whatever the
answer was (a refused or conflicting write cost the hub too). Leases are left apart: every
component renews its own on a timer, whatever the load. Dry runs are not writes.

Scraped from the hub's /metrics as the bed's admin: an observer, not the benchmark's user.
"""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from bench.report import row
from kmc_testbed import bed

WRITES = frozenset({"POST", "PUT", "PATCH", "APPLY", "DELETE", "DELETECOLLECTION"})
APART = frozenset({"leases"})
_LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')

Key = tuple[str, str]  # ("apps/deployments/status", "APPLY")


def scrape(cluster: str = bed.HUB, succeeded: bool = False) -> dict[Key, float]:
    """A cluster's write counters (the hub's unless named), summed by
    (group/resource[/subresource], verb); only those answered 2xx when `succeeded`."""
    state = bed.load()
    assert state is not None, "the test bed is not up"
    answer = bed.admin_client(state.cluster(cluster)).request("GET", "/metrics", timeout=60.0)
    assert answer.status == 200, answer.body[:300]
    return parse(answer.body.decode(), succeeded)


def parse(text: str, succeeded: bool = False) -> dict[Key, float]:
    """Write counters by (what, verb): every answer, or the 2xx ones (the writes that changed
    something: a child's own count of its changes) when `succeeded`."""
    counts: dict[Key, float] = defaultdict(float)
    for line in text.splitlines():
        if not line.startswith("apiserver_request_total{"):
            continue
        labels_text, _, value = line.rpartition("} ")
        labels = dict(_LABEL.findall(labels_text))
        if labels.get("verb") not in WRITES or labels.get("dry_run"):
            continue
        if labels.get("resource") in APART:
            continue
        if succeeded and not labels.get("code", "").startswith("2"):
            continue
        what = "/".join(
            filter(None, (labels.get("group"), labels.get("resource"), labels.get("subresource")))
        )
        counts[(what or "(core)", labels["verb"])] += float(value)
    return dict(counts)


@dataclass(frozen=True)
class HubWrites:
    """The hub's writes between two scrapes."""

    before: dict[Key, float]
    after: dict[Key, float]

    def by_kind(self) -> dict[Key, float]:
        keys = set(self.before) | set(self.after)
        delta = {k: self.after.get(k, 0.0) - self.before.get(k, 0.0) for k in keys}
        return {k: v for k, v in sorted(delta.items()) if v > 0}

    def total(self) -> float:
        return sum(self.by_kind().values())

    def rows(self, benchmark: str, figure: str, creates: int) -> list[dict[str, Any]]:
        """Writes per created object, all of them and then by resource and verb."""
        rows = [row(benchmark, f"{figure}_per_create_{creates}", self.total() / creates, None, 2)]
        for (what, verb), count in self.by_kind().items():
            rows.append(row(benchmark, f"{figure}.{what}.{verb}", count / creates, None, 2))
        return rows
