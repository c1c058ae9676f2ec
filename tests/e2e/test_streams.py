"""Logs, exec and port-forward of pods in any location, through the hub (issue 33).

The bed's kwok serves what a kubelet serves, so first a direct `kubectl logs` and `exec` in a
child must work; then the same through `pods.remote.kmc.dev` with the real kubectl and
`kubectl mc`: a followed log of a Deployment in three locations that goes on while one of
them stops, an exec's output and outcome, bytes both ways through a port-forward, a child's
own RBAC refusing by name, and bad input answered in kubectl's words.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import signal
import socket
import ssl
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp

from kmc_testbed import bed, config

from .conftest import CHILDREN, VENV_BIN, Kubectl, run_testbed
from .test_aggregated import remote_pods
from .test_locations import wait_until
from .test_testbed import deployment

REMOTE = "/apis/remote.kmc.dev/v1alpha1"
KWOK = "kwok.x-k8s.io/v1alpha1"


def plugin(
    *args: str,
    stdin: str | None = None,
    kubeconfig: Path | None = None,
    timeout: float = 120,
) -> subprocess.CompletedProcess[str]:
    """`kubectl mc ARGS` against the hub (the bed kubeconfig's current context, so no flag
    has to come after an exec's `--`)."""
    return subprocess.run(
        [Kubectl("hub").binary, "mc", *args],
        capture_output=True,
        text=True,
        input=stdin,
        timeout=timeout,
        env=_env(kubeconfig),
    )


def _env(kubeconfig: Path | None = None) -> dict[str, str]:
    return {
        **os.environ,
        "PATH": f"{VENV_BIN}{os.pathsep}{os.environ['PATH']}",
        "KUBECONFIG": str(kubeconfig or config.kubeconfig_path()),
    }


def child_exec(
    location: str, pod: str, namespace: str, *command: str
) -> subprocess.CompletedProcess[str]:
    """The real `kubectl exec` in a child (its flags before the `--`)."""
    return subprocess.run(
        [Kubectl(location).binary, "--context", location, "exec", pod, "-n", namespace,
         "--", *command],
        capture_output=True,
        text=True,
        timeout=120,
        env=_env(),
    )  # fmt: skip


def placed(hub: Kubectl, namespace: str) -> dict[str, str]:
    """A Deployment `web` with one pod in each location: location → its pod. (A location
    that has just come back, after another test's outage, gets its share once it is Ready
    and its cooldown is over: on a busy machine that takes a while.)"""
    hub.apply(deployment("web", 3), namespace)

    def everywhere() -> dict[str, str]:
        pods = remote_pods(hub, namespace)
        running = {
            p["metadata"]["annotations"]["kmc.dev/location"]: p["metadata"]["name"]
            for p in pods
            if p["status"].get("phase") == "Running"
        }
        return running if len(pods) == 3 and set(running) == set(CHILDREN) else {}

    found: dict[str, str] = wait_until("a running pod in each location", everywhere, 240)
    return found


def cri(line: str) -> str:
    """A log line as kwok reads it: the CRI log format."""
    now = time.time_ns()  # one reading: its seconds and its fraction must agree
    stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(now // 10**9)) + f".{now % 10**9:09d}Z"
    return f"{stamp} stdout F {line}\n"


def kwok_logs(child: Kubectl, namespace: str, pod: str, path: Path) -> None:
    """The pod's log is this file from now on (kwok's `Logs`, named after the pod)."""
    child.apply(
        {
            "apiVersion": KWOK,
            "kind": "Logs",
            "metadata": {"name": pod},
            "spec": {"logs": [{"logsFile": str(path), "follow": True}]},
        },
        namespace,
    )
    # kwok reads its Logs from a watch: wait until it serves this one.
    wait_until(
        f"kwok in {child.context} to serve {path.name}",
        lambda: (
            path.read_text().split(" ", 3)[-1].strip()
            in child.run("logs", pod, "-n", namespace, check=False).stdout
        ),
        60,
    )


# --- the bed -----------------------------------------------------------------------------------


def test_logs_and_exec_work_in_a_child_directly(
    testbed_up: bed.State, kubectl: dict[str, Kubectl], namespace_everywhere: str
) -> None:
    namespace = namespace_everywhere
    for name in CHILDREN:
        child = kubectl[name]
        child.apply(deployment("direct", 1), namespace)

        def running_pod(child: Kubectl = child) -> str | None:
            items = child.json("get", "pods", "-n", namespace)["items"]
            found = [p for p in items if p["status"].get("phase") == "Running"]
            return str(found[0]["metadata"]["name"]) if found else None

        pod = wait_until(f"a running pod in {name}", running_pod, 120)
        # The bed's defaults: the log is a file of the child's, exec runs in its folder.
        logs = child.run("logs", pod, "-n", namespace)
        assert f"a fake pod of {name}, simulated by kwok" in logs.stdout
        folder = config.state_dir() / name / "pods"
        done = child_exec(name, pod, namespace, "sh", "-c", "pwd; echo oops >&2")
        assert (done.stdout, done.stderr) == (f"{folder}\n", "oops\n")
        node = child.json("get", "node", f"{name}-node-1")
        addresses = node["status"]["addresses"]
        assert {"type": "InternalIP", "address": "127.0.0.1"} in addresses
        port = node["status"]["daemonEndpoints"]["kubeletEndpoint"]["Port"]
        assert port == testbed_up.cluster(name).ports["kwok"]


# --- logs --------------------------------------------------------------------------------------


class Follower:
    """`kubectl mc logs … -f` running, its lines collected as they come."""

    def __init__(self, *args: str, kubeconfig: Path | None = None) -> None:
        self.proc = subprocess.Popen(
            [Kubectl("hub").binary, "mc", "logs", *args, "-f"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=_env(kubeconfig),
        )
        self.lines: list[str] = []
        self.errors: list[str] = []
        for stream, into in ((self.proc.stdout, self.lines), (self.proc.stderr, self.errors)):
            threading.Thread(target=self._collect, args=(stream, into), daemon=True).start()

    @staticmethod
    def _collect(stream: Any, into: list[str]) -> None:
        for line in stream:
            into.append(line.rstrip("\n"))

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGINT)
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def ticks(lines: list[str], prefix: str) -> list[int]:
    return [int(line.rsplit(" ", 1)[1]) for line in lines if line.startswith(prefix)]


def test_logs_follow_every_location_and_go_on_through_an_outage(
    installed: bed.State, kubectl: dict[str, Kubectl], namespace: str, tmp_path: Path
) -> None:
    hub = kubectl["hub"]
    pods = placed(hub, namespace)
    files = {}
    for location, pod in pods.items():
        files[location] = tmp_path / f"{location}.log"
        files[location].write_text(cri(f"{location} tick 0"))
        kwok_logs(kubectl[location], namespace, pod, files[location])
    # Plain kubectl reads a log through the hub too.
    raw = hub.run("get", "--raw", f"{REMOTE}/namespaces/{namespace}/pods/{pods['us-east']}/log")
    assert raw.stdout == "us-east tick 0\n"

    stop = threading.Event()

    def write() -> None:
        tick = 1
        while not stop.is_set():
            for location, path in files.items():
                with path.open("a") as handle:
                    handle.write(cri(f"{location} tick {tick}"))
            tick += 1
            stop.wait(0.2)

    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    follower = Follower("deploy/web", "-n", namespace)
    prefixes = {loc: f"[{loc}/{pod}/web] {loc} tick " for loc, pod in pods.items()}
    try:
        wait_until(
            "lines from every location",
            lambda: all(len(ticks(follower.lines, p)) >= 5 for p in prefixes.values()),
            60,
        )
        assert not follower.errors, follower.errors
        run_testbed("stop", "us-west")
        try:
            wait_until(
                "the loss of us-west on stderr",
                lambda: any("location us-west: lost" in e for e in follower.errors),
                60,
            )
            # The others go on, us-west's stream waits.
            seen = {loc: len(ticks(follower.lines, p)) for loc, p in prefixes.items()}
            wait_until(
                "more lines from us-east and eu-west while us-west is down",
                lambda: all(
                    len(ticks(follower.lines, prefixes[loc])) >= seen[loc] + 10
                    for loc in ("us-east", "eu-west")
                ),
                60,
            )
            assert follower.proc.poll() is None
        finally:
            run_testbed("start", "us-west")

        # Back within its grace period, us-west's pod is read again after its last line;
        # away for longer, its share has moved (a new pod elsewhere, and later maybe one in
        # us-west again), and the follower follows the workload's new pods where they run.
        def recovered() -> str:
            if any("location us-west is back: following" in e for e in follower.errors):
                return "back"
            gone = any("location us-west is back without" in e for e in follower.errors)
            new = [line for line in follower.lines if not line.startswith(tuple(prefixes.values()))]
            return "moved" if gone and new else ""

        try:
            outcome = wait_until("us-west back, or its share moved", recovered, 240)
        except AssertionError as err:
            raise AssertionError(f"{err}; stderr: {follower.errors}") from None
        if outcome == "back":
            written = int(files["us-west"].read_text().splitlines()[-1].rsplit(" ", 1)[1])
            wait_until(
                "us-west's lines written during the outage",
                lambda: max(ticks(follower.lines, prefixes["us-west"])) >= written,
                60,
            )
        else:
            followed = [e for e in follower.errors if ": following " in e]
            assert followed, follower.errors  # each new pod is said on stderr
    finally:
        stop.set()
        follower.stop()
    # Every location's lines once each, in order, none lost over the outage.
    for location, prefix in prefixes.items():
        seen_ticks = ticks(follower.lines, prefix)
        expected = list(range(seen_ticks[0], seen_ticks[-1] + 1))
        assert seen_ticks == expected, f"{location}: {follower.errors}"
    assert all(re.match(r"\[(us-east|us-west|eu-west)/web-", line) for line in follower.lines)


# --- exec --------------------------------------------------------------------------------------


def test_exec_passes_output_input_and_outcome_through(
    installed: bed.State, kubectl: dict[str, Kubectl], namespace: str
) -> None:
    hub = kubectl["hub"]
    pods = placed(hub, namespace)
    pod = pods["eu-west"]
    folder = config.state_dir() / "eu-west" / "pods"
    for name in (pod, f"{pod}@eu-west"):
        done = plugin("exec", name, "-n", namespace, "--", "sh", "-c", "pwd; echo oops >&2")
        assert (done.returncode, done.stdout, done.stderr) == (0, f"{folder}\n", "oops\n")
    fed = plugin("exec", "-i", pod, "-n", namespace, "--", "head", "-n", "1", stdin="a\nb\n")
    assert (fed.returncode, fed.stdout) == (0, "a\n")
    # The end of the caller's stdin reaches the command: `cat` ends with it.
    copied = plugin("exec", "-i", pod, "-n", namespace, "--", "cat", stdin="a\nb\n")
    assert (copied.returncode, copied.stdout) == (0, "a\nb\n")
    # The outcome is the child's, as `kubectl exec` there gives it: the command's exit code.
    command = ("sh", "-c", "echo partial; exit 3")
    ours = plugin("exec", pod, "-n", namespace, "--", *command)
    theirs = child_exec("eu-west", pod, namespace, *command)
    assert (ours.returncode, ours.stdout, ours.stderr) == (
        theirs.returncode,
        theirs.stdout,
        theirs.stderr,
    )
    assert ours.returncode == 3 and "command terminated with exit code 3" in ours.stderr


def test_an_spdy_upgrade_is_switched_through_the_hub_too(
    installed: bed.State, kubectl: dict[str, Kubectl], namespace: str
) -> None:
    """kubectl before 1.30 (and after, when WebSocket is refused) speaks SPDY: a POST that
    asks to switch to SPDY/3.1. The hub's aggregator, kmc-apiserver and the child must pass
    the switch on; the child's 101 comes back to the caller."""
    pods = placed(kubectl["hub"], namespace)
    hub = installed.cluster("hub")
    pki = config.state_dir() / "hub" / "pki"
    context = ssl.create_default_context(cafile=str(pki / "ca.crt"))
    context.load_cert_chain(str(pki / "admin.crt"), str(pki / "admin.key"))
    path = (
        f"{REMOTE}/namespaces/{namespace}/pods/{pods['us-west']}@us-west/exec"
        "?command=true&stdout=true"
    )
    with (
        socket.create_connection(("127.0.0.1", hub.ports["apiserver"]), timeout=30) as raw,
        context.wrap_socket(raw, server_hostname="127.0.0.1") as conn,
    ):
        conn.sendall(
            f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: Upgrade\r\n"
            "Upgrade: SPDY/3.1\r\nX-Stream-Protocol-Version: v4.channel.k8s.io\r\n"
            "Content-Length: 0\r\n\r\n".encode()
        )
        head = b""
        while b"\r\n\r\n" not in head:
            piece = conn.recv(4096)
            assert piece, f"the connection closed after {head!r}"
            head += piece
    lines = head.split(b"\r\n\r\n")[0].decode().lower().split("\r\n")
    assert lines[0].startswith("http/1.1 101"), lines
    assert "upgrade: spdy/3.1" in lines
    assert "x-stream-protocol-version: v4.channel.k8s.io" in lines


def test_attach_reads_the_pods_output_through_the_hub(
    installed: bed.State, kubectl: dict[str, Kubectl], namespace: str, tmp_path: Path
) -> None:
    """`attach` is switched like exec: a WebSocket through the hub's aggregator and
    kmc-apiserver to the child's kubelet, its stdout on channel 1, as kubectl reads it. kwok
    attaches to the end of the pod's attach file: what is written there from then on."""
    pods = placed(kubectl["hub"], namespace)
    pod = pods["eu-west"]
    output = tmp_path / "attached.log"
    output.write_text("")
    kubectl["eu-west"].apply(
        {
            "apiVersion": KWOK,
            "kind": "Attach",
            "metadata": {"name": pod},
            "spec": {"attaches": [{"logsFile": str(output)}]},
        },
        namespace,
    )
    hub = installed.cluster("hub")
    pki = config.state_dir() / "hub" / "pki"
    context = ssl.create_default_context(cafile=str(pki / "ca.crt"))
    context.load_cert_chain(str(pki / "admin.crt"), str(pki / "admin.key"))
    url = (
        f"wss://127.0.0.1:{hub.ports['apiserver']}{REMOTE}/namespaces/{namespace}/pods/"
        f"{pod}/attach?stdout=true&stderr=true"
    )

    async def attached() -> bytes:
        """What one attach reads in 10 s, or until it sees a tick. (kwok reads its Attach
        from a watch: until it has, an attach follows the bed's default file instead.)"""
        seen = b""
        async with (
            aiohttp.ClientSession() as session,
            session.ws_connect(url, ssl=context, protocols=("v4.channel.k8s.io",)) as ws,
        ):
            assert ws.protocol == "v4.channel.k8s.io"
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(10):
                    async for message in ws:
                        assert message.type == aiohttp.WSMsgType.BINARY, message
                        if message.data[:1] == b"\x01":
                            seen += message.data[1:]
                        if b"attached tick" in seen:
                            break
        return seen

    def read_a_tick() -> bytes:
        seen = asyncio.run(attached())
        return seen if b"attached tick" in seen else b""

    written = threading.Event()

    def tick() -> None:
        count = 0
        while not written.wait(0.5):
            with output.open("a") as file:
                file.write(cri(f"attached tick {count}"))
            count += 1

    threading.Thread(target=tick, daemon=True).start()
    try:
        seen = wait_until("an attach to read the pod's output", read_a_tick, 180)
    finally:
        written.set()
    assert re.search(rb"attached tick \d+", seen), seen


# --- port-forward ------------------------------------------------------------------------------


@contextlib.contextmanager
def echo_server() -> Iterator[int]:
    """A TCP server on this machine sending back every byte it gets: its port."""
    listener = socket.create_server(("127.0.0.1", 0))

    def serve(conn: socket.socket) -> None:
        with conn:
            while data := conn.recv(65536):
                conn.sendall(data)

    def accept() -> None:
        with contextlib.suppress(OSError):
            while True:
                conn, _ = listener.accept()
                threading.Thread(target=serve, args=(conn,), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    try:
        yield listener.getsockname()[1]
    finally:
        listener.close()


def round_trip(port: int, payload: bytes) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=30) as conn:
        conn.sendall(payload)
        received = b""
        while len(received) < len(payload):
            data = conn.recv(65536)
            if not data:
                break
            received += data
        return received


def test_port_forward_carries_bytes_both_ways(
    installed: bed.State, kubectl: dict[str, Kubectl], namespace: str
) -> None:
    hub = kubectl["hub"]
    pods = placed(hub, namespace)
    pod = pods["us-east"]
    # Both pipes drained all along: a pipe nobody reads fills up, and a process blocked
    # writing to it cannot end on Ctrl-C.
    with echo_server() as target, tempfile.TemporaryFile("w+") as errors:
        kubectl["us-east"].apply(
            {
                "apiVersion": KWOK,
                "kind": "PortForward",
                "metadata": {"name": pod},
                "spec": {
                    "forwards": [
                        {"ports": [8080], "target": {"address": "127.0.0.1", "port": target}}
                    ]
                },
            },
            namespace,
        )
        proc = subprocess.Popen(
            [Kubectl("hub").binary, "mc", "port-forward", pod, ":8080", "-n", namespace],
            stdout=subprocess.PIPE,
            stderr=errors,
            text=True,
            env=_env(),
        )
        try:
            assert proc.stdout is not None
            first = proc.stdout.readline()
            threading.Thread(target=proc.stdout.read, daemon=True).start()
            match = re.fullmatch(r"Forwarding from 127\.0\.0\.1:(\d+) -> 8080\n", first)
            assert match, first
            local = int(match.group(1))
            payload = os.urandom(256 * 1024)
            # kwok reads PortForwards from a watch: the first connections may find none.
            wait_until("an echo through the pod", lambda: round_trip(local, b"ping") == b"ping", 60)
            assert round_trip(local, payload) == payload
            assert round_trip(local, b"and again") == b"and again"
        finally:
            proc.send_signal(signal.SIGINT)
            try:
                assert proc.wait(60) == 0  # as kubectl's port-forward on Ctrl-C: quietly
            finally:
                proc.kill()
                errors.seek(0)
                print(errors.read()[-4000:])  # shown by pytest if the test failed


# --- RBAC --------------------------------------------------------------------------------------


def token_kubeconfig(hub: Kubectl, namespace: str, account: str, folder: Path) -> Path:
    """A kubeconfig for the hub as a ServiceAccount (the plugin has no --as)."""
    token = hub.run("create", "token", account, "-n", namespace).stdout.strip()
    bed_config = json.loads(
        subprocess.run(
            [hub.binary, "config", "view", "--raw", "--minify", "--context", "hub", "-o", "json"],
            capture_output=True,
            text=True,
            check=True,
            env=_env(),
        ).stdout
    )
    cluster = bed_config["clusters"][0]
    path = folder / f"{account}.kubeconfig"
    path.write_text(
        json.dumps(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [cluster],
                "users": [{"name": account, "user": {"token": token}}],
                "contexts": [
                    {"name": "hub", "context": {"cluster": cluster["name"], "user": account}}
                ],
                "current-context": "hub",
            }
        )
    )
    return path


def test_a_child_that_denies_exec_says_so_by_name_and_nothing_else_changes(
    installed: bed.State, kubectl: dict[str, Kubectl], namespace: str, tmp_path: Path
) -> None:
    hub = kubectl["hub"]
    pods = placed(hub, namespace)
    account = "streamer"
    user = f"system:serviceaccount:{namespace}:{account}"
    hub.run("create", "serviceaccount", account, "-n", namespace)
    # Reads and logs: a hub Role, which follows the namespace to the children.
    hub.apply(
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "Role",
            "metadata": {"name": "reader"},
            "rules": [
                {
                    "apiGroups": ["remote.kmc.dev"],
                    "resources": ["pods", "pods/log"],
                    "verbs": ["get", "list"],
                },
                {"apiGroups": ["apps"], "resources": ["deployments"], "verbs": ["get"]},
            ],
        },
        namespace,
    )
    hub.run(
        "create", "rolebinding", "reader", "-n", namespace, "--role=reader",
        f"--serviceaccount={namespace}:{account}",
    )  # fmt: skip
    # exec on the hub: a ClusterRole, which stays on the hub (a binding to it that reaches a
    # child binds nothing there)…
    exec_role = f"kmc-e2e-exec-{namespace}"
    hub.apply(
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": {"name": exec_role},
            "rules": [
                {
                    "apiGroups": ["remote.kmc.dev"],
                    "resources": ["pods/exec"],
                    "verbs": ["get", "create"],
                }
            ],
        }
    )
    try:
        hub.run(
            "create", "rolebinding", "exec", "-n", namespace, f"--clusterrole={exec_role}",
            f"--serviceaccount={namespace}:{account}",
        )  # fmt: skip
        # …and in the children by hand: in us-east and eu-west, not in us-west.
        for location in ("us-east", "eu-west"):
            child = kubectl[location]
            child.run(
                "create", "role", "exec-here", "-n", namespace, "--verb=get,create",
                "--resource=pods/exec",
            )  # fmt: skip
            child.run(
                "create",
                "rolebinding",
                "exec-here",
                "-n",
                namespace,
                "--role=exec-here",
                f"--user={user}",
            )
        as_streamer = token_kubeconfig(hub, namespace, account, tmp_path)

        def logs_of(location: str) -> subprocess.CompletedProcess[str]:
            return plugin(
                "logs", f"{pods[location]}@{location}", "-n", namespace, kubeconfig=as_streamer
            )

        # The hub Role reached every child (read as the streamer there).
        wait_until("logs as the streamer everywhere", lambda: all(
            logs_of(loc).returncode == 0 for loc in CHILDREN
        ), 60)  # fmt: skip
        for location in ("us-east", "eu-west"):
            allowed = plugin(
                "exec", pods[location], "-n", namespace, "--", "echo", "in", location,
                kubeconfig=as_streamer,
            )  # fmt: skip
            assert (allowed.returncode, allowed.stdout) == (0, f"in {location}\n"), allowed.stderr
        denied = plugin(
            "exec", pods["us-west"], "-n", namespace, "--", "echo", "no",
            kubeconfig=as_streamer,
        )  # fmt: skip
        assert denied.returncode == 1 and denied.stdout == ""
        # The child's own words (it adds why no binding applied), naming the child.
        assert denied.stderr.startswith(
            f'Error from server (Forbidden): location us-west: pods "{pods["us-west"]}" is '
            f'forbidden: User "{user}" cannot get resource "pods/exec" in API group "" in the '
            f'namespace "{namespace}"'
        ), denied.stderr
        # Nothing else changed: its log still reads, from us-west too.
        assert "a fake pod of us-west" in logs_of("us-west").stdout
        every = plugin("logs", "deploy/web", "-n", namespace, kubeconfig=as_streamer)
        assert every.returncode == 0
        assert {line.split("/")[0].strip("[") for line in every.stdout.splitlines()} == set(
            CHILDREN
        )
    finally:
        hub.run("delete", "clusterrole", exec_role, "--ignore-not-found")


