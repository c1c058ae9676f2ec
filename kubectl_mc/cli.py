"""The `kubectl-mc` executable: `kubectl mc …` starts here.

`get` and `describe` are what people run most, and they should answer about as fast as
`kubectl get` does (and `exec` about as fast as `kubectl exec`), so their usual command
lines are read without click (`get_flags.py`) and run with the standard library alone: no
click, no PyYAML (a kubeconfig is read by `kubeconfig_yaml.py`), no dataclasses or typing
at run time. Everything else — other
commands, `--help`, completion, lines with a mistake in them — goes to click's command
tree in `commands.py`, which gives the same answers and the same messages.
"""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False  # typing is not imported at run time: it costs a few milliseconds
if TYPE_CHECKING:
    from kubectl_mc.get_flags import Values


def main() -> None:
    from kubectl_mc.argv import COMPLETE_VAR, normalize

    args = sys.argv[1:]
    if args[:1] == ["__complete"]:  # cobra's convention: kubectl_complete-mc may be a
        kubectl_complete()  # one-line script running `kubectl-mc __complete "$@"`
        return
    line = normalize(args)
    if COMPLETE_VAR not in os.environ:
        from kubectl_mc.get_flags import parse

        parsed = parse(line)
        if parsed is not None:
            _quick(*parsed)
    from kubectl_mc.commands import cli

    try:
        cli.main(line, prog_name="kubectl mc", complete_var=COMPLETE_VAR)
    except KeyboardInterrupt:  # Ctrl-C ends a watch: quietly, as kubectl does
        sys.exit(130)
    except BrokenPipeError:  # `kubectl mc get … | head`
        sys.stderr.close()
        sys.exit(0)


def kubectl_complete() -> None:
    """The `kubectl_complete-mc` executable kubectl runs for `kubectl mc <TAB>`."""
    from kubectl_mc.commands import cli
    from kubectl_mc.completion import cobra_lines

    print("\n".join(cobra_lines(cli, sys.argv[1:])))


def _quick(command: str, args: tuple[str, ...], values: Values) -> None:
    """Run `get`, `describe` or `exec` as click would have, with the values click would have
    passed; the end is click's too (Ctrl-C: `Aborted!`, exit 1; a closed pipe: exit 1)."""
    from kubectl_mc import get_run

    def text(name: str) -> str | None:
        value = values.get(name)
        return value if isinstance(value, str) else None

    def flag(name: str) -> bool:
        return values.get(name) is True

    hub = get_run.HubFlags(
        text("kubeconfig"),
        text("context"),
        text("cluster"),
        text("user"),
        text("request_timeout") or "30s",
    )
    namespace, everywhere = text("namespace"), flag("all_namespaces")
    selector, fields = text("selector"), text("field_selector")
    try:
        if command == "exec":
            from kubectl_mc import execute

            execute.command(args, namespace, text("container"), flag("stdin"), flag("tty"), hub)
        if command == "describe":
            get_run.describe(args, namespace, everywhere, selector, fields, hub)
        get_run.get(
            args,
            text("output"),
            flag("no_headers"),
            flag("show_labels"),
            flag("watch"),
            text("subresource"),
            namespace,
            everywhere,
            selector,
            fields,
            hub,
        )
    except KeyboardInterrupt:
        print(file=sys.stderr)
        print("Aborted!", file=sys.stderr)
        sys.exit(1)
    except BrokenPipeError:
        devnull = os.open(os.devnull, os.O_WRONLY)  # nothing more reaches the closed pipe,
        os.dup2(devnull, sys.stdout.fileno())  # not even the flush at exit
        sys.exit(1)
