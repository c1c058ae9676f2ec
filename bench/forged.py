"""Forged identities straight at kmc-apiserver, around the hub: how many are let in.

Each attempt claims to be the hub's admin with `X-Remote-*` headers: without a client
certificate, with a hub user's own certificate (valid for the hub, not a front proxy), with a
front-proxy-named certificate from a CA nobody trusts, and on every path of both groups (and
the admission webhook). `forged_accepted` counts the answers that were not a refusal; the goal
is 0. A refusal is only what the guard says — 401, or a handshake refused for the unknown CA —
and each path is first asked with the front proxy's real certificate, which must succeed: a
dead server, a wrong path or any other error is counted in `forged_probe_failures` (goal 0),
never as a refusal.
"""

from __future__ import annotations

import contextlib
import json
import ssl
import sys
import tempfile
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from apiserver import certs
from bench import objects
from bench.report import emit
from kmc_testbed import bed, config

PATHS = (
    "/apis/remote.kmc.dev/v1alpha1/pods",
    "/apis/remote.kmc.dev/v1alpha1/namespaces/default/configmaps",
    "/apis/mc.kmc.dev/v1alpha1/deployments",
    "/apis/mc.kmc.dev/v1alpha1/namespaces/default/deployments/forged-probe/strategy",
    "/apis/mc.kmc.dev/v1alpha1",
    "/openapi/v2",
)
FORGED = {"X-Remote-User": "kmc-testbed-admin", "X-Remote-Group": "system:masters"}
ADMISSION = "/admission/strategy"
REVIEW = json.dumps(
    {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {"uid": "bench", "kind": {"kind": "ConfigMap"}, "object": {"metadata": {}}},
    }
).encode()


def attempt(url: str, ca: Path, cert: tuple[Path, Path] | None) -> int | None:
    """The HTTP status, or None when the TLS handshake itself was refused (or nothing
    answered: the caller tells which by asking with the right certificate first)."""
    context = ssl.create_default_context(cafile=str(ca))
    if cert is not None:
        context.load_cert_chain(str(cert[0]), str(cert[1]))
    post = url.endswith(ADMISSION)
    request = urllib.request.Request(
        url,
        data=REVIEW if post else None,
        headers={**FORGED, "Content-Type": "application/json"} if post else FORGED,
        method="POST" if post else "GET",
    )
    try:
        with urllib.request.urlopen(request, context=context, timeout=10) as response:
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
    proxy = (pki / "front-proxy-client.crt", pki / "front-proxy-client.key")
    accepted = attempts = failures = 0
    # The object the strategy path names must exist, or its answer is a 404 whoever asks.
    hub = bed.admin_client(state.cluster(bed.HUB))
    deployments = "/apis/apps/v1/namespaces/default/deployments"
    hub.request("POST", deployments, objects.deployment("forged-probe", 0))
    with contextlib.ExitStack() as cleanup, tempfile.TemporaryDirectory() as folder:
        cleanup.callback(hub.request, "DELETE", f"{deployments}/forged-probe")
        stranger = certs.ensure_ca(Path(folder), "ca", "stranger")
        foreign = certs.ensure_cert(Path(folder), "client", stranger, "front-proxy-client")
        # (certificate, what a refusal of it looks like): 401 from the guard, or no handshake.
        identities = (
            (None, 401),
            ((pki / "admin.crt", pki / "admin.key"), 401),
            ((foreign.cert, foreign.key), None),
        )
        for path in (*PATHS, ADMISSION):
            url = f"https://localhost:{state.kmc_port}{path}"
            if attempt(url, ca, proxy) != 200:
                failures += 1  # down, or not a path it serves: nothing below would mean a thing
                continue
            for cert, refused in identities:
                status = attempt(url, ca, cert)
                attempts += 1
                if status is not None and status < 400:
                    accepted += 1
                elif status != refused:
                    failures += 1
    return [
        {
            "benchmark": "security",
            "figure": "forged_accepted",
            "value": accepted,
            "attempts": attempts,
        },
        {"benchmark": "security", "figure": "forged_probe_failures", "value": failures},
    ]


def main(argv: list[str]) -> None:
    emit(forged())


if __name__ == "__main__":
    main(sys.argv[1:])
