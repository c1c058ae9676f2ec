"""kmc-apiserver's command line: parsed, completed with defaults, validated, then run.

Everything a loop or handler needs to know about its configuration is on `Options`.
"""

from __future__ import annotations

import argparse
import os
from dataclasses import dataclass
from pathlib import Path

from aiohttp import web

from apiserver.leader import Timing
from apiserver.readlimit import WAITS_PER_READ


class OptionsError(ValueError):
    """A flag combination that cannot work; the message names the flag."""


@dataclass(frozen=True)
class Options:
    kubeconfig: str | None
    context: str | None
    bind_address: str
    secure_port: int
    cert_dir: Path
    tls_cert_file: Path | None
    tls_private_key_file: Path | None
    service_name: str
    service_namespace: str
    probe_interval: float
    probe_timeout: float
    grace_period: float
    cooldown: float
    capacity_hold: float
    remote_timeout: float
    read_concurrency: int
    max_queued_reads: int
    consistent_read_timeout: float
    remote_cache_idle: float
    remote_cache_max_objects: int
    child_authz_allowed_ttl: float
    child_authz_denied_ttl: float
    workers: int
    leader_elect: bool
    leader_elect_lease_duration: float
    leader_elect_renew_deadline: float
    leader_elect_retry_period: float
    cert_check_interval: float
    log_level: str

    @property
    def leader_timing(self) -> Timing:
        return Timing(
            lease=self.leader_elect_lease_duration,
            renew_deadline=self.leader_elect_renew_deadline,
            retry=self.leader_elect_retry_period,
        )

    @property
    def serving_hosts(self) -> tuple[str, ...]:
        svc, ns = self.service_name, self.service_namespace
        return ("localhost", "127.0.0.1", "::1", svc, f"{svc}.{ns}", f"{svc}.{ns}.svc")


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="kmc-apiserver",
        description="kubectl-mc's aggregated API server and control loops.",
    )
    p.add_argument(
        "--kubeconfig",
        default=os.environ.get("KUBECONFIG"),
        help="the hub's kubeconfig (default: $KUBECONFIG, else in-cluster)",
    )
    p.add_argument("--context", help="context of --kubeconfig to use")
    p.add_argument("--bind-address", default="127.0.0.1")
    p.add_argument("--secure-port", type=int, default=8443)
    p.add_argument(
        "--cert-dir",
        type=Path,
        default=Path("apiserver.local.config/certificates"),
        help="where a generated serving certificate is kept",
    )
    p.add_argument("--tls-cert-file", type=Path, help="serving certificate (else generated)")
    p.add_argument("--tls-private-key-file", type=Path)
    p.add_argument("--service-name", default="kmc-apiserver")
    p.add_argument("--service-namespace", default="kmc-system")
    p.add_argument(
        "--probe-interval",
        type=float,
        default=10.0,
        help="seconds between probes of a healthy location",
    )
    p.add_argument("--probe-timeout", type=float, default=5.0)
    p.add_argument(
        "--grace-period",
        type=float,
        default=60.0,
        help="seconds a location may be not Ready before its share moves elsewhere",
    )
    p.add_argument(
        "--cooldown",
        type=float,
        default=60.0,
        help="seconds a location must be Ready before it gets new replicas again",
    )
    p.add_argument(
        "--capacity-hold",
        type=float,
        default=300.0,
        help="seconds a location that could not schedule its share keeps the lower share",
    )
    p.add_argument(
        "--remote-timeout",
        type=float,
        default=3.0,
        help="seconds a location has to start answering a remote.kmc.dev read once another "
        "location has answered, before it is left out (4 times that while none has)",
    )
    p.add_argument(
        "--read-concurrency",
        type=int,
        default=4,
        help="lists (both groups) served at once; more wait their turn, so a burst of big "
        "lists cannot starve discovery, health checks and the loops. Reads waiting on "
        f"children (remote.kmc.dev gets, lists not served from the caches) have "
        f"{WAITS_PER_READ} times as many",
    )
    p.add_argument(
        "--max-queued-reads",
        type=int,
        default=200,
        help="reads waiting for their turn (see --read-concurrency); more are answered 429 "
        "with Retry-After",
    )
    p.add_argument(
        "--consistent-read-timeout",
        type=float,
        default=3.0,
        help="seconds an mc.kmc.dev read without resourceVersion waits for the hub cache to "
        "catch up with the hub before it reads the hub itself",
    )
    p.add_argument(
        "--remote-cache-idle",
        type=float,
        default=600.0,
        help="seconds a child's watch cache (remote.kmc.dev lists) is kept after its last read",
    )
    p.add_argument(
        "--remote-cache-max-objects",
        type=int,
        default=50000,
        help="a child resource with more objects than this is not cached but read live",
    )
    p.add_argument(
        "--child-authz-allowed-ttl",
        type=float,
        default=10.0,
        help="seconds a child's SubjectAccessReview allowing a caller is reused (a revoked "
        "grant can be seen through remote.kmc.dev for that long)",
    )
    p.add_argument(
        "--child-authz-denied-ttl",
        type=float,
        default=5.0,
        help="seconds a child's SubjectAccessReview denying a caller is reused",
    )
    p.add_argument(
        "--workers",
        type=int,
        default=32,
        help="reconciles at once in each of the placement and sync loops (they mostly wait on "
        "the hub and the children, so many more than the cores)",
    )
    p.add_argument(
        "--leader-elect",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="run the loops only while holding the kmc-system/kmc-apiserver Lease",
    )
    p.add_argument(
        "--leader-elect-lease-duration",
        type=float,
        default=15.0,
        help="seconds another replica waits, after it last saw the Lease renewed, before it "
        "takes it",
    )
    p.add_argument(
        "--leader-elect-renew-deadline",
        type=float,
        default=10.0,
        help="seconds the leader keeps acting after its last renewal began; past that it stops "
        "writing until it renews (less than --leader-elect-lease-duration)",
    )
    p.add_argument(
        "--leader-elect-retry-period",
        type=float,
        default=2.0,
        help="seconds between attempts to take or renew the Lease (less than "
        "--leader-elect-renew-deadline)",
    )
    p.add_argument(
        "--cert-check-interval",
        type=float,
        default=60.0,
        help="seconds between checks that the serving certificate is current (renewed, reloaded)",
    )
    p.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"])
    return p


