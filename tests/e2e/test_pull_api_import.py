"""API import with a pull location on the real bed (docs/pull.md, "CRDs for API import"): a
CRD installed in the pull location's cluster reaches the hub's API import through its agent
(the hub asks for the CRDs its probe names; kmc-apiserver never dials the location) and is
negotiated with a pushed location's as any location's CRD is; a custom object placed there is
written by the agent, put back when edited in the child, and removed when the hub object
goes; a restarted kmc-apiserver asks the agent for the CRDs again; and the CRD removed there
turns the location's verdict `Missing`."""

from __future__ import annotations

import copy
import json
import subprocess
from pathlib import Path
from typing import Any

from kmc_testbed import bed, config

from .conftest import Kubectl, run_testbed
from .test_agent import stop, wait_until
from .test_api_import import gone, spec_fields, widget_crd
from .test_placement import wait_placement, with_strategy
from .test_pull_location import NAME, PUSHED, USER, ready_is, spare, start_agent

__all__ = ["spare"]  # its fixture: the spare cluster, its Pull Location, the agent's identity

TIMEOUT = 180.0
AGENT_LOG = config.REPO_ROOT / ".testbed" / "logs" / f"kmc-agent-{NAME}.log"


def record(hub: Kubectl, name: str) -> dict[str, Any]:
    got = hub.run("get", "apiimport", name, "-o", "json", check=False)
    return json.loads(got.stdout) if got.returncode == 0 else {}


def verdicts(hub: Kubectl, name: str) -> dict[str, str]:
    rows = (record(hub, name).get("status") or {}).get("locations") or []
    return {row["name"]: row["verdict"] for row in rows}


def hub_crd(hub: Kubectl, name: str) -> dict[str, Any]:
    got = hub.run("get", "crd", name, "-o", "json", check=False)
    return json.loads(got.stdout) if got.returncode == 0 else {}


def put_crds(
    hub: Kubectl, location: str, body: dict[str, Any], folder: Path, *as_user: str
) -> subprocess.CompletedProcess[str]:
    path = folder / "crds.json"
    path.write_text(json.dumps(body))
    where = f"/apis/mc.kmc.dev/v1alpha1/locations/{location}/crds"
    return hub.run("replace", "--raw", where, "-f", str(path), *as_user, check=False)


def crds_sent() -> int:
    """How many times the agent has sent CRDs the hub asked for (its log says each)."""
    if not AGENT_LOG.exists():
        return 0
    return sum(1 for line in AGENT_LOG.read_text().splitlines() if f"CRD(s) of {NAME}" in line)


