"""Pinned versions and where things live: one place to bump a version or move a folder."""

from __future__ import annotations

import os
from pathlib import Path

KUBERNETES_VERSION = "v1.34.4"
ETCD_VERSION = "v3.6.16"
KWOK_VERSION = "v0.8.0"
# The Gateway API's standard-channel CRDs every child serves (an imported kind on the hub).
# v1.7.0 asks for Go >= 1.27 in its go.mod, which `go mod download` refuses here.
GATEWAY_API_VERSION = "v1.6.3"
# Not part of the bed: the krew e2e test installs kubectl-mc with it. v0.4.5 is not served by
# the Go module proxy.
KREW_VERSION = "v0.4.4"

REPO_ROOT = Path(__file__).resolve().parents[2]


def state_dir() -> Path:
    """The running test bed's folder: certificates, kubeconfigs, etcd data, logs."""
    return Path(os.environ.get("KMC_TESTBED_DIR", REPO_ROOT / ".testbed")).resolve()


def cache_dir() -> Path:
    """Built binaries, kept outside the repo and reused across clones."""
    default = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "kubectl-mc"
    return Path(os.environ.get("KMC_CACHE_DIR", default)).resolve()


def kubeconfig_path() -> Path:
    return state_dir() / "kubeconfig"


def user_kubeconfig_path() -> Path:
    """The same contexts as `kubeconfig_path`, for an ordinary user (bound to cluster-admin,
    not in system:masters): what the benchmarks act as, so the hub's priority and fairness
    treats their requests as it treats a person's instead of exempting them."""
    return state_dir() / "user.kubeconfig"
