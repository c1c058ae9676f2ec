"""The running test bed: which clusters exist, which processes serve them, and bringing them up.

Everything the bed knows is in `.testbed/state.json`: the clusters (name, role, labels), the
ports chosen for them on first start (kept, so kubeconfigs and Location secrets stay valid
across `stop`/`start`) and the pid of every process. Command lines are derived from that state,
so `start NAME` brings a component back exactly as it was, with its data (all of it in etcd).

Processes run in their own session and outlive the command that started them; a pid counts
as ours only while /proc says it runs the binary we started (pids get reused).
"""

from __future__ import annotations

import base64
import contextlib
import fcntl
import functools
import json
import os
import re
import shutil
import signal
import socket
import ssl
import subprocess
import time
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import yaml

from apiserver import certs as pki
from kmc_testbed import build, config, kubeconfig
from kmc_testbed.apiclient import Client

Log = Callable[[str], None]

HUB = "hub"
KMC = "kmc-apiserver"
PUSH, PULL = "push", "pull"  # how a child is joined: the hub dials it, or its agent dials out
AGENT = "kmc-agent"  # a pull child's agent: component `kmc-agent-NAME`
HUB_PATH = "hub-path"  # its way to the hub (`hubpath.py`): component `hub-path-NAME`
AGENT_LEASE = 12  # the agents' --lease-duration on the bed, in seconds
IDENTITY_SECRET = ("kmc-system", "kmc-agent-identity")  # where an agent keeps its certificate
GRACE = 8  # kmc-apiserver's grace period and cooldown on the bed, in seconds
CAPACITY_HOLD = 30  # how long a location short of room keeps its lowered share on the bed
DEFAULT_CHILDREN: dict[str, dict[str, str]] = {
    "us-east": {"topology.kubernetes.io/region": "us", "topology.kubernetes.io/zone": "us-east-1"},
    "us-west": {"topology.kubernetes.io/region": "us", "topology.kubernetes.io/zone": "us-west-1"},
    "eu-west": {"topology.kubernetes.io/region": "eu", "topology.kubernetes.io/zone": "eu-west-1"},
}
NODES_PER_CHILD = 3
NODE_IP = "127.0.0.1"  # every fake node's InternalIP: where its kwok serves as its kubelet
# kwok's resources for what a kubelet serves (logs, exec, attach, port-forward), read from
# the child's API (CRDs the bed installs) so tests can add their own.
KWOK_KINDS = (
    "Logs",
    "ClusterLogs",
    "Exec",
    "ClusterExec",
    "Attach",
    "ClusterAttach",
    "PortForward",
    "ClusterPortForward",
)
KWOK_API = "/apis/kwok.x-k8s.io/v1alpha1"
NODE_CAPACITY = {"cpu": "8", "memory": "32Gi", "pods": "110"}
# Workload controllers the hub must not run: hub workloads are placed, never run, there. Nor
# the autoscaler and disruption controllers: a hub HPA's and PDB's status is folded from their
# children's, as a workload's is, and the hub's own would write it from pods it does not have.
HUB_DISABLED_CONTROLLERS = (
    "deployment-controller",
    "replicaset-controller",
    "statefulset-controller",
    "daemonset-controller",
    "job-controller",
    "cronjob-controller",
    # A hub claim follows its workloads and each location binds its own volume: its phase is
    # folded from theirs, and a hub binder would set it back to Pending every resync.
    "persistentvolume-binder-controller",
    "horizontal-pod-autoscaler-controller",
    "disruption-controller",
)
CHILD_KINDS = ("apiserver", "controller-manager", "scheduler", "kwok")
HUB_KINDS = ("apiserver", "controller-manager")
RESERVED_NAMES = {"etcd", "kmc-apiserver", "all"}
NAME_RE = re.compile(r"^[a-z]([-a-z0-9]{0,30}[a-z0-9])?$")


class BedError(Exception):
    """Something the person at the keyboard must fix; the message says what, in one line."""


@dataclass
class Cluster:
    name: str
    role: str  # "hub" or "child"
    labels: dict[str, str]
    ports: dict[str, int]
    apiserver_args: list[str] = field(default_factory=list)  # e.g. --runtime-config=…
    mode: str = PUSH  # PULL: joined with `--mode pull`, its agent a component of the bed

    @property
    def kinds(self) -> tuple[str, ...]:
        return HUB_KINDS if self.role == HUB else CHILD_KINDS

    @property
    def pull(self) -> bool:
        return self.role != HUB and self.mode == PULL

    @property
    def server(self) -> str:
        return f"https://127.0.0.1:{self.ports['apiserver']}"

    @property
    def folder(self) -> Path:
        return config.state_dir() / self.name


@dataclass
class State:
    etcd_ports: dict[str, int]
    clusters: list[Cluster]
    pids: dict[str, int] = field(default_factory=dict)
    kmc_port: int | None = None  # set by `install`: kmc-apiserver is part of the bed

    def cluster(self, name: str) -> Cluster:
        for c in self.clusters:
            if c.name == name:
                return c
        known = ", ".join(c.name for c in self.clusters)
        raise BedError(f"no cluster named {name!r} in the test bed (it has: {known})")

    def components(self) -> list[tuple[str, Cluster | None, str]]:
        """(component name, its cluster, its kind) for every process of the bed, in start order."""
        out: list[tuple[str, Cluster | None, str]] = [("etcd", None, "etcd")]
        for kind in CHILD_KINDS:
            out += [(f"{c.name}-{kind}", c, kind) for c in self.clusters if kind in c.kinds]
        if self.kmc_port is not None:
            out.append((KMC, None, KMC))
            for c in self.clusters:
                if c.pull:
                    out.append((f"{HUB_PATH}-{c.name}", c, HUB_PATH))
                    out.append((f"{AGENT}-{c.name}", c, AGENT))
        return out

    def agents(self) -> list[str]:
        """The components of every pull child that has joined: its hub path and its agent."""
        return [
            name
            for name, cluster, kind in self.components()
            if kind in (HUB_PATH, AGENT) and cluster is not None and joined(cluster)
        ]


