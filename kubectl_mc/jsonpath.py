"""kubectl's JSONPath templates (`-o jsonpath=…`, and the paths of `-o custom-columns=…`).

kubectl's flavour is a template language, not plain JSONPath: text outside braces is printed
as it is, `{…}` holds a path, a quoted literal (`{"\\n"}`), or `{range …}`/`{end}`. JSONPath
libraries on PyPI evaluate paths only, so the template part would be ours anyway; the paths
people write with kubectl are a small set, implemented here:

    .a.b  .a\\.b/c  ['a.b']  ['a','b']  [*]  .*  [0]  [-1]  [1:3]  [0,2]  ..name
    [?(@.type=="Ready")]  [?(@.count>1)]  [?(@.name)]  $  @

A missing key prints nothing (kubectl's default `--allow-missing-template-keys=true`).
Several results of one path are joined with a space; maps and lists print as JSON.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

_FIELD_STOP = set(".[ \t\n)=!<>,")
_OPERATORS = ("==", "!=", "<=", ">=", "<", ">")


class JSONPathError(Exception):
    """A template that does not parse; the message names the template."""


@dataclass(frozen=True)
class _Text:
    text: str


@dataclass(frozen=True)
class _Path:
    segments: tuple[tuple[Any, ...], ...]
    root: bool = False


@dataclass(frozen=True)
class _Range:
    path: _Path
    body: tuple[_Text | _Path | _Range, ...]


_Node = _Text | _Path | _Range


class Template:
    """A parsed template; `render(data)` is what kubectl prints (no newline added)."""

    def __init__(self, text: str) -> None:
        self.text = text
        try:
            self.nodes = _parse_template(text)
        except JSONPathError as err:
            raise JSONPathError(f"error parsing jsonpath {text}, {err}") from None

    def render(self, data: Any) -> str:
        return "".join(_run(self.nodes, data, data))

    def values(self, data: Any) -> list[Any]:
        """The values the template's paths select, for custom columns."""
        out: list[Any] = []
        for node in self.nodes:
            if isinstance(node, _Path):
                out.extend(_evaluate(node, data, data))
        return out


def relaxed(path: str) -> str:
    """A custom-columns path as kubectl takes it: `.a.b`, `a.b` or `{.a.b}`."""
    path = path.strip()
    if path.startswith("{"):
        return path
    if not path.startswith((".", "[", "$")):
        path = "." + path
    return "{" + path + "}"


