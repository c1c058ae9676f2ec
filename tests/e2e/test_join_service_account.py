"""`kubectl mc join` with a short-lived credential (issue #15): the credential is used once, to
make kmc-apiserver's ServiceAccount in the child, whose token the Location keeps and
kmc-apiserver renews. A child of its own (`hack/testbed add`), joined from a kubeconfig whose
user is an exec plugin (`sa_token_plugin.py`, minting tokens of an admin account there)."""

from __future__ import annotations

import base64
import json
import sys
from pathlib import Path
from typing import Any

import yaml

from kmc_testbed import bed, config
from kubectl_mc.kubeconfig import load, select

from .conftest import Kubectl, run_testbed
from .test_locations import ready, wait_until

PLUGIN = Path(__file__).with_name("sa_token_plugin.py")
CHILD = "ap-north"
ACCOUNT_NAME = "kmc-location"
ACCOUNT = f"system:serviceaccount:kmc-system:{ACCOUNT_NAME}"

# What kmc-apiserver needs in a child, and some of what it must not have.
CAN_I = [
    ("yes", "create", "deployments.apps", "-n", "anywhere"),
    ("yes", "watch", "deployments.apps", "-A"),
    ("yes", "patch", "statefulsets.apps", "-n", "anywhere"),
    ("yes", "delete", "daemonsets.apps", "-n", "anywhere"),
    ("yes", "update", "replicasets.apps", "-n", "anywhere"),
    ("yes", "create", "jobs.batch", "-n", "anywhere"),
    ("yes", "create", "configmaps", "-n", "anywhere"),
    ("yes", "patch", "secrets", "-n", "anywhere"),
    ("yes", "create", "serviceaccounts", "-n", "anywhere"),
    ("yes", "patch", "resourcequotas", "-n", "anywhere"),
    ("yes", "create", "limitranges", "-n", "anywhere"),
    ("yes", "create", "networkpolicies.networking.k8s.io", "-n", "anywhere"),
    ("yes", "create", "ingresses.networking.k8s.io", "-n", "anywhere"),
    ("yes", "create", "services", "-n", "anywhere"),
    ("yes", "patch", "persistentvolumeclaims", "-n", "anywhere"),
    ("yes", "delete", "priorityclasses.scheduling.k8s.io"),
    ("yes", "patch", "horizontalpodautoscalers.autoscaling", "-n", "anywhere"),
    ("yes", "watch", "horizontalpodautoscalers.autoscaling", "-A"),
    ("yes", "create", "poddisruptionbudgets.policy", "-n", "anywhere"),
    ("yes", "delete", "poddisruptionbudgets.policy", "-n", "anywhere"),
    ("yes", "create", "pods", "-n", "anywhere"),  # bare Pods placed from the hub
    ("yes", "delete", "pods", "-n", "anywhere"),
    ("yes", "create", "roles.rbac.authorization.k8s.io", "-n", "anywhere"),
    ("yes", "escalate", "roles.rbac.authorization.k8s.io", "-n", "anywhere"),
    ("yes", "bind", "roles.rbac.authorization.k8s.io", "-n", "anywhere"),
    ("yes", "create", "rolebindings.rbac.authorization.k8s.io", "-n", "anywhere"),
    # cluster-scoped objects placed by their strategy (docs/strategy.md: as strong as admin)
    ("yes", "create", "clusterroles.rbac.authorization.k8s.io"),
    ("yes", "escalate", "clusterroles.rbac.authorization.k8s.io"),
    ("yes", "bind", "clusterroles.rbac.authorization.k8s.io"),
    ("yes", "delete", "clusterrolebindings.rbac.authorization.k8s.io"),
    ("yes", "patch", "storageclasses.storage.k8s.io"),
    ("yes", "create", "ingressclasses.networking.k8s.io"),
    ("yes", "create", "customresourcedefinitions.apiextensions.k8s.io"),
    ("yes", "delete", "customresourcedefinitions.apiextensions.k8s.io"),
    ("yes", "create", "namespaces"),
    ("yes", "delete", "namespaces"),
    ("yes", "watch", "nodes"),
    ("yes", "watch", "pods", "-A"),
    ("yes", "list", "services", "-A"),
    ("yes", "list", "events", "-A"),
    ("yes", "list", "endpointslices.discovery.k8s.io", "-A"),
    ("yes", "patch", "endpointslices.discovery.k8s.io", "-n", "anywhere"),
    ("yes", "delete", "endpointslices.discovery.k8s.io", "-n", "anywhere"),
    ("yes", "patch", "serviceimports.multicluster.x-k8s.io", "-n", "anywhere"),
    ("yes", "watch", "serviceimports.multicluster.x-k8s.io", "-A"),
    ("no", "patch", "serviceexports.multicluster.x-k8s.io", "-n", "anywhere"),
    ("yes", "impersonate", "users"),
    ("yes", "impersonate", "groups"),
    ("yes", "impersonate", "serviceaccounts", "-n", "anywhere"),
    ("yes", "create", "subjectaccessreviews.authorization.k8s.io"),
    ("yes", "get", "/version"),
    ("yes", "get", "/openapi/v3/apis/apps/v1"),
    ("yes", "create", "serviceaccounts/kmc-location", "--subresource=token", "-n", "kmc-system"),
    # and no more:
    ("no", "create", "serviceaccounts/default", "--subresource=token", "-n", "kmc-system"),
    ("no", "create", "serviceaccounts/default", "--subresource=token", "-n", "kube-system"),
    ("no", "create", "pods", "--subresource=exec", "-n", "anywhere"),
    ("no", "patch", "nodes"),
    ("no", "delete", "nodes"),
    ("no", "create", "validatingwebhookconfigurations.admissionregistration.k8s.io"),
    ("no", "create", "certificatesigningrequests.certificates.k8s.io"),
    ("no", "update", "leases.coordination.k8s.io", "-n", "kube-system"),
    ("yes", "watch", "customresourcedefinitions.apiextensions.k8s.io"),
    ("no", "create", "persistentvolumes"),
    ("no", "*", "*"),
]


