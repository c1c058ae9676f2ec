"""Which API a name typed to `kubectl mc get` means (the rule `kubectl mc get --help` shows)."""

import pytest

from kubectl_mc.resources import MC, REMOTE, UnknownResource, resolve


@pytest.mark.parametrize(
    "typed",
    ["deployments", "deployment", "deploy", "Deployments", "deploy.mc", "deployments.mc.kmc.dev"],
)
def test_a_workload_kind_is_the_hub_view(typed: str) -> None:
    res = resolve(typed)
    assert (res.plural, res.group) == ("deployments", MC)
    assert res.path("demo", "web", "locations") == (
        "/apis/mc.kmc.dev/v1alpha1/namespaces/demo/deployments/web/locations"
    )


@pytest.mark.parametrize(
    ("typed", "plural"),
    [("pods", "pods"), ("po", "pods"), ("ev", "events"), ("svc", "services"), ("cm", "configmaps")],
)
def test_child_only_kinds_read_the_children(typed: str, plural: str) -> None:
    res = resolve(typed)
    assert (res.plural, res.group) == (plural, REMOTE)


def test_dot_remote_reads_the_childrens_copies_of_a_workload() -> None:
    for typed in ("deployments.remote", "rs.remote", "jobs.remote.kmc.dev", "pods.remote"):
        assert resolve(typed).group == REMOTE
    assert resolve("rs.remote").plural == "replicasets"


def test_locations_are_cluster_scoped() -> None:
    for typed in ("locations", "location", "loc", "locations.kmc.dev"):
        res = resolve(typed)
        assert res.plural == "locations" and not res.namespaced
        assert res.path("ignored") == "/apis/kmc.dev/v1alpha1/locations"


@pytest.mark.parametrize("typed", ["foo", "secrets", "secrets.remote", "pods.mc", "nodes"])
def test_anything_else_is_kubectls_unknown_type(typed: str) -> None:
    with pytest.raises(UnknownResource) as err:
        resolve(typed)
    assert str(err.value) == f'the server doesn\'t have a resource type "{typed}"'
