"""`kubectl mc get` against a fake hub: which requests, what is printed, what fails how."""

from collections.abc import Iterator
from typing import Any

import pytest

from kubectl_mc.get import GetError, GetOptions, parse_target, run
from kubectl_mc.kube import KubeError
from kubectl_mc.printers import parse_output

Obj = dict[str, Any]
BASE = "/apis/mc.kmc.dev/v1alpha1"


def table(columns: list[str], rows: list[tuple[str, str, list[Any]]], rv: str = "7") -> Obj:
    return {
        "kind": "Table",
        "metadata": {"resourceVersion": rv},
        "columnDefinitions": [{"name": c, "priority": 0} for c in columns],
        "rows": [
            {"cells": cells, "object": {"metadata": {"name": name, "namespace": ns}}}
            for ns, name, cells in rows
        ],
    }


def not_found(name: str) -> KubeError:
    message = f'deployments.mc.kmc.dev "{name}" not found'
    return KubeError(
        f"Error from server (NotFound): {message}", {"code": 404, "reason": "NotFound"}
    )


class FakeHub:
    """Answers by path; records every request."""

    def __init__(self, answers: dict[str, Obj | KubeError], events: list[Obj] | None = None):
        self.answers, self.events = answers, events or []
        self.asked: list[str] = []

    def _answer(self, path: str) -> Obj:
        self.asked.append(path)
        answer = self.answers.get(path)
        if answer is None:
            raise not_found(path.rsplit("/", 1)[-1])
        if isinstance(answer, KubeError):
            raise answer
        return answer

    def table(self, path: str, **params: str) -> Obj:
        return self._answer(path)

    def get(self, path: str, **params: str) -> Obj:
        return self._answer(path)

    def watch(
        self, path: str, params: dict[str, str] | None = None, accept: str = ""
    ) -> Iterator[Obj]:
        self.asked.append(f"watch {path} rv={(params or {}).get('resourceVersion')}")
        yield from self.events


def get(hub: FakeHub, *args: str, output: str = "", **opts: Any) -> int:
    return run(hub, "demo", parse_target(args), GetOptions(**opts), parse_output(output))  # type: ignore[arg-type]


LIST = table(
    ["Name", "Strategy"], [("demo", "web", ["web", "Split"]), ("demo", "db", ["db", "Single"])]
)
SUB = table(
    ["Location", "Desired"], [("demo", "web", ["us-east", 2]), ("demo", "web", ["eu-west", 1])]
)


def test_a_list_prints_the_servers_table(capsys: pytest.CaptureFixture[str]) -> None:
    hub = FakeHub({f"{BASE}/namespaces/demo/deployments": LIST})
    assert get(hub, "deploy") == 0
    assert capsys.readouterr().out.splitlines() == [
        "NAME   STRATEGY",
        "web    Split",
        "db     Single",
    ]


def test_an_empty_list_says_so_on_stderr(capsys: pytest.CaptureFixture[str]) -> None:
    hub = FakeHub({f"{BASE}/namespaces/demo/deployments": table(["Name"], [])})
    assert get(hub, "deploy") == 0
    out = capsys.readouterr()
    assert out.out == "" and out.err == "No resources found in demo namespace.\n"
    hub = FakeHub({f"{BASE}/deployments": table(["Name"], [])})
    assert get(hub, "deploy", all_namespaces=True) == 0
    assert capsys.readouterr().err == "No resources found\n"


def test_names_that_fail_are_reported_and_the_rest_printed(
    capsys: pytest.CaptureFixture[str],
) -> None:
    hub = FakeHub(
        {f"{BASE}/namespaces/demo/deployments/web": table(["Name"], [("demo", "web", ["web"])])}
    )
    assert get(hub, "deploy", "web", "nope") == 1
    out = capsys.readouterr()
    assert out.out == "NAME\nweb\n"
    assert out.err == 'Error from server (NotFound): deployments.mc.kmc.dev "nope" not found\n'


def test_a_subresource_over_a_list_adds_a_name_column(capsys: pytest.CaptureFixture[str]) -> None:
    hub = FakeHub(
        {
            f"{BASE}/namespaces/demo/deployments": LIST,
            f"{BASE}/namespaces/demo/deployments/web/locations": SUB,
            f"{BASE}/namespaces/demo/deployments/db/locations": not_found("db"),  # gone meanwhile
        }
    )
    assert get(hub, "deploy", subresource="locations") == 0
    assert capsys.readouterr().out.splitlines() == [
        "NAME   LOCATION   DESIRED",
        "web    us-east    2",
        "web    eu-west    1",
    ]


def test_a_subresource_of_one_name_is_kubectls_table(capsys: pytest.CaptureFixture[str]) -> None:
    hub = FakeHub({f"{BASE}/namespaces/demo/deployments/web/locations": SUB})
    assert get(hub, "deploy", "web", subresource="locations") == 0
    assert capsys.readouterr().out.splitlines()[0] == "LOCATION   DESIRED"


def test_subresources_all_namespaces_as_names(capsys: pytest.CaptureFixture[str]) -> None:
    placement = {
        "kind": "Placement",
        "apiVersion": "mc.kmc.dev/v1alpha1",
        "metadata": {"name": "web"},
    }
    hub = FakeHub(
        {
            f"{BASE}/deployments": table(["Name"], [("demo", "web", ["web"])]),
            f"{BASE}/namespaces/demo/deployments/web/locations": placement,
        }
    )
    assert get(hub, "deploy", subresource="locations", all_namespaces=True, output="name") == 0
    assert capsys.readouterr().out == "placement.mc.kmc.dev/web\n"


def test_watch_lists_then_streams_from_the_lists_version(
    capsys: pytest.CaptureFixture[str],
) -> None:
    later = table(["Name", "Strategy"], [("demo", "web", ["web", "Replicate"])])
    hub = FakeHub(
        {f"{BASE}/namespaces/demo/deployments": LIST},
        events=[
            {"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": "8"}}},
            {"type": "MODIFIED", "object": later},
        ],
    )
    assert get(hub, "deploy", watch=True) == 0
    assert capsys.readouterr().out.splitlines() == [
        "NAME   STRATEGY",
        "web    Split",
        "db     Single",
        "web    Replicate",
    ]
    assert hub.asked[-1] == f"watch {BASE}/namespaces/demo/deployments rv=7"


@pytest.mark.parametrize(
    ("args", "opts", "message"),
    [
        ((), {}, "Required resource not specified."),
        (
            ("deploy", "web"),
            {"all_namespaces": True},
            "a resource cannot be retrieved by name across all namespaces",
        ),
        (
            ("pods",),
            {"subresource": "locations"},
            "pods.remote.kmc.dev has no sub-resource locations",
        ),
        (("deploy",), {"subresource": "status"}, 'invalid subresource value: "status"'),
        (("deploy", "a", "b"), {"watch": True}, "watch is only supported on individual resources"),
        (("deploy/a", "pods/b"), {}, "one resource type at a time"),
    ],
)
def test_command_lines_that_cannot_work(
    args: tuple[str, ...], opts: dict[str, Any], message: str
) -> None:
    with pytest.raises(GetError, match=message):
        get(FakeHub({}), *args, **opts)


def test_type_slash_name() -> None:
    target = parse_target(("deploy/web", "deployments/db"))
    assert target.resource.plural == "deployments" and target.names == ("web", "db")