# ---------------------------------------------------------------------------------------
# state on disk


def _state_file() -> Path:
    return config.state_dir() / "state.json"


def load() -> State | None:
    try:
        raw = json.loads(_state_file().read_text())
    except FileNotFoundError:
        return None
    return State(
        etcd_ports=raw["etcd_ports"],
        clusters=[Cluster(**c) for c in raw["clusters"]],
        pids=raw.get("pids", {}),
        kmc_port=raw.get("kmc_port"),
    )


def save(state: State) -> None:
    path = _state_file()
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(asdict(state), indent=2))
    tmp.replace(path)


@contextlib.contextmanager
def locked() -> Iterator[None]:
    """One mutating test-bed command at a time (a test run and a person may both call `up`)."""
    config.state_dir().mkdir(parents=True, exist_ok=True)
    with (config.state_dir() / "lock").open("w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        yield


def free_ports(count: int) -> list[int]:
    sockets = []
    try:
        for _ in range(count):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            sockets.append(s)
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


def new_cluster(name: str, role: str, labels: dict[str, str], mode: str = PUSH) -> Cluster:
    kinds = HUB_KINDS if role == HUB else CHILD_KINDS
    if mode == PULL:
        kinds = (*kinds, HUB_PATH)
    ports = dict(zip(kinds, free_ports(len(kinds)), strict=True))
    return Cluster(name, role, dict(labels), ports, mode=mode)


def initial_state() -> State:
    client, peer = free_ports(2)
    clusters = [new_cluster(HUB, HUB, {})]
    clusters += [new_cluster(n, "child", labels) for n, labels in DEFAULT_CHILDREN.items()]
    return State({"client": client, "peer": peer}, clusters)


# ---------------------------------------------------------------------------------------
# files: certificates and kubeconfigs


def admin_client(cluster: Cluster) -> Client:
    pki_dir = cluster.folder / "pki"
    return Client(
        "127.0.0.1",
        cluster.ports["apiserver"],
        pki_dir / "ca.crt",
        pki_dir / "admin.crt",
        pki_dir / "admin.key",
    )


USER = "kmc-testbed-user"  # an ordinary user of every cluster (see `ensure_user`)


def write_files(state: State) -> None:
    """Certificates (kept when present) and every kubeconfig (rewritten: ports may be new)."""
    entries, users = [], []
    for cluster in state.clusters:
        p = cluster.folder / "pki"
        ca = pki.ensure_ca(p, "ca", f"kmc-testbed-{cluster.name}-ca")
        pki.ensure_cert(
            p,
            "apiserver",
            ca,
            "kube-apiserver",
            hosts=(
                "127.0.0.1",
                "localhost",
                "::1",
                "kubernetes",
                "kubernetes.default",
                "kubernetes.default.svc",
                "10.0.0.1",
            ),
        )
        admin = pki.ensure_cert(p, "admin", ca, "kmc-testbed-admin", ("system:masters",))
        user = pki.ensure_cert(p, "user", ca, USER)
        pki.ensure_key(p / "sa.key")
        for component in ("controller-manager", "scheduler", "kwok"):
            if component in cluster.kinds:
                cert = pki.ensure_cert(
                    p, component, ca, f"system:kube-{component}", ("system:masters",)
                )
                kubeconfig.write(
                    cluster.folder / f"{component}.kubeconfig",
                    [kubeconfig.entry(cluster.name, cluster.server, ca.cert, cert.cert, cert.key)],
                    cluster.name,
                )
        if cluster.role == HUB:
            fp = pki.ensure_ca(p, "front-proxy-ca", "kmc-testbed-front-proxy-ca")
            proxy = pki.ensure_cert(p, "front-proxy-client", fp, "front-proxy-client")
            write_admission_config(cluster.folder, proxy)
            write_audit_policy(cluster.folder)
        if cluster.pull:
            # All its agent is given of its own cluster (and of no other).
            kubeconfig.write(
                agent_kubeconfig(cluster),
                [kubeconfig.entry(cluster.name, cluster.server, ca.cert, admin.cert, admin.key)],
                cluster.name,
            )
        entries.append(
            kubeconfig.entry(cluster.name, cluster.server, ca.cert, admin.cert, admin.key)
        )
        users.append(
            kubeconfig.entry(cluster.name, cluster.server, ca.cert, user.cert, user.key, "user")
        )
    kubeconfig.write(config.kubeconfig_path(), entries, HUB)
    kubeconfig.write(config.user_kubeconfig_path(), users, HUB)


def write_admission_config(folder: Path, client: pki.Pair) -> None:
    """The hub's admission configuration: it calls webhooks with the front-proxy client
    certificate, which kmc-apiserver's admission webhook requires (anyone else gets 401).
    "*" offers it to every webhook; on the bed ours is the only one."""
    kubeconfig_file = folder / "admission-webhooks.kubeconfig"
    users = {
        "apiVersion": "v1",
        "kind": "Config",
        "users": [
            {
                "name": "*",
                "user": {"client-certificate": str(client.cert), "client-key": str(client.key)},
            }
        ],
    }
    kubeconfig_file.write_text(json.dumps(users, indent=2))
    webhook = {
        "apiVersion": "apiserver.config.k8s.io/v1",
        "kind": "WebhookAdmissionConfiguration",
        "kubeConfigFile": str(kubeconfig_file),
    }
    admission = {
        "apiVersion": "apiserver.config.k8s.io/v1",
        "kind": "AdmissionConfiguration",
        "plugins": [
            {"name": name, "configuration": webhook}
            for name in ("ValidatingAdmissionWebhook", "MutatingAdmissionWebhook")
        ],
    }
    (folder / "admission.yaml").write_text(json.dumps(admission, indent=2))


def write_audit_policy(folder: Path) -> None:
    """The hub's audit policy: every write, at Metadata level (who, what, when, with which
    User-Agent), once its response is sent. The fault tests read it to tell which
    kmc-apiserver replica wrote what, and when (`audit_log`)."""
    policy = {
        "apiVersion": "audit.k8s.io/v1",
        "kind": "Policy",
        "omitStages": ["RequestReceived", "ResponseStarted"],
        "rules": [
            {
                "level": "Metadata",
                "verbs": ["create", "update", "patch", "delete", "deletecollection"],
            },
            {"level": "None"},
        ],
    }
    (folder / "audit-policy.yaml").write_text(json.dumps(policy, indent=2))


def audit_log() -> Path:
    """Where the hub writes its audit events (one JSON object a line)."""
    return config.state_dir() / HUB / "audit.log"


# ---------------------------------------------------------------------------------------
# command lines


def command(state: State, cluster: Cluster | None, kind: str) -> list[str]:
    if kind == "etcd":
        return _etcd_command(state)
    if kind == KMC:
        return _kmc_command(state)
    assert cluster is not None
    if kind == AGENT:
        return _agent_command(state, cluster)
    if kind == HUB_PATH:
        return _hub_path_command(state, cluster)
    port = cluster.ports[kind]
    p = cluster.folder / "pki"
    kubeconf = cluster.folder / f"{kind}.kubeconfig"
    delegated = [
        f"--kubeconfig={kubeconf}",
        f"--authentication-kubeconfig={kubeconf}",
        f"--authorization-kubeconfig={kubeconf}",
        "--bind-address=127.0.0.1",
        f"--secure-port={port}",
        f"--cert-dir={cluster.folder / kind}",
        "--leader-elect=false",
    ]
    if kind == "apiserver":
        return _apiserver_command(state, cluster)
    if kind == "controller-manager":
        controllers = "*"
        signing: list[str] = []
        if cluster.role == HUB:
            # Pull locations join with a bootstrap token (`tokencleaner` removes expired ones;
            # it is off by default) and a CSR signed by `csrsigning` with the hub's CA.
            controllers = ",".join(
                ["*", "tokencleaner", *(f"-{c}" for c in HUB_DISABLED_CONTROLLERS)]
            )
            signing = [
                f"--cluster-signing-cert-file={p / 'ca.crt'}",
                f"--cluster-signing-key-file={p / 'ca.key'}",
            ]
        return [
            str(build.binary("kube-controller-manager")),
            *delegated,
            f"--controllers={controllers}",
            *signing,
            f"--root-ca-file={p / 'ca.crt'}",
            f"--service-account-private-key-file={p / 'sa.key'}",
            "--use-service-account-credentials=false",
            "--kube-api-qps=100",
            "--kube-api-burst=200",
            # kwok renews node leases from a busy 2-core machine; a late renewal must not make
            # nodes NotReady (their pods would be marked unready, and kwok never undoes that).
            "--node-monitor-grace-period=3m",
        ]
    if kind == "scheduler":
        return [str(build.binary("kube-scheduler")), *delegated]
    if kind == "kwok":
        return [
            str(build.binary("kwok")),
            f"--kubeconfig={kubeconf}",
            f"--config={build.binary('kwok-stages.yaml')}",
            f"--config={config.REPO_ROOT / 'hack' / 'kmc_testbed' / 'kwok-bare-pods.yaml'}",
            "--manage-all-nodes=false",
            "--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake",
            "--node-lease-duration-seconds=40",
            # Its kubelet-like server: the apiserver dials a node's InternalIP and kubelet
            # port for logs, exec, attach and port-forward, so the nodes say where it is.
            f"--server-address=127.0.0.1:{port}",
            f"--node-ip={NODE_IP}",
            f"--node-port={port}",
            f"--enable-crds={','.join(KWOK_KINDS)}",
        ]
    raise ValueError(kind)


def _etcd_command(state: State) -> list[str]:
    client = f"http://127.0.0.1:{state.etcd_ports['client']}"
    peer = f"http://127.0.0.1:{state.etcd_ports['peer']}"
    return [
        str(build.binary("etcd")),
        "--name=testbed",
        f"--data-dir={config.state_dir() / 'etcd'}",
        f"--listen-client-urls={client}",
        f"--advertise-client-urls={client}",
        f"--listen-peer-urls={peer}",
        f"--initial-advertise-peer-urls={peer}",
        f"--initial-cluster=testbed={peer}",
        # A throwaway bed: no fsync keeps four apiservers' writes cheap on a small disk.
        "--unsafe-no-fsync",
        "--quota-backend-bytes=4294967296",
        "--auto-compaction-mode=periodic",
        "--auto-compaction-retention=5m",
        "--log-level=warn",
    ]


def kmc_folder() -> Path:
    return config.state_dir() / KMC


def kmc_kubeconfig() -> Path:
    """kmc-apiserver's kubeconfig for the hub: its own ServiceAccount (`kmc_credentials`)."""
    return kmc_folder() / "kubeconfig"


# kmc-apiserver's ServiceAccount on the hub (manifests/apiserver/rbac.yaml) and how long a
# token the bed gives it lives: a week, made anew at every start.
KMC_ACCOUNT = ("kmc-system", "kmc-apiserver")
KMC_USER = "system:serviceaccount:{}:{}".format(*KMC_ACCOUNT)
KMC_TOKEN_SECONDS = 7 * 24 * 3600


def kmc_credentials(state: State) -> None:
    """A fresh token of kmc-apiserver's own ServiceAccount, as a real install runs it: bound
    by the RBAC in manifests/, classified by the hub's priority and fairness like any
    ServiceAccount's requests (an admin's are exempt from both). The kubeconfig names the
    token as a `tokenFile`, which kmc-apiserver reads again after a 401, as a pod reads its
    rotated projected token."""
    namespace, name = KMC_ACCOUNT
    request = {
        "apiVersion": "authentication.k8s.io/v1",
        "kind": "TokenRequest",
        "spec": {"expirationSeconds": KMC_TOKEN_SECONDS},
    }
    hub = state.cluster(HUB)
    path = f"/api/v1/namespaces/{namespace}/serviceaccounts/{name}/token"
    resp = admin_client(hub).request("POST", path, request, timeout=30.0)
    if resp.status == 404:
        raise BedError(
            f"no ServiceAccount {namespace}/{name} on the hub: `hack/testbed install` makes it"
        )
    if resp.status != 201:
        raise BedError(f"cannot make a token for {namespace}/{name}: {resp.body[:300]!r}")
    folder = kmc_folder()
    folder.mkdir(parents=True, exist_ok=True)
    token = folder / "token"
    tmp = token.with_suffix(".tmp")
    tmp.write_text(resp.json()["status"]["token"])
    tmp.chmod(0o600)
    tmp.replace(token)
    ca = hub.folder / "pki" / "ca.crt"
    kubeconfig.write(
        kmc_kubeconfig(),
        [
            {
                "cluster": {
                    "name": HUB,
                    "cluster": {"server": hub.server, "certificate-authority": str(ca)},
                },
                "user": {"name": name, "user": {"tokenFile": str(token)}},
                "context": {"name": HUB, "context": {"cluster": HUB, "user": name}},
            }
        ],
        HUB,
    )


def _kmc_command(state: State) -> list[str]:
    """kmc-apiserver from the working tree, as its own ServiceAccount, probing children often."""
    return [
        str(config.REPO_ROOT / ".venv" / "bin" / "python"),
        "-m",
        "apiserver",
        f"--kubeconfig={kmc_kubeconfig()}",
        "--context=hub",
        f"--secure-port={state.kmc_port}",
        f"--cert-dir={kmc_folder() / 'certs'}",
        "--probe-interval=2",
        "--probe-timeout=3",
        # Short, so e2e tests see evacuation and return within seconds, not minutes.
        f"--grace-period={GRACE}",
        f"--cooldown={GRACE}",
        f"--capacity-hold={CAPACITY_HOLD}",
        "--cert-check-interval=2",
    ]


def agent_folder(cluster: Cluster) -> Path:
    return cluster.folder / AGENT


def agent_kubeconfig(cluster: Cluster) -> Path:
    """A pull child's agent's kubeconfig: its own cluster only."""
    return agent_folder(cluster) / "kubeconfig"


def agent_token(cluster: Cluster) -> Path:
    """The bootstrap token its join printed: the agent trades it for a certificate on its
    first start; later starts use the certificate kept in its cluster."""
    return agent_folder(cluster) / "token"


def joined(cluster: Cluster) -> bool:
    """A pull child that `kubectl mc join --mode pull` has made a Location for."""
    return cluster.pull and agent_token(cluster).exists()


def hub_url(cluster: Cluster) -> str:
    """The hub as a pull child's agent reaches it: through its hub path."""
    return f"https://127.0.0.1:{cluster.ports[HUB_PATH]}"


def _agent_command(state: State, cluster: Cluster) -> list[str]:
    """kmc-agent from the working tree, given only its own cluster's kubeconfig, the hub's URL
    (through its hub path) and CA, and the bootstrap token; kept in the bed's state so a
    restart (`start`, `up`) is the same agent, which finds its certificate in its cluster."""
    hub = state.cluster(HUB)
    return [
        str(config.REPO_ROOT / ".venv" / "bin" / "python"),
        "-m",
        "apiserver.agent",
        f"--location={cluster.name}",
        f"--hub-url={hub_url(cluster)}",
        f"--hub-ca={hub.folder / 'pki' / 'ca.crt'}",
        f"--bootstrap-token-file={agent_token(cluster)}",
        f"--kubeconfig={agent_kubeconfig(cluster)}",
        "--retry=1",
        # Short, so e2e tests see a lost agent's location go not Ready within seconds.
        f"--lease-duration={AGENT_LEASE}",
    ]


def _hub_path_command(state: State, cluster: Cluster) -> list[str]:
    return [
        str(config.REPO_ROOT / ".venv" / "bin" / "python"),
        str(config.REPO_ROOT / "hack" / "kmc_testbed" / "hubpath.py"),
        str(cluster.ports[HUB_PATH]),
        str(state.cluster(HUB).ports["apiserver"]),
    ]


def identity_kept(cluster: Cluster) -> bool:
    """The agent has joined: its certificate is kept in its cluster."""
    namespace, name = IDENTITY_SECRET
    try:
        resp = admin_client(cluster).request(
            "GET", f"/api/v1/namespaces/{namespace}/secrets/{name}", timeout=5.0
        )
    except OSError:
        return False
    return resp.status == 200


def forget_identity(cluster: Cluster) -> None:
    """Delete the certificate an agent keeps in its cluster, so its next start joins anew."""
    namespace, name = IDENTITY_SECRET
    path = f"/api/v1/namespaces/{namespace}/secrets/{name}"
    resp = admin_client(cluster).request("DELETE", path, timeout=10.0)
    if resp.status not in (200, 202, 404):
        raise BedError(f"cannot delete {namespace}/{name} in {cluster.name}: {resp.body[:300]!r}")


def _apiserver_command(state: State, cluster: Cluster) -> list[str]:
    p = cluster.folder / "pki"
    cmd = [
        str(build.binary("kube-apiserver")),
        "--bind-address=127.0.0.1",
        "--advertise-address=127.0.0.1",
        f"--secure-port={cluster.ports['apiserver']}",
        f"--tls-cert-file={p / 'apiserver.crt'}",
        f"--tls-private-key-file={p / 'apiserver.key'}",
        f"--client-ca-file={p / 'ca.crt'}",
        f"--etcd-servers=http://127.0.0.1:{state.etcd_ports['client']}",
        f"--etcd-prefix=/{cluster.name}/registry",
        "--service-cluster-ip-range=10.0.0.0/24",
        "--authorization-mode=Node,RBAC",
        f"--service-account-issuer=https://{cluster.name}.testbed.kmc.dev",
        f"--service-account-key-file={p / 'sa.pub'}",
        f"--service-account-signing-key-file={p / 'sa.key'}",
        # Nothing can reach 127.0.0.1 through a Service here; do not publish it as an endpoint.
        "--endpoint-reconciler-type=none",
        "--allow-privileged=true",
        # KMC_TESTBED_PROFILING=1 serves /debug/pprof (e.g. a heap profile of the hub's
        # apiserver while a benchmark runs: `go tool pprof -top heap.pb.gz`).
        f"--profiling={'true' if os.environ.get('KMC_TESTBED_PROFILING') == '1' else 'false'}",
        *cluster.apiserver_args,
    ]
    if cluster.role == HUB:
        cmd += [
            f"--requestheader-client-ca-file={p / 'front-proxy-ca.crt'}",
            "--requestheader-allowed-names=front-proxy-client",
            "--requestheader-username-headers=X-Remote-User",
            "--requestheader-group-headers=X-Remote-Group",
            "--requestheader-extra-headers-prefix=X-Remote-Extra-",
            f"--proxy-client-cert-file={p / 'front-proxy-client.crt'}",
            f"--proxy-client-key-file={p / 'front-proxy-client.key'}",
            # A pull location's agent first authenticates with a bootstrap token
            # (`kubectl mc join --mode pull`), to ask for its client certificate.
            "--enable-bootstrap-token-auth",
            # Off, so an APIService may point at an ExternalName Service for localhost.
            "--enable-aggregator-routing=false",
            # Webhooks are called with the front-proxy client certificate (our webhook
            # answers nobody else).
            f"--admission-control-config-file={cluster.folder / 'admission.yaml'}",
            # Every write, so the fault tests can tell which replica wrote and when.
            f"--audit-policy-file={cluster.folder / 'audit-policy.yaml'}",
            f"--audit-log-path={audit_log()}",
            "--audit-log-maxsize=200",
            "--audit-log-maxbackup=1",
        ]
    return cmd


# ---------------------------------------------------------------------------------------
# processes


def alive(state: State, component: str) -> bool:
    pid = state.pids.get(component)
    return pid is not None and _runs(pid, _binary_of(state, component))


def _binary_of(state: State, component: str) -> str:
    for name, cluster, kind in state.components():
        if name == component:
            return command(state, cluster, kind)[0]
    raise BedError(f"unknown component {component!r}")


def _runs(pid: int, binary: str) -> bool:
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    return pid_running(pid) and cmdline[0].decode(errors="replace") == binary


def pid_running(pid: int) -> bool:
    """True for a live process; a zombie (dead, not yet reaped) is not running."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X")


def _port_in_use(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


def _ports_of(state: State, cluster: Cluster | None, kind: str) -> list[int]:
    if kind == "etcd":
        return [state.etcd_ports["client"], state.etcd_ports["peer"]]
    if kind == KMC:
        return [state.kmc_port] if state.kmc_port else []
    assert cluster is not None
    return [cluster.ports[kind]] if kind in cluster.ports else []


def log_path(component: str) -> Path:
    return config.state_dir() / "logs" / f"{component}.log"


def spawn(state: State, component: str, cluster: Cluster | None, kind: str) -> None:
    if kind == KMC:
        kmc_credentials(state)
    log = log_path(component)
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("ab") as out:
        out.write(f"\n=== {time.strftime('%Y-%m-%dT%H:%M:%S')} starting {component}\n".encode())
        out.flush()
        proc = subprocess.Popen(
            command(state, cluster, kind),
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            cwd=config.state_dir(),
            # kmc-apiserver from this working tree, whichever tree the venv was installed from.
            env={**os.environ, "PYTHONPATH": str(config.REPO_ROOT)},
        )
    state.pids[component] = proc.pid
    save(state)


def kill(state: State, component: str, sig: signal.Signals, grace: float = 10.0) -> None:
    """Signal a component's process group and wait until it is gone."""
    pid = state.pids.get(component)
    if pid is None or not alive(state, component):
        state.pids.pop(component, None)
        return
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, sig)
    deadline = time.monotonic() + grace
    while alive(state, component):
        if time.monotonic() > deadline:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pid, signal.SIGKILL)
            deadline = time.monotonic() + grace
        time.sleep(0.05)
    # A thread-group leader turns zombie before its other threads have closed their sockets:
    # gone means its ports are free too.
    ports = next((_ports_of(state, c, k) for n, c, k in state.components() if n == component), [])
    deadline = time.monotonic() + grace
    while any(_port_in_use(port) for port in ports) and time.monotonic() < deadline:
        time.sleep(0.05)
    state.pids.pop(component, None)
    save(state)


