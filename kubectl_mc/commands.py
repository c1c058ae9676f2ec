"""The `kubectl mc` command tree (click). Commands import what they need when they run.

`get` and `describe` are defined here too (in `get_cli.py`), for `--help`, completion and
command lines the quick path in `cli.py` leaves to click; the common ones never load this
module. kubectl passes its own flags through to plugins wherever the user typed them, so
the kubeconfig flags are accepted after the command name, as kubectl accepts them.
"""

from __future__ import annotations

import sys
from typing import Any

import click

from kubectl_mc.hub import fail, hub_client, seconds
from kubectl_mc.options import hub_args, hub_options

# Commands defined in their own modules, imported when they are run (or listed by --help):
# the module, and the command's name there when it is not the command's own.
_ELSEWHERE = {
    "completion": "kubectl_mc.completion",
    "cordon": "kubectl_mc.drain_cli",
    "describe": "kubectl_mc.get_cli",
    "diff": "kubectl_mc.diff_cli",
    "drain": "kubectl_mc.drain_cli",
    "exec": "kubectl_mc.streams_cli:exec_",
    "get": "kubectl_mc.get_cli",
    "logs": "kubectl_mc.streams_cli",
    "move": "kubectl_mc.move_cli",
    "port-forward": "kubectl_mc.streams_cli:port_forward",
    "uncordon": "kubectl_mc.drain_cli",
}


class _Group(click.Group):
    """A group whose commands in other modules load only when asked for."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *_ELSEWHERE})

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name in _ELSEWHERE:
            import importlib

            module, _, attribute = _ELSEWHERE[name].partition(":")
            command = getattr(importlib.import_module(module), attribute or name)
            assert isinstance(command, click.Command)
            return command
        return super().get_command(ctx, name)


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
def cli() -> None:
    """Transparent multi-cluster for Kubernetes: see and move what runs where."""


@cli.command()
@click.option("--client", "client_only", is_flag=True, help="The client version only.")
@click.option("-o", "--output", help="yaml or json.")
@hub_options
def version(client_only: bool, output: str | None, **hub: Any) -> None:
    """Print the client version, the hub's, and whether kmc-apiserver serves its API groups."""
    from kubectl_mc import version as versions

    if output not in (None, "", "json", "yaml"):
        fail("error: --output must be 'yaml' or 'json'")
    found: dict[str, Any] = {"clientVersion": versions.client_version()}
    problem = None
    if not client_only:
        from kubectl_mc.kube import KubeError

        try:
            found.update(versions.server_versions(hub_client(**hub_args(hub))))
        except KubeError as err:
            problem = str(err)
    if output:
        from kubectl_mc.printers import dump_json, dump_yaml

        click.echo(dump_json(found) if output == "json" else dump_yaml(found))
    else:
        click.echo(versions.text(found))
    if problem:
        fail(problem)
    if not client_only and not versions.healthy(found):
        sys.exit(1)


@cli.command()
@click.argument("name")
@click.option(
    "--mode",
    type=click.Choice(["push", "pull"]),
    default="push",
    help="push: kmc-apiserver dials the cluster with the credential given (stored on the hub); "
    "pull: an agent in the cluster dials the hub, which keeps no credential for it; a one-use "
    "bootstrap token and how to start the agent are printed.",
)
@click.option("--cluster-kubeconfig", help="kubeconfig of the cluster to join (push mode).")
@click.option("--cluster-context", help="context in --cluster-kubeconfig (default: current).")
@click.option("--labels", default="", help="traits as k=v,… (region, zone, cloud, …).")
@click.option(
    "--credentials",
    type=click.Choice(["auto", "as-is"]),
    default="auto",
    help="auto: a short-lived credential (exec plugin, token file, expiring token) is used "
    "once, to make a ServiceAccount for kmc-apiserver in the cluster, whose token is stored "
    "and renewed; as-is: store the given credential.",
)
@hub_options
def join(
    name: str,
    mode: str,
    cluster_kubeconfig: str | None,
    cluster_context: str | None,
    labels: str,
    credentials: str,
    **hub: Any,
) -> None:
    """Make a cluster a location of the hub.

    \b
    kubectl mc join us-east --cluster-kubeconfig us-east.yaml \\
        --labels topology.kubernetes.io/region=us
    kubectl mc join edge-7 --mode pull --labels topology.kubernetes.io/region=eu
    """
    from kubectl_mc import join as joining
    from kubectl_mc.kube import KubeError

    parsed = {}
    for item in filter(None, labels.split(",")):
        key, sep, value = item.partition("=")
        if not sep or not key:
            fail(f"error: --labels takes k=v pairs separated by commas; {item!r} is not one")
        parsed[key.strip()] = value.strip()
    if mode == "pull":
        if cluster_kubeconfig or cluster_context:
            fail(
                "error: --cluster-kubeconfig and --cluster-context are for --mode push: the hub "
                "keeps no credential for a pull location (its agent dials the hub)"
            )
        _join_pull(name, parsed, hub)
        return
    if not cluster_kubeconfig:
        fail("error: --cluster-kubeconfig is required (or --mode pull)")
    client = hub_client(**hub_args(hub))
    try:
        verb = joining.join(client, name, cluster_kubeconfig, cluster_context, parsed, credentials)
    except joining.JoinError as err:
        fail(f"error: {err}")
    except KubeError as err:
        fail(str(err))
    click.echo(f"location.kmc.dev/{name} {verb}")


