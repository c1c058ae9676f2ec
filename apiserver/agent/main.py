"""`kmc-agent`: runs in a pull location, follows its work feed on the hub, writes its cluster.

It renews its location's Lease on the hub (`heartbeat.py`): the hub's only sign that the
location is there. It reaches the hub at `--hub-url` as `kmc:location:<name>`, with a client
certificate it got with the one-use bootstrap token of `kubectl mc join NAME --mode pull`
and keeps in its own cluster (`identity.py`), renewed before it expires or at once on
SIGHUP; or, for tests and people who make its hub identity themselves, with
`--hub-kubeconfig`. Its own cluster is reached in-cluster (its ServiceAccount) or, outside
a pod, through `--kubeconfig`.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime
import logging
import re
import signal
import ssl
import sys
from importlib.metadata import version
from pathlib import Path

import aiohttp

from apiserver.agent import identity
from apiserver.agent.apply import Writer
from apiserver.agent.follow import Agent
from apiserver.agent.heartbeat import Heartbeat
from apiserver.agent.report import Reporter
from apiserver.agent.tunnel import Tunnel
from apiserver.kube import config as kubeconfig
from apiserver.kube.client import ApiError, Credentials, Kube
from apiserver.locations import joins

log = logging.getLogger("apiserver.agent")

# A Location's name: a DNS label, as the Location CRD has it.
_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="kmc-agent",
        description="Follow one pull location's work feed on the hub and apply it here.",
    )
    parser.add_argument("--location", required=True, help="the Location this agent runs in")
    parser.add_argument("--hub-url", default=None, help="the hub's API server (https://…)")
    parser.add_argument("--hub-ca", default=None, help="CA file for --hub-url (default: system)")
    parser.add_argument(
        "--bootstrap-token",
        default=None,
        help="the token `kubectl mc join NAME --mode pull` printed: used once, when no "
        "certificate of its join is kept in this cluster yet (a kept one of an older join "
        "is replaced)",
    )
    parser.add_argument("--bootstrap-token-file", default=None, help="the same, from a file")
    parser.add_argument(
        "--certificate-seconds",
        type=int,
        default=24 * 3600,
        help="how long a certificate is asked for (the hub's signer may cut it); renewed "
        "70-80%% of the way through",
    )
    parser.add_argument(
        "--identity-secret",
        default=identity.SECRET,
        help="the Secret in kmc-system of this cluster that keeps its hub certificate",
    )
    parser.add_argument(
        "--hub-kubeconfig",
        default=None,
        help="instead of --hub-url and a certificate: a hub kubeconfig made by hand",
    )
    parser.add_argument("--hub-context", default=None)
    parser.add_argument("--kubeconfig", default=None, help="this cluster (default: in-cluster)")
    parser.add_argument("--context", default=None)
    parser.add_argument("--retry", type=float, default=5.0, help="seconds between retries")
    parser.add_argument(
        "--lease-duration",
        type=int,
        default=40,
        help="seconds the hub counts the location Ready after a renewal of its Lease "
        "(renewed every quarter of it)",
    )
    parser.add_argument("--log-level", default="info", choices=["debug", "info", "warning"])
    args = parser.parse_args(argv)
    if not _NAME.match(args.location):
        parser.error(f"--location: {args.location!r} is not a valid Location name")
    if args.retry <= 0:
        parser.error("--retry: must be more than 0")
    if args.lease_duration < 4:
        parser.error("--lease-duration: must be at least 4 (seconds)")
    if bool(args.hub_url) == bool(args.hub_kubeconfig):
        parser.error("give --hub-url (joined with a bootstrap token) or --hub-kubeconfig")
    if args.certificate_seconds < 600:
        parser.error("--certificate-seconds: must be at least 600 (Kubernetes' minimum)")
    if args.bootstrap_token_file and not args.bootstrap_token:
        try:
            args.bootstrap_token = Path(args.bootstrap_token_file).read_text().strip() or None
        except FileNotFoundError:
            pass  # a Secret mounted optional and gone: fine once a certificate is kept
        except OSError as err:
            parser.error(f"--bootstrap-token-file: {err}")
    return args


async def run(args: argparse.Namespace) -> None:
    if args.kubeconfig:
        own = await kubeconfig.from_file(args.kubeconfig, args.context)
    else:
        own = await asyncio.to_thread(kubeconfig.in_cluster)
    agent_name = f"kmc-agent/{args.location}"
    connector = aiohttp.TCPConnector(limit=0)  # a watch holds one connection for minutes
    async with aiohttp.ClientSession(connector=connector) as session:
        cluster = Kube(session, own, args.location, agent=agent_name)
        current: identity.Identity | None = None
        if args.hub_kubeconfig:
            hub_creds = await kubeconfig.from_file(args.hub_kubeconfig, args.hub_context)
            # No certificate of ours to renew; SIGHUP must not end the agent (its default).
            asyncio.get_running_loop().add_signal_handler(signal.SIGHUP, _nothing_to_renew)
        else:
            current = await _identity(args, session, cluster, agent_name)
            hub_creds = identity.credentials(args.hub_url, args.hub_ca, current)
        hub = Kube(session, hub_creds, "hub", agent=agent_name)
        reporter = Reporter(hub, args.location, cluster=cluster)
        agent = Agent(
            hub,
            Writer(cluster),
            args.location,
            retry=args.retry,
            cluster=cluster,
            reporter=reporter,
        )
        heartbeat = Heartbeat(hub, args.location, args.lease_duration)
        async with asyncio.TaskGroup() as tasks:
            tasks.create_task(heartbeat.run(), name="heartbeat")
            tasks.create_task(agent.run(), name="follow")
            # Punch-through reads, asked by the hub over the agent's own connection.
            tasks.create_task(Tunnel(hub, cluster, args.location).run(), name="tunnel")
            if current is not None:
                tasks.create_task(_renew(args, hub, cluster, current), name="renew")


def _nothing_to_renew() -> None:
    log.info("SIGHUP: nothing to renew: the hub identity is --hub-kubeconfig's")


async def _identity(
    args: argparse.Namespace, session: aiohttp.ClientSession, cluster: Kube, agent_name: str
) -> identity.Identity:
    """The certificate kept in this cluster, or a new one got with the bootstrap token."""
    kept = await identity.stored(cluster, args.identity_secret)
    now = datetime.datetime.now(datetime.UTC)
    if kept is not None and kept.common_name != joins.user(args.location):
        raise identity.IdentityError(
            f"Secret {args.identity_secret} in this cluster holds a certificate for "
            f"{kept.common_name!r}, not location {args.location}: delete it to join anew"
        )
    if kept is not None and identity.reusable(kept, args.bootstrap_token, now):
        log.info("using the certificate kept in Secret %s", args.identity_secret)
        return kept
    if not args.bootstrap_token:
        what = "an expired certificate" if kept else "no certificate"
        raise identity.IdentityError(
            f"{what} in Secret {args.identity_secret} and no --bootstrap-token: run `kubectl mc "
            f"join {args.location} --mode pull` on the hub for one"
        )
    context = ssl.create_default_context(cafile=args.hub_ca or None)
    creds = Credentials(args.hub_url.rstrip("/"), context, token=args.bootstrap_token)
    bootstrap = Kube(session, creds, "hub", agent=agent_name)
    given = identity.token_id(args.bootstrap_token)
    if kept is not None and kept.not_after > now:
        log.info(
            "the bootstrap token is of join %s, the certificate kept in Secret %s of join %s: "
            "joining anew",
            given,
            args.identity_secret,
            kept.join_id or "(none)",
        )
    got = await identity.ask(bootstrap, args.location, given, args.certificate_seconds)
    await identity.store(cluster, got, args.hub_url, args.identity_secret)
    return got


async def _renew(
    args: argparse.Namespace, hub: Kube, cluster: Kube, current: identity.Identity
) -> None:
    """Ask for the next certificate, as the current one, before it expires, or at once on
    SIGHUP (after the hub's CA or signer changed, say); switch to it."""
    now_please = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGHUP, now_please.set)
    while True:
        wait = (current.renew_after() - datetime.datetime.now(datetime.UTC)).total_seconds()
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(max(wait, 0.0)):
                await now_please.wait()
            log.info("SIGHUP: renewing the hub certificate now")
        now_please.clear()
        try:
            fresh = await identity.ask(
                hub, args.location, current.join_id, args.certificate_seconds
            )
            await identity.store(cluster, fresh, args.hub_url, args.identity_secret)
        except (ApiError, TimeoutError, identity.IdentityError) as err:
            log.warning("renewing the hub certificate failed: %s; trying again in 30s", err)
            await asyncio.sleep(30.0)
            continue
        hub.creds = identity.credentials(args.hub_url, args.hub_ca, fresh)
        current = fresh
        log.info("switched to the renewed certificate (serial %x)", fresh.serial)


def main(argv: list[str] | None = None) -> None:
    args = parse(argv)
    logging.basicConfig(
        level=args.log_level.upper(),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    log.info("kmc-agent %s for location %s", version("kubectl-mc"), args.location)
    try:
        asyncio.run(run(args))
    except KeyboardInterrupt:
        pass
    except (kubeconfig.KubeconfigError, identity.IdentityError) as err:
        print(f"kmc-agent: error: {err}", file=sys.stderr)
        raise SystemExit(1) from err
