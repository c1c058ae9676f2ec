"""Measure the figures issue #30 asks for, on any checkout of kubectl-mc, with one piece of code.

Run it on main and on the commit the issue measured (`a698e13`) so both columns of the
before/after table come from the same rules:

    .venv/bin/python hack/house_figures.py [ROOT] [--json]

What is counted, over `apiserver/` and `kubectl_mc/` (tests, bench and hack are not counted):

- upward imports: an import from a module in one layer of the `layers` import-linter contract
  in ROOT's pyproject.toml into a module of a higher layer. A tree with no such contract (the
  commit before the house plan) is measured against `OLD_LAYERS` below: the layer order the
  issue's own list of upward imports implies.
- package cycles: strongly connected components of the graph whose nodes are `apiserver.X`
  and `kubectl_mc.X` (the first name below the root) and whose edges are the imports between
  them (`from P.X import`, `import P.X`, and `importlib.import_module("P.X")` with a literal).
- kind tests: a comparison against a kind name literal (`kind == "Deployment"`, `!=`, and `in`
  or `not in` a literal tuple/list/set holding one) outside the kinds module or package.
- per-kind tables: a module- or class-level name bound to a collection (a dict, set, tuple or
  list literal or comprehension, or frozenset/dict/... of one) that holds a kind name literal
  or two kinds' plurals (`"deployments"`), outside the kinds module or package.
- the largest class (lines, and its own methods) and the largest function (lines).
- explicit `Any` in function signatures: each `Any` in a parameter or return annotation.
- `Obj = dict[str, Any]` definitions; `dict[str, int | None]` written out.
- Status exception types: exception classes that are not a subclass of another one here and
  keep a `Status` body (`self.status = ...`); hand-built `{"kind": "Status", ...}` literals.
"""

from __future__ import annotations

import argparse
import ast
import json
import sys
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass, field
from itertools import pairwise
from pathlib import Path

ROOTS = ("apiserver", "kubectl_mc")

# The Kubernetes kinds kubectl-mc places, follows or serves. API meta kinds (Status, Table,
# List) are no object's kind, and kubectl-mc's own (Location, PlacementPolicy, APIImport) are
# left out: "Location" is also a column title, and no loop places them.
KIND_NAMES = frozenset(
    {
        "ClusterRole",
        "ClusterRoleBinding",
        "ConfigMap",
        "CronJob",
        "CustomResourceDefinition",
        "DaemonSet",
        "Deployment",
        "EndpointSlice",
        "Endpoints",
        "Event",
        "HorizontalPodAutoscaler",
        "Ingress",
        "IngressClass",
        "Job",
        "LimitRange",
        "Namespace",
        "NetworkPolicy",
        "Node",
        "PersistentVolume",
        "PersistentVolumeClaim",
        "Pod",
        "PodDisruptionBudget",
        "PriorityClass",
        "ReplicaSet",
        "ResourceQuota",
        "Role",
        "RoleBinding",
        "Secret",
        "Service",
        "ServiceAccount",
        "ServiceExport",
        "ServiceImport",
        "StatefulSet",
        "StorageClass",
    }
)

# The layers for a tree that has no `layers` contract (a698e13): the order the issue's own list
# of eight upward imports implies (keys.py under sync/remote/viewrows and over api/guard.py,
# placement under hubcache, locations under placement and imports), highest first.
OLD_LAYERS: list[list[str]] = [
    ["apiserver.main"],
    ["apiserver.app"],
    [
        "apiserver.admission",
        "apiserver.subresources",
        "apiserver.views",
        "apiserver.viewrows",
        "apiserver.resources",
        "apiserver.workloads",
        "apiserver.remote",
    ],
    ["apiserver.sync"],
    ["apiserver.keys"],
    ["apiserver.imports"],
    ["apiserver.hubcache"],
    ["apiserver.placement"],
    ["apiserver.locations"],
    ["apiserver.kinds", "apiserver.hubwrites"],
    ["apiserver.api", "apiserver.readlimit", "apiserver.options", "apiserver.serving"],
    [
        "apiserver.kube",
        "apiserver.leader",
        "apiserver.workqueue",
        "apiserver.fairgate",
        "apiserver.metrics",
        "apiserver.certs",
    ],
]


@dataclass
class Module:
    name: str
    path: Path
    tree: ast.Module
    lines: list[str]


