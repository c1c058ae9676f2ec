"""Per-location overrides, the one-off form (`kmc.dev/overrides`), on the real bed with plain
kubectl: each location's child gets its rules; a hand edit is put back to the overridden form;
a rule that cannot apply in one location leaves that child as it was and says so on the hub
(condition and Event) while the others go on; a malformed annotation is refused at the door;
removing the annotation returns every child to the plain object."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from kmc_testbed import bed

from .conftest import CHILDREN, Kubectl
from .test_placement import events_of, wait_placement
from .test_sync import child_deployments
from .test_testbed import deployment

OVERRIDES = "kmc.dev/overrides"
IMAGE = "registry.example/web:1"  # the e2e Deployment's image
TIMEOUT = 180.0  # CI shares two cores with fifteen control-plane processes


def web(overrides: dict[str, Any] | None) -> dict[str, Any]:
    obj = deployment("web", 3)
    if overrides is not None:
        obj["metadata"]["annotations"] = {OVERRIDES: json.dumps(overrides)}
    return obj


def container(child: dict[str, Any]) -> dict[str, Any]:
    found: dict[str, Any] = child["spec"]["template"]["spec"]["containers"][0]
    return found


def env(child: dict[str, Any]) -> dict[str, str]:
    return {e["name"]: e.get("value", "") for e in container(child).get("env") or []}


def wait_for(
    kubectl: dict[str, Kubectl],
    namespace: str,
    ok: Callable[[dict[str, Any]], bool],
    what: str,
    timeout: float = TIMEOUT,
) -> dict[str, Any]:
    """The children by location once every location has one and `ok` holds for them."""
    deadline = time.monotonic() + timeout
    while True:
        children = child_deployments(kubectl, "web", namespace)
        if set(children) == set(CHILDREN) and ok(children):
            return children
        shown = {loc: (container(c)["image"], env(c)) for loc, c in children.items()}
        assert time.monotonic() < deadline, f"{what}: the children stayed {shown}"
        time.sleep(0.5)


def overridden(hub: Kubectl, namespace: str) -> dict[str, Any]:
    status = hub.json("get", "deployment", "web", "-n", namespace).get("status") or {}
    return next((c for c in status.get("conditions") or [] if c["type"] == "Overridden"), {})


def wait_overridden(
    hub: Kubectl, namespace: str, ok: Callable[[dict[str, Any]], bool]
) -> dict[str, Any]:
    deadline = time.monotonic() + TIMEOUT
    while True:
        condition = overridden(hub, namespace)
        if condition and ok(condition):
            return condition
        assert time.monotonic() < deadline, f"Overridden stayed {condition}"
        time.sleep(0.5)


FIRST = {
    "*": [{"env": {"set": {"SITE": "${location.name}"}}}],
    "us-west": [{"image": {"registry": "mirror.us-west.example"}}],
    "topology.kubernetes.io/region=us": [
        {"labels": {"set": {"geo": "${location.labels['topology.kubernetes.io/region']}"}}}
    ],
}


def first_form(children: dict[str, Any]) -> bool:
    images = {loc: container(c)["image"] for loc, c in children.items()}
    geo = {loc: (c["metadata"].get("labels") or {}).get("geo") for loc, c in children.items()}
    return (
        all(env(c) == {"SITE": loc} for loc, c in children.items())
        and images
        == {"us-west": "mirror.us-west.example/web:1", "us-east": IMAGE, "eu-west": IMAGE}
        and geo == {"us-west": "us", "us-east": "us", "eu-west": None}
    )


def test_overrides_per_location_drift_failure_refusal_and_removal(
    installed: bed.State, kubectl: dict[str, Kubectl], namespace: str
) -> None:
    hub = kubectl["hub"]
    hub.apply(web(FIRST), namespace)
    wait_placement(hub, "deployment", "web", namespace, lambda p: len(p) == 3)
    children = wait_for(kubectl, namespace, first_form, "first overrides")
    assert all(OVERRIDES not in (c["metadata"].get("annotations") or {}) for c in children.values())
    assert children["us-west"]["spec"]["replicas"] == 1  # the share, untouched
    wait_overridden(hub, namespace, lambda c: c["status"] == "True")
    described = hub.mc("describe", "deployment", "web", "-n", namespace).stdout
    rows = {
        line.split()[0]: line.split(None, 1)[1]
        for line in described[described.index("Overrides:") :].splitlines()[3:6]
    }
    assert rows == {
        "eu-west": 'kmc.dev/overrides["*"][0] (env)',
        "us-east": 'kmc.dev/overrides["*"][0] (env), '
        'kmc.dev/overrides["topology.kubernetes.io/region=us"][0] (labels)',
        "us-west": 'kmc.dev/overrides["*"][0] (env), kmc.dev/overrides["us-west"][0] (image), '
        'kmc.dev/overrides["topology.kubernetes.io/region=us"][0] (labels)',
    }, described

    # Drift: a hand edit in a child is put back to the overridden form, not the plain one.
    west = kubectl["us-west"]
    west.run("set", "env", "deployment/web", "-n", namespace, "SITE=by-hand")
    west.run("set", "image", "deployment/web", "-n", namespace, f"web={IMAGE}")
    wait_for(kubectl, namespace, first_form, "after a hand edit in us-west", timeout=60)

    # A rule that cannot apply in eu-west: that child stays as it was, the others move on.
    failing = {
        "*": [{"env": {"set": {"SITE": "v2-${location.name}"}}}],
        "eu-west": [{"patch": [{"op": "replace", "path": "/spec/nope", "value": 1}]}],
    }
    hub.run(
        "annotate", "--overwrite", "deployment/web", "-n", namespace,
        f"{OVERRIDES}={json.dumps(failing)}",
    )  # fmt: skip
    children = wait_for(
        kubectl,
        namespace,
        lambda cs: (
            env(cs["us-east"]) == {"SITE": "v2-us-east"}
            and env(cs["us-west"]) == {"SITE": "v2-us-west"}
        ),
        "the locations whose rules apply",
    )
    condition = wait_overridden(hub, namespace, lambda c: c["status"] == "False")
    assert condition["reason"] == "OverrideFailed"
    message = condition["message"]
    assert "in eu-west" in message and 'kmc.dev/overrides["eu-west"][0] (patch)' in message
    assert "replace /spec/nope: no such path" in message
    assert "us-east" not in message and "us-west" not in message
    eu = child_deployments(kubectl, "web", namespace)["eu-west"]
    assert env(eu) == {"SITE": "eu-west"}  # its last good copy
    assert (eu["metadata"].get("labels") or {}).get("geo") is None
    deadline = time.monotonic() + TIMEOUT
    while not any(
        e["reason"] == "OverrideFailed" and e["type"] == "Warning" and "eu-west" in e["message"]
        for e in events_of(hub, namespace, "web")
    ):
        assert time.monotonic() < deadline, "no OverrideFailed Event on the hub Deployment"
        time.sleep(0.5)

    # Malformed: refused by `kubectl apply` at the door, naming the field; nothing changes.
    refused = hub.run(
        "apply", "-n", namespace, "-f", "-",
        stdin=json.dumps(web({"us-west": [{"imagee": {"tag": "2"}}]})), check=False,
    )  # fmt: skip
    assert refused.returncode == 1 and "denied the request" in refused.stderr
    assert 'kmc.dev/overrides["us-west"][0]: unknown rule "imagee"' in refused.stderr
    kept = hub.json("get", "deployment", "web", "-n", namespace)["metadata"]["annotations"]
    assert json.loads(kept[OVERRIDES]) == failing

    # A result the child refuses (a cpu limit below the container's request) is the rules'
    # failure too: us-east keeps its last good copy, the others go on.
    refused_there = {
        "*": [{"env": {"set": {"SITE": "v3-${location.name}"}}}],
        "us-east": [{"resources": {"limits": {"cpu": "10m"}}}],
    }
    hub.run(
        "annotate", "--overwrite", "deployment/web", "-n", namespace,
        f"{OVERRIDES}={json.dumps(refused_there)}",
    )  # fmt: skip
    children = wait_for(
        kubectl,
        namespace,
        lambda cs: (
            env(cs["us-west"]) == {"SITE": "v3-us-west"}
            and env(cs["eu-west"]) == {"SITE": "v3-eu-west"}
        ),
        "the locations that take their rules",
    )
    condition = wait_overridden(
        hub, namespace, lambda c: c["status"] == "False" and "in us-east" in c["message"]
    )
    assert 'refuses what its rules kmc.dev/overrides["*"][0] (env), ' in condition["message"]
    assert "eu-west" not in condition["message"]
    east = child_deployments(kubectl, "web", namespace)["us-east"]
    assert env(east) == {"SITE": "v2-us-east"}
    assert "limits" not in container(east).get("resources", {})

    # Removed: every child returns to the plain object, and the failure is over.
    hub.run("annotate", "deployment/web", "-n", namespace, f"{OVERRIDES}-")
    wait_for(
        kubectl,
        namespace,
        lambda cs: all(
            env(c) == {}
            and container(c)["image"] == IMAGE
            and "geo" not in (c["metadata"].get("labels") or {})
            for c in cs.values()
        ),
        "after the annotation was removed",
    )
    condition = wait_overridden(hub, namespace, lambda c: c["status"] == "True")
    assert condition["reason"] == "NoOverrides"


def test_mc_diff_shows_what_each_location_gets(
    installed: bed.State, kubectl: dict[str, Kubectl], namespace: str
) -> None:
    hub = kubectl["hub"]
    obj = web(None)
    obj["metadata"]["annotations"] = {"kmc.dev/strategy": json.dumps({"type": "Replicate"})}
    hub.apply(obj, namespace)
    wait_placement(hub, "deployment", "web", namespace, lambda p: len(p) == 3)
    same = hub.mc("diff", "web", "-n", namespace, check=False)
    assert (same.returncode, same.stdout) == (0, ""), same.stderr  # a full copy everywhere
    hub.run(
        "annotate", "deployment/web", "-n", namespace,
        f"{OVERRIDES}={json.dumps({'us-west': [{'env': {'set': {'SITE': '${location.name}'}}}]})}",
    )  # fmt: skip
    deadline = time.monotonic() + TIMEOUT
    while (shown := hub.mc("diff", "deployment/web", "-n", namespace, check=False)).returncode != 1:
        assert shown.returncode == 0, shown.stderr
        assert time.monotonic() < deadline, "kubectl mc diff never saw the annotation"
        time.sleep(0.5)
    assert "+++ deployment.apps/web (us-west)" in shown.stdout
    assert "+        - name: SITE\n+          value: us-west\n" in shown.stdout
    assert "(us-east)" not in shown.stdout and "(eu-west)" not in shown.stdout
    one = hub.mc("diff", "web", "-n", namespace, "--location", "eu-west", check=False)
    assert (one.returncode, one.stdout) == (0, "")
    nowhere = hub.mc("diff", "web", "-n", namespace, "--location", "mars", check=False)
    assert nowhere.returncode == 2 and "has no copy in mars" in nowhere.stderr
    # What the diff shows is what the child holds.
    children = wait_for(
        kubectl, namespace, lambda cs: env(cs["us-west"]) == {"SITE": "us-west"}, "diffed"
    )
    assert env(children["eu-west"]) == {}


def test_a_move_carries_the_destinations_overrides(
    installed: bed.State, kubectl: dict[str, Kubectl], namespace: str
) -> None:
    hub = kubectl["hub"]
    obj = web(
        {
            "us-east": [{"env": {"set": {"SITE": "east"}}}],
            "eu-west": [{"image": {"registry": "mirror.eu.example"}}],
        }
    )
    obj["metadata"]["annotations"]["kmc.dev/strategy"] = json.dumps(
        {"type": "Split", "pin": ["us-east"]}
    )
    hub.apply(obj, namespace)
    wait_placement(hub, "deployment", "web", namespace, lambda p: set(p) == {"us-east"})

    def east_overridden() -> bool:
        east = child_deployments(kubectl, "web", namespace).get("us-east")
        return east is not None and env(east) == {"SITE": "east"}

    deadline = time.monotonic() + TIMEOUT
    while not east_overridden():
        assert time.monotonic() < deadline, "us-east never got its override"
        time.sleep(0.5)
    hub.mc(
        "move", "deployment/web", "--to", "eu-west", "--wait", "--timeout", "5m", "-n", namespace
    )
    children = child_deployments(kubectl, "web", namespace)
    assert set(children) == {"eu-west"}
    moved = container(children["eu-west"])
    assert moved["image"] == "mirror.eu.example/web:1"
    assert "env" not in moved  # us-east's rule stayed with us-east


def test_the_other_rules_args_command_annotations_patch_and_a_yaml_field(
    installed: bed.State, kubectl: dict[str, Kubectl], namespace: str
) -> None:
    """Every rule type reaches the child it is meant for: args, command, annotations on the
    pod template and a JSON patch on a Deployment; a YAML document inside a ConfigMap, written
    back as YAML."""
    hub = kubectl["hub"]
    settings = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": "settings",
            "annotations": {
                OVERRIDES: json.dumps(
                    {
                        "*": [
                            {
                                "field": {
                                    "path": "/data/config.yaml",
                                    "patch": [
                                        {"op": "replace", "path": "/log/level", "value": "debug"},
                                        {"op": "add", "path": "/site", "value": "${location.name}"},
                                    ],
                                }
                            }
                        ]
                    }
                )
            },
        },
        "data": {"config.yaml": "log:\n  level: info\n"},
    }
    hub.apply(settings, namespace)
    obj = web(
        {
            "*": [
                {"args": {"append": ["--site=${location.name}"]}},
                {"annotations": {"set": {"site": "${location.name}"}, "on": "template"}},
                {"patch": [{"op": "add", "path": "/spec/minReadySeconds", "value": 1}]},
            ],
            "us-east": [{"command": {"replace": ["/bin/east"]}}],
        }
    )
    pod = obj["spec"]["template"]["spec"]
    pod["volumes"] = [{"name": "settings", "configMap": {"name": "settings"}}]
    hub.apply(obj, namespace)

    def right(children: dict[str, Any]) -> bool:
        return all(
            container(c).get("args") == [f"--site={loc}"]
            and container(c).get("command") == (["/bin/east"] if loc == "us-east" else None)
            and (c["spec"]["template"]["metadata"].get("annotations") or {}).get("site") == loc
            and c["spec"].get("minReadySeconds") == 1
            for loc, c in children.items()
        )

    wait_for(kubectl, namespace, right, "args, command, template annotations, patch")
    deadline = time.monotonic() + TIMEOUT
    while True:
        found = {}
        for loc in CHILDREN:
            got = kubectl[loc].run(
                "get", "configmap", "settings", "-n", namespace, "-o", "json", check=False
            )
            if got.returncode == 0:
                found[loc] = json.loads(got.stdout)["data"]["config.yaml"]
        if set(found) == set(CHILDREN) and all(
            yaml.safe_load(text) == {"log": {"level": "debug"}, "site": loc}
            and not text.lstrip().startswith("{")
            for loc, text in found.items()
        ):
            break
        assert time.monotonic() < deadline, f"the ConfigMap's copies stayed {found}"
        time.sleep(0.5)


def headers(diff: str) -> set[str]:
    """The locations a `kubectl mc diff` output has a diff for."""
    return {line.rpartition("(")[2].rstrip(")") for line in diff.splitlines() if line[:4] == "+++ "}


def test_mc_diff_f_previews_a_new_object_and_an_unapplied_override(
    installed: bed.State, kubectl: dict[str, Kubectl], namespace: str, tmp_path: Path
) -> None:
    hub = kubectl["hub"]
    new = tmp_path / "web.yaml"
    new.write_text(yaml.safe_dump(web({"eu-west": [{"env": {"set": {"SITE": "eu"}}}]})))
    # An object not created yet: where the engine would place it, and what each location gets.
    shown = hub.mc("diff", "-f", str(new), "-n", namespace, check=False)
    assert shown.returncode == 1, shown.stderr
    would = headers(shown.stdout)
    assert would and would <= set(CHILDREN), shown.stdout
    assert "+        - name: SITE\n+          value: eu\n" in shown.stdout
    gone = hub.run("get", "deployment", "web", "-n", namespace, check=False)
    assert gone.returncode != 0 and "NotFound" in gone.stderr  # nothing was written
    # Applied, it lands where the diff said, with what the diff said.
    hub.run("apply", "-n", namespace, "-f", str(new))
    placement = wait_placement(hub, "deployment", "web", namespace, timeout=TIMEOUT)
    assert set(placement) == would
    assert hub.mc("diff", "-f", str(new), "-n", namespace, check=False).stdout == shown.stdout

    # An Override not applied yet: per location, what it gets now against with the Override.
    hub.run("annotate", "deployment/web", "-n", namespace, f"{OVERRIDES}-")
    ovr = tmp_path / "mirror.yaml"
    mirror: dict[str, Any] = {
        "apiVersion": "kmc.dev/v1alpha1",
        "kind": "Override",
        "metadata": {"name": "mirror"},
        "spec": {
            "targets": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}],
            "locations": {"names": sorted(placement)[:1]},
            "rules": [{"image": {"registry": "mirror.example"}}],
        },
    }
    ovr.write_text(yaml.safe_dump(mirror))
    first = sorted(placement)[0]
    deadline = time.monotonic() + TIMEOUT
    while True:  # until the sync loop has seen the annotation go
        preview = hub.mc("diff", "-f", str(ovr), "-n", namespace, check=False)
        if headers(preview.stdout) == {first} and "SITE" not in preview.stdout:
            break
        assert time.monotonic() < deadline, f"{preview.stdout}{preview.stderr}"
        time.sleep(0.5)
    assert preview.returncode == 1, preview.stderr
    assert f"-      - image: {IMAGE}\n+      - image: mirror.example/web:1\n" in preview.stdout
    assert f"--- deployment.apps/web ({first} now)\n" in preview.stdout
    for other in sorted(placement)[1:]:
        quiet = hub.mc("diff", "-f", str(ovr), "-n", namespace, "--location", other, check=False)
        assert (quiet.returncode, quiet.stdout) == (0, ""), quiet.stderr
    listed = hub.run("get", "overrides", "-n", namespace, "-o", "name").stdout
    assert listed.strip() == ""  # nothing was written
    # Applied, the Override gives the location what the diff showed; then nothing differs.
    hub.run("apply", "-n", namespace, "-f", str(ovr))
    deadline = time.monotonic() + TIMEOUT
    while True:
        children = child_deployments(kubectl, "web", namespace)
        images = {loc: container(c)["image"] for loc, c in children.items()}
        if images == {loc: IMAGE for loc in placement} | {first: "mirror.example/web:1"}:
            break
        assert time.monotonic() < deadline, f"the Override never landed: {images}"
        time.sleep(0.5)
    same = hub.mc("diff", "-f", str(ovr), "-n", namespace, check=False)
    assert (same.returncode, same.stdout) == (0, ""), same.stderr

    # Bad input: a kubectl-style error, exit code 2, nothing changed.
    bad = tmp_path / "bad.yaml"
    bad.write_text("kind: [Deployment\n")
    broken = hub.mc("diff", "-f", str(bad), "-n", namespace, check=False)
    assert broken.returncode == 2 and broken.stderr.startswith("error: error parsing"), broken
    bad.write_text(yaml.safe_dump({"apiVersion": "example.com/v1", "kind": "Widget",
                                   "metadata": {"name": "w"}}))  # fmt: skip
    unknown = hub.mc("diff", "-f", str(bad), "-n", namespace, check=False)
    assert unknown.returncode == 2 and 'no matches for kind "Widget"' in unknown.stderr, unknown
    bad.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n"}}))
    unplaced = hub.mc("diff", "-f", str(bad), check=False)
    assert unplaced.returncode == 2 and 'does not place objects of kind "Node"' in unplaced.stderr
    bad.write_text(yaml.safe_dump({**mirror, "spec": {**mirror["spec"], "rules": [{"nope": 1}]}}))
    refused = hub.mc("diff", "-f", str(bad), "-n", namespace, check=False)
    assert refused.returncode == 2 and "nope" in refused.stderr, refused
    missing = hub.mc("diff", "-f", str(tmp_path / "none.yaml"), check=False)
    assert missing.returncode == 2 and "does not exist" in missing.stderr


def test_previews_are_authorized_where_they_are_asked(
    installed: bed.State, kubectl: dict[str, Kubectl], namespace: str, tmp_path: Path
) -> None:
    """A namespace's viewer may preview there (the aggregated `view` role grants `create` on
    `previews`), not in another namespace nor cluster-wide."""
    hub = kubectl["hub"]
    hub.run("create", "serviceaccount", "viewer", "-n", namespace)
    hub.run(
        "create", "rolebinding", "viewer", "-n", namespace, "--clusterrole=view",
        f"--serviceaccount={namespace}:viewer",
    )  # fmt: skip
    user = f"system:serviceaccount:{namespace}:viewer"
    body = tmp_path / "web.json"
    body.write_text(json.dumps(web(None)))
    base = "/apis/mc.kmc.dev/v1alpha1"

    def preview(path: str) -> Any:
        return hub.run("create", "--raw", path, "-f", str(body), "--as", user, check=False)

    deadline = time.monotonic() + TIMEOUT
    while (mine := preview(f"{base}/namespaces/{namespace}/previews")).returncode != 0:
        assert time.monotonic() < deadline, mine.stderr  # RBAC caches settle
        time.sleep(0.5)
    answer = json.loads(mine.stdout)
    assert answer["kind"] == "Preview" and answer["objects"][0]["namespace"] == namespace
    assert answer["objects"][0]["locations"], answer
    for elsewhere in (f"{base}/namespaces/default/previews", f"{base}/previews"):
        refused = preview(elsewhere)
        assert refused.returncode != 0 and "Forbidden" in refused.stderr, refused
    gone = hub.run("get", "deployment", "web", "-n", namespace, check=False)
    assert gone.returncode != 0 and "NotFound" in gone.stderr  # a preview writes nothing
