"""Forged identities straight at kmc-apiserver, around the hub: how many are let in.

Each attempt claims to be the hub's admin with `X-Remote-*` headers: without a client
certificate, with a hub user's own certificate (valid for the hub, not a front proxy), with a
front-proxy-named certificate from a CA nobody trusts, and on every path of both groups.
`forged_accepted` counts the answers that were not a refusal; the goal is 0.
"""

from __future__ import annotations

import ssl
import sys
import tempfile
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from apiserver import certs
from bench.report import emit
from kmc_testbed import bed, config

PATHS = (
    "/apis/remote.kmc.dev/v1alpha1/pods",
    "/apis/remote.kmc.dev/v1alpha1/namespaces/default/configmaps",
    "/apis/mc.kmc.dev/v1alpha1/deployments",
    "/apis/mc.kmc.dev/v1alpha1/namespaces/default/deployments/x/strategy",
    "/apis/mc.kmc.dev/v1alpha1",
    "/openapi/v2",
)
FORGED = {"X-Remote-User": "kmc-testbed-admin", "X-Remote-Group": "system:masters"}


def attempt(url: str, ca: Path, cert: tuple[Path, Path] | None) -> int | None:
    """The HTTP status, or None when the TLS handshake itself was refused."""
    context = ssl.create_default_context(cafile=str(ca))
    if cert is not None:
        context.load_cert_chain(str(cert[0]), str(cert[1]))
    try:
        with urllib.request.urlopen(
            urllib.request.Request(url, headers=FORGED), context=context, timeout=10
        ) as response:
            return int(response.status)
    except urllib.error.HTTPError as err:
        return err.code
    except (urllib.error.URLError, ssl.SSLError, ConnectionError):
        return None


def forged() -> list[dict[str, Any]]:
    state = bed.load()
    assert state is not None and state.kmc_port is not None, "kubectl-mc is not installed"
    pki = config.state_dir() / "hub" / "pki"
    ca = bed.kmc_folder() / "certs" / "ca.crt"
    accepted = attempts = 0
    with tempfile.TemporaryDirectory() as folder:
        stranger = certs.ensure_ca(Path(folder), "ca", "stranger")
        foreign = certs.ensure_cert(Path(folder), "client", stranger, "front-proxy-client")
        identities = (None, (pki / "admin.crt", pki / "admin.key"), (foreign.cert, foreign.key))
        for path in PATHS:
            for cert in identities:
                status = attempt(f"https://localhost:{state.kmc_port}{path}", ca, cert)
                attempts += 1
                accepted += status is not None and status < 400
    return [
        {
            "benchmark": "security",
            "figure": "forged_accepted",
            "value": accepted,
            "attempts": attempts,
        }
    ]


def main(argv: list[str]) -> None:
    emit(forged())


if __name__ == "__main__":
    main(sys.argv[1:])
