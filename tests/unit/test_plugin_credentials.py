"""The plugin's credentials, as kubectl finds them (issue #15): exec plugins (v1 and v1beta1,
args, env, cluster info, expiry, a retry after a 401, interactive modes, a missing command),
token files read again when they change, client certificates, tls-server-name and an HTTP
proxy, against a local HTTPS server and a fake plugin written to tmp_path."""

from __future__ import annotations

import base64
import io
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
import yaml

from kubectl_mc import kube
from kubectl_mc.kube import Client, KubeError
from kubectl_mc.kubeconfig import load, select

from .kube_fakes import ApiServer, Plugin, api_server, connect_proxy, pem_pair, write_plugin

REPO = Path(__file__).resolve().parents[2]
HELP = (
    "It looks like you are trying to use a client-go credential plugin that is not installed."
    "\n\nTo learn more about this feature, consult the documentation available at:\n"
    "      https://kubernetes.io/docs/reference/access-authn-authz/authentication/"
    "#client-go-credential-plugins"
)


@pytest.fixture
def api(tmp_path: Path) -> Iterator[ApiServer]:
    with api_server(tmp_path / "pki") as server:
        yield server


@pytest.fixture
def plugin(tmp_path: Path) -> Plugin:
    return write_plugin(tmp_path)


@pytest.fixture(autouse=True)
def no_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    """stdin is not a terminal unless a test says so."""
    monkeypatch.setattr(sys, "stdin", io.StringIO())


def kubeconfig(api: ApiServer, user: dict[str, Any], **cluster: Any) -> dict[str, Any]:
    return {
        "clusters": [
            {
                "name": "hub",
                "cluster": {
                    "server": api.url,
                    "certificate-authority": str(api.ca.cert),
                    **cluster,
                },
            }
        ],
        "users": [{"name": "alice", "user": user}],
        "contexts": [{"name": "hub", "context": {"cluster": "hub", "user": "alice"}}],
        "current-context": "hub",
    }


def client(api: ApiServer, user: dict[str, Any], **cluster: Any) -> Client:
    return kube.connect(select(kubeconfig(api, user, **cluster)))


def test_an_exec_plugin_is_run_once_with_its_args_env_and_cluster(
    api: ApiServer, plugin: Plugin
) -> None:
    exec_ = {**plugin.exec(greeting="hello"), "provideClusterInfo": True}
    hub = client(api, {"exec": exec_})
    assert plugin.runs() == []  # nothing runs before a request needs it
    assert hub.get("/api")["token"] == "token-1"
    assert hub.get("/api")["token"] == "token-1"
    [run] = plugin.runs()
    assert run["args"] == ["--region", "eu west"] and run["env"] == "hello"
    info = run["info"]
    assert info["apiVersion"] == "client.authentication.k8s.io/v1"
    assert info["kind"] == "ExecCredential" and info["spec"]["interactive"] is False
    assert info["spec"]["cluster"] == {
        "server": api.url,
        "certificate-authority-data": base64.b64encode(api.ca.cert.read_bytes()).decode(),
    }
    assert api.tokens() == ["Bearer token-1", "Bearer token-1"]


def test_v1beta1_and_a_client_certificate(api: ApiServer, plugin: Plugin, tmp_path: Path) -> None:
    cert, key = pem_pair(tmp_path, api.ca, "alice-cert")
    exec_ = plugin.exec("v1beta1", mode=None, cert=str(cert), key=str(key))
    answer = client(api, {"exec": exec_}).get("/api")
    assert answer == {"kind": "Thing", "token": None, "client": "alice-cert"}
    [run] = plugin.runs()
    assert run["info"]["apiVersion"] == "client.authentication.k8s.io/v1beta1"
    assert "cluster" not in run["info"]["spec"]  # only with provideClusterInfo


def test_a_credential_is_kept_until_it_expires(api: ApiServer, plugin: Plugin) -> None:
    lasting = client(api, {"exec": plugin.exec(expires="3600")})
    assert [lasting.get("/api")["token"] for _ in range(3)] == ["token-1"] * 3
    expired = client(api, {"exec": plugin.exec(expires="-60")})
    assert [expired.get("/api")["token"] for _ in range(2)] == ["token-2", "token-3"]


def test_threads_share_one_run(api: ApiServer, plugin: Plugin) -> None:
    hub = client(api, {"exec": plugin.exec()})
    with ThreadPoolExecutor(max_workers=6) as pool:
        tokens = list(pool.map(lambda _: hub.get("/api")["token"], range(12)))
    assert set(tokens) == {"token-1"} and len(plugin.runs()) == 1


