"""A location whose credentials are revoked: not Ready with a reason that says so, and
nothing of ours is deleted anywhere; with the credentials back it is Ready again."""

from __future__ import annotations

import base64
import contextlib
import json
import time
from collections.abc import Iterator
from typing import Any

import yaml

from kmc_testbed import bed
from tests.e2e.conftest import Kubectl
from tests.e2e.test_placement import wait_placement
from tests.e2e.test_testbed import deployment

REVOKED = "eu-west"


def condition(hub: Kubectl) -> dict[str, Any]:
    status = hub.json("get", "location", REVOKED).get("status", {})
    found: dict[str, Any] = next(c for c in status["conditions"] if c["type"] == "Ready")
    return found


@contextlib.contextmanager
def revoked(hub: Kubectl) -> Iterator[None]:
    """The Location's kubeconfig now presents a token the child has never issued."""
    secret = hub.json("get", "secret", f"location-{REVOKED}", "-n", "kmc-system")
    key = next(iter(secret["data"]))
    original = secret["data"][key]
    config = yaml.safe_load(base64.b64decode(original))
    for user in config["users"]:
        user["user"] = {"token": "revoked-token"}
    forged = base64.b64encode(yaml.safe_dump(config).encode()).decode()
    patch = ("patch", "secret", f"location-{REVOKED}", "-n", "kmc-system", "--type=merge", "-p")
    hub.run(*patch, json.dumps({"data": {key: forged}}))
    try:
        yield
    finally:
        hub.run(*patch, json.dumps({"data": {key: original}}))
    deadline = time.monotonic() + 60
    while condition(hub)["status"] != "True":
        assert time.monotonic() < deadline, f"{REVOKED} did not come back with its credentials"
        time.sleep(1)


def test_revoked_credentials_say_so_and_delete_nothing(
    installed: bed.State, kubectl: dict[str, Kubectl], namespace: str
) -> None:
    hub, child = kubectl["hub"], kubectl[REVOKED]
    hub.apply(deployment("web", 3), namespace)
    # Placed everywhere first: then there is something of ours in the child not to delete.
    deadline = time.monotonic() + 120
    while child.run("get", "deployment", "web", "-n", namespace, check=False).returncode != 0:
        assert time.monotonic() < deadline, f"web never reached {REVOKED}"
        time.sleep(0.5)
    with revoked(hub):
        revoked_and_nothing_deleted(hub, child, namespace)


def revoked_and_nothing_deleted(hub: Kubectl, child: Kubectl, namespace: str) -> None:
    deadline = time.monotonic() + 30
    while condition(hub)["status"] == "True":
        assert time.monotonic() < deadline, "the revoked location stayed Ready"
        time.sleep(0.5)
    ready = condition(hub)
    assert ready["reason"] == "Unauthorized", ready
    assert "credentials" in ready["message"] or "Unauthorized" in ready["message"]
    # Placed (or, past the grace period, moved) elsewhere, as for any location not Ready.
    wait_placement(hub, "deployment", "web", namespace, lambda p: REVOKED not in p, 30)
    time.sleep(bed.GRACE + 2)
    # Nothing was deleted: the Location, its Secret and the hub object are all there.
    hub.run("get", "location", REVOKED)
    hub.run("get", "secret", f"location-{REVOKED}", "-n", "kmc-system")
    hub.run("get", "deployment", "web", "-n", namespace)
    assert child.run("get", "namespace", namespace, check=False).returncode == 0
