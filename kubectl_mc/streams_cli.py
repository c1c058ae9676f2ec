"""`kubectl mc logs`, `exec` and `port-forward`: kubectl's commands for pods of any location.

Kept apart from `logs.py`, `execute.py` and `portforward.py` so `kubectl mc` can register
the commands without importing what they need to run. Their flags are kubectl's; a pod is
`NAME` (found in whichever location holds it; a name in several is refused with their names)
or `NAME@LOCATION`.
"""

from __future__ import annotations

import sys
from typing import Any

import click

from kubectl_mc.hub import fail, hub_client, seconds
from kubectl_mc.move_cli import namespace_of
from kubectl_mc.options import hub_args, hub_options


def _say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


@click.command()
@click.argument("target", required=False, metavar="(POD | TYPE/NAME)")
@click.option("-l", "--selector", help="Pods whose labels match, in every location.")
@click.option("-c", "--container", help="The container (default: each pod's default one).")
@click.option("--all-containers", is_flag=True, help="Every container of each pod.")
@click.option("-f", "--follow", is_flag=True, help="Stream the logs, every location at once.")
@click.option("--since", help="Only lines newer than this, e.g. 10s, 5m, 1h.")
@click.option("--since-time", help="Only lines from this RFC 3339 time on.")
@click.option("--tail", type=int, default=None, help="Lines from the end (-l: 10; else all).")
@click.option("--timestamps", is_flag=True, help="Start every line with its time.")
@click.option(
    "--prefix/--no-prefix",
    default=None,
    help="Start every line with [location/pod/container] (default: unless one pod is named).",
)
@click.option(
    "--max-log-requests",
    type=int,
    default=5,
    show_default=True,
    help="With -f: how many streams may be followed at once.",
)
@click.option("-n", "--namespace", help="The namespace of the pods.")
@hub_options
def logs(
    target: str | None,
    selector: str | None,
    container: str | None,
    all_containers: bool,
    follow: bool,
    since: str | None,
    since_time: str | None,
    tail: int | None,
    timestamps: bool,
    prefix: bool | None,
    max_log_requests: int,
    namespace: str | None,
    **hub: Any,
) -> None:
    """Print the logs of a pod, or of every pod of a workload, from every location.

    \b
    kubectl mc logs web-7d4b9c-x2x9z            # one pod, wherever it runs
    kubectl mc logs web-7d4b9c-x2x9z@us-east    # the one in us-east
    kubectl mc logs deploy/web -f               # every pod of the hub Deployment, followed
    kubectl mc logs -l app=web --since 5m

    Lines start with [location/pod/container]. Following, a location that goes away is
    said on stderr and the others go on; its logs are taken up again, after the last line
    printed, when it answers.
    """
    from kubectl_mc import logs as reading
    from kubectl_mc.kube import KubeError

    if container and all_containers:
        fail("error: --container and --all-containers cannot be used together")
    if since and since_time:
        fail("error: at most one of --since and --since-time may be given")
    options = reading.Options(
        follow=follow,
        timestamps=timestamps,
        since_seconds=max(1, int(seconds(since))) if since else None,
        since_time=since_time,
        tail=tail if tail is not None else (10 if selector else -1),
    )
    client = hub_client(**hub_args(hub))
    ns = namespace_of(namespace, hub)
    try:
        found = reading.pods_of(client, ns, target, selector)
        sources = reading.sources(found.pods, container, all_containers, _say)
    except reading.LogsError as err:
        fail(str(err))
    except KubeError as err:
        fail(str(err))
    if follow and len(sources) > max_log_requests:
        fail(
            f"error: you are attempting to follow {len(sources)} log streams, but maximum "
            f"allowed concurrency is {max_log_requests}, use --max-log-requests to increase "
            "the limit"
        )
    one_pod = target is not None and reading.parse_target(target, None)[0] is None
    shown = prefix if prefix is not None else not (one_pod and len(sources) == 1)
    workload = found if found.selector is not None else None
    if not reading.run(
        client, ns, sources, options, shown, _say, workload, container, all_containers
    ):
        sys.exit(1)


@click.command("exec")
@click.argument("pod", metavar="POD[@LOCATION]")
@click.argument("command", nargs=-1, required=True, metavar="-- COMMAND [ARG...]")
@click.option("-c", "--container", help="The container (default: the pod's default one).")
@click.option("-i", "--stdin", is_flag=True, help="Pass stdin to the command.")
@click.option("-t", "--tty", is_flag=True, help="stdin is a terminal (use with -i).")
@click.option("-n", "--namespace", help="The namespace of the pod.")
@hub_options
def exec_(
    pod: str,
    command: tuple[str, ...],
    container: str | None,
    stdin: bool,
    tty: bool,
    namespace: str | None,
    **hub: Any,
) -> None:
    """Run a command in a pod, in whichever location holds it; its exit code is ours.

    \b
    kubectl mc exec web-7d4b9c-x2x9z -- ls /
    kubectl mc exec web-7d4b9c-x2x9z@eu-west -it -- sh
    """
    from kubectl_mc import execute
    from kubectl_mc.get_run import HubFlags

    flags = HubFlags(
        hub["kubeconfig"], hub["context_"], hub["cluster"], hub["user"], hub["request_timeout"]
    )
    execute.command((pod, *command), namespace, container, stdin, tty, flags)


@click.command("port-forward")
@click.argument("pod", metavar="POD[@LOCATION]")
@click.argument("ports", nargs=-1, required=True, metavar="[LOCAL:]REMOTE...")
@click.option(
    "--address",
    default="localhost",
    show_default=True,
    help="Addresses to listen on, comma-separated (localhost: 127.0.0.1 and ::1).",
)
@click.option("-n", "--namespace", help="The namespace of the pod.")
@hub_options
def port_forward(
    pod: str, ports: tuple[str, ...], address: str, namespace: str | None, **hub: Any
) -> None:
    """Forward local ports to a pod's ports, in whichever location holds it.

    \b
    kubectl mc port-forward web-7d4b9c-x2x9z 8080:80
    kubectl mc port-forward web-7d4b9c-x2x9z@us-west :80    # any free local port
    """
    from kubectl_mc import portforward
    from kubectl_mc.kube import KubeError

    pod = pod.removeprefix("pod/").removeprefix("pods/")
    client = hub_client(**hub_args(hub))
    try:
        pairs = portforward.parse_ports(list(ports))
        portforward.run(
            client,
            namespace_of(namespace, hub),
            pod,
            pairs,
            [a.strip() for a in address.split(",") if a.strip()],
            lambda text: click.echo(text),
        )
    except (portforward.PortForwardError, KubeError) as err:
        fail(str(err))
