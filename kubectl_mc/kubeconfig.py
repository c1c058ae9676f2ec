"""kubeconfig the way kubectl reads it: KUBECONFIG with several files, --context/--cluster/--user.

Merging follows kubectl: for every named cluster, user and context the first file that
defines it wins, and so does the first `current-context`. `flatten` makes one context
self-contained (file references inlined), which is what a Location's Secret must hold.
"""

from __future__ import annotations

import base64
import os

TYPE_CHECKING = False  # typing is not imported at run time: it costs a few milliseconds
if TYPE_CHECKING:
    from typing import Any

Config = dict[str, "Any"]


class KubeconfigError(Exception):
    """Unusable configuration; the message is what kubectl would say, near enough."""


class Selected:
    """One context resolved: its cluster and user entries, its namespace. (A plain class:
    importing dataclasses costs milliseconds: it loads inspect.)"""

    __slots__ = ("base", "cluster", "context", "namespace", "user", "user_name")

    def __init__(
        self,
        context: str,
        cluster: dict[str, Any],
        user: dict[str, Any],
        namespace: str,
        base: str,  # relative file references resolve against the file that named them
        user_name: str = "",  # errors about credentials name the user, as kubectl's do
    ) -> None:
        self.context, self.cluster, self.user = context, cluster, user
        self.namespace, self.base, self.user_name = namespace, base, user_name


def load(path: str | None) -> tuple[Config, str]:
    """The merged config and the folder of its first file."""
    if path:
        files = [path]
    else:
        env = os.environ.get("KUBECONFIG")
        files = [p for p in env.split(os.pathsep) if p] if env else []
        files = files or [os.path.join(os.path.expanduser("~"), ".kube", "config")]
    merged: Config = {"clusters": [], "users": [], "contexts": [], "current-context": None}
    for file in files:
        if not os.path.exists(file):
            if path:
                raise KubeconfigError(f"stat {file}: no such file or directory")
            continue
        try:
            with open(file, encoding="utf-8") as f:
                data = _parse(f.read())
        except ValueError as err:
            raise KubeconfigError(f'error loading config file "{file}": {err}') from err
        for section in ("clusters", "users", "contexts"):
            known = {e["name"] for e in merged[section]}
            for entry in data.get(section) or []:
                if entry.get("name") not in known:
                    merged[section].append(_absolute(entry, os.path.dirname(file)))
        merged["current-context"] = merged["current-context"] or data.get("current-context")
    return merged, (os.path.dirname(files[0]) if files else os.getcwd())


def _parse(text: str) -> Config:
    """YAML: the kubeconfig subset by `kubeconfig_yaml` (no PyYAML to import), anything
    else by PyYAML (its C loader when it is there: several times faster on base64 data)."""
    from kubectl_mc.kubeconfig_yaml import Unusual
    from kubectl_mc.kubeconfig_yaml import load as load_yaml

    try:
        data = load_yaml(text)
    except Unusual:
        data = _parse_with_pyyaml(text)
    return data if isinstance(data, dict) else {}


def _parse_with_pyyaml(text: str) -> Any:
    import yaml

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    try:
        data = yaml.load(text, Loader=loader)
    except yaml.YAMLError as err:
        raise ValueError(str(err)) from err
    return data


def select(
    config: Config,
    context: str | None = None,
    cluster: str | None = None,
    user: str | None = None,
    base: str | None = None,
) -> Selected:
    name = context or config.get("current-context")
    if not name:
        raise KubeconfigError(
            "no context chosen: set current-context in the kubeconfig or pass --context"
        )
    ctx = _named(config, "contexts", name, "context")
    cluster_name = cluster or ctx.get("cluster")
    user_name = user or ctx.get("user")
    return Selected(
        context=name,
        cluster=_named(config, "clusters", cluster_name, "cluster"),
        user=_named(config, "users", user_name, "user") if user_name else {},
        namespace=ctx.get("namespace") or "default",
        base=base or os.getcwd(),
        user_name=user_name or "",
    )


def flatten(selected: Selected) -> Config:
    """A one-context kubeconfig with every file reference inlined."""
    cluster = _inline(selected.cluster, {"certificate-authority": "certificate-authority-data"})
    user = _inline(
        selected.user,
        {"client-certificate": "client-certificate-data", "client-key": "client-key-data"},
    )
    if "tokenFile" in user:
        with open(user.pop("tokenFile"), encoding="utf-8") as f:
            user["token"] = f.read().strip()
    name = selected.context
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": name, "cluster": cluster}],
        "users": [{"name": name, "user": user}],
        "contexts": [{"name": name, "context": {"cluster": name, "user": name}}],
        "current-context": name,
    }


def _named(config: Config, section: str, name: str | None, what: str) -> dict[str, Any]:
    for entry in config.get(section) or []:
        if entry.get("name") == name:
            return dict(entry.get(what) or {})
    if what == "context":
        raise KubeconfigError(f"context was not found for specified context: {name}")
    raise KubeconfigError(f"{what} {name!r} not found in the kubeconfig")


def _absolute(entry: dict[str, Any], folder: str) -> dict[str, Any]:
    """Relative file references are relative to the kubeconfig that holds them, and so is an
    exec plugin's command when it is a path (`./bin/token`); a bare name is looked up in PATH."""
    out = dict(entry)
    for key in ("cluster", "user"):
        inner = dict(out.get(key) or {})
        for field in ("certificate-authority", "client-certificate", "client-key", "tokenFile"):
            if field in inner and not os.path.isabs(inner[field]):
                inner[field] = os.path.join(folder, inner[field])
        plugin = inner.get("exec")
        if isinstance(plugin, dict) and _relative_path(plugin.get("command")):
            inner["exec"] = {**plugin, "command": os.path.join(folder, plugin["command"])}
        if key in out:
            out[key] = inner
    return out


def _relative_path(command: object) -> bool:
    return isinstance(command, str) and os.sep in command and not os.path.isabs(command)


def _inline(entry: dict[str, Any], fields: dict[str, str]) -> dict[str, Any]:
    out = dict(entry)
    for file_field, data_field in fields.items():
        if file_field in out:
            path = out.pop(file_field)
            try:
                with open(path, "rb") as f:
                    out[data_field] = base64.b64encode(f.read()).decode()
            except OSError as err:
                raise KubeconfigError(f"cannot read {file_field} {path}: {err}") from err
    return out
