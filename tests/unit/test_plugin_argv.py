"""kubectl's flag syntax, as people type it after `kubectl mc`, put in click's shape."""

from kubectl_mc.argv import normalize


def test_global_flags_before_the_command_move_after_it() -> None:
    assert normalize(["-n", "demo", "--context", "hub", "get", "deploy"]) == [
        "get",
        "-n",
        "demo",
        "--context",
        "hub",
        "deploy",
    ]
    assert normalize(["--kubeconfig=/k", "-ndemo", "get", "po"]) == [
        "get",
        "--kubeconfig=/k",
        "-ndemo",
        "po",
    ]


def test_a_line_click_reads_as_it_is_stays_as_it_is() -> None:
    line = ["get", "deploy", "web", "-n", "demo", "-o", "wide", "--context", "hub"]
    assert normalize(line) == line
    assert normalize(["--help"]) == ["--help"]
    assert normalize(["-n", "demo"]) == ["-n", "demo"]  # no command: click says so


def test_short_flags_with_equals_and_booleans_with_values() -> None:
    assert normalize(["get", "po", "-o=json", "-n=demo", "-l=app=web"]) == [
        "get",
        "po",
        "-o",
        "json",
        "-n",
        "demo",
        "-l",
        "app=web",
    ]
    assert normalize(["get", "po", "--watch=true", "--no-headers=false", "-A"]) == [
        "get",
        "po",
        "--watch",
        "-A",
    ]


def test_nothing_after_a_double_dash_is_touched() -> None:
    assert normalize(["get", "--", "-o=json"]) == ["get", "--", "-o=json"]
