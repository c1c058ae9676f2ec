"""The `kubectl mc get` and `describe` commands: kubectl's flags, parsed here; the work is in
`get.py` and `describe.py`, imported only when a command runs so `kubectl mc` starts fast.
"""

from __future__ import annotations

from typing import Any

import click

from kubectl_mc.cli import _hub_args, fail, hub_context, hub_options
from kubectl_mc.completion import (
    complete_namespaces,
    complete_resource_args,
    complete_subresources,
)

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
    from kubectl_mc import get as getting
    from kubectl_mc.kube import KubeError
    from kubectl_mc.printers import OutputError, parse_output
    from kubectl_mc.resources import UnknownResource

    opts = getting.GetOptions(
        namespace=namespace,
        all_namespaces=all_namespaces,
        selector=selector,
        field_selector=field_selector,
        no_headers=no_headers,
        show_labels=show_labels,
        watch=watch,
        subresource=subresource,
    )
    try:
        target = getting.parse_target(args)
        printer = parse_output(output)
    except (getting.GetError, UnknownResource, OutputError) as err:
        fail(f"error: {err}")
    client, context_namespace = hub_context(**_hub_args(hub))
    try:
        code = getting.run(client, context_namespace, target, opts, printer)
    except getting.GetError as err:
        fail(f"error: {err}")
    except KubeError as err:
        fail(str(err))
    raise SystemExit(code)


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
    from kubectl_mc import describe as describing
    from kubectl_mc.get import GetError, parse_target
    from kubectl_mc.kube import KubeError
    from kubectl_mc.resources import UnknownResource

    try:
        target = parse_target(args)
    except (GetError, UnknownResource) as err:
        fail(f"error: {err}")
    res = target.resource
    if not res.has_subresources:
        fail(
            f"error: kubectl mc describe shows the hub's workloads (deployments, statefulsets, "
            f"replicasets, jobs, daemonsets); for {res.qualified} use kubectl describe"
        )
    if all_namespaces and target.names:
        fail("error: a resource cannot be retrieved by name across all namespaces")
    client, context_namespace = hub_context(**_hub_args(hub))
    namespace = None if all_namespaces else namespace or context_namespace
    keys: list[tuple[str, str]] = []
    try:
        if target.names:
            keys = [(namespace or "", name) for name in target.names]
        else:
            params = {"labelSelector": selector or "", "fieldSelector": field_selector or ""}
            listing = client.get(res.path(namespace), **{k: v for k, v in params.items() if v})
            for item in listing.get("items") or []:
                meta = item.get("metadata") or {}
                keys.append((meta.get("namespace", ""), meta.get("name", "")))
            if not keys:
                where = f" in {namespace} namespace." if namespace else ""
                click.echo(f"No resources found{where}", err=True)
    except KubeError as err:
        fail(str(err))
    failed = False
    for index, (ns, name) in enumerate(keys):
        try:
            text = describing.describe(client, res, ns, name)
        except KubeError as err:
            click.echo(str(err), err=True)
            failed = True
            continue
        click.echo(("\n\n" if index else "") + text)
    raise SystemExit(1 if failed else 0)
