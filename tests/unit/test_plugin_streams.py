"""The pure parts of `kubectl mc logs`, `exec` and `port-forward`: WebSocket frames, the
channels Kubernetes sends in them, the exit code kubectl would exit with, what a log line
looks like, and how a followed log is taken up again after its location came back."""

from __future__ import annotations

import io
import json
import struct
from collections.abc import Iterator

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kubectl_mc import channels, logs, websocket
from kubectl_mc.argv import normalize
from kubectl_mc.execute import query
from kubectl_mc.kube import KubeError
from kubectl_mc.portforward import PortForwardError, parse_ports
from kubectl_mc.resources import WORKLOADS

# --- WebSocket ---------------------------------------------------------------------------------


def server_frame(opcode: int, payload: bytes, fin: bool = True) -> bytes:
    """A frame as a server sends it: never masked."""
    first = (0x80 if fin else 0) | opcode
    size = len(payload)
    if size < 126:
        return struct.pack("!BB", first, size) + payload
    if size < 1 << 16:
        return struct.pack("!BBH", first, 126, size) + payload
    return struct.pack("!BBQ", first, 127, size) + payload


@given(st.binary(max_size=70000), st.binary(min_size=4, max_size=4))
def test_a_masked_frame_reads_back_as_its_payload(payload: bytes, mask: bytes) -> None:
    framed = websocket.frame(websocket.BINARY, payload, mask)
    assert framed[0] == 0x80 | websocket.BINARY
    assert framed[1] & 0x80, "a client's frames are masked"
    assert websocket.Reader(io.BytesIO(framed)).message() == (websocket.BINARY, payload)


def test_frame_lengths_take_7_16_or_64_bits() -> None:
    mask = b"\x01\x02\x03\x04"
    assert len(websocket.frame(websocket.BINARY, b"x" * 125, mask)) == 2 + 4 + 125
    assert len(websocket.frame(websocket.BINARY, b"x" * 126, mask)) == 4 + 4 + 126
    assert len(websocket.frame(websocket.BINARY, b"x" * 65536, mask)) == 10 + 4 + 65536
    # RFC 6455's own example: "Hello", masked with 37 fa 21 3d.
    hello = websocket.frame(websocket.TEXT, b"Hello", bytes.fromhex("37fa213d"))
    assert hello == bytes.fromhex("818537fa213d7f9f4d5158")


def test_fragments_pings_and_close() -> None:
    pings: list[bytes] = []
    stream = io.BytesIO(
        server_frame(websocket.BINARY, b"\x01par", fin=False)
        + server_frame(websocket.PING, b"are you there")
        + server_frame(websocket.CONTINUATION, b"ts")
        + server_frame(websocket.BINARY, b"")
        + server_frame(websocket.CLOSE, websocket.close_payload(1000, "bye"))
        + server_frame(websocket.BINARY, b"never read")
    )
    reader = websocket.Reader(stream, on_ping=pings.append)
    assert reader.message() == (websocket.BINARY, b"\x01parts")
    assert pings == [b"are you there"]
    assert reader.message() == (websocket.BINARY, b"")
    assert reader.message() is None
    assert (reader.closed, reader.close_code) == (True, 1000)
    assert reader.message() is None


def test_a_connection_cut_mid_frame_is_an_error() -> None:
    cut = server_frame(websocket.BINARY, b"\x01hello")[:-2]
    with pytest.raises(websocket.WebSocketError):
        websocket.Reader(io.BytesIO(cut)).message()
    with pytest.raises(websocket.WebSocketError):
        stray = server_frame(websocket.CONTINUATION, b"x")
        websocket.Reader(io.BytesIO(stray)).message()


def test_the_handshake_accept_is_rfc_6455s() -> None:
    assert websocket.accept_for("dGhlIHNhbXBsZSBub25jZQ==") == "s3pPLMBiTxaQ9kYGzzhZRbK+xOo="
    headers, accept = websocket.handshake(channels.COMMAND_PROTOCOLS)
    assert headers["Upgrade"] == "websocket" and headers["Connection"] == "Upgrade"
    assert headers["Sec-WebSocket-Protocol"] == "v5.channel.k8s.io, v4.channel.k8s.io"
    assert accept == websocket.accept_for(headers["Sec-WebSocket-Key"])


# --- channels ----------------------------------------------------------------------------------


def status(**fields: object) -> bytes:
    return json.dumps({"metadata": {}, **fields}).encode()


