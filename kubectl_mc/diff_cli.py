"""The `kubectl mc diff` command: flags in, diffs out (the printing is `diff.py`'s)."""

from __future__ import annotations

import sys
from typing import Any, NoReturn

import click

from kubectl_mc.hub import hub_client
from kubectl_mc.options import hub_args, hub_options


@click.command()
@click.argument("resource", metavar="[TYPE/]NAME", required=False)
@click.option(
    "-f",
    "--filename",
    help="Objects not applied yet (YAML or JSON; - for standard input): a workload or other "
    "placed object, or an Override or ClusterOverride.",
)
@click.option("--location", help="Only this location.")
@click.option("-n", "--namespace", help="The namespace of the workload.")
@hub_options
def diff(
    resource: str | None,
    filename: str | None,
    location: str | None,
    namespace: str | None,
    **hub: Any,
) -> None:
    """Show, per location, what differs between a hub workload and what that location gets.

    TYPE is deployment (the default), statefulset, replicaset, job or daemonset. What a
    location gets is computed by kmc-apiserver as its sync loop computes it: the location's
    share of the replicas, its kmc.dev/overrides, its namespace's PlacementPolicy
    constraints. Exit status as kubectl diff: 0 no differences, 1 differences, 2 an error
    (among them a location whose overrides do not apply).

    With -f, nothing is written: for an object of the file, where the placement engine would
    place it now and what each of those locations would get; for an Override or
    ClusterOverride, per object it targets and location, what the location gets now against
    what it would get with the file's version applied.

    \b
    kubectl mc diff web -n demo
    kubectl mc diff statefulset/db -n demo --location eu-west
    kubectl mc diff -f web.yaml -n demo
    kubectl mc diff -f eu-mirror-override.yaml
    """
    if (resource is None) == (filename is None):
        _error("error: give one of [TYPE/]NAME or -f FILE")
    if filename is not None:
        _diff_file(filename, location, namespace, hub)
    from kubectl_mc import diff as diffs
    from kubectl_mc.kube import KubeError
    from kubectl_mc.move import MoveError, parse_ref
    from kubectl_mc.move_cli import namespace_of

    assert resource is not None
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


def _diff_file(filename: str, location: str | None, namespace: str | None, hub: Any) -> None:
    """Each object of the file previewed by the server, its diffs printed; the exit code is
    the worst of them."""
    from kubectl_mc import diff as diffs
    from kubectl_mc.diff_file import FileError, Scopes, read_objects
    from kubectl_mc.kube import KubeError
    from kubectl_mc.move_cli import namespace_of

    try:
        objects = read_objects(filename)
    except FileError as err:
        _error(str(err))
    client = hub_client(**hub_args(hub))
    ns = namespace_of(namespace, hub)
    scopes = Scopes(client, filename)
    code = diffs.NO_DIFFERENCES
    for obj in objects:
        meta = obj.get("metadata")
        proposed = diffs.shown_name({**obj, "name": (meta or {}).get("name")})
        try:
            namespaced = scopes.namespaced(obj)
            given = (meta or {}).get("namespace") if isinstance(meta, dict) else None
            path = diffs.previews_path(given or ns if namespaced else None)
            answer = client.request("POST", path, obj)
        except (KubeError, FileError) as err:
            click.echo(str(err), err=True)
            code = diffs.ERROR
            continue
        now = obj.get("kind") in ("Override", "ClusterOverride")
        text, problems, found = diffs.render_preview(
            answer, proposed, location, "{} now" if now else "hub"
        )
        sys.stdout.write(text)
        sys.stdout.flush()
        for line in problems:
            click.echo(line, err=True)
        code = max(code, found)
    sys.exit(code)


def _error(message: str) -> NoReturn:
    click.echo(message, err=True)
    sys.exit(2)
