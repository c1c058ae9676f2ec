"""API import on the real test bed: a CRD installed in the children only appears on the hub
with the schema every child honours, and objects of it are placed like any other kind."""

from __future__ import annotations

import copy
import json
import time
from typing import Any

from kmc_testbed import bed

from .conftest import Kubectl
from .test_locations import wait_until
from .test_placement import expect_placement, wait_locations_settled, with_strategy

CHILDREN = ("us-east", "us-west", "eu-west")


def widget_crd(group: str) -> dict[str, Any]:
    spec_fields = {
        "size": {"type": "integer", "description": "How big.", "minimum": 1, "maximum": 10},
        "color": {"type": "string", "enum": ["red", "green", "blue"]},
    }
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"widgets.{group}"},
        "spec": {
            "group": group,
            "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
            "versions": [
                {
                    "name": "v1",
                    "served": True,
                    "storage": True,
                    "subresources": {"status": {}},
                    "schema": {
                        "openAPIV3Schema": {
                            "type": "object",
                            "properties": {
                                "spec": {"type": "object", "properties": spec_fields},
                                "status": {
                                    "type": "object",
                                    "x-kubernetes-preserve-unknown-fields": True,
                                },
                            },
                        }
                    },
                }
            ],
        },
    }


def spec_fields(crd: dict[str, Any]) -> dict[str, Any]:
    schema = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    fields: dict[str, Any] = schema["properties"]["spec"]["properties"]
    return fields


def test_a_crd_in_every_child_is_imported_with_the_common_schema(
    installed: bed.State, kubectl: dict[str, Kubectl], namespace: str
) -> None:
    hub = kubectl["hub"]
    wait_locations_settled(hub)
    group = f"{namespace}.example.org"
    name = f"widgets.{group}"
    crds = {child: widget_crd(group) for child in CHILDREN}
    spec_fields(crds["us-east"])["gloss"] = {"type": "boolean"}  # only us-east knows it
    spec_fields(crds["us-east"])["size"]["maximum"] = 20  # wider than the others
    spec_fields(crds["us-west"])["color"]["enum"] = ["red", "green"]  # narrower
    assert hub.run("get", "crd", name, check=False).returncode != 0, "the hub has no such CRD"
    try:
        started = time.monotonic()
        for child in CHILDREN:
            kubectl[child].apply(crds[child])

        def imported() -> dict[str, Any] | None:
            got = hub.run("get", "crd", name, "-o", "json", check=False)
            if got.returncode != 0:
                return None
            crd: dict[str, Any] = json.loads(got.stdout)
            # A CRD just created says `conditions: null` until it is established.
            conditions = (crd.get("status") or {}).get("conditions") or []
            established = any(
                c["type"] == "Established" and c["status"] == "True" for c in conditions
            )
            return crd if established else None

        crd = wait_until("the hub CRD", imported, timeout=120)
        print(f"imported in {time.monotonic() - started:.1f}s")
        assert crd["metadata"]["labels"]["kmc.dev/imported"] == "true"

        def negotiated() -> dict[str, Any] | None:
            crd = imported()
            fields = spec_fields(crd) if crd else {}
            return fields if fields.get("color", {}).get("enum") == ["red", "green"] else None

        fields = wait_until("the negotiated schema", negotiated, timeout=60)
        assert set(fields) == {"size", "color"}
        assert (fields["size"]["minimum"], fields["size"]["maximum"]) == (1, 10)

        def explained() -> str | None:
            got = hub.run("explain", "widgets.spec", f"--api-version={group}/v1", check=False)
            return got.stdout if got.returncode == 0 and "color" in got.stdout else None

        text = wait_until("kubectl explain", explained, timeout=60)
        assert "size" in text and "How big." in text and "gloss" not in text

        def recorded() -> dict[str, Any] | None:
            record = hub.json("get", "apiimport", name)
            status = record.get("status", {})
            return record if status.get("compatible") == "3/3" else None

        record = wait_until("the APIImport", recorded, timeout=60)
        assert record["spec"]["policy"] == "Exclude"
        assert record["status"]["hubCRD"] == "Imported"
        rows = {r["name"]: r for r in record["status"]["locations"]}
        assert set(rows) == set(CHILDREN)
        assert all(r["digest"].startswith("sha256:") for r in rows.values())
        assert len({r["digest"] for r in rows.values()}) == 3  # three different CRDs
        table = hub.run("get", "apiimports", name).stdout
        assert "Imported" in table and "3/3" in table

        widget: dict[str, Any] = {
            "apiVersion": f"{group}/v1",
            "kind": "Widget",
            "metadata": {"name": "gadget"},
            "spec": {"size": 3, "color": "green"},
        }
        hub.apply(with_strategy(copy.deepcopy(widget), {"type": "Replicate"}), namespace)
        expect_placement(hub, f"widgets.{group}", "gadget", namespace, dict.fromkeys(CHILDREN))
        for child in CHILDREN:

            def copied(child: str = child) -> bool:
                got = kubectl[child].run(
                    "get", f"widgets.{group}", "gadget", "-n", namespace, check=False
                )
                return got.returncode == 0

            wait_until(f"the widget in {child}", copied, timeout=120)

        glossy = copy.deepcopy(widget)
        glossy["metadata"]["name"] = "glossy"
        glossy["spec"]["gloss"] = True
        refused = hub.run(
            "apply", "-n", namespace, "-f", "-", stdin=json.dumps(glossy), check=False
        )
        assert refused.returncode != 0
        assert 'unknown field "spec.gloss"' in refused.stderr, refused.stderr
    finally:
        hub.run(
            "delete",
            f"widgets.{group}",
            "--all",
            "-n",
            namespace,
            "--ignore-not-found",
            check=False,
        )
        for child in CHILDREN:
            kubectl[child].run("delete", "crd", name, "--ignore-not-found")

        def all_missing() -> bool:
            got = hub.run("get", "apiimport", name, "-o", "json", check=False)
            if got.returncode != 0:
                return True
            rows = json.loads(got.stdout).get("status", {}).get("locations", [])
            return all(r["verdict"] == "Missing" for r in rows)

        wait_until("every child to stop serving the kind", all_missing, timeout=120)
        # Served nowhere and no objects left: kmc deletes the hub CRD it made, then the record.
        gone(hub, "crd", name)
        gone(hub, "apiimport", name)


