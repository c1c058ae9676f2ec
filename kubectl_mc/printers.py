"""`-o` formats printed the way kubectl prints them.

Tables come from the server (`meta.k8s.io/v1` Table: its column definitions and formatted
cells), so the plugin prints what `kubectl get` would, plus kubectl's own extra columns:
NAMESPACE first with `-A`, LABELS last with `--show-labels`, priority columns with `-o wide`.
Everything else prints objects: `json` and `yaml` as a `List` for more than one (keys
sorted, 4-space JSON), `name` as `kind.group/name`, and JSONPath templates.
"""

from __future__ import annotations

import json

from kubectl_mc.table import Columns

TYPE_CHECKING = False  # typing is not imported at run time: it costs a few milliseconds
if TYPE_CHECKING:
    from typing import Any

    from kubectl_mc.kube import Obj

FORMATS = ("custom-columns", "json", "jsonpath", "name", "wide", "yaml")


class OutputError(Exception):
    """An `-o` value we cannot print; the message is kubectl's."""


class Output:
    """An `-o` value understood. (Plain classes here: importing dataclasses costs more than
    kubectl's whole start.)"""

    __slots__ = ("argument", "format")

    def __init__(self, format: str, argument: str = "") -> None:
        self.format = format  # "" (table), or one of FORMATS
        self.argument = argument

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Output) and (self.format, self.argument) == (
            other.format,
            other.argument,
        )

    def __hash__(self) -> int:
        return hash((self.format, self.argument))

    def __repr__(self) -> str:
        return f"Output({self.format!r}, {self.argument!r})"

    @property
    def is_table(self) -> bool:
        return self.format in ("", "wide")

    @property
    def wide(self) -> bool:
        return self.format == "wide"


def parse_output(text: str | None) -> Output:
    if not text:
        return Output("")
    name, sep, argument = text.partition("=")
    if name in ("json", "yaml", "name", "wide") and not sep:
        return Output(name)
    if name == "jsonpath" and sep:
        if not argument:
            raise OutputError("template format specified but no template given")
        _check_templates([argument])  # a template that does not parse fails before any request
        return Output(name, argument)
    if name == "custom-columns" and sep:
        if not argument:
            raise OutputError("custom-columns format specified but no custom columns given")
        paths = []
        for spec in argument.split(","):
            header, colon, path = spec.partition(":")
            if not colon or not header or not path:
                raise OutputError(
                    f"unexpected custom-columns spec: {spec}, expected <header>:<json-path-expr>"
                )
            paths.append(path)
        from kubectl_mc.jsonpath import relaxed

        _check_templates([relaxed(path) for path in paths])
        return Output(name, argument)
    raise OutputError(
        f'unable to match a printer suitable for the output format "{text}", '
        f"allowed formats are: {','.join(FORMATS)}"
    )


def _check_templates(templates: list[str]) -> None:
    from kubectl_mc.jsonpath import JSONPathError, Template

    for template in templates:
        try:
            Template(template)
        except JSONPathError as err:
            raise OutputError(str(err)) from None


# ---- server tables


class TableView:
    """How to print server Tables: which columns, and kubectl's extra ones."""

    def __init__(
        self,
        wide: bool = False,
        no_headers: bool = False,
        show_labels: bool = False,
        namespace_column: bool = False,
        leading: tuple[
            str, ...
        ] = (),  # our own columns before the server's (NAME for sub-resources)
    ) -> None:
        self.wide, self.no_headers, self.show_labels = wide, no_headers, show_labels
        self.namespace_column, self.leading = namespace_column, leading
        self.columns: Columns | None = None
        self._picked: list[int] | None = None

    def headers(self, table: Obj) -> list[str]:
        defs = table.get("columnDefinitions") or []
        self._picked = [i for i, c in enumerate(defs) if self.wide or not c.get("priority")]
        names = [str(defs[i].get("name", "")) for i in self._picked]
        extra = ["NAMESPACE"] if self.namespace_column else []
        return [*extra, *self.leading, *names, *(["LABELS"] if self.show_labels else [])]

    def rows(self, table: Obj, leading: tuple[str, ...] = ()) -> list[list[object]]:
        if self._picked is None:
            self.headers(table)
        assert self._picked is not None
        out = []
        for row in table.get("rows") or []:
            cells = row.get("cells") or []
            meta = (row.get("object") or {}).get("metadata") or {}
            line: list[object] = [meta.get("namespace", "")] if self.namespace_column else []
            line.extend(leading)
            line.extend(_cell(cells[i]) if i < len(cells) else "" for i in self._picked)
            if self.show_labels:
                line.append(labels_text(meta.get("labels")))
            out.append(line)
        return out

    def print_rows(self, table: Obj, rows: list[list[object]]) -> str:
        """Rows as text; the header too the first time anything is printed."""
        first = self.columns is None
        if self.columns is None:
            self.columns = Columns(self.headers(table), self.no_headers)
        return self.columns.lines(rows, with_header=first)


