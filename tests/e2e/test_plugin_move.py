"""`kubectl mc move`, `cordon`, `uncordon` and `drain`, run through the real kubectl on the
test bed: where things end up, that nothing dropped below what the workload's own rollout
strategy allows on the way (the sum of available replicas over every child, sampled every
100 ms straight from their apiservers), and that errors and hints read as printed.

A drain moves everything out of a location, other tests' workloads included, so it is kept
short and the location is uncordoned however the test ends.
"""

from __future__ import annotations

import json
import os
import subprocess
from typing import Any

from kmc_testbed import bed, config

from .conftest import VENV_BIN, Kubectl
from .test_placement import (
    expect_placement,
    wait_locations_settled,
    wait_placement,
    with_strategy,
)
from .test_sync import AvailabilitySampler, child_deployments, moving, shares, wait_children

EVEN: dict[str, int | None] = {"eu-west": 2, "us-east": 2, "us-west": 2}
HUB_FLAGS = f"--kubeconfig {config.kubeconfig_path()} --context hub"


def web_of_six(hub: Kubectl, namespace: str) -> None:
    """6 replicas, 2 in each child, rolling out with at most 1 unavailable."""
    wait_locations_settled(hub)
    hub.apply(moving(6, 1), namespace)
    expect_placement(hub, "deployment", "web", namespace, EVEN)
    hub.run("rollout", "status", "deployment/web", "-n", namespace, "--timeout=120s")


def strategy_of(hub: Kubectl, namespace: str) -> Any:
    annotations = hub.json("get", "deployment", "web", "-n", namespace)["metadata"]["annotations"]
    return json.loads(annotations["kmc.dev/strategy"])


def shell(command: str) -> subprocess.CompletedProcess[str]:
    """A command printed by the plugin, run as a person pastes it."""
    env = {**os.environ, "PATH": f"{VENV_BIN}{os.pathsep}{os.environ['PATH']}"}
    return subprocess.run(command, shell=True, capture_output=True, text=True, env=env, timeout=180)


def test_move_to_one_location_is_made_before_break(
    installed: bed.State, kubectl: dict[str, Kubectl], namespace: str
) -> None:
    hub = kubectl["hub"]
    web_of_six(hub, namespace)
    with AvailabilitySampler("web", namespace) as sampler:
        sampler.begin()
        out = hub.mc("move", "deployment/web", "--to", "eu-west", "--wait", "-n", namespace)
        sampler.end()
    lines = out.stdout.splitlines()
    assert lines[0] == "deployment.apps/web moving to eu-west"
    assert lines[-3:] == [
        "LOCATION   DESIRED   READY   AVAILABLE   STATE    MESSAGE",
        "eu-west    6         6       6           Synced",
        "deployment.apps/web moved to eu-west",
    ], out.stdout
    assert shares(child_deployments(kubectl, "web", namespace)) == {"eu-west": 6}
    assert len(sampler.during) >= 5, sampler.report()  # sampled while it moved
    assert min(sampler.samples) >= 6 - 1, sampler.report()
    assert strategy_of(hub, namespace) == {"type": "Split", "pin": ["eu-west"]}


def test_move_of_some_replicas_then_a_timeout_says_how_to_go_on_or_back(
    installed: bed.State, kubectl: dict[str, Kubectl], namespace: str
) -> None:
    hub = kubectl["hub"]
    web_of_six(hub, namespace)
    some = ("--from", "us-west", "--to", "eu-west", "--replicas", "1")
    out = hub.mc("move", "deploy/web", *some, "--wait", "-n", namespace)
    last = out.stdout.splitlines()[-1]
    assert last == "deployment.apps/web moved 1 replica from us-west to eu-west"
    after = {"eu-west": 3, "us-east": 2, "us-west": 1}
    assert shares(child_deployments(kubectl, "web", namespace)) == after
    split = strategy_of(hub, namespace)
    assert split == {"type": "Split", "pin": sorted(after), "weights": after}

    # A wait too short to see the next move through: the state, and two commands to paste.
    too_short = ("--wait", "--timeout=1ms", "-n", namespace)
    late = hub.mc("move", "deployment/web", "--to", "us-east", *too_short, check=False)
    assert late.returncode == 1
    error = late.stderr.splitlines()
    assert error[0].startswith(
        "error: timed out after 1ms waiting for deployment.apps/web to move to us-east; now: "
    ), late.stderr
    assert error[1:3] == [
        "The move goes on in the background. To keep waiting:",
        f"  kubectl mc move deployment/web -n {namespace} --wait {HUB_FLAGS}",
    ]
    assert error[3] == "To undo it (back to the previous strategy):"
    assert shell(error[2]).returncode == 0
    assert shares(child_deployments(kubectl, "web", namespace)) == {"us-east": 6}
    undo = shell(error[4])
    assert undo.stdout == "strategy.mc.kmc.dev/web patched\n", undo.stderr
    assert strategy_of(hub, namespace) == split
    wait_children(kubectl, "web", namespace, lambda c: shares(c) == after, timeout=60)