def gone(hub: Kubectl, *what: str) -> None:
    wait_until(
        " ".join(what) + " to go",
        lambda: hub.run("get", *what, check=False).returncode != 0,
        timeout=180,
    )


def record_of(hub: Kubectl, name: str) -> dict[str, Any]:
    got = hub.run("get", "apiimport", name, "-o", "json", check=False)
    return json.loads(got.stdout) if got.returncode == 0 else {}


def test_an_upgrade_that_narrows_excludes_the_child_until_narrow_finds_no_object_in_the_way(
    installed: bed.State, kubectl: dict[str, Kubectl], namespace: str
) -> None:
    hub = kubectl["hub"]
    wait_locations_settled(hub)
    group = f"{namespace}.example.org"
    name = f"widgets.{group}"
    resource = f"widgets.{group}"
    glossy = widget_crd(group)
    spec_fields(glossy)["gloss"] = {"type": "boolean"}
    everywhere = dict.fromkeys(CHILDREN)
    try:
        for child in CHILDREN:
            kubectl[child].apply(glossy)

        def schema_has(field: str, present: bool) -> bool:
            got = hub.run("get", "crd", name, "-o", "json", check=False)
            return got.returncode == 0 and (field in spec_fields(json.loads(got.stdout))) == present

        wait_until("the hub CRD with gloss", lambda: schema_has("gloss", True), timeout=180)
        wait_until(
            "3/3 compatible",
            lambda: record_of(hub, name).get("status", {}).get("compatible") == "3/3",
            timeout=120,
        )
        shiny: dict[str, Any] = {
            "apiVersion": f"{group}/v1",
            "kind": "Widget",
            "metadata": {"name": "shiny"},
            "spec": {"size": 2, "color": "red", "gloss": True},
        }
        hub.apply(with_strategy(shiny, {"type": "Replicate"}), namespace)
        expect_placement(hub, resource, "shiny", namespace, everywhere)

        # us-west upgrades to a CRD without gloss: the hub keeps its schema for `shiny`, and
        # us-west is Incompatible, so the widget leaves it.
        kubectl["us-west"].apply(widget_crd(group))

        def excluded() -> dict[str, Any] | None:
            record = record_of(hub, name)
            rows = {r["name"]: r for r in record.get("status", {}).get("locations", [])}
            west = rows.get("us-west", {})
            return record if west.get("verdict") == "Incompatible" else None

        record = wait_until("us-west Incompatible", excluded, timeout=120)
        west = next(r for r in record["status"]["locations"] if r["name"] == "us-west")
        assert any("gloss" in p for p in west["paths"]), west
        expect_placement(hub, resource, "shiny", namespace, {"us-east": None, "eu-west": None})
        assert schema_has("gloss", True), "objects use gloss: Exclude never narrows the hub"
        west_copy = ("get", resource, "shiny", "-n", namespace)
        wait_until(
            "the widget to leave us-west",
            lambda: kubectl["us-west"].run(*west_copy, check=False).returncode != 0,
            timeout=120,
        )
        for child in ("us-east", "eu-west"):
            assert kubectl[child].run("get", resource, "shiny", "-n", namespace).returncode == 0

        # Narrow: refused while `shiny` uses gloss, and the message says which object.
        hub.run("patch", "apiimport", name, "--type=merge", "-p", '{"spec":{"policy":"Narrow"}}')

        def refused() -> str | None:
            message = record_of(hub, name).get("status", {}).get("message", "")
            return message if message.startswith("Narrow refused") else None

        message = wait_until("the Narrow refusal", refused, timeout=120)
        assert f"{namespace}/shiny" in message and "spec.gloss" in message, message
        wide = hub.run("get", "apiimport", name, "-o", "wide").stdout
        assert "Narrow" in wide and "Narrow refused" in wide, wide
        assert schema_has("gloss", True)
        events = hub.run(
            "get", "events", "-A", "--field-selector", "reason=NarrowRefused", "-o", "json"
        )
        assert any(
            e["involvedObject"].get("name") == name for e in json.loads(events.stdout)["items"]
        ), "a Warning Event says why Narrow waits"

        # The object stops using gloss: the schema narrows by itself and us-west is back.
        hub.run(
            "patch",
            resource,
            "shiny",
            "-n",
            namespace,
            "--type=json",
            "-p",
            '[{"op":"remove","path":"/spec/gloss"}]',
        )
        wait_until("the narrowed hub CRD", lambda: schema_has("gloss", False), timeout=180)

        def narrowed() -> dict[str, Any] | None:
            status = record_of(hub, name).get("status", {})
            return (
                status if status.get("compatible") == "3/3" and not status.get("message") else None
            )

        wait_until("3/3 compatible after Narrow", narrowed, timeout=120)
        expect_placement(hub, resource, "shiny", namespace, everywhere)
        wait_until(
            "the widget back in us-west",
            lambda: kubectl["us-west"].run(*west_copy, check=False).returncode == 0,
            timeout=120,
        )

        # Every child stops serving the kind: the hub CRD stays while `shiny` is on the hub.
        for child in CHILDREN:
            kubectl[child].run("delete", "crd", name)

        def kept() -> str | None:
            message = record_of(hub, name).get("status", {}).get("message", "")
            return message if "kept" in message else None

        message = wait_until("the hub CRD kept for its objects", kept, timeout=180)
        assert "(1 now)" in message, message
        assert hub.run("get", "crd", name, check=False).returncode == 0
        hub.run("delete", resource, "shiny", "-n", namespace, "--wait=false")
        gone(hub, resource, "shiny", "-n", namespace)
        gone(hub, "crd", name)
        gone(hub, "apiimport", name)
    finally:
        if hub.run("get", "crd", name, check=False).returncode == 0:
            hub.run("delete", resource, "--all", "-n", namespace, "--wait=false", check=False)
        for child in CHILDREN:
            kubectl[child].run("delete", "crd", name, "--ignore-not-found")
        gone(hub, "crd", name)


