"""What an exported Service puts in each location (sync/clusterset.py): the ServiceImport, the
other locations' ready endpoints, and the export's conditions."""

from __future__ import annotations

from typing import Any

from apiserver.sync import clusterset

NS = "shop"


def service(name: str = "web", **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name, "namespace": NS, "uid": "svc-uid"},
        "spec": {
            "clusterIP": "10.0.0.7",
            "ports": [{"name": "http", "port": 80, "targetPort": 8080, "protocol": "TCP"}],
            **spec,
        },
    }


def mirror(name: str, location: str, *ready: bool | None, service: str = "web") -> dict[str, Any]:
    """A hub slice as the endpoints loop mirrors one child slice."""
    endpoints = []
    for i, state in enumerate(ready):
        endpoint: dict[str, Any] = {"addresses": [f"10.{len(location)}.0.{i}"], "zone": "z"}
        if state is not None:
            endpoint["conditions"] = {"ready": state}
        endpoints.append(endpoint)
    return {
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": {
            "name": f"{name}-{location}",
            "namespace": NS,
            "labels": {
                "kubernetes.io/service-name": service,
                "endpointslice.kubernetes.io/managed-by": "kmc.dev",
                "multicluster.kubernetes.io/source-cluster": location,
            },
        },
        "addressType": "IPv4",
        "endpoints": endpoints,
        "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}],
    }


PLACED = {"us-east": None, "us-west": None, "eu-west": None}
MIRRORS = [
    mirror("web-aaaaa", "us-east", True, False),
    mirror("web-bbbbb", "us-west", True),
    mirror("web-ccccc", "eu-west", None),
    mirror("api-ddddd", "eu-west", True, service="api"),  # another Service's
]


def test_each_location_gets_the_import_and_only_the_other_locations_slices() -> None:
    want = clusterset.wanted(service(), PLACED, MIRRORS)
    assert sorted(want) == ["eu-west", "us-east", "us-west"]
    assert sorted(want["us-east"].slices) == ["web-bbbbb-us-west", "web-ccccc-eu-west"]
    assert sorted(want["eu-west"].slices) == ["web-aaaaa-us-east", "web-bbbbb-us-west"]
    derived = want["eu-west"].slices["web-aaaaa-us-east"]
    assert derived["metadata"]["labels"] == {
        "multicluster.kubernetes.io/service-name": "web",
        "endpointslice.kubernetes.io/managed-by": "kmc.dev",
        "multicluster.kubernetes.io/source-cluster": "us-east",
    }
    # only the ready endpoint; a condition left unset counts as ready
    assert [e["addresses"] for e in derived["endpoints"]] == [["10.7.0.0"]]
    assert len(want["us-east"].slices["web-ccccc-eu-west"]["endpoints"]) == 1
    assert derived["ports"] == [{"name": "http", "port": 8080, "protocol": "TCP"}]


def test_the_import_says_the_type_and_the_service_ports() -> None:
    imported = clusterset.wanted(service(), PLACED, [])["us-east"].service_import
    assert imported["metadata"] == {
        "name": "web",
        "namespace": NS,
        "labels": {"app.kubernetes.io/managed-by": "kmc.dev"},
    }
    assert imported["spec"] == {
        "type": "ClusterSetIP",
        "ports": [{"name": "http", "protocol": "TCP", "port": 80}],
    }
    headless = clusterset.service_import(service(clusterIP="None", sessionAffinity="ClientIP"))
    assert headless["spec"]["type"] == "Headless"
    assert headless["spec"]["sessionAffinity"] == "ClientIP"


def test_only_where_the_service_is_placed_and_nothing_without_it() -> None:
    want = clusterset.wanted(service(), {"us-east": None, "us-west": 0}, MIRRORS)
    assert list(want) == ["us-east"]
    assert clusterset.wanted(None, PLACED, MIRRORS) == {}
    assert clusterset.wanted(service(type="ExternalName"), PLACED, MIRRORS) == {}
    assert clusterset.wanted(service(), {}, MIRRORS) == {}