def test_the_outcome_is_the_exit_code_kubectl_exits_with() -> None:
    assert channels.outcome(status(status="Success")) == (0, "")
    exited = status(
        status="Failure",
        reason="NonZeroExitCode",
        message="command terminated with non-zero exit code: exit status 3",
        details={"causes": [{"reason": "ExitCode", "message": "3"}]},
    )
    assert channels.outcome(exited) == (3, "command terminated with exit code 3")
    # What kwok sends (it loses the code): kubectl exits 1 and prints the message.
    internal = status(status="Failure", reason="InternalError", message="Internal error: boom")
    assert channels.outcome(internal) == (1, "error: Internal error: boom")
    assert channels.outcome(b"not json")[0] == 1
    no_code = status(status="Failure", reason="NonZeroExitCode", details={"causes": []})
    assert channels.outcome(no_code) == (
        1,
        "error: error stream protocol error: no ExitCode cause given",
    )


def test_channel_messages_and_port_forward_openings() -> None:
    assert channels.message(channels.STDIN, b"ls\n") == b"\x00ls\n"
    assert channels.split(b"\x02oops") == (channels.STDERR, b"oops")
    assert channels.split(b"") == (-1, b"")
    assert json.loads(channels.resize(80, 24)) == {"Width": 80, "Height": 24}
    assert channels.port_of(b"\x90\x1f") == 8080
    with pytest.raises(ValueError):
        channels.port_of(b"\x90")


def test_exec_asks_as_kubectl_asks() -> None:
    assert query(["sh", "-c", "echo hi"], None, stdin=False, tty=False) == [
        ("command", "sh"),
        ("command", "-c"),
        ("command", "echo hi"),
        ("stdout", "true"),
        ("stderr", "true"),
    ]
    # A terminal merges stderr into stdout.
    assert query(["sh"], "app", stdin=True, tty=True) == [
        ("command", "sh"),
        ("container", "app"),
        ("stdin", "true"),
        ("stdout", "true"),
        ("tty", "true"),
    ]


def test_port_pairs() -> None:
    assert parse_ports(["8080", "9090:80", ":443", "0:22"]) == [
        (8080, 8080),
        (9090, 80),
        (0, 443),
        (0, 22),
    ]
    for bad in ("x", "8080:", "70000:80", "1:0"):
        with pytest.raises(PortForwardError):
            parse_ports([bad])


# --- logs --------------------------------------------------------------------------------------


def test_targets_are_kubectls() -> None:
    assert logs.parse_target("web-1", None) == (None, "web-1")
    assert logs.parse_target("pod/web-1@us-east", None) == (None, "web-1@us-east")
    assert logs.parse_target("deploy/web", None) == ("deploy", "web")
    assert logs.parse_target("StatefulSets/db", None) == ("statefulsets", "db")
    assert logs.parse_target(None, "app=web") == (None, None)
    for target, selector in (("svc/web", None), ("deploy/", None), (None, None), ("x", "a=b")):
        with pytest.raises(logs.LogsError):
            logs.parse_target(target, selector)


def test_every_workload_kind_is_read_by_each_of_its_names() -> None:
    """Logs read the plugin's one table of workloads: a kind added there needs no second
    edit here, and every name kubectl gives it (plural, singular, short) works."""
    names = 0
    for plural, workload in WORKLOADS.items():
        api_version = f"{workload.group}/{workload.version}"
        for name in (plural, workload.singular, *workload.shorts):
            assert logs.WORKLOADS[name] == (api_version, plural)
            assert logs.parse_target(f"{name.upper()}/web", None) == (name, "web")
            names += 1
    assert len(logs.WORKLOADS) == names  # and nothing else
    assert logs.WORKLOADS["deploy"] == ("apps/v1", "deployments")
    assert logs.WORKLOADS["job"] == ("batch/v1", "jobs")


def test_selectors_of_workloads() -> None:
    deployment = {
        "metadata": {"name": "web"},
        "spec": {
            "selector": {
                "matchLabels": {"tier": "front", "app": "web"},
                "matchExpressions": [
                    {"key": "track", "operator": "In", "values": ["stable", "canary"]},
                    {"key": "legacy", "operator": "DoesNotExist"},
                ],
            }
        },
    }
    assert logs.selector_of(deployment, "deployments") == (
        "app=web,tier=front,track in (stable,canary),!legacy"
    )
    # A hub Job's selector names the hub's controller uid, not the children's.
    job = {"metadata": {"name": "batch"}, "spec": {"selector": {"matchLabels": {"x": "y"}}}}
    assert logs.selector_of(job, "jobs") == "batch.kubernetes.io/job-name=batch"


