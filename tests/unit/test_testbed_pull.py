"""The bed's pull children (`hack/testbed add NAME --pull`): what their agent is given, and
that kmc-apiserver is given nothing of them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from kmc_testbed import bed, config


@pytest.fixture
def state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> bed.State:
    monkeypatch.setenv("KMC_TESTBED_DIR", str(tmp_path))
    s = bed.initial_state()
    s.clusters.append(bed.new_cluster("edge", "child", {"a": "b"}, bed.PULL))
    s.kmc_port = 7443
    return s


def test_a_pull_child_has_an_agent_and_a_hub_path_once_kmc_apiserver_is_installed(
    state: bed.State,
) -> None:
    names = [name for name, _, _ in state.components()]
    assert names[-3:] == [bed.KMC, "hub-path-edge", "kmc-agent-edge"]
    assert not any(n.startswith(("kmc-agent-us", "hub-path-us")) for n in names)
    state.kmc_port = None
    assert not any("edge" in n and not n.startswith("edge-") for n, _, _ in state.components())
    # Not joined yet (no token from a join): `up` starts no agent for it.
    state.kmc_port = 7443
    assert state.agents() == []
    bed.agent_token(state.cluster("edge")).parent.mkdir(parents=True)
    bed.agent_token(state.cluster("edge")).write_text("abcdef.0123456789abcdef\n")
    assert state.agents() == ["hub-path-edge", "kmc-agent-edge"]


def test_the_agent_gets_its_own_cluster_the_hub_url_and_ca_and_the_token_only(
    state: bed.State,
) -> None:
    edge, hub = state.cluster("edge"), state.cluster(bed.HUB)
    agent = bed.command(state, edge, bed.AGENT)
    assert agent[1:3] == ["-m", "apiserver.agent"]
    flags = dict(arg.split("=", 1) for arg in agent[3:])
    assert flags == {
        "--location": "edge",
        "--hub-url": f"https://127.0.0.1:{edge.ports[bed.HUB_PATH]}",
        "--hub-ca": str(hub.folder / "pki" / "ca.crt"),
        "--bootstrap-token-file": str(bed.agent_token(edge)),
        "--kubeconfig": str(bed.agent_kubeconfig(edge)),
        "--retry": "1",
        "--lease-duration": str(bed.AGENT_LEASE),
    }
    path = bed.command(state, edge, bed.HUB_PATH)
    assert path[-2:] == [str(edge.ports[bed.HUB_PATH]), str(hub.ports["apiserver"])]


def test_kmc_apiserver_is_given_nothing_of_a_pull_child(state: bed.State) -> None:
    bed.write_files(state)
    edge = state.cluster("edge")
    # The agent's kubeconfig names its own cluster and no other.
    own = yaml.safe_load(bed.agent_kubeconfig(edge).read_text())
    assert [c["cluster"]["server"] for c in own["clusters"]] == [edge.server]
    # The bed's kubeconfig keeps a context named after it, for tests and people.
    everything = yaml.safe_load(config.kubeconfig_path().read_text())
    assert "edge" in [c["name"] for c in everything["contexts"]]
    # kmc-apiserver's command line points at its own kubeconfig (the hub only) and nothing of
    # the child's.
    kmc = " ".join(bed.command(state, None, bed.KMC))
    assert str(edge.folder) not in kmc and str(config.kubeconfig_path()) not in kmc
    assert f"--kubeconfig={bed.kmc_kubeconfig()}" in kmc


def test_a_state_saved_before_pull_children_loads_every_child_as_push(state: bed.State) -> None:
    bed.save(state)
    raw = json.loads((config.state_dir() / "state.json").read_text())
    for cluster in raw["clusters"]:
        if cluster["name"] != "edge":
            del cluster["mode"]
    (config.state_dir() / "state.json").write_text(json.dumps(raw))
    loaded = bed.load()
    assert loaded is not None
    assert {c.name: c.pull for c in loaded.clusters} == {
        "hub": False,
        "us-east": False,
        "us-west": False,
        "eu-west": False,
        "edge": True,
    }
