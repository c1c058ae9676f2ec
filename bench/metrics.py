"""kmc-apiserver's own figures, read from its `/metrics` during a benchmark.

The bed's hub reaches kmc-apiserver as an aggregated server; so do we here, straight to its
port, with the hub's front-proxy client certificate and the identity it would pass on (the
bed's admin). What a benchmark reports about the loops (how long keys waited in the queues,
how many reconciles and retries) comes from here, not from guesses.
"""

from __future__ import annotations

import ssl
import urllib.request
from dataclasses import dataclass
from typing import Any

from bench.report import row
from kmc_testbed import bed, config


def scrape() -> dict[str, float]:
    """Every sample, by its name with labels (`workqueue_adds_total{name="sync"}`)."""
    state = bed.load()
    assert state is not None and state.kmc_port is not None, "kubectl-mc is not installed"
    pki = config.state_dir() / "hub" / "pki"
    context = ssl.create_default_context(cafile=str(bed.kmc_folder() / "certs" / "ca.crt"))
    context.load_cert_chain(pki / "front-proxy-client.crt", pki / "front-proxy-client.key")
    request = urllib.request.Request(
        f"https://localhost:{state.kmc_port}/metrics",
        headers={"X-Remote-User": "kubernetes-admin", "X-Remote-Group": "system:masters"},
    )
    with urllib.request.urlopen(request, context=context, timeout=30) as answer:
        text = answer.read().decode()
    samples = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, _, value = line.rpartition(" ")
            samples[name] = float(value)
    return samples


@dataclass(frozen=True)
class Loops:
    """The loops' work between two scrapes."""

    before: dict[str, float]
    after: dict[str, float]

    def _delta(self, name: str) -> float:
        return self.after.get(name, 0.0) - self.before.get(name, 0.0)

    def rows(self, benchmark: str) -> list[dict[str, Any]]:
        rows = []
        for queue in ("placement", "sync"):
            label = f'{{name="{queue}"}}'
            count = self._delta(f"workqueue_queue_duration_seconds_count{label}")
            waited = self._delta(f"workqueue_queue_duration_seconds_sum{label}")
            worked = self._delta(f"workqueue_work_duration_seconds_sum{label}")
            for figure, value in (
                (f"{queue}_reconciles", count),
                (f"{queue}_retries", self._delta(f"workqueue_retries_total{label}")),
                (f"{queue}_queue_wait_mean_ms", waited / count * 1000 if count else 0.0),
                (f"{queue}_work_mean_ms", worked / count * 1000 if count else 0.0),
            ):
                rows.append(row(benchmark, figure, value))
        return rows

    def status_writes(self, benchmark: str, per: int) -> list[dict[str, Any]]:
        """Our status writes to hub objects per `per` objects, by why they went (the fold's
        `kmc_status_writes_total`): which of them a quieter fold would have to cut."""
        return [
            row(
                benchmark,
                f"status_writes_{why}_per_object",
                self._delta(f'kmc_status_writes_total{{why="{why}"}}') / per,
                digits=2,
            )
            for why in ("first", "settled", "partway", "flipped", "placed")
        ]