def parse(argv: list[str] | None = None) -> Options:
    args = parser().parse_args(argv)
    options = Options(**{k: v for k, v in vars(args).items()})
    validate(options)
    return options


def validate(options: Options) -> None:
    if not 0 < options.secure_port < 65536:
        raise OptionsError(f"--secure-port {options.secure_port} is not a port")
    if (options.tls_cert_file is None) != (options.tls_private_key_file is None):
        raise OptionsError("--tls-cert-file and --tls-private-key-file go together")
    for flag, path in (
        ("--tls-cert-file", options.tls_cert_file),
        ("--tls-private-key-file", options.tls_private_key_file),
        ("--kubeconfig", options.kubeconfig),
    ):
        if path is not None and not Path(path).is_file():
            raise OptionsError(f"{flag} {path}: no such file")
    if options.probe_interval <= 0 or options.probe_timeout <= 0 or options.remote_timeout <= 0:
        raise OptionsError(
            "--probe-interval, --probe-timeout and --remote-timeout must be positive"
        )
    if options.consistent_read_timeout <= 0 or options.remote_cache_idle <= 0:
        raise OptionsError("--consistent-read-timeout and --remote-cache-idle must be positive")
    if options.remote_cache_max_objects < 0:
        raise OptionsError("--remote-cache-max-objects cannot be negative")
    if options.child_authz_allowed_ttl < 0 or options.child_authz_denied_ttl < 0:
        raise OptionsError(
            "--child-authz-allowed-ttl and --child-authz-denied-ttl cannot be negative"
        )
    if options.read_concurrency < 1:
        raise OptionsError("--read-concurrency must be at least 1")
    if options.max_queued_reads < 0:
        raise OptionsError("--max-queued-reads cannot be negative")
    if options.workers < 1:
        raise OptionsError("--workers must be at least 1")
    if options.grace_period < 0 or options.cooldown < 0 or options.capacity_hold < 0:
        raise OptionsError("--grace-period, --cooldown and --capacity-hold cannot be negative")
    lease, renew, retry = (
        options.leader_elect_lease_duration,
        options.leader_elect_renew_deadline,
        options.leader_elect_retry_period,
    )
    if not 0 < retry < renew < lease:
        # client-go's rule: a leader must stop before another may start, and try to renew
        # more than once before it must stop.
        raise OptionsError(
            f"--leader-elect-retry-period ({retry:g}s) < --leader-elect-renew-deadline "
            f"({renew:g}s) < --leader-elect-lease-duration ({lease:g}s) must hold, all positive"
        )
    if lease != int(lease):
        raise OptionsError(
            f"--leader-elect-lease-duration {lease:g}: whole seconds only (the Lease records "
            "leaseDurationSeconds)"
        )


OPTIONS = web.AppKey("options", Options)
