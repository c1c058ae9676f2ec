"""Turn a kubeconfig (the hub's file, or a child's from its Location Secret) into Credentials.

kubernetes_asyncio's loader does the parsing: file and inline credentials, tokens, exec
plugins. We only take what it resolved — server, CA, client certificate, token — and build
an `ssl.SSLContext` for our own aiohttp session.
"""

from __future__ import annotations

import asyncio
import ssl
from pathlib import Path

import yaml
from kubernetes_asyncio.client import Configuration
from kubernetes_asyncio.config.config_exception import ConfigException
from kubernetes_asyncio.config.kube_config import KubeConfigLoader

from apiserver.kube.client import Credentials
from apiserver.objects import Obj


class KubeconfigError(ValueError):
    """A kubeconfig that cannot be used; the message says why."""


async def from_dict(config: Obj, context: str | None = None) -> Credentials:
    configuration = Configuration()
    try:
        loader = KubeConfigLoader(config_dict=config, active_context=context)
        await loader.load_and_set(configuration)
    except (ConfigException, KeyError, TypeError, ValueError) as err:
        raise KubeconfigError(f"unusable kubeconfig: {err}") from err
    if not configuration.host:
        raise KubeconfigError("unusable kubeconfig: no server")

    async def renew() -> Credentials:
        # The loader again: an exec plugin is run again, a tokenFile read again.
        return await from_dict(config, context)

    return Credentials(
        server=configuration.host.rstrip("/"),
        ssl=_ssl_context(configuration),
        token=_token(configuration),
        renew=renew,
    )


async def from_file(path: str | Path, context: str | None = None) -> Credentials:
    try:
        text = await asyncio.to_thread(Path(path).read_text)
        config = yaml.safe_load(text)
    except (OSError, yaml.YAMLError) as err:
        raise KubeconfigError(f"cannot read kubeconfig {path}: {err}") from err
    if not isinstance(config, dict):
        raise KubeconfigError(f"{path} is not a kubeconfig")
    return await from_dict(config, context)


def parse(text: str) -> Obj:
    """A kubeconfig's text (from a Secret) as a dict, or KubeconfigError."""
    try:
        config = yaml.safe_load(text)
    except yaml.YAMLError as err:
        raise KubeconfigError(f"not YAML: {err}") from err
    if not isinstance(config, dict) or "clusters" not in config:
        raise KubeconfigError("not a kubeconfig (no clusters)")
    return config


def _ssl_context(configuration: Configuration) -> ssl.SSLContext | bool:
    if not configuration.verify_ssl:
        return False
    context = ssl.create_default_context(cafile=configuration.ssl_ca_cert or None)
    if configuration.cert_file and configuration.key_file:
        context.load_cert_chain(configuration.cert_file, configuration.key_file)
    return context


def _token(configuration: Configuration) -> str | None:
    value = configuration.api_key.get("BearerToken") or configuration.api_key.get("authorization")
    if not value:
        return None
    token = str(value)
    return token.removeprefix("Bearer ").strip()


SERVICE_ACCOUNT = Path("/var/run/secrets/kubernetes.io/serviceaccount")


def in_cluster() -> Credentials:
    """The pod's own ServiceAccount, as every in-cluster client finds it: its files in
    /var/run/secrets/kubernetes.io/serviceaccount, or the folder `KMC_SERVICE_ACCOUNT_DIR`
    names (the test bed runs the in-cluster path with that, outside a pod)."""
    import os

    account = Path(os.environ.get("KMC_SERVICE_ACCOUNT_DIR") or SERVICE_ACCOUNT)
    host, port = (
        os.environ.get("KUBERNETES_SERVICE_HOST"),
        os.environ.get("KUBERNETES_SERVICE_PORT"),
    )
    if not host or not port or not (account / "token").is_file():
        raise KubeconfigError(
            "no --kubeconfig and not running in a pod: pass --kubeconfig for the hub"
        )
    context = ssl.create_default_context(cafile=str(account / "ca.crt"))
    server = f"https://{'[' + host + ']' if ':' in host else host}:{port}"

    async def renew() -> Credentials:
        # The kubelet rotates the projected token in place: read it again.
        token = await asyncio.to_thread((account / "token").read_text)
        return Credentials(server, context, token.strip(), renew)

    return Credentials(server, context, (account / "token").read_text().strip(), renew)