def pod(
    name: str, location: str, *containers: str, default: str | None = None
) -> dict[str, object]:
    annotations = {"kmc.dev/location": location}
    if default:
        annotations["kubectl.kubernetes.io/default-container"] = default
    return {
        "metadata": {"name": name, "annotations": annotations},
        "spec": {"containers": [{"name": c} for c in containers]},
    }


def test_containers_read_and_labels() -> None:
    said: list[str] = []
    pods = [pod("a", "us-east", "app"), pod("b", "eu-west", "app", "sidecar", default="sidecar")]
    chosen = logs.sources(pods, None, False, said.append)
    assert [s.label for s in chosen] == ["us-east/a/app", "eu-west/b/sidecar"]
    assert said == ['Defaulted container "sidecar" out of: app, sidecar']
    assert [s.label for s in logs.sources(pods, None, True, said.append)] == [
        "us-east/a/app",
        "eu-west/b/app",
        "eu-west/b/sidecar",
    ]
    assert chosen[1].path("ns") == "/apis/remote.kmc.dev/v1alpha1/namespaces/ns/pods/b@eu-west/log"


def test_timestamps_are_read_as_instants() -> None:
    assert logs.instant("1970-01-01T00:00:01Z") == 10**9
    assert logs.instant("1970-01-01T00:00:01.5Z") == 15 * 10**8
    assert logs.instant("1970-01-01T02:00:01.000000001+02:00") == 10**9 + 1
    # Go trims a fraction's zeros: text order is not time order, instants are.
    assert logs.instant("2024-01-01T00:00:00.9Z") > logs.instant("2024-01-01T00:00:00.10Z")  # type: ignore[operator]
    for bad in (
        "",
        "yesterday",
        "2024-01-01 00:00:00Z",
        "2024-01-01T00:00:00",
        "2024-13-01T00:00:00Z",
    ):
        assert logs.instant(bad) is None
    assert logs.split_timestamp("2024-01-01T00:00:00Z hello world\n") == (
        "2024-01-01T00:00:00Z",
        "hello world\n",
    )
    assert logs.split_timestamp("no time here\n") == ("", "no time here\n")


def test_lines_are_printed_whole_and_prefixed() -> None:
    out: list[bytes] = []
    source = logs.Source("us-east", "web-1", "app")
    logs.Printer(True, out.append).line(source, "hello")
    logs.Printer(False, out.append).line(source, "bye\n")
    assert out == [b"[us-east/web-1/app] hello\n", b"bye\n"]


def test_a_log_query_asks_timestamps_and_resumes_after_the_last_line() -> None:
    options = logs.Options(follow=True, since_seconds=60, tail=5)
    assert options.query("app", None) == [
        ("container", "app"),
        ("timestamps", "true"),
        ("follow", "true"),
        ("sinceSeconds", "60"),
        ("tailLines", "5"),
    ]
    assert options.query("app", "2024-01-01T00:00:00.5Z") == [
        ("container", "app"),
        ("timestamps", "true"),
        ("follow", "true"),
        ("sinceTime", "2024-01-01T00:00:00.5Z"),
    ]


class Stream:
    def __init__(self, lines: list[str], cut: bool) -> None:
        self._lines, self._cut = lines, cut

    def lines(self) -> Iterator[bytes]:
        for line in self._lines:
            yield line.encode()
        if self._cut:
            raise KubeError("Unable to connect to the server: Connection closed")


class Answers:
    """What a server answers each ask for a log, in turn: lines (cut or not), or an error."""

    def __init__(self, *answers: Stream | KubeError) -> None:
        self.answers = list(answers)
        self.asked: list[list[tuple[str, str]]] = []

    def stream(self, path: str, params: list[tuple[str, str]]) -> Stream:
        self.asked.append(params)
        answer = self.answers.pop(0)
        if isinstance(answer, KubeError):
            raise answer
        return answer


def t(second: int, text: str) -> str:
    return f"2024-01-01T00:00:{second:02d}.5Z {text}\n"