# ---------------------------------------------------------------------------------------
# bringing things up


def wait_for(what: str, check: Callable[[], bool], timeout: float, component: str | None) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            hint = ""
            if component is not None:
                hint = f"; last log line: {_last_log_line(component)} (see {log_path(component)})"
            raise BedError(f"{what} not ready after {timeout:.0f}s{hint}")
        time.sleep(0.2)


def _last_log_line(component: str) -> str:
    try:
        lines = log_path(component).read_text(errors="replace").strip().splitlines()
    except OSError:
        return "no log"
    return lines[-1][:300] if lines else "empty log"


def _ready_check(state: State, cluster: Cluster | None, kind: str) -> Callable[[], bool]:
    if kind == "etcd":

        def etcd_healthy() -> bool:
            url = f"http://127.0.0.1:{state.etcd_ports['client']}/health"
            try:
                with urllib.request.urlopen(url, timeout=2) as resp:
                    return bool(json.load(resp).get("health") == "true")
            except OSError:
                return False

        return etcd_healthy
    if kind == KMC:
        return kmc_ready
    assert cluster is not None
    if kind == AGENT:
        return functools.partial(_agent_ready, state, f"{AGENT}-{cluster.name}", cluster)
    if kind == "apiserver":
        return lambda: admin_client(cluster).ok("/readyz")
    port = cluster.ports[kind]
    return lambda: _port_in_use(port)


