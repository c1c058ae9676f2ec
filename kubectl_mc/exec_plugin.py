"""A kubeconfig user's `exec` credential plugin, run the way client-go runs it.

Managed clusters hand out kubeconfigs whose user is a command (`aws eks get-token`,
`gke-gcloud-auth-plugin`, `kubelogin`) printing an ExecCredential; kubectl runs it, and so
must the plugin, or it is system:anonymous there (issue #15). The contract is
client.authentication.k8s.io v1 and v1beta1: the command, its args and env, an ExecCredential
in KUBERNETES_EXEC_INFO (with the cluster when `provideClusterInfo`), stdin passed through
only when interactive, the plugin's stderr shown as it is, a token or a client certificate
and key back, kept until `expirationTimestamp`. The messages are client-go's.

Imported only for a user that has an `exec` section: the others never pay for subprocess.
Credentials are kept in memory for the one command, never on disk.
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
import threading
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from kubectl_mc.credentials import ClusterTLS, Credential, CredentialError, failed

GROUP = "client.authentication.k8s.io"
VERSIONS = (f"{GROUP}/v1", f"{GROUP}/v1beta1")
MODES = ("Never", "IfAvailable", "Always")
CLUSTER_CONFIG_EXTENSION = f"{GROUP}/exec"
INSTALL_HELP = (
    "\n\nIt looks like you are trying to use a client-go credential plugin that is not installed."
    "\n\nTo learn more about this feature, consult the documentation available at:\n"
    "      https://kubernetes.io/docs/reference/access-authn-authz/authentication/"
    "#client-go-credential-plugins"
)


@dataclass
class ExecPlugin:
    """A credential Source that runs the plugin when it has no live credential."""

    user: str
    api_version: str
    command: str
    args: list[str]
    env: dict[str, str]
    mode: str  # interactiveMode
    install_hint: str
    cluster_info: dict[str, Any] | None  # for KUBERNETES_EXEC_INFO, when provideClusterInfo
    tls: ClusterTLS
    _cached: Credential | None = field(default=None, repr=False)
    _expiry: datetime | None = field(default=None, repr=False)
    # Held while the plugin runs: threads wait for one answer, and an interactive plugin
    # asks once.
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @classmethod
    def of(
        cls, user: str, config: dict[str, Any], cluster: dict[str, Any], tls: ClusterTLS
    ) -> ExecPlugin:
        """Checked as kubectl checks a kubeconfig before it runs anything."""
        version, command = config.get("apiVersion") or "", config.get("command") or ""
        if not command:
            raise _missing("command", user)
        if not version:
            raise _missing("apiVersion", user)
        if version not in VERSIONS:
            raise CredentialError(f'exec plugin: invalid apiVersion "{version}"')
        env = {}
        for item in config.get("env") or []:
            if not item.get("name"):
                raise _missing("env variable name", user)
            env[str(item["name"])] = str(item.get("value") or "")
        return cls(
            user=user,
            api_version=version,
            command=str(command),
            args=[str(a) for a in config.get("args") or []],
            env=env,
            mode=_mode(user, version, config.get("interactiveMode")),
            install_hint=str(config.get("installHint") or ""),
            cluster_info=_cluster_info(cluster, tls) if config.get("provideClusterInfo") else None,
            tls=tls,
        )

    def current(self) -> Credential:
        with self._lock:
            if self._cached is None or self._expired():
                self._cached = self._run()
            return self._cached

    def refresh(self, stale: Credential) -> Credential | None:
        with self._lock:
            if self._cached is stale or self._cached is None:
                self._cached = self._run()
            return self._cached

    def _expired(self) -> bool:
        return self._expiry is not None and datetime.now(UTC) > self._expiry

    def _run(self) -> Credential:
        try:
            interactive = self._interactive()
            out = self._execute(interactive)
            status = self._status(out)
            self._expiry = _expiry(status)
            return self._credential(status)
        except CredentialError as err:
            raise failed(self.user, str(err)) from err

    def _interactive(self) -> bool:
        tty = sys.stdin is not None and sys.stdin.isatty()
        if self.mode == "Always" and not tty:
            raise CredentialError(
                "exec plugin cannot support interactive mode: standard input is not a terminal"
            )
        return self.mode != "Never" and tty

    def _execute(self, interactive: bool) -> bytes:
        spec: dict[str, Any] = {"interactive": interactive}
        if self.cluster_info is not None:
            spec["cluster"] = self.cluster_info
        info = {"apiVersion": self.api_version, "kind": "ExecCredential", "spec": spec}
        env = {**os.environ, **self.env, "KUBERNETES_EXEC_INFO": json.dumps(info)}
        try:
            done = subprocess.run(
                [self.command, *self.args],
                env=env,
                stdin=None if interactive else subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                check=False,
            )
        except (FileNotFoundError, PermissionError, NotADirectoryError) as err:
            hint = f"\n\n{self.install_hint}" if self.install_hint else ""
            message = f"exec: executable {self.command} not found{INSTALL_HELP}{hint}"
            raise CredentialError(message) from err
        except OSError as err:
            raise CredentialError(f"exec: {err}") from err
        if done.returncode != 0:
            raise CredentialError(
                f"exec: executable {self.command} failed with exit code {done.returncode}"
            )
        return done.stdout

    def _status(self, out: bytes) -> dict[str, Any]:
        try:
            answer = json.loads(out)
        except ValueError as err:
            raise CredentialError(f"decoding stdout: {err}") from err
        if not isinstance(answer, dict) or answer.get("kind") != "ExecCredential":
            raise CredentialError("decoding stdout: not an ExecCredential")
        if answer.get("apiVersion") != self.api_version:
            raise CredentialError(
                f"exec plugin is configured to use API version {self.api_version}, "
                f"plugin returned version {answer.get('apiVersion')}"
            )
        status = answer.get("status")
        if not isinstance(status, dict):
            raise CredentialError("exec plugin didn't return a status field")
        cert, key = status.get("clientCertificateData"), status.get("clientKeyData")
        if not (status.get("token") or cert or key):
            raise CredentialError("exec plugin didn't return a token or cert/key pair")
        if bool(cert) != bool(key):
            raise CredentialError("exec plugin returned only certificate or key, not both")
        return status

    def _credential(self, status: dict[str, Any]) -> Credential:
        cert, key = status.get("clientCertificateData"), status.get("clientKeyData")
        if not (cert and key):
            return Credential(status.get("token") or None, self.tls.plain)
        try:
            context = self.tls.with_client_pem(str(cert).encode(), str(key).encode())
        except OSError as err:  # ssl.SSLError included
            raise CredentialError(f"failed parsing client key/certificate: {err}") from err
        return Credential(status.get("token") or None, context)


def _missing(what: str, user: str) -> CredentialError:
    return CredentialError(f"{what} must be specified for {user} to use exec authentication plugin")


def _mode(user: str, version: str, mode: Any) -> str:
    """v1 has no default (kubectl refuses the user); v1beta1's is IfAvailable."""
    if not mode:
        if version == f"{GROUP}/v1":
            raise _missing("interactiveMode", user)
        return "IfAvailable"
    if mode not in MODES:
        raise CredentialError(f'invalid interactiveMode for {user}: "{mode}"')
    return str(mode)