def test_a_401_runs_the_plugin_again_and_retries_once(api: ApiServer, plugin: Plugin) -> None:
    api.accept = {"token-2"}
    hub = client(api, {"exec": plugin.exec(expires="3600")})
    assert hub.get("/api")["token"] == "token-2"
    assert api.tokens() == ["Bearer token-1", "Bearer token-2"]
    assert hub.get("/api")["token"] == "token-2" and len(plugin.runs()) == 2
    api.accept = {"token-9"}
    with pytest.raises(KubeError) as refused:
        hub.get("/api")
    assert str(refused.value) == "error: You must be logged in to the server (Unauthorized)"
    assert api.tokens()[3:] == ["Bearer token-2", "Bearer token-3"]  # one retry, no more


def test_a_watch_is_retried_after_a_401_too(api: ApiServer, plugin: Plugin) -> None:
    api.accept = {"token-2"}
    events = list(client(api, {"exec": plugin.exec()}).watch("/watch"))
    assert events == [{"type": "ADDED", "object": {"token": "token-2"}}]


def test_a_static_token_is_not_retried(api: ApiServer) -> None:
    api.accept = set()
    with pytest.raises(KubeError, match="You must be logged in"):
        client(api, {"token": "old"}).get("/api")
    assert api.tokens() == ["Bearer old"]


def test_a_missing_command_names_the_user_and_gives_the_hint(api: ApiServer) -> None:
    exec_ = {
        "apiVersion": "client.authentication.k8s.io/v1",
        "command": "kmc-test-no-such-plugin",
        "interactiveMode": "Never",
        "installHint": "Install it with: brew install kmc-test-no-such-plugin",
    }
    with pytest.raises(KubeError) as missing:
        client(api, {"exec": exec_}).get("/api")
    assert str(missing.value) == (
        'error: getting credentials for user "alice": exec: executable kmc-test-no-such-plugin '
        f"not found\n\n{HELP}\n\nInstall it with: brew install kmc-test-no-such-plugin"
    )
    assert api.seen == []  # nothing went out as anonymous


def test_the_plugin_exits_1_like_kubectl(api: ApiServer, tmp_path: Path) -> None:
    """Through the real command line, in a process of its own."""
    exec_ = {
        "apiVersion": "client.authentication.k8s.io/v1beta1",
        "command": "kmc-test-no-such-plugin",
    }
    config = tmp_path / "kubeconfig"
    config.write_text(yaml.safe_dump(kubeconfig(api, {"exec": exec_})))
    code = "from kubectl_mc.cli import main; main()"
    done = subprocess.run(
        [sys.executable, "-c", code, "get", "deploy", "--kubeconfig", str(config)],
        capture_output=True,
        text=True,
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        stdin=subprocess.DEVNULL,
        timeout=60,
    )
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr == (
        'error: getting credentials for user "alice": exec: executable kmc-test-no-such-plugin '
        f"not found\n\n{HELP}\n"
    )


def test_a_failing_plugin_and_a_bad_answer(api: ApiServer, plugin: Plugin) -> None:
    with pytest.raises(KubeError) as failing:
        client(api, {"exec": plugin.exec(exit="3")}).get("/api")
    assert str(failing.value) == (
        f'error: getting credentials for user "alice": exec: executable {plugin.command} '
        "failed with exit code 3"
    )
    with pytest.raises(KubeError) as wrong:
        exec_ = plugin.exec(answers="client.authentication.k8s.io/v1beta1")
        client(api, {"exec": exec_}).get("/api")
    assert "plugin returned version client.authentication.k8s.io/v1beta1" in str(wrong.value)