def _agent_ready(state: State, component: str, cluster: Cluster) -> bool:
    """Running, with its certificate kept in its cluster; an agent that exited (a token
    refused, a CSR denied) fails at once with what it said."""
    if not alive(state, component):
        raise BedError(
            f"{component} exited: {_last_log_line(component)} (see {log_path(component)})"
        )
    return identity_kept(cluster)


def kmc_ready() -> bool:
    state = load()
    if state is None or state.kmc_port is None:
        return False
    url = f"https://localhost:{state.kmc_port}/readyz"
    try:
        context = ssl.create_default_context(cafile=str(kmc_folder() / "certs" / "ca.crt"))
        with urllib.request.urlopen(url, timeout=2, context=context) as resp:
            return bool(resp.status == 200)
    except (OSError, ssl.SSLError):
        return False


def ensure_running(state: State, names: list[str], log: Log) -> None:
    """Start whichever of these components is not running, then wait until each serves."""
    started = []
    for name, cluster, kind in state.components():
        if name in names and not alive(state, name):
            for port in _ports_of(state, cluster, kind):
                if _port_in_use(port):
                    raise BedError(
                        f"port {port} for {name} is taken by another process; free it, or run "
                        "`hack/testbed down` and `up` again to pick new ports"
                    )
            log(f"starting {name}")
            spawn(state, name, cluster, kind)
            started.append((name, cluster, kind))
    for name, cluster, kind in started:
        timeout = 120.0 if kind == "apiserver" else 60.0
        wait_for(name, _ready_check(state, cluster, kind), timeout, name)


