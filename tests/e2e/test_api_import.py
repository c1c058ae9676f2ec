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
            established = any(
                c["type"] == "Established" and c["status"] == "True"
                for c in crd.get("status", {}).get("conditions", [])
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
        hub.run("delete", "crd", name, "--ignore-not-found")
        wait_until(
            "the APIImport to go",
            lambda: hub.run("get", "apiimport", name, check=False).returncode != 0,
            timeout=120,
        )