def test_interactive_modes(api: ApiServer, plugin: Plugin, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(KubeError) as always:
        client(api, {"exec": plugin.exec(mode="Always")}).get("/api")
    assert str(always.value) == (
        'error: getting credentials for user "alice": exec plugin cannot support interactive '
        "mode: standard input is not a terminal"
    )
    assert plugin.runs() == []

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    monkeypatch.setattr(sys, "stdin", Terminal())
    for mode in ("Always", "IfAvailable", "Never"):
        client(api, {"exec": plugin.exec(mode=mode)}).get("/api")
    assert [r["info"]["spec"]["interactive"] for r in plugin.runs()] == [True, True, False]


def test_a_kubeconfig_kubectl_refuses_is_refused(api: ApiServer, plugin: Plugin) -> None:
    with pytest.raises(KubeError) as no_mode:
        client(api, {"exec": plugin.exec(mode=None)})
    assert str(no_mode.value) == (
        "interactiveMode must be specified for alice to use exec authentication plugin"
    )
    exec_ = {**plugin.exec(), "apiVersion": "client.authentication.k8s.io/v1alpha1"}
    with pytest.raises(KubeError) as old:
        client(api, {"exec": exec_})
    assert (
        str(old.value) == 'exec plugin: invalid apiVersion "client.authentication.k8s.io/v1alpha1"'
    )


def test_a_token_in_the_kubeconfig_wins_over_exec(api: ApiServer, plugin: Plugin) -> None:
    assert client(api, {"token": "t", "exec": plugin.exec()}).get("/api")["token"] == "t"
    assert plugin.runs() == []


def test_a_relative_command_is_relative_to_its_kubeconfig(
    api: ApiServer, plugin: Plugin, tmp_path: Path
) -> None:
    exec_ = {**plugin.exec(), "command": "./bin/fake-auth"}
    (tmp_path / "config").write_text(yaml.safe_dump(kubeconfig(api, {"exec": exec_})))
    config, base = load(str(tmp_path / "config"))
    assert kube.connect(select(config, base=base)).get("/api")["token"] == "token-1"


def test_a_token_file_is_read_again_when_it_changes(api: ApiServer, tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text("first\n")
    hub = client(api, {"tokenFile": str(token)})
    assert hub.get("/api")["token"] == "first"
    stamp = token.stat().st_mtime_ns
    token.write_text("other\n")
    os.utime(token, ns=(stamp, stamp))  # same modification time: not read again
    assert hub.get("/api")["token"] == "first"
    os.utime(token, ns=(stamp + 10**9, stamp + 10**9))
    assert hub.get("/api")["token"] == "other"
    token.unlink()
    with pytest.raises(KubeError) as gone:
        hub.get("/api")
    assert str(gone.value) == (
        f'error: getting credentials for user "alice": reading tokenFile {token}: '
        "No such file or directory"
    )


def test_client_certificates_from_files_and_data(api: ApiServer, tmp_path: Path) -> None:
    cert, key = pem_pair(tmp_path, api.ca, "bob")
    files = {"client-certificate": str(cert), "client-key": str(key)}
    assert client(api, files).get("/api")["client"] == "bob"
    data = {
        "client-certificate-data": base64.b64encode(cert.read_bytes()).decode(),
        "client-key-data": base64.b64encode(key.read_bytes()).decode(),
    }
    assert client(api, data).get("/api")["client"] == "bob"


def test_tls_server_name_is_what_the_certificate_is_checked_for(api: ApiServer) -> None:
    assert client(api, {"token": "t"}, **{"tls-server-name": "localhost"}).get("/api")
    with pytest.raises(KubeError, match="certificate verify failed"):
        client(api, {"token": "t"}, **{"tls-server-name": "elsewhere.example"}).get("/api")
    insecure = {"certificate-authority": None, "insecure-skip-tls-verify": True}
    assert client(api, {"token": "t"}, **insecure).get("/api")["token"] == "t"


def test_an_http_proxy_tunnels_with_connect(api: ApiServer, plugin: Plugin) -> None:
    with connect_proxy() as proxy:
        url = f"http://me:p%40ss@127.0.0.1:{proxy.port}"
        hub = client(api, {"exec": plugin.exec()}, **{"proxy-url": url})
        assert hub.get("/api")["token"] == "token-1"
        assert hub.get("/api")["token"] == "token-1"
    secret = base64.b64encode(b"me:p@ss").decode()
    assert proxy.requests == [(f"CONNECT 127.0.0.1:{api.port} HTTP/1.0", f"Basic {secret}")]


def test_a_proxy_refusing_the_tunnel_and_unsupported_proxies(api: ApiServer) -> None:
    with connect_proxy() as proxy:
        server = f"https://elsewhere.example:{api.port}"
        hub = client(api, {"token": "t"}, server=server, **{"proxy-url": f"127.0.0.1:{proxy.port}"})
        with pytest.raises(KubeError, match="Tunnel connection failed: 403"):
            hub.get("/api")
    with pytest.raises(KubeError, match="only http:// proxies are supported"):
        client(api, {"token": "t"}, **{"proxy-url": "socks5://127.0.0.1:1080"})


def test_the_plain_path_imports_no_exec_or_proxy_code() -> None:
    code = (
        "import sys, kubectl_mc.kube; "
        "print([m for m in ('kubectl_mc.exec_plugin', 'kubectl_mc.proxy', 'subprocess', "
        "'tempfile') if m in sys.modules])"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, check=True
    )
    assert json.loads(done.stdout.replace("'", '"')) == []
