"""The hub's kubeconfig flags every command takes, as kubectl has them, and how they reach
`hub.hub_client`. A module of its own so commands defined in other modules take them
without importing the command tree."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

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


def hub_args(options: dict[str, Any]) -> dict[str, Any]:
    return {
        "kubeconfig": options["kubeconfig"],
        "context": options["context_"],
        "cluster": options["cluster"],
        "user": options["user"],
        "request_timeout": options["request_timeout"],
    }
