"""What ships to run kubectl-mc in a cluster is accepted by a real kube-apiserver as it is:
`kubectl apply -k manifests/`, tried on a child cluster of the bed that has none of it."""

from __future__ import annotations

from kmc_testbed import bed, config

from .conftest import Kubectl


def test_the_kustomization_applies_cleanly_to_a_fresh_cluster(
    testbed_up: bed.State, kubectl: dict[str, Kubectl]
) -> None:
    child = kubectl["us-west"]
    # A server-side dry run creates nothing, so the namespace the rest goes into must exist.
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
        } <= kinds
        assert "(server dry run)" in out
        image = child.run("kustomize", str(config.REPO_ROOT / "manifests")).stdout
        assert "image: kmc-apiserver:dev" in image
    finally:
        if made:
            child.run("delete", "namespace", "kmc-system", "--wait=false", "--ignore-not-found")