def test_a_users_hub_crd_is_only_judged_against(
    installed: bed.State, kubectl: dict[str, Kubectl], namespace: str
) -> None:
    hub = kubectl["hub"]
    group = f"{namespace}.example.org"
    name = f"widgets.{group}"
    mine = widget_crd(group)
    spec_fields(mine)["gloss"] = {"type": "boolean"}
    narrower = widget_crd(group)
    try:
        hub.apply(mine)
        before = hub.json("get", "crd", name)
        for child in CHILDREN:
            kubectl[child].apply(narrower)

        def judged() -> dict[str, Any] | None:
            # A child whose probe has not seen its new CRD yet is still Missing.
            status = record_of(hub, name).get("status", {})
            verdicts = [r["verdict"] for r in status.get("locations", [])]
            return status if verdicts == ["Incompatible"] * 3 else None

        status = wait_until("every child judged Incompatible", judged, timeout=180)
        assert status["hubCRD"] == "User"
        hub.run("patch", "apiimport", name, "--type=merge", "-p", '{"spec":{"policy":"Narrow"}}')
        wait_until(
            "the Narrow policy seen",
            lambda: record_of(hub, name).get("status", {}).get("observedGeneration", 0) >= 2,
            timeout=120,
        )
        after = hub.json("get", "crd", name)
        assert after["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"]
        assert "kmc.dev/imported" not in (after["metadata"].get("labels") or {})
    finally:
        for child in CHILDREN:
            kubectl[child].run("delete", "crd", name, "--ignore-not-found")
        hub.run("delete", "crd", name, "--ignore-not-found")
        gone(hub, "apiimport", name)