def _join_pull(name: str, labels: dict[str, str], hub: dict[str, Any]) -> None:
    from kubectl_mc import join as joining
    from kubectl_mc import join_pull
    from kubectl_mc.kube import KubeError
    from kubectl_mc.kubeconfig import KubeconfigError, flatten, load, select

    if not joining.NAME_RE.match(name):
        fail(
            f'error: invalid location name "{name}": a lowercase RFC 1123 label '
            "(letters, digits and '-', at most 63 characters)"
        )
    args = hub_args(hub)
    client = hub_client(**args)
    try:
        config, base = load(args["kubeconfig"])
        selected = select(
            flatten(select(config, args["context"], args["cluster"], args["user"], base=base))
        )
    except KubeconfigError as err:
        fail(f"error: {err}")
    data = str(selected.cluster.get("certificate-authority-data") or "")
    import base64

    ca = base64.b64decode(data).decode() if data else ""
    try:
        verb, token, expires = join_pull.join(client, name, labels)
    except join_pull.JoinError as err:
        fail(f"error: {err}")
    except KubeError as err:
        fail(str(err))
    click.echo(f"location.kmc.dev/{name} {verb} (pull)")
    click.echo(join_pull.instructions(name, token, expires, client.server, ca), nl=False)


@cli.command()
@click.argument("name")
@click.option("--force", is_flag=True, help="Do not drain: forget it now, what runs there stays.")
@click.option("--timeout", default="5m", help="How long to wait for the drain, e.g. 90s, 10m.")
@click.option(
    "--cluster-kubeconfig",
    help="kubeconfig of the cluster: also remove the ServiceAccount join made there.",
)
@click.option("--cluster-context", help="context in --cluster-kubeconfig (default: current).")
@hub_options
def unjoin(
    name: str,
    force: bool,
    timeout: str,
    cluster_kubeconfig: str | None,
    cluster_context: str | None,
    **hub: Any,
) -> None:
    """Stop using a cluster as a location.

    It is drained first (cordoned; everything moves elsewhere, make before break), then its
    Location and credentials are deleted. A ServiceAccount that join made in the cluster is
    removed with --cluster-kubeconfig; without it, unjoin says what is left there.
    """
    from kubectl_mc import join as joining
    from kubectl_mc.kube import KubeError

    client = hub_client(**hub_args(hub))
    try:
        joining.unjoin(
            client,
            name,
            force=force,
            timeout=seconds(timeout),
            progress=click.echo,
            kubeconfig=cluster_kubeconfig,
            context=cluster_context,
        )
    except joining.JoinError as err:
        fail(f"error: {err}")
    except KubeError as err:
        fail(str(err))
    click.echo(f"location.kmc.dev/{name} unjoined")


@cli.command()
@click.argument("name")
@hub_options
def revoke(name: str, **hub: Any) -> None:
    """Take a pull location's agent's rights on the hub away, and keep the rest.

    Its certificate opens nothing from then on (its feed, report, Lease and renewals are
    refused), the Location turns not Ready (then the grace and evacuation as for any silent
    location), and what runs in the location stays: its agent deletes nothing. `kubectl mc
    join NAME --mode pull` makes a new join; give its token to the agent and restart it.
    """
    from kubectl_mc import join_pull
    from kubectl_mc.kube import KubeError

    client = hub_client(**hub_args(hub))
    try:
        token_id = join_pull.revoke(client, name)
    except join_pull.JoinError as err:
        fail(f"error: {err}")
    except KubeError as err:
        fail(str(err))
    joined = f" (join {token_id})" if token_id else ""
    click.echo(f"location.kmc.dev/{name} revoked{joined}")
    click.echo(
        f"Its agent's certificate opens nothing on the hub now. To let it back: "
        f"`kubectl mc join {name} --mode pull`, and give its agent the new token."
    )
