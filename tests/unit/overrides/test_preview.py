"""`kubectl mc diff -f`: the server's `previews` pieces and the plugin's reading and rendering."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from apiserver.contract import PLACEMENT
from apiserver.kinds import ALL
from apiserver.models.child_inputs import ChildInputs
from apiserver.models.override_index import read
from apiserver.subresources import preview
from kubectl_mc.diff import DIFFERENCES, ERROR, NO_DIFFERENCES, render_preview
from kubectl_mc.diff_file import FileError, read_objects

DEPLOYMENT = next(k for k in ALL if k.kind == "Deployment")
LABELS = {"us-east": {"region": "us"}, "eu-west": {"region": "eu"}}
INPUTS = ChildInputs(lambda name: LABELS.get(name) or {})


def web() -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "shop"},
        "spec": {
            "replicas": 2,
            "template": {"spec": {"containers": [{"name": "app", "image": "web:1"}]}},
        },
    }


def override(name: str = "eu", namespace: str = "shop", **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "kmc.dev/v1alpha1",
        "kind": "Override",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "targets": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}],
            "locations": {"names": ["eu-west"]},
            "rules": [{"image": {"registry": "mirror.eu.example"}}],
            **spec,
        },
    }


def test_a_new_object_gets_each_locations_child_beside_the_plain_copy() -> None:
    hub = preview.placed(web(), {"eu-west": 1, "us-east": 1})
    assert json.loads(hub["metadata"]["annotations"][PLACEMENT]) == {"eu-west": 1, "us-east": 1}
    entry = preview.object_entry(hub, DEPLOYMENT, INPUTS)
    assert (entry["kind"], entry["namespace"], entry["name"]) == ("Deployment", "shop", "web")
    assert [e["location"] for e in entry["locations"]] == ["eu-west", "us-east"]
    assert all(e["object"]["spec"]["replicas"] == 1 for e in entry["locations"])
    text, problems, code = render_preview(preview.preview_object([entry]), "web", None)
    assert code == DIFFERENCES and not problems
    assert "-  replicas: 2" in text and "+  replicas: 1" in text


def test_an_override_shows_now_beside_with_it_and_only_where_it_applies() -> None:
    hub = preview.placed(web(), {"eu-west": 1, "us-east": 1})
    proposed = preview.proposed_override(override())
    after = preview.with_proposed([], proposed, targeted=True)
    entry = preview.object_entry(hub, DEPLOYMENT, INPUTS, after)
    eu, us = entry["locations"]
    assert eu["hub"]["spec"]["replicas"] == 1  # before: the child as it is now, not the hub
    assert eu["object"]["spec"]["template"]["spec"]["containers"][0]["image"] == (
        "mirror.eu.example/web:1"
    )
    assert us["hub"] == us["object"]
    text, _, code = render_preview(preview.preview_object([entry]), "override/eu", None)
    assert code == DIFFERENCES and "(eu-west)" in text and "(us-east)" not in text
    only_us = render_preview(preview.preview_object([entry]), "override/eu", "us-east")
    assert only_us == ("", [], NO_DIFFERENCES)
    nowhere = render_preview(preview.preview_object([entry]), "override/eu", "mars")
    assert nowhere[2] == ERROR and "mars" in nowhere[1][0]


def test_the_proposed_override_replaces_the_one_of_its_name_and_keeps_the_order() -> None:
    old = read(override(rules=[{"labels": {"set": {"a": "1"}}}]))
    other = read(override(name="aa", priority=5))
    assert old is not None and other is not None
    proposed = preview.proposed_override(override(priority=9))
    assert preview.with_proposed([old, other], proposed, True) == [other, proposed]
    assert preview.with_proposed([old, other], proposed, False) == [other]


@pytest.mark.parametrize(
    ("change", "said"),
    [
        ({"rules": [{"nope": {}}]}, "nope"),
        ({"targets": []}, "spec.targets"),
        ({"priority": "high"}, "spec.priority"),
    ],
)
def test_a_bad_override_is_refused_naming_the_field(change: dict[str, Any], said: str) -> None:
    with pytest.raises(preview.PreviewError, match=said):
        preview.proposed_override(override(**change))


def test_an_override_without_namespace_is_refused() -> None:
    with pytest.raises(preview.PreviewError, match=r"metadata\.namespace"):
        preview.proposed_override(override(namespace=""))


def test_the_namespace_is_the_paths() -> None:
    assert preview.in_namespace(web(), "shop", True)["metadata"]["namespace"] == "shop"
    bare = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}}
    assert preview.in_namespace(bare, "other", True)["metadata"]["namespace"] == "other"
    with pytest.raises(preview.PreviewError, match="does not match"):
        preview.in_namespace(web(), "other", True)
    with pytest.raises(preview.PreviewError, match="is namespaced"):
        preview.in_namespace(bare, "", True)
    with pytest.raises(preview.PreviewError, match="is cluster-scoped"):
        preview.in_namespace(bare, "other", False)
    assert "namespace" not in preview.in_namespace(bare, "", False)["metadata"]


def test_no_target_and_notes_are_said_on_stderr() -> None:
    assert render_preview({"objects": []}, "override.kmc.dev/eu", None) == (
        "",
        ["warning: override.kmc.dev/eu targets no object"],
        NO_DIFFERENCES,
    )
    noted = {"objects": [{**web(), "name": "web", "locations": [], "note": "no room"}]}
    assert render_preview(noted, "x", None)[1] == ["warning: deployment.apps/web: no room"]


def test_the_file_is_read_as_kubectl_reads_it(tmp_path: Path) -> None:
    path = tmp_path / "objs.yaml"
    path.write_text(
        "apiVersion: v1\nkind: List\nitems:\n- {apiVersion: v1, kind: ConfigMap}\n---\n"
        '{"apiVersion": "apps/v1", "kind": "Deployment"}\n---\n'
    )
    assert [o["kind"] for o in read_objects(str(path))] == ["ConfigMap", "Deployment"]
    path.write_text("a: [b\n")
    with pytest.raises(FileError, match=r"^error: error parsing .*objs.yaml"):
        read_objects(str(path))
    path.write_text("just: a map\n")
    with pytest.raises(FileError, match="no apiVersion or kind"):
        read_objects(str(path))
    with pytest.raises(FileError, match=r"the path \".*nope\.yaml\" does not exist"):
        read_objects(str(tmp_path / "nope.yaml"))


def test_a_dash_reads_standard_input(monkeypatch: pytest.MonkeyPatch) -> None:
    import io

    monkeypatch.setattr("sys.stdin", io.StringIO(json.dumps(web())))
    assert read_objects("-") == [web()]
