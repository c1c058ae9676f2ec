"""What the test bed looked like when an e2e test failed, for the failure report.

CI deletes the bed after its run, so a failure that does not happen locally must explain
itself from the report alone: where each child stands, which of our objects each child still
holds, and what kmc-apiserver last complained about. Kept short: a report is read, not mined.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from kmc_testbed import bed, config

# Every kind the sync loop writes to a child; our copies carry the origin label.
OURS = (
    "deployments,statefulsets,replicasets,daemonsets,jobs,configmaps,secrets,serviceaccounts,"
    "resourcequotas,roles,rolebindings"
)
COLUMNS = (
    "KIND:.kind,NAMESPACE:.metadata.namespace,NAME:.metadata.name,"
    "REPLICAS:.spec.replicas,AVAILABLE:.status.availableReplicas,"
    "DELETING:.metadata.deletionTimestamp"
)
MAX_OBJECTS = 12  # rows per child
MAX_LOG = 15  # kmc-apiserver warnings


def snapshot() -> str | None:
    """The bed as it is now, or None when no bed is up."""
    state = bed.load()
    if state is None:
        return None
    parts = ["$ kubectl get locations", _kubectl("hub", "get", "locations")]
    for child in (c.name for c in state.clusters if c.role != bed.HUB):
        rows = _kubectl(
            child, "get", OURS, "-A", "-l", "kmc.dev/origin-uid", "-o", f"custom-columns={COLUMNS}"
        ).splitlines()
        more = f"\n… and {len(rows) - 1 - MAX_OBJECTS} more" if len(rows) > MAX_OBJECTS + 1 else ""
        parts += [f"# ours in {child}", "\n".join(rows[: MAX_OBJECTS + 1]) + more]
    parts += ["# kmc-apiserver's last warnings", _warnings(config.state_dir() / "logs")]
    return "\n".join(parts)


def _kubectl(context: str, *args: str) -> str:
    from tests.e2e.conftest import Kubectl  # imported late: this module loads with every test

    try:
        proc = Kubectl(context).run(*args, check=False, timeout=20)
    except subprocess.TimeoutExpired:
        return "(kubectl timed out)"
    return (proc.stdout + proc.stderr).rstrip() or "(none)"


def _warnings(logs: Path) -> str:
    try:
        lines = (logs / "kmc-apiserver.log").read_text(errors="replace").splitlines()[-5000:]
    except OSError as err:
        return f"(no log: {err})"
    bad = [line[:240] for line in lines if " WARNING " in line or " ERROR " in line]
    return "\n".join(bad[-MAX_LOG:]) or "(none)"
