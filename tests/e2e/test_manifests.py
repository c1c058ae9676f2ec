"""What ships to run kubectl-mc in a cluster is accepted by a real kube-apiserver as it is:
`kubectl apply -k manifests/`, tried on a child cluster of the bed that has none of it."""

from __future__ import annotations

import re

from kmc_testbed import bed, config

from .conftest import Kubectl
from .test_locations import wait_until


def test_the_kustomization_applies_cleanly_to_a_fresh_cluster(
    testbed_up: bed.State, kubectl: dict[str, Kubectl]
) -> None:
    child = kubectl["us-west"]
    # A server-side dry run creates nothing, so the namespace the rest goes into must exist
    # (and not be still going from a run just before).
    phase = child.run(
        "get", "namespace", "kmc-system", "-o", "jsonpath={.status.phase}", check=False
    )
    if phase.stdout == "Terminating":
        child.run("wait", "--for=delete", "namespace/kmc-system", "--timeout=180s")
    made = child.run("get", "namespace", "kmc-system", check=False).returncode != 0
    if made:
        child.run("create", "namespace", "kmc-system")
    try:
        out = child.run(
            "apply", "-k", str(config.REPO_ROOT / "manifests"), "--dry-run=server"
        ).stdout
        kinds = {line.split("/")[0] for line in out.splitlines() if line.strip()}
        assert {
            "customresourcedefinition.apiextensions.k8s.io",
            "clusterrole.rbac.authorization.k8s.io",
            "deployment.apps",
            "apiservice.apiregistration.k8s.io",
            "validatingwebhookconfiguration.admissionregistration.k8s.io",
            "mutatingwebhookconfiguration.admissionregistration.k8s.io",
            "flowschema.flowcontrol.apiserver.k8s.io",
        } <= kinds
        assert "(server dry run)" in out
        image = child.run("kustomize", str(config.REPO_ROOT / "manifests")).stdout
        assert "image: kmc-apiserver:dev" in image
    finally:
        if made:
            child.run("delete", "namespace", "kmc-system", "--wait=false", "--ignore-not-found")


SERVICE_ACCOUNT = "system:serviceaccount:kmc-system:kmc-apiserver"


def _flow(hub: Kubectl, *args: str) -> tuple[str, str]:
    """The FlowSchema and priority level uids the hub's priority and fairness gave a request
    made as kmc-apiserver's service account (read from the response headers kubectl logs)."""
    out = hub.run(*args, f"--as={SERVICE_ACCOUNT}", "-v=8", check=False).stderr
    schema = re.search(r"X-Kubernetes-Pf-Flowschema-Uid: (\S+)", out, re.IGNORECASE)
    level = re.search(r"X-Kubernetes-Pf-Prioritylevel-Uid: (\S+)", out, re.IGNORECASE)
    assert schema and level, out
    return schema.group(1), level.group(1)


def test_the_leaders_lease_renewals_are_not_queued_behind_our_own_writes(
    testbed_up: bed.State, kubectl: dict[str, Kubectl]
) -> None:
    hub = kubectl["hub"]
    path = str(config.REPO_ROOT / "manifests" / "apiserver" / "flowschema.yaml")
    hub.run("apply", "--server-side", "--field-manager=kmc-test", "-f", path)
    try:
        ours = hub.json("get", "flowschema", "kmc-apiserver-leader-election")["metadata"]["uid"]
        election = hub.json("get", "prioritylevelconfiguration", "leader-election")
        lease = ("get", "lease", "kmc-apiserver", "-n", "kmc-system")
        # The hub classifies a request before it authorizes it, and remembers the schema.
        wait_until("the hub to use our FlowSchema", lambda: _flow(hub, *lease)[0] == ours, 60)
        assert _flow(hub, *lease) == (ours, election["metadata"]["uid"])
        # Its other requests stay where every service account's go.
        other = _flow(hub, "get", "deployments", "-n", "kmc-system")
        assert other[0] != ours and other[1] != election["metadata"]["uid"]
    finally:
        hub.run("delete", "-f", path, "--ignore-not-found")
