"""What ships to run kubectl-mc in a cluster is accepted by a real kube-apiserver as it is:
`kubectl apply -k manifests/`, tried on a child cluster of the bed that has none of it."""

from __future__ import annotations

import json
import re

from kmc_testbed import bed, config

from .conftest import Kubectl
from .test_locations import wait_until
from .test_placement import wait_placement
from .test_testbed import deployment


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
    installed: bed.State, kubectl: dict[str, Kubectl]
) -> None:
    """`hack/testbed install` applied manifests/apiserver/flowschema.yaml, as a real install."""
    hub = kubectl["hub"]
    ours = hub.json("get", "flowschema", "kmc-apiserver-leader-election")["metadata"]["uid"]
    election = hub.json("get", "prioritylevelconfiguration", "leader-election")
    lease = ("get", "lease", "kmc-apiserver", "-n", "kmc-system")
    # The hub classifies a request before it authorizes it, and remembers the schema.
    wait_until("the hub to use our FlowSchema", lambda: _flow(hub, *lease)[0] == ours, 60)
    assert _flow(hub, *lease) == (ours, election["metadata"]["uid"])
    # Its reads stay where every service account's go.
    other = _flow(hub, "get", "deployments", "-n", "kmc-system")
    assert other[0] != ours and other[1] != election["metadata"]["uid"]


def _dispatched(hub: Kubectl, schema: str) -> float:
    """Requests the hub's priority and fairness has let through under one FlowSchema."""
    text = hub.run("get", "--raw", "/metrics").stdout
    name = "apiserver_flowcontrol_dispatched_requests_total"
    return sum(
        float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line.startswith(name + "{") and f'flow_schema="{schema}"' in line
    )


def test_our_writes_yield_to_peoples_and_our_reviews_do_not_queue_behind_them(
    installed: bed.State, kubectl: dict[str, Kubectl], namespace: str
) -> None:
    hub = kubectl["hub"]
    writes = hub.json("get", "flowschema", "kmc-apiserver-writes")
    level = hub.json("get", "prioritylevelconfiguration", "kmc-apiserver-writes")
    users = hub.json("get", "prioritylevelconfiguration", "global-default")
    shares = "nominalConcurrencyShares"
    assert level["spec"]["limited"][shares] < users["spec"]["limited"][shares]
    assert level["spec"]["limited"]["borrowingLimitPercent"] == 0
    assert writes["spec"]["priorityLevelConfiguration"]["name"] == "kmc-apiserver-writes"
    # A write as our service account is classified there; a review for a caller is not.
    write = ("create", "configmap", "apf-probe", "-n", namespace, "--dry-run=server")
    wait_until(
        "the hub to use our writes' FlowSchema",
        lambda: _flow(hub, *write) == (writes["metadata"]["uid"], level["metadata"]["uid"]),
        60,
    )
    review = {
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SubjectAccessReview",
        "spec": {"user": "someone", "resourceAttributes": {"verb": "get", "resource": "pods"}},
    }
    reviews = hub.json("get", "flowschema", "kmc-apiserver-reviews")["metadata"]["uid"]
    out = hub.run(
        "create", "-f", "-", "-o", "name", f"--as={SERVICE_ACCOUNT}", "-v=8",
        stdin=json.dumps(review),
    ).stderr  # fmt: skip
    assert re.search(rf"X-Kubernetes-Pf-Flowschema-Uid: {reviews}", out, re.IGNORECASE), out
    # And the bed's own kmc-apiserver runs as that account: placing a Deployment and folding
    # its status goes through our writes' level.
    before = _dispatched(hub, "kmc-apiserver-writes")
    hub.apply(deployment("web", 3), namespace)
    wait_placement(hub, "deployment", "web", namespace)
    assert _dispatched(hub, "kmc-apiserver-writes") > before
