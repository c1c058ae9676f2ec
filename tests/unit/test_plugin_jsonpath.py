"""kubectl's JSONPath templates: the forms people use with `-o jsonpath` and custom columns."""

from typing import Any

import pytest

from kubectl_mc.jsonpath import JSONPathError, Template, relaxed

PODS: dict[str, Any] = {
    "kind": "List",
    "items": [
        {
            "metadata": {"name": "a", "annotations": {"kmc.dev/location": "us-east"}},
            "spec": {"containers": [{"name": "c1"}, {"name": "c2"}]},
            "status": {"conditions": [{"type": "Ready", "status": "True"}], "restarts": 0},
        },
        {
            "metadata": {"name": "b", "annotations": {"kmc.dev/location": "eu-west"}},
            "spec": {"containers": [{"name": "c1"}]},
            "status": {"conditions": [{"type": "Ready", "status": "False"}], "restarts": 3},
        },
    ],
}


@pytest.mark.parametrize(
    ("template", "printed"),
    [
        ("{.items[*].metadata.name}", "a b"),
        ('{range .items[*]}{.metadata.name}{"\\n"}{end}', "a\nb\n"),
        ("{.items[0].metadata.annotations.kmc\\.dev/location}", "us-east"),
        ("{.items[1].metadata.annotations['kmc.dev/location']}", "eu-west"),
        ("{.items[-1].metadata.name}", "b"),
        ("{.items[0:1].metadata.name}", "a"),
        ("{.items[0,1].metadata.name}", "a b"),
        ('{.items[?(@.status.conditions[0].status=="True")].metadata.name}', "a"),
        ("{.items[?(@.status.restarts>1)].metadata.name}", "b"),
        ("{.items[0].spec.containers[*].name}", "c1 c2"),
        ("{..name}", "a c1 c2 b c1"),
        ("{$.kind}: {.items[1].status.restarts}", "List: 3"),
        ("{.items[0].status.conditions[0]}", '{"status":"True","type":"Ready"}'),
        ("{.nope}{.items[5].metadata.name}", ""),
        ("names: {range .items[*]}[{.metadata.name}]{end}", "names: [a][b]"),
    ],
)
def test_templates_print_what_kubectl_prints(template: str, printed: str) -> None:
    assert Template(template).render(PODS) == printed


def test_custom_column_paths_are_relaxed_like_kubectls() -> None:
    assert relaxed(".metadata.name") == "{.metadata.name}"
    assert relaxed("metadata.name") == "{.metadata.name}"
    assert relaxed("{.metadata.name}") == "{.metadata.name}"
    assert Template(relaxed("spec.containers[*].name")).values(PODS["items"][0]) == ["c1", "c2"]


@pytest.mark.parametrize("template", ["{.items[*]", "{range .items[*]}{.x}", "{end}", "{.a[x]}"])
def test_malformed_templates_say_so(template: str) -> None:
    with pytest.raises(JSONPathError, match="error parsing jsonpath"):
        Template(template)
