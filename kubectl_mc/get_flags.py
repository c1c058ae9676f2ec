"""`get`, `describe` and `exec` command lines read without click, the way click reads them.

Importing click costs more than kubectl takes for a whole `kubectl get`, so the usual
command lines of the commands people run most (and expect to answer at once) are parsed here,
with click's own rules
(options anywhere among the arguments, `--opt=value`, `-ovalue`, `-Aw`, `--` ending
options, the last of a repeated option wins). Anything these rules do not cover — `--help`,
an unknown option, a flag given a value, a missing value, shell completion — returns None,
and click (`get_cli.py`) reads the line instead, so its messages stay the only ones.
A unit test holds both parsers to the same answers.
"""

from __future__ import annotations

# The command's options by every name they have: (parameter, takes a value).
_HUB = {
    "--kubeconfig": ("kubeconfig", True),
    "--context": ("context", True),
    "--cluster": ("cluster", True),
    "--user": ("user", True),
    "--request-timeout": ("request_timeout", True),
}
_LISTING = {
    "-n": ("namespace", True),
    "--namespace": ("namespace", True),
    "-A": ("all_namespaces", False),
    "--all-namespaces": ("all_namespaces", False),
    "-l": ("selector", True),
    "--selector": ("selector", True),
    "--field-selector": ("field_selector", True),
}
OPTIONS = {
    "describe": _HUB | _LISTING,
    "exec": _HUB
    | {
        "-n": ("namespace", True),
        "--namespace": ("namespace", True),
        "-c": ("container", True),
        "--container": ("container", True),
        "-i": ("stdin", False),
        "--stdin": ("stdin", False),
        "-t": ("tty", False),
        "--tty": ("tty", False),
    },
    "get": _HUB
    | _LISTING
    | {
        "-o": ("output", True),
        "--output": ("output", True),
        "--no-headers": ("no_headers", False),
        "--show-labels": ("show_labels", False),
        "-w": ("watch", False),
        "--watch": ("watch", False),
        "--subresource": ("subresource", True),
    },
}


# Arguments a command needs at least (click answers a line with fewer with an error):
# exec's POD and a command.
MIN_ARGS = {"exec": 2}


class _Unusual(Exception):
    """A line for click to read (and, if it is wrong, to explain)."""


Values = dict[str, "str | bool | None"]


def parse(line: list[str]) -> tuple[str, tuple[str, ...], Values] | None:
    """(command, its arguments, the values click would give its options) for `get …`,
    `describe …` or `exec …`; None for any other line, and for any line click would answer
    with help or an error."""
    if not line or line[0] not in OPTIONS:
        return None
    command, known = line[0], OPTIONS[line[0]]
    values: Values = {}
    for name, takes_value in known.values():
        values[name] = None if takes_value else False
    values["request_timeout"] = "30s"
    args: list[str] = []
    rest = line[1:]
    try:
        while rest:
            arg = rest.pop(0)
            if arg == "--":
                args.extend(rest)
                break
            if arg[:1] == "-" and len(arg) > 1:
                _option(arg, rest, known, values)
            else:
                args.append(arg)
    except _Unusual:
        return None
    if len(args) < MIN_ARGS.get(command, 0):
        return None
    return command, tuple(args), values


def _option(
    arg: str,
    rest: list[str],
    known: dict[str, tuple[str, bool]],
    values: Values,
) -> None:
    """One option word, as click's parser takes it: a long name (with `=value` or a value
    after it), else a run of short ones (`-Aw`, `-ojson`, `-o json`)."""
    name, sep, explicit = arg.partition("=")
    if name.startswith("--"):
        if name not in known:
            raise _Unusual
        param, takes_value = known[name]
        if not takes_value:
            if sep:
                raise _Unusual  # "does not take a value"
            values[param] = True
            return
        if sep:
            rest.insert(0, explicit)
        if not rest:
            raise _Unusual  # "requires an argument"
        values[param] = rest.pop(0)
        return
    for index in range(1, len(arg)):
        short = "-" + arg[index]
        if short not in known:
            raise _Unusual  # "no such option"
        param, takes_value = known[short]
        if not takes_value:
            values[param] = True
            continue
        if index + 1 < len(arg):
            rest.insert(0, arg[index + 1 :])
        if not rest:
            raise _Unusual
        values[param] = rest.pop(0)
        return
