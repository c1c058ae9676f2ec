"""`hack/testbed`: build, start, stop and inspect the local test bed.

Every command is safe to repeat. Errors are one line on stderr and exit 1; progress goes to
stderr so stdout stays clean for tables and `env` output.
"""

from __future__ import annotations

import argparse
import shlex
import signal
import sys
import time
from typing import Any

from kmc_testbed import bed, build, config, install
from kubectl_mc.table import render


def log(message: str) -> None:
    print(f"testbed: {message}", file=sys.stderr, flush=True)


def cmd_build(_: argparse.Namespace) -> None:
    build.ensure_built(log)
    for target in build.TARGETS:
        print(f"{target.name} {target.version}: {target.folder}")


def cmd_up(_: argparse.Namespace) -> None:
    started = time.monotonic()
    with bed.locked():
        state = bed.up(log)
    log(f"up in {time.monotonic() - started:.1f}s; kubeconfig: {config.kubeconfig_path()}")
    print(clusters_table(state))


def cmd_add(args: argparse.Namespace) -> None:
    state = install.add(args.name, bed.parse_labels(args.labels), log, pull=args.pull)
    print(clusters_table(state))


def cmd_remove(args: argparse.Namespace) -> None:
    install.remove(args.name, log)


def cmd_install(_: argparse.Namespace) -> None:
    started = time.monotonic()
    with bed.locked():
        install.install(_loaded(), log)
    log(f"installed in {time.monotonic() - started:.1f}s")
    print(install.kubectl("get", "locations", "-o", "wide").stdout.rstrip())


def cmd_reconfigure(args: argparse.Namespace) -> None:
    with bed.locked():
        bed.reconfigure(_loaded(), args.name, args.apiserver_arg, log)
    log(f"{args.name}-apiserver restarted with {args.apiserver_arg or 'default flags'}")


def cmd_down(_: argparse.Namespace) -> None:
    with bed.locked():
        bed.down(log)


def cmd_stop(args: argparse.Namespace) -> None:
    with bed.locked():
        state = _loaded()
        component = bed.resolve(state, args.name)
        # An outage, not a shutdown: no chance to say goodbye.
        bed.kill(state, component, signal.SIGKILL)
    log(f"stopped {component}")


def cmd_start(args: argparse.Namespace) -> None:
    with bed.locked():
        state = _loaded()
        component = bed.resolve(state, args.name)
        bed.ensure_running(state, [component], log)
    log(f"{component} is running")


def cmd_status(_: argparse.Namespace) -> None:
    state = _loaded()
    rows = []
    for name, cluster, kind in state.components():
        port = _port(state, cluster, kind)
        up = bed.alive(state, name)
        rows.append(
            [
                name,
                cluster.name if cluster else "-",
                state.pids.get(name, "-") if up else "-",
                port,
                "up" if up else "down",
            ]
        )
    print(render(["name", "cluster", "pid", "port", "state"], rows))


def _port(state: bed.State, cluster: bed.Cluster | None, kind: str) -> int | None:
    if kind == "etcd":
        return state.etcd_ports["client"]
    if kind == bed.KMC:
        return state.kmc_port
    return cluster.ports.get(kind) if cluster else None


def cmd_clusters(_: argparse.Namespace) -> None:
    print(clusters_table(_loaded()))


def cmd_env(_: argparse.Namespace) -> None:
    print(f"export KUBECONFIG={shlex.quote(str(config.kubeconfig_path()))}")


def clusters_table(state: bed.State) -> str:
    rows: list[list[Any]] = []
    for c in state.clusters:
        version = bed.server_version(c)
        nodes, ready = bed.node_summary(c) if version != "-" else (0, 0)
        readiness = (
            "Unreachable" if version == "-" else ("Ready" if bed.cluster_ready(c) else "NotReady")
        )
        rows.append(
            [
                c.name,
                "hub" if c.role == bed.HUB else ("pull location" if c.pull else "location"),
                readiness,
                version,
                f"{ready}/{nodes}" if c.role != bed.HUB else "-",
                c.labels.get("topology.kubernetes.io/region", "-"),
                c.labels.get("topology.kubernetes.io/zone", "-"),
                c.server,
            ]
        )
    return render(
        ["cluster", "role", "status", "version", "nodes", "region", "zone", "server"], rows
    )


def _loaded() -> bed.State:
    state = bed.load()
    if state is None:
        raise bed.BedError("the test bed is not up; run `hack/testbed up` first")
    return state


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="hack/testbed",
        description="Real Kubernetes control planes on loopback: a hub and child clusters.",
    )
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")
    sub.add_parser("build", help="build (or find cached) kube-apiserver, etcd, kwok…").set_defaults(
        func=cmd_build
    )
    sub.add_parser("up", help="start etcd, the hub and the children; idempotent").set_defaults(
        func=cmd_up
    )
    sub.add_parser(
        "down", help="stop everything and delete the bed's data (logs stay)"
    ).set_defaults(func=cmd_down)
    sub.add_parser(
        "install", help="CRDs, kmc-apiserver from the working tree, every child joined"
    ).set_defaults(func=cmd_install)
    add = sub.add_parser("add", help="start one more child cluster")
    add.add_argument("name")
    add.add_argument(
        "--labels", default="", help="k=v,… traits, e.g. topology.kubernetes.io/region=ap"
    )
    add.add_argument(
        "--pull",
        action="store_true",
        help="a pull location: joined with `kubectl mc join --mode pull`, its kmc-agent run "
        "beside it (component kmc-agent-NAME); kmc-apiserver never gets its kubeconfig",
    )
    add.set_defaults(func=cmd_add)
    remove = sub.add_parser(
        "remove", help="unjoin a child cluster (drained), stop it (and its agent), delete its data"
    )
    remove.add_argument("name")
    remove.set_defaults(func=cmd_remove)
    reconfigure = sub.add_parser(
        "reconfigure", help="restart a cluster's apiserver with extra flags (none: defaults)"
    )
    reconfigure.add_argument("name")
    reconfigure.add_argument(
        "--apiserver-arg",
        action="append",
        default=[],
        metavar="FLAG",
        help="e.g. --apiserver-arg=--runtime-config=batch/v1=false",
    )
    reconfigure.set_defaults(func=cmd_reconfigure)
    stop = sub.add_parser("stop", help="kill a component (a cluster NAME means its apiserver)")
    stop.add_argument("name")
    stop.set_defaults(func=cmd_stop)
    start = sub.add_parser("start", help="bring a stopped component back, with its data")
    start.add_argument("name")
    start.set_defaults(func=cmd_start)
    sub.add_parser("status", help="every component: pid, port, up/down").set_defaults(
        func=cmd_status
    )
    sub.add_parser(
        "clusters", help="the hub and locations: version, nodes, readiness"
    ).set_defaults(func=cmd_clusters)
    sub.add_parser("env", help="print `export KUBECONFIG=…` for eval").set_defaults(func=cmd_env)
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        args.func(args)
    except (bed.BedError, build.BuildError) as err:
        print(f"testbed: error: {err}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    return 0
