"""Shell completion: `kubectl mc completion bash|zsh|fish`, and `kubectl mc <TAB>` in kubectl's.

Two ways in, one source of candidates (click's completion of our command tree, with the
callbacks below for resource types, names, namespaces and locations):

- `kubectl-mc` completed directly, by the script `kubectl mc completion SHELL` prints
  (click's own, driven by `_KUBECTL_MC_COMPLETE`);
- kubectl ≥ 1.26 completing `kubectl mc …`: it runs `kubectl_complete-mc ARGS… WORD` and reads
  cobra's protocol, one candidate a line (`value<TAB>help`) then `:4` (no file completion).

Candidates that need the server are read with a short timeout; any failure offers nothing,
never an error in the middle of someone's command line.
"""

from __future__ import annotations

from typing import Any

import click
from click.shell_completion import CompletionItem

from kubectl_mc.argv import COMPLETE_VAR

NO_FILE_COMPLETION = 4  # cobra.ShellCompDirectiveNoFileComp
TIMEOUT = 5.0  # seconds


def _client(ctx: click.Context) -> tuple[Any, str]:
    """A hub client from the flags typed so far, and the namespace they mean."""
    from kubectl_mc import kube
    from kubectl_mc.kubeconfig import load, select

    p = ctx.params
    config, base = load(p.get("kubeconfig"))
    selected = select(config, p.get("context_"), p.get("cluster"), p.get("user"), base=base)
    client = kube.connect(selected, timeout=TIMEOUT)
    client.on_warning = lambda _: None
    return client, p.get("namespace") or selected.namespace


def _names(ctx: click.Context, path: str, incomplete: str) -> list[CompletionItem]:
    try:
        client, _ = _client(ctx)
        items = client.get(path).get("items") or []
    except Exception:  # completion must never fail loudly
        return []
    names = sorted({(i.get("metadata") or {}).get("name", "") for i in items})
    return [CompletionItem(n) for n in names if n and n.startswith(incomplete)]


def complete_namespaces(ctx: click.Context, _: Any, incomplete: str) -> list[CompletionItem]:
    return _names(ctx, "/api/v1/namespaces", incomplete)


def complete_locations(ctx: click.Context, _: Any, incomplete: str) -> list[CompletionItem]:
    from kubectl_mc.resources import LOCATIONS

    return _names(ctx, LOCATIONS.path(), incomplete)


def complete_resource_args(ctx: click.Context, _: Any, incomplete: str) -> list[CompletionItem]:
    """`get`/`describe`: a type first, then names of that type in the namespace."""
    from kubectl_mc.resources import UnknownResource, completions, resolve

    typed = ctx.params.get("args") or ()
    if not typed:
        return [CompletionItem(t) for t in completions() if t.startswith(incomplete)]
    try:
        res = resolve(typed[0].partition("/")[0])
    except UnknownResource:
        return []
    try:
        _, namespace = _client(ctx)
    except Exception:
        return []
    return _names(ctx, res.path(namespace), incomplete)


def complete_subresources(_: click.Context, __: Any, incomplete: str) -> list[CompletionItem]:
    from kubectl_mc.resources import SUBRESOURCES

    return [CompletionItem(s) for s in SUBRESOURCES if s.startswith(incomplete)]


def script(shell: str, cli: click.Command) -> str:
    """click's completion script for `kubectl-mc`."""
    from click.shell_completion import get_completion_class

    cls = get_completion_class(shell)
    if cls is None:
        raise click.UsageError(f"unsupported shell {shell!r}: bash, zsh or fish")
    return cls(cli, {}, "kubectl-mc", COMPLETE_VAR).source()


def cobra_lines(cli: click.Command, args: list[str]) -> list[str]:
    """What kubectl expects from `kubectl_complete-mc ARGS… WORD`."""
    from click.shell_completion import ShellComplete

    if args[:1] == ["__complete"]:  # as cobra programs are called; kubectl itself omits it
        args = args[1:]
    from kubectl_mc.argv import normalize

    *done, incomplete = args or [""]
    completer = ShellComplete(cli, {}, "kubectl mc", COMPLETE_VAR)
    lines = []
    for item in completer.get_completions(normalize(done), incomplete):
        help_text = (item.help or "").splitlines()[0] if item.help else ""
        lines.append(f"{item.value}\t{help_text}" if help_text else str(item.value))
    return [*lines, f":{NO_FILE_COMPLETION}"]


@click.command()
@click.argument("shell", type=click.Choice(["bash", "zsh", "fish"]))
def completion(shell: str) -> None:
    """Print a shell completion script for kubectl-mc.

    \b
    source <(kubectl mc completion bash)     # ~/.bashrc
    kubectl mc completion fish | source      # fish

    `kubectl mc <TAB>` in kubectl's own completion (kubectl >= 1.26) needs no script: kubectl
    runs kubectl_complete-mc, installed beside kubectl-mc.
    """
    click.echo(script(shell, click.get_current_context().find_root().command))
