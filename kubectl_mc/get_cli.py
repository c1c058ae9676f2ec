"""The `kubectl mc get` and `describe` commands: kubectl's flags, parsed here; the work is in
`get.py` and `describe.py`, imported only when a command runs so `kubectl mc` starts fast.
"""

from __future__ import annotations

from typing import Any

import click

from kubectl_mc.completion import (
    complete_namespaces,
    complete_resource_args,
    complete_subresources,
)
from kubectl_mc.options import hub_args, hub_options

_GET_HELP = """Display one or many resources: the hub's workloads with where they run, the
child clusters' objects, or the locations.

\b
Resource types:
  deployments (deploy), statefulsets (sts), replicasets (rs), jobs, daemonsets (ds)
      the hub's workloads and where they run (<type>.mc.kmc.dev);
      --subresource locations|strategy shows each location's state, or its verdict
  pods (po), events (ev), services (svc), endpointslices, configmaps (cm)
      the child clusters' objects in one list, LOCATION first (<type>.remote.kmc.dev)
  <type>.remote, e.g. deployments.remote, replicasets.remote
      the child clusters' own copies of a workload kind
  <type>.mc
      the hub view, said explicitly (the same as the bare name)
  locations (loc)
      the child clusters themselves (locations.kmc.dev)

\b
Examples:
  kubectl mc get deploy -n demo                        # NAME STRATEGY LOCATIONS READY AGE
  kubectl mc get deploy -n demo --subresource locations  # every object, every location
  kubectl mc get deploy web --subresource strategy -o wide
  kubectl mc get pods -n demo -o wide -w
  kubectl mc get deployments.remote web@us-east -n demo -o yaml
  kubectl mc get pods -A -o jsonpath='{range .items[*]}{.metadata.name}{"\\n"}{end}'
"""


def kubectl_get_options(f: Any) -> Any:
    """-n/-A/-l/--field-selector, and the hub's kubeconfig flags, as kubectl has them."""
    f = hub_options(f)
    for option in reversed(
        [
            click.option(
                "-n",
                "--namespace",
                shell_complete=complete_namespaces,
                help="The namespace (default: the context's).",
            ),
            click.option("-A", "--all-namespaces", is_flag=True, help="Across all namespaces."),
            click.option("-l", "--selector", help="Label selector, e.g. app=web,tier!=db."),
            click.option("--field-selector", help="Field selector, e.g. metadata.name=web."),
        ]
    ):
        f = option(f)
    return f


@click.command(help=_GET_HELP, context_settings={"max_content_width": 100})
@click.argument("args", nargs=-1, metavar="TYPE [NAME…]", shell_complete=complete_resource_args)
@click.option(
    "-o",
    "--output",
    help="wide, json, yaml, name, jsonpath=TEMPLATE, custom-columns=HEADER:PATH,…",
)
@click.option("--no-headers", is_flag=True, help="Tables without their header.")
@click.option("--show-labels", is_flag=True, help="A LABELS column last.")
@click.option("-w", "--watch", is_flag=True, help="After listing, print changes as they come.")
@click.option(
    "--subresource",
    shell_complete=complete_subresources,
    help="locations or strategy, for one object or a whole list.",
)
@kubectl_get_options
def get(
    args: tuple[str, ...],
    output: str | None,
    no_headers: bool,
    show_labels: bool,
    watch: bool,
    subresource: str | None,
    namespace: str | None,
    all_namespaces: bool,
    selector: str | None,
    field_selector: str | None,
    **hub: Any,
) -> None:
    from kubectl_mc import get_run

    get_run.get(
        args,
        output,
        no_headers,
        show_labels,
        watch,
        subresource,
        namespace,
        all_namespaces,
        selector,
        field_selector,
        get_run.HubFlags(**hub_args(hub)),
    )


@click.command(context_settings={"max_content_width": 100})
@click.argument("args", nargs=-1, metavar="TYPE [NAME…]", shell_complete=complete_resource_args)
@kubectl_get_options
def describe(
    args: tuple[str, ...],
    namespace: str | None,
    all_namespaces: bool,
    selector: str | None,
    field_selector: str | None,
    **hub: Any,
) -> None:
    """Show where a hub workload runs and why: its strategy and where it came from, the
    placement, each location's state, every location's verdict, conditions, and the Events
    of the hub object and of what the children made for it (ReplicaSets, pods).

    \b
    kubectl mc describe deployment web -n demo
    kubectl mc describe deploy -n demo           # every Deployment in demo
    """
    from kubectl_mc import get_run

    get_run.describe(
        args,
        namespace,
        all_namespaces,
        selector,
        field_selector,
        get_run.HubFlags(**hub_args(hub)),
    )
