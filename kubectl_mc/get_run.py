"""`kubectl mc get` and `describe` as commands: from parsed flags to output and exit code.

Standard library only. Both ways into these commands end here: click's (`get_cli.py`, for
`--help`, completion and unusual command lines) and the quick path (`get_flags.py`), which
parses the usual ones without importing click.
"""

from __future__ import annotations

import sys

from kubectl_mc.hub import fail, hub_context

TYPE_CHECKING = False  # typing is not imported at run time: it costs a few milliseconds
if TYPE_CHECKING:
    from typing import NoReturn


class HubFlags:
    """kubectl's flags that choose the hub: --kubeconfig --context --cluster --user
    --request-timeout."""

    __slots__ = ("cluster", "context", "kubeconfig", "request_timeout", "user")

    def __init__(
        self,
        kubeconfig: str | None = None,
        context: str | None = None,
        cluster: str | None = None,
        user: str | None = None,
        request_timeout: str = "30s",
    ) -> None:
        self.kubeconfig, self.context, self.cluster = kubeconfig, context, cluster
        self.user, self.request_timeout = user, request_timeout


def get(
    args: tuple[str, ...],
    output: str | None,
    no_headers: bool,
    show_labels: bool,
    watch: bool,
    subresource: str | None,
    namespace: str | None,
    all_namespaces: bool,
    selector: str | None,
    field_selector: str | None,
    hub: HubFlags,
) -> NoReturn:
    from kubectl_mc import get as getting
    from kubectl_mc.kube import KubeError
    from kubectl_mc.printers import OutputError, parse_output
    from kubectl_mc.resources import UnknownResource

    opts = getting.GetOptions(
        namespace=namespace,
        all_namespaces=all_namespaces,
        selector=selector,
        field_selector=field_selector,
        no_headers=no_headers,
        show_labels=show_labels,
        watch=watch,
        subresource=subresource,
    )
    try:
        target = getting.parse_target(args)
        printer = parse_output(output)
    except (getting.GetError, UnknownResource, OutputError) as err:
        fail(f"error: {err}")
    client, context_namespace = hub_context(
        hub.kubeconfig, hub.context, hub.cluster, hub.user, hub.request_timeout
    )
    try:
        code = getting.run(client, context_namespace, target, opts, printer)
    except getting.GetError as err:
        fail(f"error: {err}")
    except KubeError as err:
        fail(str(err))
    raise SystemExit(code)


def describe(
    args: tuple[str, ...],
    namespace: str | None,
    all_namespaces: bool,
    selector: str | None,
    field_selector: str | None,
    hub: HubFlags,
) -> NoReturn:
    from kubectl_mc import describe as describing
    from kubectl_mc.get import GetError, parse_target
    from kubectl_mc.kube import KubeError
    from kubectl_mc.resources import FOLLOWERS, REMOTE, UnknownResource

    try:
        target = parse_target(args)
    except (GetError, UnknownResource) as err:
        fail(f"error: {err}")
    res = target.resource
    follower = res.group == REMOTE and res.plural in FOLLOWERS  # the hub's own, described
    if not res.has_subresources and not follower:
        fail(
            f"error: kubectl mc describe shows the hub's workloads (deployments, statefulsets, "
            f"replicasets, jobs, daemonsets) and what follows them (services, configmaps); "
            f"for {res.qualified} use kubectl describe"
        )
    if all_namespaces and target.names:
        fail("error: a resource cannot be retrieved by name across all namespaces")
    client, context_namespace = hub_context(
        hub.kubeconfig, hub.context, hub.cluster, hub.user, hub.request_timeout
    )
    namespace = None if all_namespaces else namespace or context_namespace
    keys: list[tuple[str, str]] = []
    try:
        if target.names:
            keys = [(namespace or "", name) for name in target.names]
        else:
            params = {"labelSelector": selector or "", "fieldSelector": field_selector or ""}
            where = f"/api/v1/namespaces/{namespace}" if namespace else "/api/v1"
            listed = f"{where}/{res.plural}" if follower else res.path(namespace)
            listing = client.get(listed, **{k: v for k, v in params.items() if v})
            for item in listing.get("items") or []:
                meta = item.get("metadata") or {}
                keys.append((meta.get("namespace", ""), meta.get("name", "")))
            if not keys:
                where = f" in {namespace} namespace." if namespace else ""
                print(f"No resources found{where}", file=sys.stderr, flush=True)
    except KubeError as err:
        fail(str(err))
    failed = False
    for index, (ns, name) in enumerate(keys):
        try:
            if follower:
                text = describing.describe_follower(client, res, ns, name)
            else:
                text = describing.describe(client, res, ns, name)
        except KubeError as err:
            print(str(err), file=sys.stderr, flush=True)
            failed = True
            continue
        print(("\n\n" if index else "") + text, flush=True)
    raise SystemExit(1 if failed else 0)
