"""Who the plugin is to the server: the kubeconfig user's credentials, found as kubectl finds them.

Without this the plugin sent only what it could read at start (a token, a certificate) and
went out as system:anonymous wherever kubectl runs an `exec` plugin, as on managed clusters
(issue #15). Here every request asks its `Source` for the credential to use now:

- a token, client certificate and key (inline data or files) never change;
- a `tokenFile` is read again when its modification time changes (projected tokens rotate);
- an `exec` plugin (`exec_plugin.py`, imported only for a user that has one) is run when a
  request first needs it, its answer reused until its `expirationTimestamp`, and run again
  once after a 401, as client-go does.

Precedence is client-go's (`kube.source_for` picks the source): a token, token file or client
certificate in the kubeconfig means the exec plugin is not used. Standard library only, and
cheap to import, since every command loads it: plain classes here, as a dataclass costs a few
tenths of a millisecond to define.
"""

from __future__ import annotations

import base64
import os
import ssl
import threading

TYPE_CHECKING = False  # typing is not imported at run time: it costs a few milliseconds
if TYPE_CHECKING:
    from typing import Any, Protocol


class CredentialError(Exception):
    """What failed while getting a credential, already naming the kubeconfig user."""


def failed(user: str, detail: str) -> CredentialError:
    return CredentialError(f'getting credentials for user "{user}": {detail}')


class Credential:
    """What one request authenticates with. Compared by identity: a refresh after a 401
    makes a new one unless another thread already did."""

    __slots__ = ("context", "token")

    def __init__(self, token: str | None, context: ssl.SSLContext) -> None:
        self.token = token
        self.context = context  # holds the client certificate, if there is one


if TYPE_CHECKING:

    class Source(Protocol):
        """Where a client gets its credential for each request."""

        def current(self) -> Credential:
            """The credential to use now (raises CredentialError)."""
            ...

        def refresh(self, stale: Credential) -> Credential | None:
            """After a 401 with `stale`: a different credential to retry with once, or None."""
            ...


class ClusterTLS:
    """The cluster's side of TLS: whom to trust, and the name its certificate must carry."""

    __slots__ = ("_plain", "ca_data", "ca_file", "insecure", "server_name")

    def __init__(
        self,
        ca_file: str | None = None,
        ca_data: str | None = None,  # PEM
        insecure: bool = False,
        server_name: str | None = None,  # tls-server-name: checked instead of the host
    ) -> None:
        self.ca_file, self.ca_data = ca_file, ca_data
        self.insecure, self.server_name = insecure, server_name
        self._plain: ssl.SSLContext | None = None

    @classmethod
    def of(cls, cluster: dict[str, Any]) -> ClusterTLS:
        data = cluster.get("certificate-authority-data")
        return cls(
            ca_file=cluster.get("certificate-authority"),
            ca_data=base64.b64decode(data).decode() if data else None,
            insecure=bool(cluster.get("insecure-skip-tls-verify")),
            server_name=cluster.get("tls-server-name") or None,
        )

    @property
    def plain(self) -> ssl.SSLContext:
        """The context without a client certificate, made once (loading a CA costs)."""
        if self._plain is None:
            self._plain = self.context()
        return self._plain

    def context(self) -> ssl.SSLContext:
        if self.insecure:
            return ssl._create_unverified_context()
        return ssl.create_default_context(cafile=self.ca_file, cadata=self.ca_data)

    def with_client_pem(self, cert: bytes, key: bytes) -> ssl.SSLContext:
        """A context presenting this certificate and key (PEM); ssl reads them only from
        files, so they pass through a file in memory (Linux), or else a private folder that
        is removed at once."""
        context = self.context()
        if hasattr(os, "memfd_create"):
            fd = os.memfd_create("kubectl-mc-client-cert")
            try:
                with open(fd, "wb", closefd=False) as pem:
                    pem.write(cert.rstrip(b"\n") + b"\n" + key)
                context.load_cert_chain(f"/proc/self/fd/{fd}")
            finally:
                os.close(fd)
            return context
        import tempfile

        with tempfile.TemporaryDirectory(prefix="kubectl-mc-") as folder:
            cert_path, key_path = os.path.join(folder, "tls.crt"), os.path.join(folder, "tls.key")
            for path, data in ((cert_path, cert), (key_path, key)):
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
                with os.fdopen(fd, "wb") as out:
                    out.write(data)
            context.load_cert_chain(cert_path, key_path)
        return context


class Static:
    """A token and/or a client certificate written in the kubeconfig; read on first use, so a
    file that cannot be read is reported like any other credential failure."""

    def __init__(self, user: str, tls: ClusterTLS, entry: dict[str, Any]) -> None:
        self.user, self.tls, self.entry = user, tls, entry
        self._credential: Credential | None = None
        self._lock = threading.Lock()

    def current(self) -> Credential:
        with self._lock:
            if self._credential is None:
                self._credential = Credential(self.entry.get("token"), self._context())
            return self._credential

    def refresh(self, stale: Credential) -> Credential | None:
        return None  # nothing here can change

    def _context(self) -> ssl.SSLContext:
        cert = _material(self.user, self.entry, "client-certificate")
        key = _material(self.user, self.entry, "client-key")
        if not (cert and key):
            return self.tls.plain
        try:
            return self.tls.with_client_pem(cert, key)
        except OSError as err:  # ssl.SSLError included
            raise failed(self.user, f"failed parsing client key/certificate: {err}") from err


class TokenFile:
    """A bearer token read from a file, read again whenever the file changes."""

    def __init__(self, user: str, path: str, certificate: Static) -> None:
        self.user, self.path = user, path
        self.certificate = certificate  # the TLS side: a client certificate, if any
        self._seen: tuple[int, Credential] | None = None
        self._lock = threading.Lock()

    def current(self) -> Credential:
        context = self.certificate.current().context
        with self._lock:
            try:
                mtime = os.stat(self.path).st_mtime_ns
                if self._seen is None or self._seen[0] != mtime:
                    with open(self.path, encoding="utf-8") as f:
                        token = f.read().strip()
                    self._seen = (mtime, Credential(token, context))
            except OSError as err:
                raise failed(self.user, f"reading tokenFile {self.path}: {err.strerror}") from err
            return self._seen[1]

    def refresh(self, stale: Credential) -> Credential | None:
        fresh = self.current()
        return fresh if fresh.token != stale.token else None


def _material(user_name: str, user: dict[str, Any], name: str) -> bytes | None:
    """A certificate or key: the file named, or the inline base64 data."""
    if user.get(name):
        try:
            with open(user[name], "rb") as f:
                return f.read()
        except OSError as err:
            raise failed(user_name, f"reading {name} {user[name]}: {err.strerror}") from err
    data = user.get(f"{name}-data")
    try:
        return base64.b64decode(data) if data else None
    except ValueError as err:
        raise failed(user_name, f"decoding {name}-data: {err}") from err