def _expiry(status: dict[str, Any]) -> datetime | None:
    stamp = status.get("expirationTimestamp")
    if not stamp:
        return None
    try:
        when = datetime.fromisoformat(str(stamp))
    except ValueError as err:
        raise CredentialError(f"decoding stdout: expirationTimestamp {stamp!r}: {err}") from err
    return when if when.tzinfo else when.replace(tzinfo=UTC)


def _cluster_info(cluster: dict[str, Any], tls: ClusterTLS) -> dict[str, Any]:
    """The cluster as client-go hands it to a plugin (`spec.cluster`)."""
    info: dict[str, Any] = {"server": cluster.get("server", "")}
    if tls.server_name:
        info["tls-server-name"] = tls.server_name
    if tls.insecure:
        info["insecure-skip-tls-verify"] = True
    ca = cluster.get("certificate-authority-data")
    if not ca and tls.ca_file:
        try:
            ca = base64.b64encode(Path(tls.ca_file).read_bytes()).decode()
        except OSError as err:
            raise CredentialError(
                f"reading certificate-authority {tls.ca_file}: {err.strerror}"
            ) from err
    if ca:
        info["certificate-authority-data"] = ca
    for name in ("proxy-url", "disable-compression"):
        if cluster.get(name):
            info[name] = cluster[name]
    for extension in cluster.get("extensions") or []:
        if extension.get("name") == CLUSTER_CONFIG_EXTENSION:
            info["config"] = extension.get("extension")
    return info