def up(log: Log, extra: Cluster | None = None) -> State:
    build.ensure_built(log)
    state = load() or initial_state()
    if extra is not None:
        state.clusters.append(extra)
    save(state)
    write_files(state)
    # In waves: storage, then the apiservers (all at once), then what talks to them.
    for wave in ({"etcd"}, {"apiserver"}, {"controller-manager", "scheduler", "kwok"}):
        if "kwok" in wave:
            for cluster in state.clusters:
                if cluster.role != HUB:
                    ensure_kwok_resources(cluster)
                    ensure_mcs_crds(cluster)
                    ensure_gateway_api_crds(cluster)
            restart_changed(state, "kwok", log)
        ensure_running(state, [n for n, _, kind in state.components() if kind in wave], log)
    for cluster in state.clusters:
        ensure_user(cluster)
        if cluster.role != HUB:
            ensure_nodes(cluster)
    for cluster in state.clusters:
        wait_for(
            f"{cluster.name} cluster",
            functools.partial(cluster_ready, cluster),
            120.0,
            f"{cluster.name}-controller-manager",
        )
    # The agents of pull children already joined (after a machine restart: they find their
    # certificates in their clusters); `install` joins the others and starts theirs.
    ensure_running(state, state.agents(), log)
    return state


def ensure_user(cluster: Cluster) -> None:
    """`USER` may do anything (cluster-admin) without being in system:masters: its requests
    go through RBAC and priority and fairness as a person's do (`user.kubeconfig`)."""
    binding = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {"name": USER},
        "roleRef": {
            "apiGroup": "rbac.authorization.k8s.io",
            "kind": "ClusterRole",
            "name": "cluster-admin",
        },
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": USER}],
    }
    path = "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings"
    resp = admin_client(cluster).request("POST", path, binding)
    if resp.status not in (201, 409):
        raise BedError(f"cannot bind {USER} in {cluster.name}: {resp.body[:300]!r}")


