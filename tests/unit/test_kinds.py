"""The kinds' entries: what every other module asks instead of testing a kind's name."""

from __future__ import annotations

import pytest

from apiserver.kinds import ALL, DEPLOYMENT, JOB, PLACED, POD, REMOTE, VIEWS, Role, of_crd


def test_paths_of_collections_and_objects() -> None:
    assert DEPLOYMENT.collection == "/apis/apps/v1/deployments"
    assert DEPLOYMENT.path(None) == "/apis/apps/v1/deployments"
    assert DEPLOYMENT.path("shop") == "/apis/apps/v1/namespaces/shop/deployments"
    assert DEPLOYMENT.path("shop", "web") == "/apis/apps/v1/namespaces/shop/deployments/web"
    assert JOB.path("shop", "batch", "status") == "/apis/batch/v1/namespaces/shop/jobs/batch/status"
    assert POD.path("shop", "web-1") == "/api/v1/namespaces/shop/pods/web-1"
    assert (DEPLOYMENT.group, DEPLOYMENT.version, POD.group, POD.version) == (
        "apps",
        "v1",
        "",
        "v1",
    )


def test_typed_adds_kind_and_version_without_changing_the_cached_object() -> None:
    cached = {"metadata": {"name": "web"}}
    typed = DEPLOYMENT.typed(cached)
    assert typed == {"kind": "Deployment", "apiVersion": "apps/v1", "metadata": {"name": "web"}}
    assert cached == {"metadata": {"name": "web"}}


def test_every_entry_says_what_each_part_needs() -> None:
    for kind in ALL:
        if kind.view is not None:  # a view folds, and shows what it folds
            assert kind.role is Role.WORKLOAD and kind.folds
            assert set(kind.view.counters) == set(kind.view.counter_docs)
        if kind.max_unavailable is not None:  # handed over by replicas
            assert kind.shape({"spec": {"replicas": 3}}).total == 3
    assert set(PLACED) == {k.key for k in ALL if k.role is not None}
    assert "secrets" not in REMOTE  # a child's Secrets are never read through the hub
    assert set(VIEWS) == {"deployments", "statefulsets", "replicasets", "jobs", "daemonsets"}


@pytest.mark.parametrize(
    ("scope", "expected"),
    [
        ("Namespaced", ("Widget.example.org", "example.org/v2", Role.ASKED, True)),
        ("Cluster", ("Widget.example.org", "example.org/v2", Role.ASKED, False)),
        ("Elsewhere", None),
    ],
)
def test_a_crd_kind_joins_with_its_storage_version(
    scope: str, expected: tuple[str, str, Role, bool] | None
) -> None:
    crd = {
        "spec": {
            "group": "example.org",
            "scope": scope,
            "names": {"kind": "Widget", "plural": "widgets"},
            "versions": [{"name": "v1", "storage": False}, {"name": "v2", "storage": True}],
        }
    }
    kind = of_crd(crd)
    assert (kind and (kind.key, kind.api_version, kind.role, kind.namespaced)) == expected
    assert kind is None or kind.custom  # takes no strategic merge patch


@pytest.mark.parametrize("group", ["kmc.dev", "mc.kmc.dev"])
def test_our_own_crds_are_never_kinds_to_place(group: str) -> None:
    """A Location or a PlacementPolicy is the hub's own: no strategy on one sends it down."""
    crd = {
        "spec": {
            "group": group,
            "scope": "Cluster",
            "names": {"kind": "Location", "plural": "locations"},
            "versions": [{"name": "v1alpha1", "storage": True}],
        }
    }
    assert of_crd(crd) is None