def test_a_pull_locations_crd_is_imported_and_its_custom_objects_kept_by_its_agent(
    spare: Path, kubectl: dict[str, Kubectl], namespace: str
) -> None:
    hub, cluster, pushed = kubectl["hub"], Kubectl(NAME), kubectl[PUSHED]
    hub.apply(
        {
            "apiVersion": "kmc.dev/v1alpha1",
            "kind": "Location",
            "metadata": {"name": NAME},
            "spec": {"mode": "Pull"},
        }
    )
    group = f"{namespace}.example.org"
    name = f"widgets.{group}"
    resource = f"widgets.{group}"
    # The pull location's CRD is narrower in one way (colors) and wider in another (gloss,
    # size): what the hub serves must show both came from it.
    theirs = widget_crd(group)
    spec_fields(theirs)["color"]["enum"] = ["red", "green"]
    spec_fields(theirs)["gloss"] = {"type": "boolean"}
    spec_fields(theirs)["size"]["maximum"] = 20
    agent = start_agent(spare)
    try:
        wait_until("Ready from the lease", ready_is(hub, NAME, "True", "AgentLease"))
        sent_before = crds_sent()
        cluster.apply(theirs)
        pushed.apply(widget_crd(group))

        # The hub's CRD is the common subset of the pushed location's CRD and the pull
        # location's, which only its agent could have sent.
        def negotiated() -> tuple[Any, str | None]:
            crd = hub_crd(hub, name)
            fields = spec_fields(crd) if crd else {}
            said = verdicts(hub, name)
            if (
                fields.get("color", {}).get("enum") == ["red", "green"]
                and said.get(NAME) == "Compatible"
                and said.get(PUSHED) == "Compatible"
            ):
                return (crd, said), None
            return (fields, said), f"hub schema fields {fields}, verdicts {said}"

        crd, said = wait_until("negotiated with the pull location", negotiated, TIMEOUT)
        assert crd["metadata"]["labels"]["kmc.dev/imported"] == "true"
        fields = spec_fields(crd)
        assert set(fields) == {"size", "color"}, fields  # gloss: the pushed one lacks it
        assert fields["size"]["maximum"] == 10
        assert all(said[other] == "Missing" for other in said if other not in (NAME, PUSHED))
        # The digest in the record is the one the agent's probe put in the Location's status.
        rows = {r["name"]: r for r in record(hub, name)["status"]["locations"]}
        assert rows[NAME]["digest"] != rows[PUSHED]["digest"]

        def same_digest() -> tuple[Any, str | None]:
            status = hub.json("get", "location", NAME).get("status") or {}
            found = (status.get("apiDigests") or {}).get(f"{group}/v1/Widget")
            ok = found == rows[NAME]["digest"]
            return found, None if ok else f"{found} in its status, {rows[NAME]['digest']} used"

        wait_until("the digest of the probe's CRD in the import", same_digest, TIMEOUT)
        assert crds_sent() > sent_before  # asked for, and sent once it changed

        # The agent's identity may send its own location's CRDs only; a bad body is refused
        # naming the field, and changes nothing.
        empty = {"apiVersion": "mc.kmc.dev/v1alpha1", "kind": "LocationCRDs", "items": []}
        other = put_crds(hub, PUSHED, empty, spare.parent, "--as", USER)
        assert other.returncode != 0 and "Forbidden" in other.stderr, other.stderr
        assert 'cannot update resource "locations/crds"' in other.stderr, other.stderr
        bad = copy.deepcopy(theirs)
        bad["spec"]["scope"] = "Galactic"
        refused = put_crds(hub, NAME, {**empty, "items": [bad]}, spare.parent, "--as", USER)
        assert refused.returncode != 0, refused.stderr
        for field in ("items[0].spec.scope", "items[0].metadata.uid"):
            assert field in refused.stderr, refused.stderr
        assert verdicts(hub, name).get(NAME) == "Compatible"

        # A custom object placed there is written by its agent, as kmc-sync.
        widget: dict[str, Any] = {
            "apiVersion": f"{group}/v1",
            "kind": "Widget",
            "metadata": {"name": "gadget"},
            "spec": {"size": 3, "color": "green"},
        }
        hub.apply(with_strategy(copy.deepcopy(widget), {"type": "Replicate"}), namespace)
        left = copy.deepcopy(widget)
        left["metadata"]["name"] = "left"
        hub.apply(with_strategy(left, {"type": "Replicate"}), namespace)
        for placed in ("gadget", "left"):
            wait_placement(
                hub, resource, placed, namespace, lambda p: set(p) == {NAME, PUSHED}, TIMEOUT
            )

        def size_there(want: int | None, widget: str = "gadget") -> Any:
            def check() -> tuple[Any, str | None]:
                got = cluster.run(
                    "get", resource, widget, "-n", namespace, "-o", "json", check=False
                )
                size = json.loads(got.stdout)["spec"]["size"] if got.returncode == 0 else None
                return size, None if size == want else f"{widget} in {NAME}: {size}, not {want}"

            return check

        wait_until("the widget in the pull location", size_there(3), TIMEOUT)
        child = json.loads(
            cluster.run(
                "get", resource, "gadget", "-n", namespace, "-o", "json", "--show-managed-fields"
            ).stdout
        )
        assert "kmc.dev/origin-uid" in child["metadata"]["labels"]
        managers = {m["manager"] for m in child["metadata"].get("managedFields") or []}
        assert "kmc-sync" in managers, managers

        # Edited in the child: put back by the agent (its watch of the imported kind).
        patch = json.dumps({"spec": {"size": 7}})
        cluster.run("patch", resource, "gadget", "-n", namespace, "--type=merge", "-p", patch)
        wait_until("the edit in the child put back", size_there(3), TIMEOUT)
        # Deleted in the child: made again.
        cluster.run("delete", resource, "gadget", "-n", namespace, "--wait=false")
        wait_until("the widget deleted in the child made again", size_there(3), TIMEOUT)

        # A new kmc-apiserver knows no pull location's CRDs: it asks the agent again.
        sent_before = crds_sent()
        run_testbed("stop", bed.KMC)
        run_testbed("start", bed.KMC)

        def asked_again() -> tuple[Any, str | None]:
            sent = crds_sent()
            return sent, None if sent > sent_before else "the agent has not sent them again"

        wait_until("the CRDs sent again after the restart", asked_again, TIMEOUT)

        def still_compatible() -> tuple[Any, str | None]:
            said = verdicts(hub, name)
            return said, None if said.get(NAME) == "Compatible" else f"verdicts {said}"

        wait_until("the pull location still Compatible", still_compatible, TIMEOUT)

        # The hub object goes: so does the pull location's copy.
        hub.run("delete", resource, "gadget", "-n", namespace)
        wait_until("the widget gone from the pull location", size_there(None), TIMEOUT)

        # One removed on the hub while the agent is away: an orphan there, which the agent
        # restarted finds (the feed names the imported kind; it wrote none of it yet) and
        # removes, as the push loop removes its children's orphans.
        wait_until("the other widget in the pull location", size_there(3, "left"), TIMEOUT)
        stop(agent)
        hub.run("delete", resource, "left", "-n", namespace)
        agent = start_agent(spare)
        wait_until("the orphan gone from the pull location", size_there(None, "left"), TIMEOUT)

        # The CRD removed in the pull location: seen by the hub, its verdict Missing, while
        # the pushed location still serves the kind (the hub CRD stays).
        cluster.run("delete", "crd", name)

        def missing_there() -> tuple[Any, str | None]:
            said = verdicts(hub, name)
            ok = said.get(NAME) == "Missing" and said.get(PUSHED) == "Compatible"
            return said, None if ok else f"verdicts {said}"

        wait_until("the pull location's verdict Missing", missing_there, TIMEOUT)
        assert hub_crd(hub, name), "the hub CRD stays while a location serves the kind"
    finally:
        stop(agent)
        hub.run("delete", resource, "--all", "-n", namespace, "--ignore-not-found", check=False)
        pushed.run("delete", "crd", name, "--ignore-not-found", check=False)
        cluster.run("delete", "crd", name, "--ignore-not-found", check=False)
    gone(hub, "crd", name)
    gone(hub, "apiimport", name)
