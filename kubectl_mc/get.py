"""`kubectl mc get`: the server's Tables for our three API groups, printed like `kubectl get`.

What kubectl cannot do, the plugin adds: `--subresource locations|strategy` on a list (one
request per object, concurrently, in one table with a leading NAME column) and a short
name for every view (`kubectl mc get deploy` is `deployments.mc.kmc.dev`, see
`resources.py`). Everything else is kubectl's behaviour: errors printed as they come, what
could be read still printed, exit 1 if anything failed.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from functools import partial

from kubectl_mc.kube import JSON, TABLE, Client, KubeError, Obj
from kubectl_mc.printers import Output, TableView, as_list, print_objects, typed_items
from kubectl_mc.resources import SUBRESOURCES, Resource, resolve


class GetError(Exception):
    """A command line that cannot work; the message is kubectl's `error: …` line."""


class GetOptions:
    """The flags of `kubectl mc get` besides -o. (Plain classes here and in the modules
    `get` loads: importing dataclasses costs milliseconds: it loads inspect.)"""

    __slots__ = (
        "all_namespaces",
        "field_selector",
        "namespace",
        "no_headers",
        "selector",
        "show_labels",
        "subresource",
        "watch",
    )

    def __init__(
        self,
        namespace: str | None = None,  # None: the context's
        all_namespaces: bool = False,
        selector: str | None = None,
        field_selector: str | None = None,
        no_headers: bool = False,
        show_labels: bool = False,
        watch: bool = False,
        subresource: str | None = None,
    ) -> None:
        self.namespace, self.all_namespaces = namespace, all_namespaces
        self.selector, self.field_selector = selector, field_selector
        self.no_headers, self.show_labels = no_headers, show_labels
        self.watch, self.subresource = watch, subresource


class Target:
    """What to get: one resource type, and names (none: the list)."""

    __slots__ = ("names", "resource")

    def __init__(self, resource: Resource, names: tuple[str, ...]) -> None:
        self.resource, self.names = resource, names


def parse_target(args: tuple[str, ...]) -> Target:
    """`TYPE [NAME…]` or `TYPE/NAME…` (one type), as kubectl takes them."""
    if not args:
        raise GetError(
            "Required resource not specified.\n"
            "See 'kubectl mc get -h' for the resource types and examples."
        )
    if "/" in args[0]:
        pairs = [arg.partition("/") for arg in args]
        if any(not sep or not name for _, sep, name in pairs):
            raise GetError(
                "there is no need to specify a resource type as a separate argument when "
                "passing arguments in resource/name form"
            )
        resources = {resolve(kind) for kind, _, _ in pairs}
        if len(resources) > 1:
            raise GetError("kubectl mc get takes one resource type at a time")
        return Target(resources.pop(), tuple(name for _, _, name in pairs))
    if "," in args[0]:
        raise GetError("kubectl mc get takes one resource type at a time")
    return Target(resolve(args[0]), tuple(args[1:]))


def out(text: str) -> None:
    if text:
        print(text, flush=True)


