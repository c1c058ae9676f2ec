"""The `kubectl mc` command line (click). Commands import what they need when they run,
so `kubectl mc` starts about as fast as kubectl itself."""

from __future__ import annotations

import click

from kubectl_mc import __version__


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
def cli() -> None:
    """Transparent multi-cluster for Kubernetes: see and move what runs where."""


@cli.command()
def version() -> None:
    """Print the client version."""
    click.echo(f"Client Version: v{__version__}")


def main() -> None:
    cli(prog_name="kubectl mc")
