"""The `kubectl mc` command line (click). Commands import what they need when they run,
so `kubectl mc` starts about as fast as kubectl itself.

kubectl passes its own flags through to plugins wherever the user typed them, so the
kubeconfig flags are accepted after the command name, as kubectl accepts them.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any, NoReturn, TypeVar

import click

F = TypeVar("F", bound=Callable[..., Any])


def hub_options(f: F) -> F:
    """--kubeconfig/--context/--cluster/--user/--request-timeout, as kubectl has them."""
    for option in reversed(
        [
            click.option("--kubeconfig", help="Path to the kubeconfig file (the hub)."),
            click.option("--context", "context_", help="The kubeconfig context to use."),
            click.option("--cluster", help="The kubeconfig cluster to use."),
            click.option("--user", help="The kubeconfig user to use."),
            click.option("--request-timeout", default="30s", help="e.g. 1s, 2m; 0 = none."),
        ]
    ):
        f = option(f)
    return f


def fail(message: str) -> NoReturn:
    click.echo(message, err=True)
    sys.exit(1)


def hub_client(
    kubeconfig: str | None,
    context: str | None,
    cluster: str | None,
    user: str | None,
    request_timeout: str,
) -> Any:
    return hub_context(kubeconfig, context, cluster, user, request_timeout)[0]


def hub_context(
    kubeconfig: str | None,
    context: str | None,
    cluster: str | None,
    user: str | None,
    request_timeout: str,
) -> tuple[Any, str]:
    """A client for the hub, and the namespace its kubeconfig context names."""
    from kubectl_mc import kube
    from kubectl_mc.kubeconfig import KubeconfigError, load, select

    try:
        config, base = load(kubeconfig)
        selected = select(config, context, cluster, user, base=base)
        return kube.connect(selected, timeout=_seconds(request_timeout)), selected.namespace
    except (KubeconfigError, kube.KubeError, OSError, ValueError) as err:
        fail(f"error: {err}")


def _seconds(text: str) -> float:
    units = {"ms": 0.001, "s": 1, "m": 60, "h": 3600}
    for suffix in sorted(units, key=len, reverse=True):
        if text.endswith(suffix):
            value = float(text[: -len(suffix)]) * units[suffix]
            break
    else:
        value = float(text)
    return value or 3600.0


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
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
            found.update(versions.server_versions(hub_client(**_hub_args(hub))))
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
@click.option("--cluster-kubeconfig", required=True, help="kubeconfig of the cluster to join.")
@click.option("--cluster-context", help="context in --cluster-kubeconfig (default: current).")
@click.option("--labels", default="", help="traits as k=v,… (region, zone, cloud, …).")
@hub_options
def join(
    name: str, cluster_kubeconfig: str, cluster_context: str | None, labels: str, **hub: Any
) -> None:
    """Make a cluster a location of the hub.

    \b
    kubectl mc join us-east --cluster-kubeconfig us-east.yaml \\
        --labels topology.kubernetes.io/region=us
    """
    from kubectl_mc import join as joining
    from kubectl_mc.kube import KubeError

    parsed = {}
    for item in filter(None, labels.split(",")):
        key, sep, value = item.partition("=")
        if not sep or not key:
            fail(f"error: --labels takes k=v pairs separated by commas; {item!r} is not one")
        parsed[key.strip()] = value.strip()
    client = hub_client(**_hub_args(hub))
    try:
        verb = joining.join(client, name, cluster_kubeconfig, cluster_context, parsed)
    except joining.JoinError as err:
        fail(f"error: {err}")
    except KubeError as err:
        fail(str(err))
    click.echo(f"location.kmc.dev/{name} {verb}")


@cli.command()
@click.argument("name")
@click.option("--force", is_flag=True, help="Do not drain: forget it now, what runs there stays.")
@click.option("--timeout", default="5m", help="How long to wait for the drain, e.g. 90s, 10m.")
@hub_options
def unjoin(name: str, force: bool, timeout: str, **hub: Any) -> None:
    """Stop using a cluster as a location.

    It is drained first (cordoned; everything moves elsewhere, make before break), then its
    Location and credentials are deleted.
    """
    from kubectl_mc import join as joining
    from kubectl_mc.kube import KubeError

    client = hub_client(**_hub_args(hub))
    try:
        joining.unjoin(client, name, force=force, timeout=_seconds(timeout), progress=click.echo)
    except joining.JoinError as err:
        fail(f"error: {err}")
    except KubeError as err:
        fail(str(err))
    click.echo(f"location.kmc.dev/{name} unjoined")


def _hub_args(options: dict[str, Any]) -> dict[str, Any]:
    return {
        "kubeconfig": options["kubeconfig"],
        "context": options["context_"],
        "cluster": options["cluster"],
        "user": options["user"],
        "request_timeout": options["request_timeout"],
    }


from kubectl_mc.completion import completion  # noqa: E402 (they use the above)
from kubectl_mc.get_cli import describe, get  # noqa: E402

cli.add_command(get)
cli.add_command(describe)
cli.add_command(completion)

from kubectl_mc.drain_cli import cordon, drain, uncordon  # noqa: E402 (they use the above)
from kubectl_mc.move_cli import move  # noqa: E402

cli.add_command(move)
cli.add_command(cordon)
cli.add_command(uncordon)
cli.add_command(drain)


def main() -> None:
    from kubectl_mc.argv import normalize
    from kubectl_mc.completion import COMPLETE_VAR, kubectl_complete

    if sys.argv[1:2] == ["__complete"]:  # cobra's convention: kubectl_complete-mc may be a
        kubectl_complete()  # one-line script running `kubectl-mc __complete "$@"`
        return
    try:
        cli.main(normalize(sys.argv[1:]), prog_name="kubectl mc", complete_var=COMPLETE_VAR)
    except KeyboardInterrupt:  # Ctrl-C ends a watch: quietly, as kubectl does
        sys.exit(130)
    except BrokenPipeError:  # `kubectl mc get … | head`
        sys.stderr.close()
        sys.exit(0)
