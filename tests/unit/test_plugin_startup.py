"""`kubectl mc get` starts fast (issue #15): its usual command lines are read without click,
with click's answers, and run on the standard library alone."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import click
import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from kubectl_mc.get_cli import describe, get
from kubectl_mc.get_flags import parse

from .kube_fakes import ApiServer, api_server, pem_pair

REPO = Path(__file__).resolve().parents[2]
# Imported by `get` they would cost milliseconds each (click and PyYAML: tens).
SLOW = (
    *("click", "yaml", "pydantic", "http.client", "email", "dataclasses", "typing", "tempfile"),
    *("pathlib", "urllib.parse", "ipaddress", "runpy"),
)


@pytest.fixture
def api(tmp_path: Path) -> Any:
    with api_server(tmp_path / "pki") as server:
        yield server


def kubeconfig(api: ApiServer, folder: Path) -> Path:
    cert, key = pem_pair(folder, api.ca, "alice")
    path = folder / "kubeconfig"
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": "hub",
                "cluster": {"server": api.url, "certificate-authority": str(api.ca.cert)},
            }
        ],
        "users": [
            {"name": "alice", "user": {"client-certificate": str(cert), "client-key": str(key)}}
        ],
        "contexts": [{"name": "hub", "context": {"cluster": "hub", "user": "alice"}}],
        "current-context": "hub",
    }
    path.write_text(yaml.safe_dump(config, default_flow_style=False))
    return path


def modules_after(*args: str) -> tuple[list[str], str]:
    """What `kubectl-mc ARGS` imported, run without site-packages (so anything but the
    standard library and kubectl_mc fails to import), and what it printed."""
    code = (
        "import sys\n"
        "from kubectl_mc.cli import main\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        "print('\\n' + repr(sorted(sys.modules)))\n"
    )
    done = subprocess.run(
        [sys.executable, "-S", "-c", code, *args],
        capture_output=True,
        text=True,
        cwd=REPO,
        env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"},
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    *printed, modules = done.stdout.rstrip("\n").split("\n")
    return json.loads(modules.replace("'", '"')), "\n".join(printed) + done.stderr


@pytest.mark.parametrize(
    "args",
    [
        ("get", "deployments", "-n", "demo"),
        ("get", "pods", "-A", "-o", "json"),
        ("get", "locations", "--no-headers"),
        ("describe", "deployments", "-n", "demo"),
        ("exec", "web-1", "-n", "demo", "--", "true"),
    ],
)
def test_get_describe_and_exec_use_only_the_standard_library(
    api: ApiServer, tmp_path: Path, args: tuple[str, ...]
) -> None:
    flags = ("--kubeconfig", str(kubeconfig(api, tmp_path)))
    end = args.index("--") if "--" in args else len(args)  # exec's command comes after `--`
    modules, printed = modules_after(*args[:end], *flags, *args[end:])
    assert api.seen and api.seen[0].client == "alice", printed  # it did reach the server
    ours = {"kubectl_mc", "__main__"} | set(sys.stdlib_module_names)
    assert [m for m in modules if m.partition(".")[0] not in ours] == []
    if args[0] == "get":
        assert [m for m in modules if m in SLOW or m.startswith("email.")] == []


def test_other_commands_still_go_to_click(api: ApiServer, tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", "from kubectl_mc.cli import main; main()", "get", "--help"],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=60,
    )
    assert done.returncode == 0 and "Display one or many resources" in done.stdout


def clicks(command: click.Command, line: list[str]) -> dict[str, Any] | None:
    """The values click gives `command` for `line`; None when it answers with an error or
    help instead."""
    try:
        with command.make_context(command.name or "", list(line)) as ctx:
            params = dict(ctx.params)
    except (click.ClickException, click.exceptions.Exit):
        return None
    params["context"] = params.pop("context_")
    return params


WORDS = [
    "deploy", "web", "db", "-", "", "--", "-n", "demo", "--namespace", "--namespace=x", "-A",
    "--all-namespaces", "-Aw", "-wA", "-An", "-nA", "-ndemo", "-o", "json", "-ojson", "-owide",
    "--output=wide", "--output", "-l", "app=web", "-lapp=web", "--selector=a=b",
    "--field-selector", "metadata.name=web", "--no-headers", "--no-headers=x", "--show-labels",
    "-w", "--watch", "--subresource", "locations", "--kubeconfig", "/k", "--context=hub",
    "--context", "--cluster", "c", "--user", "u", "--request-timeout", "5s", "-x", "--bogus",
    "-h", "--help", "-oname=x", "-=", "--=x", "-Ax",
]  # fmt: skip


@settings(max_examples=500, deadline=None)
@given(st.sampled_from(["get", "describe"]), st.lists(st.sampled_from(WORDS), max_size=7))
def test_the_quick_parser_reads_lines_as_click_does(command: str, words: list[str]) -> None:
    expected = clicks(get if command == "get" else describe, words)
    parsed = parse([command, *words])
    if expected is None:
        assert parsed is None
        return
    assert parsed is not None, "a line click reads went to click"
    name, args, values = parsed
    assert name == command and {**values, "args": args} == expected


EXEC_WORDS = [
    "web-1", "web-1@us-east", "sh", "ls", "-la", "--", "-", "", "-i", "-t", "-it", "-ti",
    "--stdin", "--tty", "--stdin=x", "-c", "app", "-capp", "--container", "--container=app",
    "-n", "demo", "-ndemo", "--namespace=x", "-in", "--kubeconfig", "/k", "--context=hub",
    "--request-timeout", "5s", "-x", "--bogus", "-h", "--help", "-it=x",
]  # fmt: skip


@settings(max_examples=500, deadline=None)
@given(st.lists(st.sampled_from(EXEC_WORDS), max_size=7))
def test_the_quick_parser_reads_exec_lines_as_click_does(words: list[str]) -> None:
    from kubectl_mc.streams_cli import exec_

    expected = clicks(exec_, words)
    parsed = parse(["exec", *words])
    if expected is None:
        assert parsed is None
        return
    assert parsed is not None, "a line click reads went to click"
    name, args, values = parsed
    expected["args"] = (expected.pop("pod"), *expected.pop("command"))
    assert name == "exec" and {**values, "args": args} == expected