def _cell(value: object) -> object:
    if value is None:
        return "<none>"
    if isinstance(value, dict | list):
        return json.dumps(value, separators=(",", ":"))
    return value


def labels_text(labels: dict[str, str] | None) -> str:
    if not labels:
        return "<none>"
    return ",".join(f"{k}={v}" for k, v in sorted(labels.items()))


# ---- objects


def as_list(items: list[Obj]) -> Obj:
    """What kubectl prints for several objects."""
    return {"apiVersion": "v1", "items": items, "kind": "List", "metadata": {"resourceVersion": ""}}


def dump_json(obj: Any) -> str:
    return json.dumps(obj, indent=4, sort_keys=True, ensure_ascii=False)


def dump_yaml(obj: Any) -> str:
    """YAML as kubectl writes it: sorted keys, block style, no line folding, and strings
    that need quotes in double quotes (PyYAML's own choice is single quotes)."""
    import yaml

    class GoStyle(yaml.SafeDumper):
        def choose_scalar_style(self) -> Any:
            style = super().choose_scalar_style()
            return '"' if style == "'" else style

    text: str = yaml.dump(
        obj,
        Dumper=GoStyle,
        sort_keys=True,
        default_flow_style=False,
        allow_unicode=True,
        width=1 << 30,
    )
    return text.rstrip("\n")


def name_of(obj: Obj) -> str:
    """`deployment.mc.kmc.dev/web`, `pod.remote.kmc.dev/web-1`: kubectl's `-o name`."""
    group = str(obj.get("apiVersion", "")).rpartition("/")[0]
    kind = str(obj.get("kind", "")).lower()
    name = (obj.get("metadata") or {}).get("name", "")
    return f"{kind}.{group}/{name}" if group else f"{kind}/{name}"


def print_objects(output: Output, data: Obj, no_headers: bool = False) -> str:
    """One object, or a `List` of them, in a non-table format. '' when there is nothing."""
    items = data["items"] if data.get("kind") == "List" else [data]
    if output.format == "json":
        return dump_json(data)
    if output.format == "yaml":
        return dump_yaml(data)
    if output.format == "name":
        return "\n".join(name_of(item) for item in items)
    from kubectl_mc.jsonpath import Template, relaxed, text_of

    if output.format == "jsonpath":
        return Template(output.argument).render(data)
    specs = [spec.partition(":") for spec in output.argument.split(",")]
    templates = [Template(relaxed(path)) for _, _, path in specs]
    rows = []
    for item in items:
        row = []
        for template in templates:
            values = template.values(item)
            row.append(",".join(text_of(v) for v in values) if values else "<none>")
        rows.append(row)
    columns = Columns([header for header, _, _ in specs], no_headers)
    if not rows:
        return "" if no_headers else "   ".join(columns.headers)
    return columns.lines(rows, with_header=True)


def typed_items(listing: Obj) -> list[Obj]:
    """A list's items with apiVersion and kind, as kubectl prints them."""
    kind = str(listing.get("kind", "")).removesuffix("List")
    api_version = listing.get("apiVersion", "")
    return [{"apiVersion": api_version, "kind": kind, **item} for item in listing.get("items", [])]
