"""The command line as kubectl would parse it, rewritten for click.

kubectl hands a plugin every argument after its name, untouched, and people type kubectl's
flags the way kubectl's parser (pflag) accepts them: before the command name
(`kubectl mc -n demo get deploy`), as `-n=demo` or `-ojson`, booleans as `--watch=true`.
click takes options after the command and reads `-o=json` as the value `=json`, so the
line is put in click's shape first; nothing is added or dropped but `--flag=false`.
"""

from __future__ import annotations

COMPLETE_VAR = "_KUBECTL_MC_COMPLETE"  # click's shell completion (see completion.py)

# kubectl's global flags that take a value: they may come before the command name.
GLOBAL_VALUE_FLAGS = frozenset(
    {"--kubeconfig", "--context", "--cluster", "--user", "--request-timeout", "-n", "--namespace"}
)
SHORT_VALUE_FLAGS = frozenset({"-n", "-o", "-l"})
BOOLEAN_FLAGS = frozenset(
    {
        *("--all-namespaces", "--no-headers", "--show-labels", "--watch", "--client", "--force"),
        *("--follow", "--timestamps", "--all-containers", "--stdin", "--tty", "--prefix"),
    }
)
# Booleans whose default may be true: `--flag=false` says `--no-flag`, not nothing.
NEGATABLE_FLAGS = frozenset({"--prefix"})


def normalize(args: list[str]) -> list[str]:
    out: list[str] = []
    for index, arg in enumerate(args):
        if arg == "--":
            out.extend(args[index:])
            break
        name, sep, value = arg.partition("=")
        if sep and name in SHORT_VALUE_FLAGS:
            out.extend([name, value])
        elif sep and name in BOOLEAN_FLAGS and value.lower() in ("true", "false"):
            if value.lower() == "true":
                out.append(name)
            elif name in NEGATABLE_FLAGS:
                out.append(f"--no-{name[2:]}")
        else:
            out.append(arg)
    return _command_first(out)


def _command_first(args: list[str]) -> list[str]:
    """Move global flags typed before the command name to just after it."""
    moved: list[str] = []
    index = 0
    while index < len(args) and args[index].startswith("-") and args[index] != "--":
        arg = args[index]
        name = arg.partition("=")[0]
        if name in GLOBAL_VALUE_FLAGS:
            takes_next = "=" not in arg and index + 1 < len(args)
            moved.extend(args[index : index + 1 + takes_next])
            index += 1 + takes_next
        elif arg[:2] in SHORT_VALUE_FLAGS & GLOBAL_VALUE_FLAGS and len(arg) > 2:
            moved.append(arg)  # -ndemo
            index += 1
        else:
            return args  # --help, or a flag only a command knows: leave the line as it is
    if not moved or index >= len(args):
        return args
    return [args[index], *moved, *args[index + 1 :]]
