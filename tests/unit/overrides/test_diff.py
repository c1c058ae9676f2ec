"""`kubectl mc diff`: the server's `children` object and the plugin's rendering of it."""

from __future__ import annotations

import json
from typing import Any

from apiserver.contract import OVERRIDES, PLACEMENT
from apiserver.kinds import ALL
from apiserver.models.child_inputs import ChildInputs
from apiserver.subresources.children import children_object
from kubectl_mc.diff import DIFFERENCES, ERROR, NO_DIFFERENCES, render

DEPLOYMENT = next(k for k in ALL if k.kind == "Deployment")
LABELS = {"us-east": {"region": "us"}, "eu-west": {"region": "eu"}}
INPUTS = ChildInputs(lambda name: LABELS.get(name) or {})


def hub(placement: dict[str, int], overrides: Any = None) -> dict[str, Any]:
    annotations = {PLACEMENT: json.dumps(placement)}
    if overrides is not None:
        annotations[OVERRIDES] = json.dumps(overrides)
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "shop", "uid": "u-1", "annotations": annotations},
        "spec": {
            "replicas": 2,
            "template": {"spec": {"containers": [{"name": "app", "image": "web:1"}]}},
        },
    }


def test_each_location_gets_its_child_beside_the_plain_hub_object() -> None:
    obj = children_object(
        hub(
            {"us-east": 2, "eu-west": 2},
            {
                "region=eu": [{"env": {"set": {"SITE": "${location.name}"}}}],
                "us-east": [{"patch": [{"op": "remove", "path": "/spec/nope"}]}],
            },
        ),
        DEPLOYMENT,
        INPUTS,
    )
    assert obj["kind"] == "Children"
    east, eu = obj["locations"]  # sorted by name: eu-west, us-east
    assert (east["location"], eu["location"]) == ("eu-west", "us-east")
    assert east["hub"]["spec"]["template"]["spec"]["containers"][0] == {
        "name": "app",
        "image": "web:1",
    }
    assert east["object"]["spec"]["template"]["spec"]["containers"][0]["env"] == [
        {"name": "SITE", "value": "eu-west"}
    ]
    assert "object" not in eu and "us-east" in eu["error"] and "no such path" in eu["error"]


def test_render_and_exit_codes() -> None:
    same = children_object(hub({"us-east": 2}), DEPLOYMENT, INPUTS)
    assert render(same, "deployment.apps/web", None) == ("", [], NO_DIFFERENCES)
    overridden = children_object(
        hub({"us-east": 1, "eu-west": 1}, {"*": [{"image": {"tag": "2"}}]}),
        DEPLOYMENT,
        INPUTS,
    )
    text, problems, code = render(overridden, "deployment.apps/web", "eu-west")
    assert code == DIFFERENCES and problems == []
    assert text.startswith("--- deployment.apps/web (hub)\n+++ deployment.apps/web (eu-west)\n")
    assert "-      - image: web:1\n+      - image: web:2\n" in text
    assert "-  replicas: 2\n+  replicas: 1\n" in text  # the share differs too
    assert "(us-east)" not in text
    missing = render(overridden, "deployment.apps/web", "mars")
    assert missing[2] == ERROR and "no copy in mars (placed in: eu-west, us-east)" in missing[1][0]
    failing = children_object(
        hub({"us-east": 2}, {"us-east": [{"patch": [{"op": "remove", "path": "/x"}]}]}),
        DEPLOYMENT,
        INPUTS,
    )
    assert render(failing, "deployment.apps/web", None)[2] == ERROR