@dataclass
class Figures:
    layers_source: str = ""
    upward: list[str] = field(default_factory=list)
    cycles: list[list[str]] = field(default_factory=list)
    kind_tests: list[str] = field(default_factory=list)
    kind_tables: list[str] = field(default_factory=list)
    largest_class: tuple[str, int, int] = ("", 0, 0)
    most_methods: tuple[str, int, int] = ("", 0, 0)
    largest_function: tuple[str, int] = ("", 0)
    modules: int = 0
    lines: int = 0
    functions: int = 0
    any_in_signatures: int = 0
    any_in_plugin_signatures: int = 0
    functions_with_any: int = 0
    any_words: int = 0
    obj_definitions: list[str] = field(default_factory=list)
    placement_dicts: int = 0
    status_exceptions: list[str] = field(default_factory=list)
    status_literals: list[str] = field(default_factory=list)


def modules(root: Path) -> Iterator[Module]:
    for top in ROOTS:
        for path in sorted((root / top).rglob("*.py")):
            rel = path.relative_to(root).with_suffix("")
            parts = list(rel.parts)
            if parts[-1] == "__init__":
                parts.pop()
            text = path.read_text()
            yield Module(".".join(parts), path.relative_to(root), ast.parse(text), text.split("\n"))


def imported(module: Module, known: set[str]) -> Iterator[tuple[str, int]]:
    """Every first-party module `module` imports, with its line (`from a import b`: `a.b` when
    that is a module, else `a`)."""
    package = module.name if module.path.name == "__init__.py" else module.name.rpartition(".")[0]
    for node in ast.walk(module.tree):
        if isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            if base.split(".")[0] in ROOTS:
                for alias in node.names:
                    name = f"{base}.{alias.name}"
                    yield (name if name in known else base), node.lineno
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] in ROOTS:
                    yield alias.name, node.lineno
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "import_module"
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
            and node.args[0].value.split(".")[0] in ROOTS
        ):
            yield node.args[0].value, node.lineno
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "import_module"
        ):
            # a computed name: every literal "kubectl_mc.X" string in the module is a target
            for const in ast.walk(module.tree):
                if isinstance(const, ast.Constant) and isinstance(const.value, str):
                    name = const.value.partition(":")[0]
                    words = name.split(".")
                    if words[0] in ROOTS and all(word.isidentifier() for word in words):
                        yield name, node.lineno


def existing(name: str, known: set[str]) -> str | None:
    """The longest prefix of `name` that is a module here (`from a.b import f` -> `a.b`)."""
    parts = name.split(".")
    while parts:
        candidate = ".".join(parts)
        if candidate in known:
            return candidate
        parts.pop()
    return None


def read_layers(root: Path) -> tuple[list[list[str]], str]:
    pyproject = root / "pyproject.toml"
    config = tomllib.loads(pyproject.read_text()) if pyproject.exists() else {}
    contracts = config.get("tool", {}).get("importlinter", {}).get("contracts", [])
    for contract in contracts:
        if contract.get("type") == "layers" and contract.get("layers"):
            layers = [
                [name.strip() for name in layer.replace(":", "|").split("|")]
                for layer in contract["layers"]
            ]
            return layers, f"pyproject.toml contract {contract.get('id', '?')!r}"
    return OLD_LAYERS, "OLD_LAYERS in hack/house_figures.py (no layers contract in this tree)"


def layer_of(name: str, layers: list[list[str]]) -> int | None:
    best: tuple[int, int] | None = None  # (prefix length, layer)
    for index, layer in enumerate(layers):
        for prefix in layer:
            if (name == prefix or name.startswith(prefix + ".")) and (
                best is None or len(prefix) > best[0]
            ):
                best = (len(prefix), index)
    return None if best is None else best[1]


def package_of(name: str) -> str:
    return ".".join(name.split(".")[:2])