def test_a_followed_log_cut_by_an_outage_goes_on_after_its_last_line() -> None:
    down = KubeError(
        "Error from server (ServiceUnavailable): location us-west is not Ready",
        {"code": 503},
    )
    client = Answers(
        Stream([t(1, "one"), t(2, "two")], cut=True),
        down,
        down,
        # The server repeats the last line (sinceTime is inclusive), then goes on.
        Stream([t(2, "two"), t(3, "three")], cut=False),
    )
    printed: list[bytes] = []
    said: list[str] = []
    slept: list[float] = []
    ok = logs.read(
        client,  # type: ignore[arg-type]
        "ns",
        logs.Source("us-west", "web-1", "app"),
        logs.Options(follow=True, tail=10),
        logs.Printer(True, printed.append),
        said.append,
        sleep=slept.append,
    )
    assert ok
    assert printed == [
        b"[us-west/web-1/app] one\n",
        b"[us-west/web-1/app] two\n",
        b"[us-west/web-1/app] three\n",
    ]
    assert said == [
        "location us-west: lost us-west/web-1/app: Connection closed; "
        "following the others, trying again",
        "location us-west is back: following us-west/web-1/app again",
    ]
    assert slept == [1.0, 2.0, 4.0]
    assert ("tailLines", "10") in client.asked[0]
    assert client.asked[-1][-1] == ("sinceTime", "2024-01-01T00:00:02.5Z")
    assert all(("tailLines", "10") not in asked for asked in client.asked[1:])


def test_a_refusal_is_not_asked_again_and_a_plain_read_is_not_retried() -> None:
    forbidden = KubeError("Error from server (Forbidden): location us-west: no", {"code": 403})
    said: list[str] = []
    source = logs.Source("us-west", "web-1", "app")
    printer = logs.Printer(True, lambda _: None)
    follow = logs.Options(follow=True)
    assert not logs.read(Answers(forbidden), "ns", source, follow, printer, said.append)  # type: ignore[arg-type]
    cut = Answers(Stream([t(1, "one")], cut=True))
    assert not logs.read(cut, "ns", source, logs.Options(), printer, said.append)  # type: ignore[arg-type]
    assert said == [str(forbidden), "Unable to connect to the server: Connection closed"]


def test_prefix_false_is_no_prefix() -> None:
    assert normalize(["logs", "deploy/web", "--prefix=false"]) == [
        "logs",
        "deploy/web",
        "--no-prefix",
    ]
    assert normalize(["logs", "deploy/web", "--follow=true"])[-1] == "--follow"


def running_pod(name: str, location: str, phase: str = "Running") -> dict[str, object]:
    return {**pod(name, location, "app"), "status": {"phase": phase}}


def test_a_workloads_new_pods_are_followed_once_they_run() -> None:
    """Following a workload, its pods that run later (its share moved to another location)
    are read too: once each, when they run, and said on stderr."""
    said: list[str] = []
    read: list[str] = []

    class Ended:
        def stream(self, path: str, params: list[tuple[str, str]]) -> Stream:
            read.append(path)
            return Stream([], cut=False)

    streams = logs.Streams(
        Ended(),  # type: ignore[arg-type]
        "ns",
        logs.Options(follow=True),
        logs.Printer(True, lambda _: None),
        said.append,
    )
    assert streams.start(logs.Source("us-west", "web-1", "app"))
    logs._new_pod(running_pod("web-2", "eu-west", phase="Pending"), streams, None, False)
    logs._new_pod(running_pod("web-1", "us-west"), streams, None, False)  # known already
    logs._new_pod(running_pod("web-2", "eu-west"), streams, None, False)
    logs._new_pod(running_pod("web-2", "eu-west"), streams, None, False)  # seen twice
    for thread in streams.threads:
        thread.join(30)
    assert streams.known == {"us-west/web-1/app", "eu-west/web-2/app"}
    assert said == ["location eu-west: following eu-west/web-2/app"]
    assert sorted(read) == [
        "/apis/remote.kmc.dev/v1alpha1/namespaces/ns/pods/web-1@us-west/log",
        "/apis/remote.kmc.dev/v1alpha1/namespaces/ns/pods/web-2@eu-west/log",
    ]
    assert streams.results == [True, True]


def test_a_pod_gone_while_its_location_was_away_ends_its_stream_quietly() -> None:
    down = KubeError("Error from server (ServiceUnavailable): not Ready", {"code": 503})
    gone = KubeError('Error from server (NotFound): location us-west: pods "web-1"', {"code": 404})
    said: list[str] = []
    ok = logs.read(
        Answers(Stream([t(1, "one")], cut=True), down, gone),  # type: ignore[arg-type]
        "ns",
        logs.Source("us-west", "web-1", "app"),
        logs.Options(follow=True),
        logs.Printer(True, lambda _: None),
        said.append,
        sleep=lambda _: None,
    )
    assert ok
    assert said[-1] == "location us-west is back without us-west/web-1/app: it is gone"
