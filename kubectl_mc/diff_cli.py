"""The `kubectl mc diff` command: flags in, diffs out (the printing is `diff.py`'s)."""

from __future__ import annotations

import sys
from typing import Any

import click

from kubectl_mc.hub import hub_client
from kubectl_mc.options import hub_args, hub_options


@click.command()
@click.argument("resource", metavar="[TYPE/]NAME")
@click.option("--location", help="Only this location.")
@click.option("-n", "--namespace", help="The namespace of the workload.")
@hub_options
def diff(resource: str, location: str | None, namespace: str | None, **hub: Any) -> None:
    """Show, per location, what differs between a hub workload and what that location gets.

    TYPE is deployment (the default), statefulset, replicaset, job or daemonset. What a
    location gets is computed by kmc-apiserver as its sync loop computes it: the location's
    share of the replicas, its kmc.dev/overrides, its namespace's PlacementPolicy
    constraints. Exit status as kubectl diff: 0 no differences, 1 differences, 2 an error
    (among them a location whose overrides do not apply).

    \b
    kubectl mc diff web -n demo
    kubectl mc diff statefulset/db -n demo --location eu-west
    """
    from kubectl_mc import diff as diffs
    from kubectl_mc.kube import KubeError
    from kubectl_mc.move import MoveError, parse_ref
    from kubectl_mc.move_cli import namespace_of

    try:
        kind, name = parse_ref(resource if "/" in resource else f"deployment/{resource}")
    except MoveError as err:
        _error(f"error: {str(err).replace('kubectl mc move moves', 'kubectl mc diff shows')}")
    ns = namespace_of(namespace, hub)
    try:
        answer = hub_client(**hub_args(hub)).get(diffs.children_path(kind, ns, name))
    except KubeError as err:
        _error(str(err))
    text, problems, code = diffs.render(answer, kind.shown(name), location)
    sys.stdout.write(text)
    sys.stdout.flush()
    for line in problems:
        click.echo(line, err=True)
    sys.exit(code)


def _error(message: str) -> None:
    click.echo(message, err=True)
    sys.exit(2)