def test_drain_empties_a_location_make_before_break_and_uncordon_opens_it(
    installed: bed.State, kubectl: dict[str, Kubectl], namespace: str
) -> None:
    hub = kubectl["hub"]
    web_of_six(hub, namespace)
    try:
        with AvailabilitySampler("web", namespace) as sampler:
            sampler.begin()
            out = hub.mc("drain", "us-west", "--wait", "--timeout=120s")
            sampler.end()
        lines = out.stdout.splitlines()
        assert lines[0] == "location.kmc.dev/us-west cordoned"
        assert lines[-2:] == [
            "draining us-west: 0 objects left",
            "location.kmc.dev/us-west drained",
        ], out.stdout
        children = child_deployments(kubectl, "web", namespace)
        assert "us-west" not in children and sum(shares(children).values()) == 6
        assert len(sampler.during) >= 5, sampler.report()
        assert min(sampler.samples) >= 6 - 1, sampler.report()
        again = hub.mc("cordon", "us-west")
        assert again.stdout == "location.kmc.dev/us-west already cordoned\n"
    finally:
        opened = hub.mc("uncordon", "us-west", check=False)
    assert opened.stdout == "location.kmc.dev/us-west uncordoned\n", opened.stderr
    assert hub.mc("uncordon", "us-west").stdout == "location.kmc.dev/us-west already uncordoned\n"
    # Open again, it takes its share back (the strategy is still the default Split).
    wait_placement(hub, "deployment", "web", namespace, lambda p: p == EVEN, timeout=60)


def test_a_drain_that_cannot_finish_names_what_holds_it(
    installed: bed.State, kubectl: dict[str, Kubectl], namespace: str
) -> None:
    hub = kubectl["hub"]
    wait_locations_settled(hub)
    hub.apply(with_strategy(moving(2, 0), {"type": "Split", "pin": ["us-west"]}), namespace)
    expect_placement(hub, "deployment", "web", namespace, {"us-west": 2})
    try:
        late = hub.mc("drain", "us-west", "--wait", "--timeout=3s", check=False)
    finally:
        hub.mc("uncordon", "us-west")
    assert late.returncode == 1
    error = late.stderr.splitlines()
    assert error[0].startswith("error: timed out after 3s draining us-west ("), late.stderr
    assert error[0].endswith("it stays cordoned and keeps draining. Still there:"), late.stderr
    ours = [line for line in error if f"deployment.apps/web -n {namespace}: " in line]
    assert len(ours) == 1, late.stderr
    assert "no eligible location: " in ours[0] and "us-west: cordoned" in ours[0], ours
    assert error[-4:-2] == ["To keep waiting:", f"  kubectl mc drain us-west --wait {HUB_FLAGS}"]
    # It never left: nowhere else may have it.
    assert shares(child_deployments(kubectl, "web", namespace)) == {"us-west": 2}


def test_errors_read_like_kubectl(
    installed: bed.State, kubectl: dict[str, Kubectl], namespace: str
) -> None:
    hub = kubectl["hub"]

    def error(*args: str) -> str:
        proc = hub.mc(*args, check=False)
        assert proc.returncode == 1, proc
        assert proc.stdout == ""
        return proc.stderr

    assert error("move", "deployment/nope", "--to", "eu-west", "-n", namespace) == (
        'Error from server (NotFound): deployments.apps "nope" not found\n'
    )
    hub.apply(moving(1, 0), namespace)
    unknown = error("move", "deployment/web", "--to", "nowhere", "-n", namespace)
    assert unknown.startswith("error: no such location: nowhere (locations: "), unknown
    assert "eu-west, us-east, us-west" in unknown
    assert error("move", "web", "--to", "eu-west", "-n", namespace) == (
        "error: arguments in resource/name form must have a single resource and name, "
        'like deployment/web; got "web"\n'
    )
    assert error("cordon", "nowhere").startswith("error: no such location: nowhere (locations: ")
