"""The YAML a kubeconfig is written in, read without PyYAML.

Importing PyYAML costs more than the rest of `kubectl mc get` together, and kubeconfigs use
a small part of YAML: block mappings and sequences, one-line scalars (plain, 'single' or
"double" quoted), comments, `{}` and `[]`. That part is read here, with PyYAML's own rules
for what a plain scalar means (`true`, `null`, `42`, `--region` a string). Anything outside
it — anchors, tags, block or multi-line scalars, flow collections with content, numbers
other than plain integers, dates — raises `Unusual`, and the caller hands the text to
PyYAML, so a file is never read differently, only sometimes more slowly. A property test
holds the two to the same answers.

Parsing the file each time rather than caching the result as JSON: on the test bed's
kubeconfig (9 KB, three certificates) this reader takes about 1 ms and `json.loads` of a
cache 0.1 ms (on a loaded machine; docs/architecture.md), a difference lost in a command's
noise, while a cache would be one more copy of the user's credentials on disk.
"""

from __future__ import annotations

import re

TYPE_CHECKING = False  # typing is not imported at run time: it costs a few milliseconds
if TYPE_CHECKING:
    from typing import Any


class Unusual(ValueError):
    """YAML this reader leaves to PyYAML."""


_BOOLS = {
    word: value
    for words, value in (("yes true on", True), ("no false off", False))
    for base in words.split()
    for word in (base, base.capitalize(), base.upper())
}
_NULLS = frozenset({"~", "null", "Null", "NULL"})
_DECIMAL = re.compile(r"[-+]?(?:0|[1-9][0-9]*)")
# PyYAML's implicit resolvers for what else a plain scalar starting with these may be.
_OTHER_TYPES = re.compile(
    r"""[-+]?0b[0-1_]+|[-+]?0[0-7_]+|[-+]?(?:0|[1-9][0-9_]*)|[-+]?0x[0-9a-fA-F_]+
    |[-+]?[1-9][0-9_]*(?::[0-5]?[0-9])+
    |[-+]?(?:[0-9][0-9_]*)\.[0-9_]*(?:[eE][-+][0-9]+)?|\.[0-9][0-9_]*(?:[eE][-+][0-9]+)?
    |[-+]?[0-9][0-9_]*(?::[0-5]?[0-9])+\.[0-9_]*|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN)
    |[0-9][0-9][0-9][0-9]-[0-9][0-9]?-[0-9][0-9]?
     (?:(?:[Tt]|[ \t]+)[0-9][0-9]?:[0-9][0-9]:[0-9][0-9](?:\.[0-9]*)?
     (?:[ \t]*(?:Z|[-+][0-9][0-9]?(?::[0-9][0-9])?))?)?
    |<<|=""",
    re.VERBOSE,
)
_ESCAPES = {
    "\\": "\\", '"': '"', "/": "/", "n": "\n", "t": "\t", "r": "\r", "b": "\b", "f": "\f",
    "0": "\0", " ": " ",
}  # fmt: skip
_HEX_ESCAPES = {"x": 2, "u": 4, "U": 8}
_INDICATORS = frozenset("&*!|>%@`?{}[],")


def load(text: str) -> Any:
    """The document, as PyYAML's safe loader would return it; raises Unusual."""
    lines: list[tuple[int, str]] = []
    for raw in text.splitlines():
        content = raw.lstrip(" ")
        if not content or content[0] == "#":
            continue
        if content[0] == "\t" or raw.startswith(("%", "---", "...")):
            if raw.rstrip() == "---" and not lines:
                continue  # a document start
            raise Unusual("tab, directive or document marker")
        lines.append((len(raw) - len(content), content.rstrip(" \t")))
    if not lines:
        return None
    reader = _Reader(lines)
    value = reader.block(lines[0][0])
    if reader.pos != len(lines):
        raise Unusual(f"line {reader.pos}: not part of the document's structure")
    return value


def _is_item(content: str) -> bool:
    return content == "-" or content.startswith("- ")