def err(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def run(
    client: Client, context_namespace: str, target: Target, opts: GetOptions, output: Output
) -> int:
    """Print what was asked; the exit code (1 if anything failed)."""
    res, names = target.resource, target.names
    if opts.all_namespaces and names and res.namespaced:
        raise GetError("a resource cannot be retrieved by name across all namespaces")
    if opts.subresource:
        if opts.subresource not in SUBRESOURCES:
            raise GetError(
                f'invalid subresource value: "{opts.subresource}". '
                f"Must be one of [{' '.join(SUBRESOURCES)}]"
            )
        if not res.has_subresources:
            raise GetError(
                f"{res.qualified} has no sub-resource {opts.subresource}: it is served for "
                "the hub's deployments, statefulsets, replicasets, jobs and daemonsets"
            )
        if opts.watch:
            raise GetError("--watch is not supported with --subresource")
    if opts.watch and len(names) > 1:
        raise GetError(
            "watch is only supported on individual resources and resource collections, "
            f"but {len(names)} resources were found"
        )
    everywhere = opts.all_namespaces or not res.namespaced
    namespace = None if everywhere else (opts.namespace or context_namespace)
    params = {}
    if opts.selector:
        params["labelSelector"] = opts.selector
    if opts.field_selector:
        params["fieldSelector"] = opts.field_selector
    getter = _Getter(client, res, namespace, names, params, opts, output)
    if opts.watch:
        return getter.watch()
    if opts.subresource:
        return getter.subresources(opts.subresource)
    return getter.objects()


class _Getter:
    def __init__(
        self,
        client: Client,
        res: Resource,
        namespace: str | None,
        names: tuple[str, ...],
        params: dict[str, str],
        opts: GetOptions,
        output: Output,
    ) -> None:
        self.client, self.res, self.namespace, self.names = client, res, namespace, names
        self.params, self.opts, self.output = params, opts, output
        self.failed = False

    def view(self, leading: tuple[str, ...] = ()) -> TableView:
        return TableView(
            wide=self.output.wide,
            no_headers=self.opts.no_headers,
            show_labels=self.opts.show_labels,
            namespace_column=self.opts.all_namespaces and self.res.namespaced,
            leading=leading,
        )

    def fail(self, error: KubeError) -> None:
        err(str(error))
        self.failed = True

    def none_found(self) -> None:
        if self.names:
            return
        if self.namespace:
            err(f"No resources found in {self.namespace} namespace.")
        else:
            err("No resources found")

    def objects(self) -> int:
        path = self.res.path
        if self.output.is_table:
            tables = []
            if self.names:
                for name in self.names:
                    try:
                        tables.append(self.client.table(path(self.namespace, name)))
                    except KubeError as error:
                        self.fail(error)
            else:
                tables.append(self.client.table(path(self.namespace), **self.params))
            self.print_tables(tables)
            return int(self.failed)
        if self.names:
            items = []
            for name in self.names:
                try:
                    items.append(self.client.get(path(self.namespace, name)))
                except KubeError as error:
                    self.fail(error)
        else:
            items = typed_items(self.client.get(path(self.namespace), **self.params))
        self.print_items(items)
        return int(self.failed)

    def subresources(self, sub: str) -> int:
        keys: list[tuple[str | None, str]]
        if self.names:
            keys = [(self.namespace, name) for name in self.names]
        else:
            listing = self.client.table(self.res.path(self.namespace), **self.params)
            keys = []
            for row in listing.get("rows") or []:
                meta = (row.get("object") or {}).get("metadata") or {}
                keys.append((meta.get("namespace") or self.namespace, meta.get("name", "")))
        fetch = self.client.table if self.output.is_table else self.client.get
        answers = _concurrently([partial(fetch, self.res.path(ns, n, sub)) for ns, n in keys])
        named = len(self.names) != 1
        if self.output.is_table:
            view = self.view(("NAME",) if named else ())
            lines: list[list[object]] = []
            first: Obj | None = None
            for (ns, name), answer in zip(keys, answers, strict=True):
                if isinstance(answer, KubeError):
                    self._fail_unless_gone(answer)
                    continue
                first = first or answer
                rows = view.rows(answer, (name,) if named else ())
                if view.namespace_column:
                    for row in rows:
                        row[0] = ns or ""
                lines.extend(rows)
            if first is None or not lines:
                self.none_found()
            else:
                out(view.print_rows(first, lines))
            return int(self.failed)
        items = []
        for answer in answers:
            if isinstance(answer, KubeError):
                self._fail_unless_gone(answer)
            else:
                items.append(answer)
        self.print_items(items)
        return int(self.failed)

    def _fail_unless_gone(self, error: KubeError) -> None:
        """An object listed but deleted before its sub-resource was read is not an error."""
        if self.names or error.code != 404:
            self.fail(error)

    def print_tables(self, tables: list[Obj]) -> None:
        view = self.view()
        rows = [row for table in tables for row in view.rows(table)]
        if not rows:
            if not self.failed:
                self.none_found()
            return
        out(view.print_rows(tables[0], rows))

    def print_items(self, items: list[Obj]) -> None:
        if self.failed and not items:
            return
        single = len(self.names) == 1 and len(items) == 1
        data = items[0] if single else as_list(items)
        out(print_objects(self.output, data, self.opts.no_headers))

    def watch(self) -> int:
        params = dict(self.params)
        if self.names:
            selector = f"metadata.name={self.names[0]}"
            fields = params.get("fieldSelector")
            params["fieldSelector"] = f"{fields},{selector}" if fields else selector
        path = self.res.path(self.namespace)
        if self.output.is_table:
            view = self.view()
            listing = self.client.table(path, **params)
            printed: Obj | None = listing if listing.get("rows") else None
            if printed is not None:
                out(view.print_rows(listing, view.rows(listing)))
            accept = TABLE
        else:
            listing = self.client.get(path, **params)
            for item in typed_items(listing):
                self.print_event_object(item)
            accept = JSON
        version = (listing.get("metadata") or {}).get("resourceVersion")
        if version:
            params["resourceVersion"] = version
        params["allowWatchBookmarks"] = "true"
        for event in self.client.watch(path, params, accept=accept):
            kind, obj = event.get("type"), event.get("object") or {}
            if kind == "BOOKMARK":
                continue
            if kind == "ERROR":
                reason = obj.get("reason") or "Unknown"
                err(f"Error from server ({reason}): {obj.get('message', '')}")
                return 1
            if self.output.is_table:
                if obj.get("kind") == "Table":
                    out(view.print_rows(printed or obj, view.rows(obj)))
                    printed = printed or obj
            else:
                self.print_event_object(obj)
        return 0

    def print_event_object(self, obj: Obj) -> None:
        text = print_objects(self.output, obj, self.opts.no_headers)
        if self.output.format == "yaml":
            text = "---\n" + text
        out(text)


def _concurrently(calls: list[Callable[[], Obj]]) -> list[Obj | KubeError]:
    """Run GETs on a few threads (the client reuses its connections); errors are returned."""
    from concurrent.futures import ThreadPoolExecutor

    def one(call: Callable[[], Obj]) -> Obj | KubeError:
        try:
            return call()
        except KubeError as error:
            return error

    if len(calls) <= 1:
        return [one(c) for c in calls]
    with ThreadPoolExecutor(max_workers=min(8, len(calls))) as pool:
        return list(pool.map(one, calls))
