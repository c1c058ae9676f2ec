"""The `kubectl mc move` command: flags in, kubectl-like words out.

Kept apart from `move.py` so `kubectl mc` can register the command without importing what
it needs to run (HTTP, tables): those load when the command runs.
"""

from __future__ import annotations

import shutil
import sys
from typing import Any

import click

from kubectl_mc.hub import fail, hub_client, seconds
from kubectl_mc.options import hub_args, hub_options


def namespace_of(given: str | None, hub: dict[str, Any]) -> str:
    """-n, else the kubeconfig context's namespace, else default (as kubectl)."""
    if given:
        return given
    from kubectl_mc.kubeconfig import KubeconfigError, load, select

    try:
        config, base = load(hub["kubeconfig"])
        return select(config, hub["context_"], hub["cluster"], hub["user"], base=base).namespace
    except KubeconfigError:
        return "default"  # connecting says what is wrong with the kubeconfig


def hub_flags(hub: dict[str, Any]) -> list[str]:
    """The hub flags given, for commands printed to be run next."""
    flags = []
    for option, key in (
        ("--kubeconfig", "kubeconfig"),
        ("--context", "context_"),
        ("--cluster", "cluster"),
        ("--user", "user"),
    ):
        if hub.get(key):
            flags += [option, str(hub[key])]
    return flags


@click.command()
@click.argument("resource", metavar="RESOURCE/NAME")
@click.option("--to", "to", default="", help="Where to: LOCATION[,LOCATION…] (pinned there).")
@click.option("--from", "source", help="Where from: LOCATION (avoided, unless --to says more).")
@click.option("--replicas", type=int, help="With --from and --to: move this many, not all.")
@click.option("--wait", is_flag=True, help="Show progress and wait until the move is done.")
@click.option("--timeout", default="5m", help="How long --wait waits, e.g. 90s, 10m.")
@click.option("-n", "--namespace", help="The namespace of the workload.")
@hub_options
def move(
    resource: str,
    to: str,
    source: str | None,
    replicas: int | None,
    wait: bool,
    timeout: str,
    namespace: str | None,
    **hub: Any,
) -> None:
    """Move a workload between locations, make before break.

    RESOURCE/NAME is a deployment (deploy), statefulset (sts), replicaset (rs), job or
    daemonset (ds). The move is a change of its strategy, which the sync loop carries out:
    new replicas are available before old ones go.

    \b
    kubectl mc move deployment/web --to eu-west          # everything there (pinned)
    kubectl mc move deployment/web --to eu-west,us-east  # divided between those two
    kubectl mc move deployment/web --from us-west        # anywhere but there (avoided)
    kubectl mc move deployment/web --from us-west --to eu-west --replicas 2
    kubectl mc move deployment/web --wait                # wait for a move under way
    """
    from kubectl_mc import move as moving
    from kubectl_mc.drain import NoSuchLocation
    from kubectl_mc.kube import KubeError
    from kubectl_mc.progress import Progress, line

    targets = tuple(sorted({loc.strip() for loc in to.split(",") if loc.strip()}))
    request = moving.Request(targets, source, replicas)
    try:
        kind, name = moving.parse_ref(resource)
    except moving.MoveError as err:
        fail(f"error: {err}")
    ns = namespace_of(namespace, hub)
    client = hub_client(**hub_args(hub))
    shown = kind.shown(name)
    waiting_only = not request.locations() and replicas is None
    if waiting_only and not wait:
        fail("error: say where: --to LOCATION[,LOCATION…], --from LOCATION, or both")
    started = None
    if not waiting_only:
        try:
            started = moving.start(client, kind, name, ns, request)
        except (moving.MoveError, NoSuchLocation) as err:
            fail(f"error: {err}")
        except KubeError as err:
            fail(str(err))
        click.echo(f"{shown} moving {started.plan.words}")
        if not wait:
            return
    else:
        try:
            client.get(kind.path(ns, name))
        except KubeError as err:
            fail(str(err))
    words = started.plan.words if started else ""
    tty = sys.stdout.isatty()
    width = shutil.get_terminal_size().columns if tty else 0
    progress = Progress(lambda text: click.echo(text, nl=False), tty, kind.divided, width)
    expected = started.plan.expected if started else None
    try:
        rows = moving.wait(client, kind, name, ns, expected, seconds(timeout), progress)
    except moving.Stopped as stop:
        progress.finish(stop.rows)
        why = {"timed out": f"timed out after {timeout}", "interrupted": "interrupted"}
        lines = [
            f"error: {why.get(str(stop), f'stopped ({stop})')} waiting for {shown} to move "
            f"{words}".rstrip()
            + f"; now: {line(stop.rows, kind.divided)}",
            "The move goes on in the background. To keep waiting:",
            "  " + moving.wait_command(kind, name, ns, hub_flags(hub)),
        ]
        if started is not None:
            lines += [
                "To undo it (back to the previous strategy):",
                "  " + moving.undo_command(kind, name, ns, started.undo, hub_flags(hub)),
            ]
        fail("\n".join(lines))
    progress.finish(rows)
    click.echo(f"{shown} moved {words}".rstrip())