def text_of(value: Any) -> str:
    """One value as kubectl prints it in a template."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "<nil>"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, dict | list):
        return json.dumps(value, separators=(",", ":"), sort_keys=True, ensure_ascii=False)
    return str(value)


# ---- templates


def _parse_template(text: str) -> tuple[_Node, ...]:
    stack: list[tuple[_Path | None, list[_Node]]] = [(None, [])]
    pos = 0
    while pos < len(text):
        start = text.find("{", pos)
        if start < 0:
            stack[-1][1].append(_Text(text[pos:]))
            break
        if start > pos:
            stack[-1][1].append(_Text(text[pos:start]))
        end = _action_end(text, start + 1)
        action = text[start + 1 : end].strip()
        pos = end + 1
        if action == "end":
            if len(stack) == 1:
                raise JSONPathError("not in range, nothing to end")
            path, body = stack.pop()
            assert path is not None
            stack[-1][1].append(_Range(path, tuple(body)))
        elif action.startswith("range ") or action.startswith("range\t"):
            stack.append((_parse_path(action[len("range") :].strip()), []))
        elif action[:1] in ("'", '"'):
            literal, rest = _quoted(action, 0)
            if rest != len(action):
                raise JSONPathError(f"unexpected text after {action[:rest]}")
            stack[-1][1].append(_Text(literal))
        elif action:
            stack[-1][1].append(_parse_path(action))
    if len(stack) > 1:
        raise JSONPathError("unclosed range")
    return tuple(stack[0][1])


def _action_end(text: str, pos: int) -> int:
    quote = ""
    while pos < len(text):
        char = text[pos]
        if quote:
            if char == "\\":
                pos += 1
            elif char == quote:
                quote = ""
        elif char in "\"'":
            quote = char
        elif char == "}":
            return pos
        pos += 1
    raise JSONPathError("unclosed action")


def _quoted(text: str, pos: int) -> tuple[str, int]:
    """A quoted string starting at pos (Go escapes); returns it and the index after it."""
    quote = text[pos]
    out: list[str] = []
    pos += 1
    escapes = {"n": "\n", "t": "\t", "r": "\r", "\\": "\\", '"': '"', "'": "'", "0": "\0"}
    while pos < len(text):
        char = text[pos]
        if char == "\\" and pos + 1 < len(text):
            nxt = text[pos + 1]
            if nxt == "u" and pos + 5 < len(text):
                out.append(chr(int(text[pos + 2 : pos + 6], 16)))
                pos += 6
                continue
            out.append(escapes.get(nxt, "\\" + nxt))
            pos += 2
            continue
        if char == quote:
            return "".join(out), pos + 1
        out.append(char)
        pos += 1
    raise JSONPathError(f"unterminated quoted string in {text}")


# ---- paths


def _parse_path(text: str) -> _Path:
    segments: list[tuple[Any, ...]] = []
    pos = 0
    root = False
    if text.startswith("$"):
        root, pos = True, 1
    elif text.startswith("@"):
        pos = 1
    if pos == len(text) and not root and text != "@":
        raise JSONPathError(f"unrecognized identifier {text}")
    while pos < len(text):
        if text.startswith("..", pos):
            name, pos = _field(text, pos + 2)
            segments.append(("recurse", name))
        elif text[pos] == ".":
            name, pos = _field(text, pos + 1)
            if name == "*":
                segments.append(("all",))
            elif name:
                segments.append(("field", name))
        elif text[pos] == "[":
            end = _bracket_end(text, pos)
            segments.append(_bracket(text[pos + 1 : end].strip()))
            pos = end + 1
        elif text[pos].isspace():
            pos += 1
        else:
            raise JSONPathError(f"unrecognized character in action: {text[pos:]!r}")
    return _Path(tuple(segments), root)


def _field(text: str, pos: int) -> tuple[str, int]:
    out: list[str] = []
    while pos < len(text) and text[pos] not in _FIELD_STOP:
        if text[pos] == "\\" and pos + 1 < len(text):
            pos += 1
        out.append(text[pos])
        pos += 1
    return "".join(out), pos


def _bracket_end(text: str, pos: int) -> int:
    depth, quote = 0, ""
    for index in range(pos, len(text)):
        char = text[index]
        if quote:
            if char == quote:
                quote = ""
        elif char in "\"'":
            quote = char
        elif char == "[":
            depth += 1
        elif char == "]":
            depth -= 1
            if depth == 0:
                return index
    raise JSONPathError(f"unterminated array: {text[pos:]}")


def _bracket(inner: str) -> tuple[Any, ...]:
    if inner == "*":
        return ("all",)
    if inner.startswith("?"):
        body = inner[1:].strip()
        if not (body.startswith("(") and body.endswith(")")):
            raise JSONPathError(f"invalid filter: {inner}")
        return ("filter", *_condition(body[1:-1].strip()))
    if inner[:1] in ("'", '"'):
        keys, pos = [], 0
        while pos < len(inner):
            key, pos = _quoted(inner, pos)
            keys.append(key)
            while pos < len(inner) and inner[pos] in " ,":
                pos += 1
        return ("keys", tuple(keys))
    if ":" in inner:
        parts = [p.strip() for p in inner.split(":")]
        if len(parts) > 3:
            raise JSONPathError(f"invalid slice: [{inner}]")
        try:
            bounds = [int(p) if p else None for p in parts]
        except ValueError:
            raise JSONPathError(f"invalid slice: [{inner}]") from None
        return ("slice", *bounds, *([None] * (3 - len(bounds))))
    try:
        return ("indexes", tuple(int(p) for p in inner.split(",")))
    except ValueError:
        raise JSONPathError(f"invalid array index: [{inner}]") from None


def _condition(text: str) -> tuple[Any, ...]:
    """`@.a == "x"` → (path, op, operand); `@.a` alone → (path, None, None)."""
    quote, depth = "", 0
    for index, char in enumerate(text):
        if quote:
            if char == quote:
                quote = ""
            continue
        if char in "\"'":
            quote = char
            continue
        depth += {"[": 1, "]": -1}.get(char, 0)
        if depth:
            continue
        for op in _OPERATORS:
            if text.startswith(op, index):
                left = _operand(text[:index].strip())
                right = _operand(text[index + len(op) :].strip())
                return (left, op, right)
    return (_operand(text), None, None)


def _operand(text: str) -> Any:
    if text.startswith(("@", "$")):
        return _parse_path(text)
    if text[:1] in ("'", '"'):
        return _quoted(text, 0)[0]
    for number in (int, float):
        try:
            return number(text)
        except ValueError:
            pass
    if text in ("true", "false"):
        return text == "true"
    raise JSONPathError(f"unrecognized filter operand: {text}")


# ---- evaluation


def _run(nodes: tuple[_Node, ...], root: Any, current: Any) -> list[str]:
    out: list[str] = []
    for node in nodes:
        if isinstance(node, _Text):
            out.append(node.text)
        elif isinstance(node, _Path):
            out.append(" ".join(text_of(v) for v in _evaluate(node, root, current)))
        else:
            for value in _evaluate(node.path, root, current):
                out.extend(_run(node.body, root, value))
    return out


def _evaluate(path: _Path, root: Any, current: Any) -> list[Any]:
    values = [root if path.root else current]
    for segment in path.segments:
        values = [out for value in values for out in _step(segment, value, root)]
    return values


def _step(segment: tuple[Any, ...], value: Any, root: Any) -> list[Any]:
    op = segment[0]
    if op == "field":
        return [value[segment[1]]] if isinstance(value, dict) and segment[1] in value else []
    if op == "keys":
        if not isinstance(value, dict):
            return []
        return [value[k] for k in segment[1] if k in value]
    if op == "all":
        if isinstance(value, dict):
            return [value[k] for k in sorted(value)]
        return list(value) if isinstance(value, list) else []
    if op == "recurse":
        return _recurse(value, segment[1])
    if not isinstance(value, list):
        return []
    if op == "indexes":
        return [value[i] for i in segment[1] if -len(value) <= i < len(value)]
    if op == "slice":
        return value[segment[1] : segment[2] : segment[3]]
    left, operator, right = segment[1:]
    return [item for item in value if _matches(item, left, operator, right, root)]


def _recurse(value: Any, name: str) -> list[Any]:
    out: list[Any] = []
    if isinstance(value, dict):
        if name in ("", "*"):
            out.extend(value.values())
        elif name in value:
            out.append(value[name])
        for child in value.values():
            out.extend(_recurse(child, name))
    elif isinstance(value, list):
        if name in ("", "*"):
            out.extend(value)
        for child in value:
            out.extend(_recurse(child, name))
    return out


def _matches(item: Any, left: Any, operator: str | None, right: Any, root: Any) -> bool:
    lefts = _evaluate(left, root, item) if isinstance(left, _Path) else [left]
    if operator is None:
        return any(v not in (None, False, "", 0) for v in lefts)
    rights = _evaluate(right, root, item) if isinstance(right, _Path) else [right]
    return any(_compare(a, operator, b) for a in lefts for b in rights)


def _compare(a: Any, operator: str, b: Any) -> bool:
    both_numbers = all(isinstance(x, int | float) and not isinstance(x, bool) for x in (a, b))
    if not both_numbers and not (isinstance(a, str) and isinstance(b, str)):
        a, b = text_of(a), text_of(b)
        if operator not in ("==", "!="):
            return False
    if operator == "==":
        return bool(a == b)
    if operator == "!=":
        return bool(a != b)
    if operator == "<":
        return bool(a < b)
    if operator == ">":
        return bool(a > b)
    if operator == "<=":
        return bool(a <= b)
    return bool(a >= b)