# --- bad input ---------------------------------------------------------------------------------


def test_bad_input_is_answered_in_kubectls_words(
    installed: bed.State, kubectl: dict[str, Kubectl], namespace_everywhere: str
) -> None:
    namespace = namespace_everywhere
    # Made in the children by hand: `twin` in two locations, `solo` in one.
    for location, name in (("us-east", "twin"), ("eu-west", "twin"), ("us-west", "solo")):
        kubectl[location].run("run", name, "-n", namespace, "--image=registry.example/x:1")
    for location, name in (("us-east", "twin"), ("eu-west", "twin"), ("us-west", "solo")):
        kubectl[location].run(
            "wait", "--for=condition=Ready", f"pod/{name}", "-n", namespace, "--timeout=120s"
        )

    def fails(command: str, *args: str) -> str:
        done = plugin(command, "-n", namespace, *args)  # before an exec's `--`
        assert done.returncode == 1, done
        return done.stderr

    missing = 'Error from server (NotFound): pods.remote.kmc.dev "nope" not found\n'
    assert fails("logs", "nope") == missing
    assert fails("exec", "nope", "--", "true") == missing
    twice = (
        'Error from server (Conflict): pods.remote.kmc.dev "twin" exists in several '
        "locations: eu-west, us-east; name one as twin@eu-west\n"
    )
    assert fails("logs", "twin") == twice
    assert fails("exec", "twin", "--", "true") == twice
    assert fails("port-forward", "twin", "8080") == twice
    assert plugin("logs", "twin@us-east", "-n", namespace).returncode == 0
    assert fails("logs", "twin@us-east", "-c", "nope") == (
        "Error from server (BadRequest): location us-east: container nope is not valid for "
        "pod twin\n"
    )
    assert fails("exec", "twin@us-east", "-c", "nope", "--", "true") == (
        "Error from server (BadRequest): location us-east: container nope is not valid for "
        "pod twin\n"
    )
    assert fails("logs", "twin@mars") == (
        'Error from server (NotFound): pods.remote.kmc.dev "twin@mars" not found: there is no '
        "location mars\n"
    )
    run_testbed("stop", "us-west")
    try:
        down = fails("exec", "solo@us-west", "--", "true")
        assert re.fullmatch(
            r"Error from server \(ServiceUnavailable\): (location us-west is not Ready: .*"
            r"|us-west \(https://127\.0\.0\.1:\d+\) is unreachable: .*)\n",
            down,
        ), down
        # Asked without its location, it is not found, and the location left out is named.
        lost = fails("logs", "solo")
        assert 'pods.remote.kmc.dev "solo" not found' in lost
        assert "Warning: location us-west left out" in lost
    finally:
        run_testbed("start", "us-west")