class _Reader:
    def __init__(self, lines: list[tuple[int, str]]) -> None:
        self.lines, self.pos = lines, 0

    def block(self, indent: int) -> Any:
        if _is_item(self.lines[self.pos][1]):
            return self.sequence(indent)
        return self.mapping(indent)

    def nested(self, indent: int) -> Any:
        """The block below a line ending in `:` or `-`, if the next line is deeper."""
        if self.pos < len(self.lines) and self.lines[self.pos][0] > indent:
            return self.block(self.lines[self.pos][0])
        return None

    def sequence(self, indent: int) -> list[Any]:
        out: list[Any] = []
        while self.pos < len(self.lines):
            at, content = self.lines[self.pos]
            if at != indent or not _is_item(content):
                break
            rest = content[1:].lstrip(" ")
            if not rest or rest[0] == "#":
                self.pos += 1
                out.append(self.nested(indent))
            elif _is_item(rest):
                raise Unusual("a sequence inside a sequence's item")
            elif _entry(rest) is not None:
                column = at + len(content) - len(rest)
                self.lines[self.pos] = (column, rest)  # the item is a mapping from here on
                out.append(self.mapping(column))
            else:
                self.pos += 1
                out.append(scalar(rest))
        self.check_dedent(indent)
        return out

    def mapping(self, indent: int) -> dict[Any, Any]:
        out: dict[Any, Any] = {}
        while self.pos < len(self.lines):
            at, content = self.lines[self.pos]
            if at != indent or _is_item(content):
                break
            entry = _entry(content)
            if entry is None:
                raise Unusual(f"line {self.pos}: expected `key: value`")
            key, rest = entry
            self.pos += 1
            if rest:
                out[key] = scalar(rest)
            elif (
                self.pos < len(self.lines)
                and self.lines[self.pos][0] == indent
                and _is_item(self.lines[self.pos][1])
            ):
                out[key] = self.sequence(indent)  # `key:` then `- item` at the key's column
            else:
                out[key] = self.nested(indent)
        self.check_dedent(indent)
        return out

    def check_dedent(self, indent: int) -> None:
        if self.pos < len(self.lines) and self.lines[self.pos][0] > indent:
            raise Unusual(f"line {self.pos}: a continued scalar or a stray indent")


def _entry(content: str) -> tuple[str, str] | None:
    """(key, what follows `: `) for a `key: value` line; None for anything else."""
    if content[0] in "'\"":
        key, end = _quoted(content)
        after = content[end:]
        if not (after == ":" or after.startswith(": ")):
            return None
        return key, after[1:].lstrip(" ")
    colon = content.find(": ")
    if colon < 0:
        if not content.endswith(":"):
            return None
        colon = len(content) - 1
    text = content[:colon].rstrip(" ")
    plain = scalar(text) if text else None
    if not isinstance(plain, str) or not plain:
        raise Unusual(f"key {text!r}")
    return plain, content[colon + 1 :].lstrip(" ")


def scalar(text: str) -> Any:
    """A one-line scalar (comments after it dropped)."""
    first = text[0]
    if first in "'\"":
        value, end = _quoted(text)
        tail = text[end:].lstrip(" ")
        if tail and tail[0] != "#":
            raise Unusual(f"after a quoted scalar: {tail!r}")
        return value
    if first == "#":
        return None
    if text in ("{}", "[]") or text.startswith(("{} #", "[] #", "{}\t", "[]\t")):
        return {} if first == "{" else []
    if first in _INDICATORS or (first in "-:" and text[1:2] in ("", " ")):
        raise Unusual(f"scalar {text!r}")
    comment = text.find(" #")
    if comment >= 0:
        text = text[:comment].rstrip(" ")
    if ": " in text or text.endswith(":") or "\t" in text:
        raise Unusual(f"scalar {text!r}")
    if text in _BOOLS:
        return _BOOLS[text]
    if text in _NULLS:
        return None
    if _DECIMAL.fullmatch(text):
        return int(text)
    if text[0] in "-+0123456789.<=" and _OTHER_TYPES.fullmatch(text):
        raise Unusual(f"a number or date: {text!r}")
    return text


def _quoted(text: str) -> tuple[str, int]:
    """A quoted scalar at the start of `text`, and where it ends."""
    quote, out, i = text[0], [], 1
    while i < len(text):
        char = text[i]
        if char == quote:
            if quote == "'" and text[i + 1 : i + 2] == "'":
                out.append("'")
                i += 2
                continue
            return "".join(out), i + 1
        if char == "\\" and quote == '"':
            code = text[i + 1 : i + 2]
            if code in _ESCAPES:
                out.append(_ESCAPES[code])
                i += 2
                continue
            width = _HEX_ESCAPES.get(code)
            digits = text[i + 2 : i + 2 + width] if width else ""
            if not width or len(digits) != width or not _is_hex(digits):
                raise Unusual(f"escape \\{code}")
            out.append(chr(int(digits, 16)))
            i += 2 + width
            continue
        out.append(char)
        i += 1
    raise Unusual("a quoted scalar continued on the next line")


def _is_hex(digits: str) -> bool:
    return all(c in "0123456789abcdefABCDEF" for c in digits)
