"""An exec credential plugin for the e2e tests: a real ServiceAccount token from the hub.

A kubeconfig whose user runs this behaves like a managed cluster's (issue #15). Each run mints
a fresh token with TokenRequest (`kubectl create token`) and prints it as the ExecCredential
that KUBERNETES_EXEC_INFO asks for, its `expirationTimestamp` the token's own `exp`.

With `--replay FILE`, a run first hands out the token saved in FILE, once (FILE is removed),
the way a plugin with a cache of its own hands out what it cached: that is how a test puts a
token the server no longer accepts in front of a new `kubectl mc` process, whose only way to a
working one is a 401 and a second run. Each run appends what it did to `--log` (JSON lines).
"""

from __future__ import annotations

import argparse
import base64
import datetime
import json
import os
import subprocess
import sys
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser()
    for flag in ("--kubeconfig", "--context", "--namespace", "--serviceaccount", "--log"):
        parser.add_argument(flag, required=True)
    parser.add_argument("--duration", default="24h")
    parser.add_argument("--replay")
    args = parser.parse_args()
    version = json.loads(os.environ["KUBERNETES_EXEC_INFO"])["apiVersion"]
    replay = Path(args.replay) if args.replay else None
    if replay is not None and replay.exists():
        token, action = replay.read_text().strip(), "replayed"
        replay.unlink()
    else:
        token, action = mint(args), "minted"
    expires = expiry(token)
    with Path(args.log).open("a") as log:
        log.write(json.dumps({"action": action, "token": token, "ppid": os.getppid()}) + "\n")
    status = {"token": token, "expirationTimestamp": expires}
    print(json.dumps({"apiVersion": version, "kind": "ExecCredential", "status": status}))


def mint(args: argparse.Namespace) -> str:
    kubectl = os.environ.get("KMC_KUBECTL", "kubectl")
    cmd = [kubectl, "create", "token", args.serviceaccount, "-n", args.namespace]
    cmd += ["--duration", args.duration, "--kubeconfig", args.kubeconfig]
    cmd += ["--context", args.context]
    done = subprocess.run(cmd, capture_output=True, text=True, check=False, timeout=60)
    if done.returncode != 0:
        print(f"sa_token_plugin: {done.stderr.strip()}", file=sys.stderr)
        sys.exit(1)
    return done.stdout.strip()


def expiry(token: str) -> str:
    """The JWT's `exp`, in RFC 3339 (a day from now for a token that is not a JWT)."""
    try:
        payload = token.split(".")[1]
        claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
        when = datetime.datetime.fromtimestamp(int(claims["exp"]), datetime.UTC)
    except (IndexError, ValueError, KeyError):
        when = datetime.datetime.now(datetime.UTC) + datetime.timedelta(days=1)
    return when.strftime("%Y-%m-%dT%H:%M:%SZ")


if __name__ == "__main__":
    main()
