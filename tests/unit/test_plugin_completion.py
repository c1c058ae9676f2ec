"""Completion in cobra's protocol, as kubectl runs `kubectl_complete-mc` for `kubectl mc <TAB>`."""

from typing import Any

import pytest

from kubectl_mc import completion
from kubectl_mc.commands import cli


def test_commands_complete_with_their_help() -> None:
    lines = completion.cobra_lines(cli, [""])
    assert lines[-1] == ":4"
    commands = [line.split("\t")[0] for line in lines[:-1]]
    assert {"get", "describe", "version", "completion", "join"} <= set(commands)
    assert any(line.startswith("get\tDisplay one or many resources") for line in lines)


def test_resource_types_then_flags() -> None:
    assert completion.cobra_lines(cli, ["get", "dep"]) == [
        "deployments",
        "deployments.remote",
        "deployments.mc",
        ":4",
    ]
    assert completion.cobra_lines(cli, ["__complete", "get", "deploy", "--sub"])[0].startswith(
        "--subresource\t"
    )
    assert completion.cobra_lines(cli, ["get", "deploy", "--subresource", ""]) == [
        "locations",
        "strategy",
        ":4",
    ]


def test_names_and_namespaces_come_from_the_hub(monkeypatch: pytest.MonkeyPatch) -> None:
    asked: list[tuple[str, str | None]] = []

    class Hub:
        def get(self, path: str) -> dict[str, Any]:
            asked.append((path, None))
            names = ["web", "worker", "db"] if "deployments" in path else ["demo", "default"]
            return {"items": [{"metadata": {"name": n}} for n in names]}

    def client(ctx: Any) -> tuple[Hub, str]:
        assert ctx.params["context_"] == "hub"
        return Hub(), ctx.params.get("namespace") or "default"

    monkeypatch.setattr(completion, "_client", client)
    assert completion.cobra_lines(
        cli, ["get", "deploy", "-n", "demo", "--context", "hub", "w"]
    ) == [
        "web",
        "worker",
        ":4",
    ]
    assert asked[-1][0] == "/apis/mc.kmc.dev/v1alpha1/namespaces/demo/deployments"
    assert completion.cobra_lines(cli, ["get", "--context", "hub", "-n", "d"]) == [
        "default",
        "demo",
        ":4",
    ]


def test_a_hub_that_does_not_answer_offers_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(ctx: Any) -> Any:
        raise OSError("no kubeconfig")

    monkeypatch.setattr(completion, "_client", broken)
    assert completion.cobra_lines(cli, ["get", "pods", ""]) == [":4"]


def test_scripts_for_each_shell() -> None:
    assert "_KUBECTL_MC_COMPLETE=bash_complete" in completion.script("bash", cli)
    assert "compdef" in completion.script("zsh", cli)
    assert "complete --no-files --command kubectl-mc" in completion.script("fish", cli)