def exec_kubeconfig(folder: Path) -> Path:
    """The child's cluster, and a user that is the plugin minting tokens of `joiner`."""
    bed_config, base = load(str(config.kubeconfig_path()))
    cluster = select(bed_config, CHILD, base=base).cluster
    args = [str(PLUGIN), "--kubeconfig", str(config.kubeconfig_path()), "--context", CHILD]
    args += ["--namespace", "default", "--serviceaccount", "joiner"]
    args += ["--log", str(folder / "runs.jsonl"), "--duration", "1h"]
    command = {
        "apiVersion": "client.authentication.k8s.io/v1",
        "command": sys.executable,
        "args": args,
        "interactiveMode": "Never",
    }
    path = folder / "kubeconfig"
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": CHILD, "cluster": cluster}],
                "users": [{"name": "joiner", "user": {"exec": command}}],
                "contexts": [{"name": CHILD, "context": {"cluster": CHILD, "user": "joiner"}}],
                "current-context": CHILD,
            }
        )
    )
    return path


def stored(hub: Kubectl) -> tuple[dict[str, Any], dict[str, Any]]:
    """The Location's Secret, and the kubeconfig in it."""
    secret = hub.json("get", "secret", "-n", "kmc-system", f"location-{CHILD}")
    return secret, yaml.safe_load(base64.b64decode(secret["data"]["kubeconfig"]))


def claims(token: str) -> dict[str, Any]:
    payload = token.split(".")[1]
    return dict(json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4))))