def test_a_change_in_one_location_changes_only_the_slices_derived_from_it() -> None:
    before = clusterset.wanted(service(), PLACED, MIRRORS)
    changed = [mirror("web-aaaaa", "us-east", True, True), *MIRRORS[1:]]
    after = clusterset.wanted(service(), PLACED, changed)
    for location in PLACED:
        differs = {
            name
            for name in before[location].slices
            if clusterset.slice_content(before[location].slices[name])
            != clusterset.slice_content(after[location].slices[name])
        }
        assert differs == ({"web-aaaaa-us-east"} if location != "us-east" else set())


def test_slices_are_owned_by_the_location_import_and_the_owner_is_content() -> None:
    derived = clusterset.wanted(service(), PLACED, MIRRORS)["us-east"].slices["web-bbbbb-us-west"]
    owner = {"metadata": {"name": "web", "uid": "imp-1"}}
    owned = clusterset.owned(derived, owner)
    assert owned["metadata"]["ownerReferences"] == [
        {
            "apiVersion": "multicluster.x-k8s.io/v1alpha1",
            "kind": "ServiceImport",
            "name": "web",
            "uid": "imp-1",
        }
    ]
    assert "ownerReferences" not in derived["metadata"]  # not changed in place
    again = clusterset.owned(derived, {"metadata": {"name": "web", "uid": "imp-2"}})
    assert clusterset.slice_content(owned) != clusterset.slice_content(again)
    assert clusterset.slice_content(owned) == clusterset.slice_content(
        clusterset.owned(derived, owner)
    )


def test_the_verdicts() -> None:
    missing = clusterset.verdict(NS, "web", None, {}, {})
    assert missing.valid[:2] == ("False", "ServiceNotFound")
    assert "does not exist" in missing.valid[2]
    assert missing.ready[0] == "False"
    nowhere = clusterset.verdict(NS, "web", service(), {}, {})
    assert nowhere.valid[0] == "True"
    assert nowhere.ready[:2] == ("False", "NotPlaced")
    failing = clusterset.verdict(NS, "web", service(), PLACED, {"us-west": "forbidden"})
    assert failing.ready == ("False", "ImportFailed", "us-west: forbidden")
    done = clusterset.verdict(NS, "web", service(), PLACED, {})
    assert done.ready == ("True", "Imported", "imported in eu-west, us-east, us-west")
    assert clusterset.verdict(NS, "web", service(type="ExternalName"), PLACED, {}).valid[0] == (
        "False"
    )


def test_conditions_are_written_only_when_they_change() -> None:
    done = clusterset.verdict(NS, "web", service(), PLACED, {})
    first = clusterset.conditions(done, [], "2026-01-01T00:00:00Z", 1)
    assert first is not None
    assert [(c["type"], c["status"]) for c in first] == [("Valid", "True"), ("Ready", "True")]
    assert clusterset.conditions(done, first, "2026-01-02T00:00:00Z", 1) is None
    # a new message keeps the transition time; a new status moves it
    other = clusterset.verdict(NS, "web", service(), {"us-east": None}, {})
    moved = clusterset.conditions(other, first, "2026-01-02T00:00:00Z", 1)
    assert moved is not None and moved[1]["lastTransitionTime"] == "2026-01-01T00:00:00Z"
    failing = clusterset.verdict(NS, "web", service(), PLACED, {"us-west": "x"})
    flipped = clusterset.conditions(failing, first, "2026-01-03T00:00:00Z", 2)
    assert flipped is not None
    assert flipped[0]["lastTransitionTime"] == "2026-01-01T00:00:00Z"  # Valid stayed True
    assert flipped[1]["lastTransitionTime"] == "2026-01-03T00:00:00Z"
    assert flipped[1]["observedGeneration"] == 2