def strongly_connected(graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's algorithm; components of more than one node, sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0

    def visit(node: str) -> None:
        nonlocal counter
        index[node] = low[node] = counter
        counter += 1
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component: list[str] = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    sys.setrecursionlimit(10_000)
    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(found)


def in_kinds(module: Module) -> bool:
    return module.name == "apiserver.kinds" or module.name.startswith("apiserver.kinds.")


def _plural(kind: str) -> str:
    lower = kind.lower()
    if lower.endswith("y"):
        return lower[:-1] + "ies"
    if lower.endswith("s"):
        return lower if lower == "endpoints" else lower + "es"
    return lower + "s"


# `deployments`, `networkpolicies`: how tables keyed by resource rather than kind name it.
KIND_PLURALS = frozenset(_plural(kind) for kind in KIND_NAMES)
COLLECTIONS = (ast.Dict, ast.Set, ast.Tuple, ast.List, ast.DictComp, ast.SetComp, ast.ListComp)
COLLECTION_CALLS = frozenset({"frozenset", "set", "dict", "tuple", "MappingProxyType"})


def kind_literal(node: ast.expr) -> bool:
    return isinstance(node, ast.Constant) and node.value in KIND_NAMES


def is_table(value: ast.expr) -> bool:
    """A collection literal (or frozenset/dict/... of one) holding kind names or plurals."""
    collection = isinstance(value, COLLECTIONS) or (
        isinstance(value, ast.Call)
        and ast.unparse(value.func).rpartition(".")[2] in COLLECTION_CALLS
    )
    if not collection:
        return False
    words = {
        node.value
        for node in ast.walk(value)
        if isinstance(node, ast.Constant) and isinstance(node.value, str)
    }
    # One kind name is enough; a lone plural may be a plain word (`pods` is also a quantity).
    return bool(words & KIND_NAMES) or len(words & KIND_PLURALS) >= 2


def literal_kinds(node: ast.expr) -> int:
    """How many kind name literals a dict's keys or a collection's elements are."""
    if isinstance(node, ast.Call) and node.args:  # frozenset({...}), MappingProxyType({...})
        return literal_kinds(node.args[0])
    if isinstance(node, ast.Dict):
        return sum(1 for key in node.keys if key is not None and kind_literal(key))
    if isinstance(node, ast.Set | ast.Tuple | ast.List):
        return sum(1 for element in node.elts if kind_literal(element))
    return 0


def kind_tests(module: Module) -> Iterator[str]:
    for node in ast.walk(module.tree):
        if not isinstance(node, ast.Compare):
            continue
        operands = [node.left, *node.comparators]
        for op, (left, right) in zip(node.ops, pairwise(operands), strict=True):
            hit = (
                isinstance(op, ast.Eq | ast.NotEq) and (kind_literal(left) or kind_literal(right))
            ) or (isinstance(op, ast.In | ast.NotIn) and literal_kinds(right) > 0)
            if hit:
                yield f"{module.path}:{node.lineno}: {ast.unparse(node)[:90]}"


def kind_tables(module: Module) -> Iterator[str]:
    bodies: list[tuple[str, list[ast.stmt]]] = [("", module.tree.body)]
    bodies += [
        (node.name + ".", node.body) for node in module.tree.body if isinstance(node, ast.ClassDef)
    ]
    for owner, body in bodies:
        for stmt in body:
            targets: list[ast.expr] = []
            value: ast.expr | None = None
            if isinstance(stmt, ast.Assign):
                targets, value = stmt.targets, stmt.value
            elif isinstance(stmt, ast.AnnAssign) and stmt.value is not None:
                targets, value = [stmt.target], stmt.value
            if value is not None and is_table(value):
                names = ", ".join(ast.unparse(target) for target in targets)
                yield f"{module.path}:{stmt.lineno}: {owner}{names}"


def is_any(node: ast.AST) -> bool:
    return (isinstance(node, ast.Name) and node.id == "Any") or (
        isinstance(node, ast.Attribute) and node.attr == "Any"
    )


def any_count(annotation: ast.expr | None) -> int:
    if annotation is None:
        return 0
    if isinstance(annotation, ast.Constant) and isinstance(annotation.value, str):
        try:
            annotation = ast.parse(annotation.value, mode="eval").body
        except SyntaxError:
            return 0
    return sum(1 for node in ast.walk(annotation) if is_any(node))


def signature_any(function: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    args = function.args
    every = [*args.posonlyargs, *args.args, *args.kwonlyargs]
    every += [arg for arg in (args.vararg, args.kwarg) if arg is not None]
    return sum(any_count(arg.annotation) for arg in every) + any_count(function.returns)


def measure(root: Path) -> Figures:
    figures = Figures()
    mods = list(modules(root))
    known = {module.name for module in mods}
    layers, figures.layers_source = read_layers(root)
    graph: dict[str, set[str]] = {}
    exception_bases: dict[str, list[str]] = {}
    keeps_status: set[str] = set()
    for module in mods:
        source = package_of(module.name)
        graph.setdefault(source, set())
        seen: set[str] = set()  # an edge is counted once per importing module
        for name, line in imported(module, known):
            target = existing(name, known)
            if target is None or target == module.name or target in seen:
                continue
            seen.add(target)
            if package_of(target) != source:
                graph[source].add(package_of(target))
            low, high = layer_of(module.name, layers), layer_of(target, layers)
            if low is not None and high is not None and high < low:
                figures.upward.append(f"{module.path}:{line}: {module.name} -> {target}")
        if not in_kinds(module) and module.name != "apiserver.kinds":
            figures.kind_tests += kind_tests(module)
            figures.kind_tables += kind_tables(module)
        for node in ast.walk(module.tree):
            where = f"{module.path}:{getattr(node, 'lineno', 0)}"
            if isinstance(node, ast.ClassDef):
                size = (node.end_lineno or node.lineno) - node.lineno + 1
                methods = sum(
                    isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef) for item in node.body
                )
                label = f"{module.path} {node.name}"
                if size > figures.largest_class[1]:
                    figures.largest_class = (label, size, methods)
                if methods > figures.most_methods[2]:
                    figures.most_methods = (label, size, methods)
                exception_bases[f"{module.name}.{node.name}"] = [
                    ast.unparse(base).rpartition(".")[2] for base in node.bases
                ]
                for item in ast.walk(node):
                    if isinstance(item, ast.Assign) and any(
                        isinstance(target, ast.Attribute)
                        and target.attr == "status"
                        and isinstance(target.value, ast.Name)
                        and target.value.id == "self"
                        for target in item.targets
                    ):
                        keeps_status.add(f"{module.name}.{node.name}")
            elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                size = (node.end_lineno or node.lineno) - node.lineno + 1
                if size > figures.largest_function[1]:
                    figures.largest_function = (f"{module.path} {node.name}", size)
                count = signature_any(node)
                figures.functions += 1
                figures.any_in_signatures += count
                if module.name.startswith("kubectl_mc"):
                    figures.any_in_plugin_signatures += count
                figures.functions_with_any += int(count > 0)
            elif isinstance(node, ast.Assign | ast.AnnAssign):
                bound = node.targets[0] if isinstance(node, ast.Assign) else node.target
                if isinstance(bound, ast.Name) and bound.id == "Obj":
                    figures.obj_definitions.append(where)
            elif isinstance(node, ast.Dict):
                pairs = zip(node.keys, node.values, strict=True)
                if any(
                    key is not None
                    and isinstance(key, ast.Constant)
                    and key.value == "kind"
                    and isinstance(value, ast.Constant)
                    and value.value == "Status"
                    for key, value in pairs
                ):
                    figures.status_literals.append(where)
        figures.modules += 1
        figures.lines += len(module.lines)
        text = "\n".join(module.lines)
        figures.placement_dicts += text.count("dict[str, int | None]")
        figures.any_words += sum(
            1
            for word in text.replace("(", " ").replace("[", " ").replace("]", " ").split()
            if word.strip(",:)\"'") == "Any"
        )
    figures.cycles = strongly_connected(graph)
    figures.status_exceptions = status_exceptions(exception_bases, keeps_status)
    return figures


def status_exceptions(bases: dict[str, list[str]], keeps_status: set[str]) -> list[str]:
    """Exception classes keeping a Status body whose bases are none of those classes."""
    short = {name.rpartition(".")[2] for name in keeps_status}
    return sorted(
        name
        for name in keeps_status
        if not any(base in short for base in bases.get(name, []))
        and any(base.endswith(("Exception", "Error")) for base in bases.get(name, []))
    )


def report(root: Path, figures: Figures) -> str:
    cls, cls_lines, cls_methods = figures.largest_class
    most, most_lines, most_methods = figures.most_methods
    fn, fn_lines = figures.largest_function
    lines = [
        f"# house figures for {root}",
        f"layers from: {figures.layers_source}",
        f"size: {figures.modules} modules, {figures.lines} lines, {figures.functions} functions",
        f"upward imports: {len(figures.upward)}",
        *(f"  {item}" for item in figures.upward),
        f"package-level import cycles: {len(figures.cycles)}",
        *(f"  {{{', '.join(component)}}}" for component in figures.cycles),
        f"kind-name tests outside apiserver/kinds: {len(figures.kind_tests)}",
        *(f"  {item}" for item in figures.kind_tests),
        f"per-kind tables outside apiserver/kinds: {len(figures.kind_tables)}",
        *(f"  {item}" for item in figures.kind_tables),
        f"largest class: {cls} ({cls_lines} lines, {cls_methods} methods)",
        f"most methods: {most} ({most_lines} lines, {most_methods} methods)",
        f"largest function: {fn} ({fn_lines} lines)",
        f"explicit Any in function signatures: {figures.any_in_signatures}"
        f" ({figures.any_in_plugin_signatures} of them in kubectl_mc; in"
        f" {figures.functions_with_any} functions; the word Any anywhere: {figures.any_words})",
        f"Obj definitions: {len(figures.obj_definitions)}",
        *(f"  {item}" for item in figures.obj_definitions),
        f"dict[str, int | None] written out: {figures.placement_dicts}",
        f"Status exception types: {len(figures.status_exceptions)}"
        f" ({', '.join(figures.status_exceptions)})",
        f'hand-built {{"kind": "Status"}} literals: {len(figures.status_literals)}',
        *(f"  {item}" for item in figures.status_literals),
    ]
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("root", nargs="?", default=".", type=Path, help="a kubectl-mc checkout")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args()
    root: Path = args.root.resolve()
    figures = measure(root)
    if args.json:
        print(json.dumps(figures.__dict__, indent=2, default=str))
    else:
        print(report(root, figures))
    return 0


if __name__ == "__main__":
    sys.exit(main())