def restart_changed(state: State, kind: str, log: Log) -> None:
    """Stop the running components of this kind whose command line is no longer the one this
    tree gives them (a bed started by an older checkout), so `ensure_running` starts them as
    they are now. Only for components that keep nothing of their own, such as kwok."""
    for name, cluster, each in state.components():
        if each != kind or not alive(state, name):
            continue
        try:
            running = Path(f"/proc/{state.pids[name]}/cmdline").read_bytes().split(b"\0")[:-1]
        except OSError:
            continue
        if [arg.decode(errors="replace") for arg in running] != command(state, cluster, each):
            log(f"restarting {name}: its command line has changed")
            kill(state, name, signal.SIGTERM)


def ensure_crds(cluster: Cluster, docs: list[Any], what: str) -> None:
    """CRDs in a cluster (created when missing), and wait until they are served."""
    client = admin_client(cluster)
    crds = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
    names = []
    for crd in docs:
        names.append(crd["metadata"]["name"])
        # Generous: a new apiserver on a loaded machine takes seconds over the Gateway API's.
        resp = client.request("POST", crds, crd, timeout=60.0)
        if resp.status not in (201, 409):
            raise BedError(f"cannot create CRD {names[-1]} in {cluster.name}: {resp.body[:300]!r}")

    def established() -> bool:
        for name in names:
            resp = client.request("GET", f"{crds}/{name}")
            # A CRD just created may have no status, or a status without conditions, yet.
            conditions = (resp.json().get("status") or {}).get("conditions") or []
            if not any(c["type"] == "Established" and c["status"] == "True" for c in conditions):
                return False
        return True

    wait_for(f"{what} in {cluster.name}", established, 60.0, f"{cluster.name}-apiserver")


