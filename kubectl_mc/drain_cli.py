"""The `kubectl mc cordon`, `uncordon` and `drain` commands, worded as kubectl's node ones.

Kept apart from `drain.py` so `kubectl mc` can register them without importing what they
need to run. One difference from nodes, said in the help: a cordoned location keeps nothing.
The placement loop only places on eligible locations, so what runs in a cordoned one moves
elsewhere at once (make before break); `drain` is a cordon that can wait for the end of it.
"""

from __future__ import annotations

from typing import Any

import click

from kubectl_mc.hub import fail, hub_client, seconds
from kubectl_mc.options import hub_args, hub_options


def _set(name: str, unschedulable: bool, hub: dict[str, Any]) -> tuple[Any, int, bool]:
    from kubectl_mc.drain import NoSuchLocation, set_unschedulable
    from kubectl_mc.kube import KubeError

    client = hub_client(**hub_args(hub))
    try:
        generation, changed = set_unschedulable(client, name, unschedulable)
    except NoSuchLocation as err:
        fail(f"error: {err}")
    except KubeError as err:
        fail(str(err))
    return client, generation, changed


def _said(name: str, verb: str, changed: bool) -> str:
    return f"location.kmc.dev/{name} {'' if changed else 'already '}{verb}"


@click.command()
@click.argument("name", metavar="LOCATION")
@hub_options
def cordon(name: str, **hub: Any) -> None:
    """Mark a location unschedulable.

    Nothing new is placed there and, unlike a node, what runs there moves to the other
    locations too, make before break. `kubectl mc drain --wait` follows that to the end.
    """
    _, _, changed = _set(name, True, hub)
    click.echo(_said(name, "cordoned", changed))


@click.command()
@click.argument("name", metavar="LOCATION")
@hub_options
def uncordon(name: str, **hub: Any) -> None:
    """Mark a location schedulable again: the strategies may use it from now on."""
    _, _, changed = _set(name, False, hub)
    click.echo(_said(name, "uncordoned", changed))


@click.command()
@click.argument("name", metavar="LOCATION")
@click.option("--wait", is_flag=True, help="Show progress and wait until nothing is left there.")
@click.option("--timeout", default="5m", help="How long --wait waits, e.g. 90s, 10m.")
@hub_options
def drain(name: str, wait: bool, timeout: str, **hub: Any) -> None:
    """Cordon a location and move everything out of it, make before break.

    With --wait, report how many of our objects are left there until none are.
    `kubectl mc uncordon` lets it be used again.
    """
    import shlex

    from kubectl_mc.drain import StillThere, wait_drained
    from kubectl_mc.kube import KubeError
    from kubectl_mc.move_cli import hub_flags

    client, generation, changed = _set(name, True, hub)
    click.echo(_said(name, "cordoned", changed))
    if not wait:
        click.echo(f"location.kmc.dev/{name} draining")
        return
    try:
        wait_drained(client, name, generation, seconds(timeout), click.echo)
    except StillThere as err:
        flags = hub_flags(hub)
        there = err.listed
        fail(
            f"error: timed out after {timeout} draining {name} ({err}); it stays cordoned and "
            f"keeps draining.{' Still there:' if there else ''}{there}\n"
            "To keep waiting:\n"
            f"  {shlex.join(['kubectl', 'mc', 'drain', name, '--wait', *flags])}\n"
            "To use it again:\n"
            f"  {shlex.join(['kubectl', 'mc', 'uncordon', name, *flags])}"
        )
    except KubeError as err:
        fail(str(err))
    click.echo(f"location.kmc.dev/{name} drained")
