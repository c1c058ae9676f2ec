"""`kmc-agent`: runs in a pull location, follows its work feed on the hub, writes its cluster.

It renews its location's Lease on the hub (`heartbeat.py`): the hub's only sign that the
location is there. Today it is given a hub kubeconfig (`--hub-kubeconfig`); joining with a
bootstrap token and a certificate from a hub CSR comes next (docs/pull.md). Its own cluster
is reached in-cluster (its ServiceAccount) or, outside a pod, through `--kubeconfig`.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import re
import sys
from importlib.metadata import version

import aiohttp

from apiserver.agent.apply import Writer
from apiserver.agent.follow import Agent
from apiserver.agent.heartbeat import Heartbeat
from apiserver.agent.report import Reporter
from apiserver.kube import config as kubeconfig
from apiserver.kube.client import Kube

log = logging.getLogger("apiserver.agent")

# A Location's name: a DNS label, as the Location CRD has it.
_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="kmc-agent",
        description="Follow one pull location's work feed on the hub and apply it here.",
    )
    parser.add_argument("--location", required=True, help="the Location this agent runs in")
    parser.add_argument("--hub-kubeconfig", required=True, help="how to reach the hub")
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
    return args


async def run(args: argparse.Namespace) -> None:
    hub_creds = await kubeconfig.from_file(args.hub_kubeconfig, args.hub_context)
    if args.kubeconfig:
        own = await kubeconfig.from_file(args.kubeconfig, args.context)
    else:
        own = await asyncio.to_thread(kubeconfig.in_cluster)
    agent_name = f"kmc-agent/{args.location}"
    connector = aiohttp.TCPConnector(limit=0)  # a watch holds one connection for minutes
    async with aiohttp.ClientSession(connector=connector) as session:
        hub = Kube(session, hub_creds, "hub", agent=agent_name)
        cluster = Kube(session, own, args.location, agent=agent_name)
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
    except kubeconfig.KubeconfigError as err:
        print(f"kmc-agent: error: {err}", file=sys.stderr)
        raise SystemExit(1) from err