def ensure_mcs_crds(cluster: Cluster) -> None:
    """The Multi-Cluster Services API's CRDs (manifests/mcs/) in a child, as a user installs
    them in every cluster of a clusterset: kmc-apiserver writes ServiceImports there."""
    docs = [
        yaml.safe_load(path.read_text())
        for path in sorted((config.REPO_ROOT / "manifests" / "mcs").glob("*.yaml"))
    ]
    ensure_crds(cluster, docs, "the MCS API's CRDs")


def ensure_gateway_api_crds(cluster: Cluster) -> None:
    """The Gateway API's standard-channel CRDs in a child, as its users install them: the hub
    serves HTTPRoutes once kmc-apiserver's import loop has imported them."""
    docs = list(yaml.safe_load_all(build.gateway_api_crds().read_text()))
    ensure_crds(cluster, docs, "the Gateway API's CRDs")


def ensure_kwok_resources(cluster: Cluster) -> None:
    """kwok's CRDs in a child, and what every fake pod answers unless a test says otherwise:
    its log (and attach) is a file in the child's folder, and exec runs the command on this
    machine, in that folder. A test's own `Logs`, `Exec` or `PortForward` for one pod comes
    first (kwok looks for one named after the pod before the cluster-wide ones)."""
    client = admin_client(cluster)
    kwok = list(yaml.safe_load_all((build.KWOK.folder / build.KWOK_CRDS_FILE).read_text()))
    ensure_crds(cluster, kwok, "kwok's CRDs")
    folder = pod_files(cluster)
    log_file = folder / "pod.log"
    if not log_file.exists():
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S.000000000Z", time.gmtime())
        line = f"a fake pod of {cluster.name}, simulated by kwok: this log is {log_file}"
        log_file.write_text(f"{stamp} stdout F {line}\n")  # the CRI log format kwok reads
    defaults = (
        ("clusterlogs", "ClusterLogs", {"logs": [{"logsFile": str(log_file)}]}),
        ("clusterattaches", "ClusterAttach", {"attaches": [{"logsFile": str(log_file)}]}),
        ("clusterexecs", "ClusterExec", {"execs": [{"local": {"workDir": str(folder)}}]}),
    )
    for plural, kind, spec in defaults:
        body = {
            "apiVersion": "kwok.x-k8s.io/v1alpha1",
            "kind": kind,
            "metadata": {"name": "kmc-testbed"},
            "spec": spec,
        }
        resp = client.request("POST", f"{KWOK_API}/{plural}", body)
        if resp.status not in (201, 409):
            raise BedError(f"cannot create {kind} in {cluster.name}: {resp.body[:300]!r}")


def pod_files(cluster: Cluster) -> Path:
    """Where a child's fake pods live on this machine: their log, and exec's working folder."""
    folder = cluster.folder / "pods"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def node_status(cluster: Cluster) -> dict[str, Any]:
    """What a fake node says of where its kubelet is: this child's kwok."""
    return {
        "addresses": [{"type": "InternalIP", "address": NODE_IP}],
        "daemonEndpoints": {"kubeletEndpoint": {"Port": cluster.ports["kwok"]}},
    }


def ensure_nodes(cluster: Cluster) -> None:
    """Fake nodes of known capacity, managed by this child's kwok."""
    client = admin_client(cluster)
    for i in range(1, NODES_PER_CHILD + 1):
        name = f"{cluster.name}-node-{i}"
        found = client.request("GET", f"/api/v1/nodes/{name}")
        if found.status == 200:
            status = found.json().get("status", {})
            wanted = node_status(cluster)
            if any(status.get(key) != value for key, value in wanted.items()):
                # A node made before the bed served streams, or by another kwok port.
                resp = client.request(
                    "PATCH",
                    f"/api/v1/nodes/{name}/status",
                    {"status": wanted},
                    content_type="application/merge-patch+json",
                )
                if resp.status != 200:
                    raise BedError(f"cannot update node {name}: {resp.body[:300]!r}")
            continue
        labels = {
            "kubernetes.io/hostname": name,
            "kubernetes.io/os": "linux",
            "kubernetes.io/arch": "amd64",
            "type": "kwok",
            **{k: v for k, v in cluster.labels.items() if k.startswith("topology.kubernetes.io/")},
        }
        node = {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {
                "name": name,
                "labels": labels,
                "annotations": {"kwok.x-k8s.io/node": "fake", "node.alpha.kubernetes.io/ttl": "0"},
            },
            # Where its kubelet is (`node_status`) kwok's node-initialize stage writes from
            # its --node-ip and --node-port (set here, that stage drops the addresses).
            "status": {
                "capacity": NODE_CAPACITY,
                "allocatable": NODE_CAPACITY,
                "nodeInfo": {
                    "architecture": "amd64",
                    "operatingSystem": "linux",
                    "kubeletVersion": "fake",
                    "kubeProxyVersion": "fake",
                },
            },
        }
        resp = client.request("POST", "/api/v1/nodes", node)
        if resp.status not in (201, 409):
            raise BedError(f"cannot create node {name} in {cluster.name}: {resp.body[:300]!r}")


