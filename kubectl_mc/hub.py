"""The hub a command talks to, from kubectl's flags, and the way a command gives up.

Standard library only: `get` and `describe` run without click (see `cli.py`), and every
other command shares these with them.
"""

from __future__ import annotations

import sys

TYPE_CHECKING = False  # typing is not imported at run time: it costs a few milliseconds
if TYPE_CHECKING:
    from typing import NoReturn

    from kubectl_mc.kube import Client


def fail(message: str) -> NoReturn:
    """kubectl's way out: the message on stderr, exit 1."""
    print(message, file=sys.stderr, flush=True)
    sys.exit(1)


def seconds(text: str) -> float:
    """A kubectl duration (`30s`, `1m`, `500ms`, a bare number of seconds); 0 means none."""
    units = {"ms": 0.001, "s": 1, "m": 60, "h": 3600}
    for suffix in sorted(units, key=len, reverse=True):
        if text.endswith(suffix):
            value = float(text[: -len(suffix)]) * units[suffix]
            break
    else:
        value = float(text)
    return value or 3600.0


def hub_client(
    kubeconfig: str | None,
    context: str | None,
    cluster: str | None,
    user: str | None,
    request_timeout: str,
) -> Client:
    return hub_context(kubeconfig, context, cluster, user, request_timeout)[0]


def hub_context(
    kubeconfig: str | None,
    context: str | None,
    cluster: str | None,
    user: str | None,
    request_timeout: str,
) -> tuple[Client, str]:
    """A client for the hub, and the namespace its kubeconfig context names."""
    from kubectl_mc import kube
    from kubectl_mc.kubeconfig import KubeconfigError, load, select

    try:
        config, base = load(kubeconfig)
        selected = select(config, context, cluster, user, base=base)
        return kube.connect(selected, timeout=seconds(request_timeout)), selected.namespace
    except (KubeconfigError, kube.KubeError, OSError, ValueError) as err:
        fail(f"error: {err}")
