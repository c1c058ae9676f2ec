"""An HTTPRoute's entry (issue #31, item 4): it joins when the hub serves its CRD, follows the
Services its backends name, and its children's `status.parents` fold into one."""

from __future__ import annotations

from typing import Any

from apiserver.kinds import HTTPROUTE, PLACED, Role, of_crd
from apiserver.kinds.gateway import MAX_PARENTS, services_of
from apiserver.sync.status import fold

NOW = "2026-01-01T00:00:00Z"


def crd(version: str = "v1", scope: str = "Namespaced") -> dict[str, Any]:
    return {
        "spec": {
            "group": "gateway.networking.k8s.io",
            "scope": scope,
            "names": {"kind": "HTTPRoute", "plural": "httproutes"},
            "versions": [
                {"name": "v1beta1", "storage": version != "v1"},
                {"name": "v1", "storage": version == "v1"},
            ],
        }
    }


def test_it_joins_with_its_own_entry_only_when_the_hub_serves_its_crd_as_we_know_it() -> None:
    assert HTTPROUTE.key not in PLACED  # never watched before its CRD is served
    assert of_crd(crd()) is HTTPROUTE
    assert HTTPROUTE.role is Role.REFERENCE_FOLLOWER and HTTPROUTE.custom
    other = of_crd(crd(version="v1beta1"))  # a version whose fields we do not know
    assert other is not None and other.role is Role.ASKED
    assert other.api_version == "gateway.networking.k8s.io/v1beta1"


def route(rules: list[dict[str, Any]], namespace: str = "shop") -> dict[str, Any]:
    return {"metadata": {"name": "web", "namespace": namespace}, "spec": {"rules": rules}}


def test_it_follows_the_services_of_its_own_namespace_that_its_backends_name() -> None:
    mirror = {"type": "RequestMirror", "requestMirror": {"backendRef": {"name": "shadow"}}}
    rules: list[dict[str, Any]] = [
        {"backendRefs": [{"name": "web", "port": 80}, {"name": "api", "kind": "Service"}]},
        {
            "backendRefs": [
                {"name": "web-v2", "group": "", "filters": [mirror]},
                {"name": "bucket", "group": "storage.example", "kind": "Bucket"},
                {"name": "far", "namespace": "other"},
                {"name": "near", "namespace": "shop"},
            ],
            "filters": [{"type": "RequestMirror", "requestMirror": {"backendRef": {"name": "m"}}}],
        },
        {"matches": [{"path": {"value": "/"}}]},  # no backends: a redirect, say
    ]
    assert services_of(route(rules)) == {
        ("Service", n) for n in ("web", "api", "web-v2", "shadow", "near", "m")
    }
    assert services_of({"spec": {}}) == frozenset()


def parent(gateway: str, accepted: str, when: str, message: str = "") -> dict[str, Any]:
    return {
        "parentRef": {"name": gateway, "group": "gateway.networking.k8s.io", "kind": "Gateway"},
        "controllerName": "example.net/gateway",
        "conditions": [
            {
                "type": "Accepted",
                "status": accepted,
                "reason": "Accepted" if accepted == "True" else "NotAllowedByListeners",
                "message": message,
                "lastTransitionTime": when,
                "observedGeneration": 3,
            },
            {
                "type": "ResolvedRefs",
                "status": "True",
                "reason": "ResolvedRefs",
                "message": "",
                "lastTransitionTime": when,
            },
        ],
    }


def folded(children: dict[str, dict[str, Any] | None]) -> dict[str, Any]:
    hub = {"metadata": {"name": "web", "generation": 2}, "spec": {}}
    placement = dict.fromkeys(children)
    assert HTTPROUTE.fold_rules is not None
    return fold(hub, HTTPROUTE.fold_rules, children, placement, {}, {}, NOW)


def test_its_parents_are_one_per_parent_and_controller_with_conditions_merged() -> None:
    east = {"status": {"parents": [parent("gw", "True", "2026-01-01T00:00:01Z")]}}
    west = {
        "status": {
            "parents": [
                parent("gw", "False", "2026-01-01T00:00:05Z", "no listener"),
                parent("internal", "True", "2026-01-01T00:00:02Z"),
            ]
        }
    }
    status = folded({"us-east": east, "us-west": west})
    assert set(status) == {"parents"}  # no conditions of ours, no observedGeneration
    gw, internal = status["parents"]
    assert gw["parentRef"]["name"] == "gw" and internal["parentRef"]["name"] == "internal"
    accepted, resolved = gw["conditions"]
    assert accepted == {
        "type": "Accepted",
        "status": "False",
        "reason": "NotAllowedByListeners",
        "message": "False in us-west: no listener",
        "lastTransitionTime": "2026-01-01T00:00:05Z",
    }
    assert resolved["status"] == "True" and resolved["message"] == "True in us-east, us-west"
    assert [c["message"] for c in internal["conditions"]] == ["True in us-west"] * 2


def test_a_route_no_controller_took_has_no_parents_and_the_list_stays_in_bounds() -> None:
    assert folded({"us-east": {"status": {}}, "us-west": None}) == {"parents": []}
    many = {
        "status": {"parents": [parent(f"gw{i:02}", "True", NOW) for i in range(MAX_PARENTS + 5)]}
    }
    assert len(folded({"us-east": many})["parents"]) == MAX_PARENTS