def node_summary(cluster: Cluster) -> tuple[int, int]:
    """(nodes, Ready nodes) of a cluster."""
    resp = admin_client(cluster).request("GET", "/api/v1/nodes")
    if resp.status != 200:
        return (0, 0)
    items: list[dict[str, Any]] = resp.json()["items"]
    ready = sum(
        1
        for n in items
        for c in n.get("status", {}).get("conditions", [])
        if c["type"] == "Ready" and c["status"] == "True"
    )
    return (len(items), ready)


def cluster_ready(cluster: Cluster) -> bool:
    """Pods can be made: the default ServiceAccount exists and (children) every node is Ready."""
    client = admin_client(cluster)
    try:
        if (
            client.request("GET", "/api/v1/namespaces/default/serviceaccounts/default").status
            != 200
        ):
            return False
        if cluster.role == HUB:
            return True
        nodes, ready = node_summary(cluster)
        return nodes >= NODES_PER_CHILD and ready == nodes
    except OSError:
        return False


def server_version(cluster: Cluster) -> str:
    try:
        resp = admin_client(cluster).request("GET", "/version", timeout=2.0)
    except OSError:
        return "-"
    return str(resp.json().get("gitVersion", "-")) if resp.status == 200 else "-"


def down(log: Log) -> None:
    state = load()
    if state is not None:
        for name, _, _ in reversed(state.components()):
            if alive(state, name):
                log(f"stopping {name}")
            kill(state, name, signal.SIGTERM)
    _remove_everything_but_logs()


def remove(state: State, name: str, log: Log) -> None:
    """Stop a child, forget it, and delete its data (certificates, kubeconfig entry, etcd keys)."""
    cluster = state.cluster(name)
    if cluster.role == HUB:
        raise BedError("the hub cannot be removed; `hack/testbed down` stops everything")
    for component, owner, _ in reversed(state.components()):
        if owner is cluster:
            kill(state, component, signal.SIGTERM)
    _etcd_delete_prefix(state, f"/{name}/")
    state.clusters.remove(cluster)
    save(state)
    write_files(state)
    shutil.rmtree(cluster.folder, ignore_errors=True)
    log(f"removed {name}")


def _etcd_delete_prefix(state: State, prefix: str) -> None:
    """Delete every key under a prefix through etcd's JSON gateway (no etcdctl needed)."""
    end = prefix[:-1] + chr(ord(prefix[-1]) + 1)
    body = json.dumps(
        {
            "key": base64.b64encode(prefix.encode()).decode(),
            "range_end": base64.b64encode(end.encode()).decode(),
        }
    ).encode()
    url = f"http://127.0.0.1:{state.etcd_ports['client']}/v3/kv/deleterange"
    try:
        with urllib.request.urlopen(urllib.request.Request(url, data=body), timeout=10):
            pass
    except OSError as err:
        raise BedError(f"cannot delete {prefix} from etcd: {err}") from err


def _remove_everything_but_logs() -> None:
    root = config.state_dir()
    if not root.exists():
        return
    for entry in root.iterdir():
        if entry.name in ("logs", "lock"):
            continue
        if entry.is_dir():
            shutil.rmtree(entry)
        else:
            entry.unlink()


def reconfigure(state: State, name: str, args: list[str], log: Log) -> None:
    """Restart a cluster's apiserver with these extra flags (none: back to the defaults),
    as an upgrade or downgrade of that cluster would."""
    cluster = state.cluster(name)
    bad = [a for a in args if not a.startswith("--")]
    if bad:
        raise BedError(
            f"--apiserver-arg takes flags like --runtime-config=batch/v1=false, not {bad[0]!r}"
        )
    cluster.apiserver_args = list(args)
    save(state)
    component = f"{name}-apiserver"
    # Quick, like a rolling restart behind a load balancer: the outage stays short.
    kill(state, component, signal.SIGKILL)
    ensure_running(state, [component], log)


def resolve(state: State, name: str) -> str:
    """A user's NAME for stop/start: a component, or a cluster (meaning its apiserver)."""
    components = [n for n, _, _ in state.components()]
    if name in components:
        return name
    if any(c.name == name for c in state.clusters):
        return f"{name}-apiserver"
    raise BedError(
        f"no component or cluster named {name!r}; try one of: "
        + ", ".join(["etcd", *(c.name for c in state.clusters)])
        + " (or `hack/testbed status` for every component)"
    )


def validate_new_name(state: State | None, name: str) -> None:
    if not NAME_RE.match(name) or name in RESERVED_NAMES or name == HUB:
        raise BedError(
            f"{name!r} cannot name a cluster: use lowercase letters, digits and '-', "
            "start with a letter, at most 32 characters, not etcd/hub/kmc-apiserver"
        )
    if state is not None and any(c.name == name for c in state.clusters):
        raise BedError(f"cluster {name!r} is already in the test bed")


def parse_labels(text: str) -> dict[str, str]:
    labels: dict[str, str] = {}
    for item in filter(None, text.split(",")):
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise BedError(f"--labels takes k=v pairs separated by commas; {item!r} is not one")
        labels[key.strip()] = value.strip()
    return labels