def test_join_from_an_exec_kubeconfig_stores_a_service_account_that_is_renewed(
    installed: bed.State, kubectl: dict[str, Kubectl], tmp_path: Path
) -> None:
    hub = kubectl["hub"]
    run_testbed("add", CHILD)
    child = Kubectl(CHILD)
    try:
        child.run("create", "serviceaccount", "joiner", "-n", "default")
        child.run(
            "create", "clusterrolebinding", "joiner", "--clusterrole=cluster-admin",
            "--serviceaccount=default:joiner",
        )  # fmt: skip
        out = hub.mc("join", CHILD, "--cluster-kubeconfig", str(exec_kubeconfig(tmp_path)))
        assert out.stdout.strip() == f"location.kmc.dev/{CHILD} joined"
        secret, kubeconfig = stored(hub)
        assert secret["metadata"]["annotations"]["kmc.dev/service-account"] == (
            "kmc-system/kmc-location"
        )
        (user,) = [u["user"] for u in kubeconfig["users"]]
        assert list(user) == ["token"]  # not the exec plugin, not the joiner's token
        assert claims(user["token"])["sub"] == ACCOUNT
        wait_until(
            f"{CHILD} Ready with the ServiceAccount's token",
            lambda: ready(hub.json("get", "location", CHILD)).get("status") == "True",
            timeout=120,
        )

        table = []
        for expected, verb, *what in CAN_I:
            answer = child.run("auth", "can-i", verb, *what, "--as", ACCOUNT, check=False)
            table.append((" ".join([verb, *what]), expected, answer.stdout.strip()))
        print("\n".join(f"{w:<90} want {e:<3} got {g}" for w, e, g in table))
        assert [row for row in table if row[1] != row[2]] == []

        # Renewal: a token whose lifetime cannot be read (a legacy Secret token of the same
        # account, no expiry) is replaced at the next probe by a fresh bound token.
        child.apply(
            {
                "apiVersion": "v1",
                "kind": "Secret",
                "type": "kubernetes.io/service-account-token",
                "metadata": {
                    "name": "kmc-location-legacy",
                    "namespace": "kmc-system",
                    "annotations": {"kubernetes.io/service-account.name": "kmc-location"},
                },
            }
        )
        legacy = wait_until(
            "the legacy token",
            lambda: (
                child.json("get", "secret", "-n", "kmc-system", "kmc-location-legacy")
                .get("data", {})
                .get("token")
            ),
            timeout=60,
        )
        kubeconfig["users"][0]["user"]["token"] = base64.b64decode(legacy).decode()
        encoded = base64.b64encode(yaml.safe_dump(kubeconfig).encode()).decode()
        hub.run(
            "patch", "secret", "-n", "kmc-system", f"location-{CHILD}", "--type=merge",
            "-p", json.dumps({"data": {"kubeconfig": encoded}}),
        )  # fmt: skip

        def renewed() -> bool:
            token = stored(hub)[1]["users"][0]["user"]["token"]
            found = claims(token)
            return found.get("sub") == ACCOUNT and "exp" in found

        wait_until("kmc-apiserver renewed the token", renewed, timeout=120)
        wait_until(
            f"{CHILD} still Ready",
            lambda: ready(hub.json("get", "location", CHILD)).get("status") == "True",
            timeout=120,
        )

        # Unjoin with the cluster's kubeconfig takes away what join made there.
        made: list[tuple[str, ...]] = [
            ("serviceaccount", ACCOUNT_NAME, "-n", "kmc-system"),
            ("role", "kmc:location-token", "-n", "kmc-system"),
            ("rolebinding", "kmc:location-token", "-n", "kmc-system"),
            ("clusterrolebinding", "kmc:location"),
            ("clusterrole", "kmc:location"),
            ("clusterrole", "kmc:location-builtin"),
        ]
        for made_one in made:
            child.run("get", *made_one)  # there before
        out = hub.mc(
            "unjoin", CHILD, "--force", "--cluster-kubeconfig", str(exec_kubeconfig(tmp_path))
        )
        assert f"removed ServiceAccount kmc-system/{ACCOUNT_NAME}" in out.stdout, out.stdout
        for made_one in made:
            gone = child.run("get", *made_one, check=False)
            assert gone.returncode != 0 and "NotFound" in gone.stderr, (made_one, gone.stderr)
        assert hub.run("get", "location", CHILD, check=False).returncode != 0
    finally:
        hub.mc("unjoin", CHILD, "--force", check=False)
        run_testbed("remove", CHILD)
