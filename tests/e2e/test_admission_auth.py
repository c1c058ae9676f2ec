"""The admission webhook answers only the hub's apiserver: a review sent straight to
kmc-apiserver without the front-proxy client certificate gets a bare 401 that names no
Location. (That the hub, which presents it through the bed's admission configuration, is
still answered is `test_aggregated.test_the_webhook_refuses_a_bad_strategy_at_apply_time`.)"""

from __future__ import annotations

import json
import ssl
import urllib.error
import urllib.request
from pathlib import Path

from kmc_testbed import bed, config

from .conftest import CHILDREN
from .test_placement import with_strategy
from .test_testbed import deployment


def review(namespace: str) -> bytes:
    obj = with_strategy(deployment("web", 1), {"type": "Split", "pin": ["mars"]})
    obj["metadata"]["namespace"] = namespace
    return json.dumps(
        {
            "apiVersion": "admission.k8s.io/v1",
            "kind": "AdmissionReview",
            "request": {
                "uid": "e2e",
                "kind": {"group": "apps", "version": "v1", "kind": "Deployment"},
                "operation": "CREATE",
                "object": obj,
            },
        }
    ).encode()


def post(url: str, body: bytes, cert: tuple[Path, Path] | None) -> tuple[int, str]:
    context = ssl.create_default_context(cafile=str(bed.kmc_folder() / "certs" / "ca.crt"))
    if cert is not None:
        context.load_cert_chain(str(cert[0]), str(cert[1]))
    request = urllib.request.Request(
        url, data=body, headers={"Content-Type": "application/json"}, method="POST"
    )
    try:
        with urllib.request.urlopen(request, context=context, timeout=10) as response:
            return int(response.status), response.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode()


def test_an_unauthenticated_admission_review_gets_401_and_no_location_name(
    installed: bed.State, namespace: str
) -> None:
    url = f"https://localhost:{installed.kmc_port}/admission/strategy"
    pki = config.state_dir() / "hub" / "pki"
    for cert in (None, (pki / "admin.crt", pki / "admin.key")):  # nobody; a hub user
        status, body = post(url, review(namespace), cert)
        assert status == 401, body
        assert json.loads(body)["reason"] == "Unauthorized"
        for name in (*CHILDREN, "mars"):
            assert name not in body
    # The hub's front-proxy certificate is the hub calling: it gets the verdict.
    proxy = (pki / "front-proxy-client.crt", pki / "front-proxy-client.key")
    status, body = post(url, review(namespace), proxy)
    assert status == 200, body
    verdict = json.loads(body)["response"]
    assert verdict["uid"] == "e2e" and verdict["allowed"] is False
    assert "no location named mars" in verdict["status"]["message"]
