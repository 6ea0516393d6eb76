"""The ``trajaudit`` command line: a thin layer over the library (one module per command group)."""

from __future__ import annotations

import importlib
import io
import logging
import sys
from typing import Any, NoReturn

import click

from trajaudit import __version__

#: command name -> (module, attribute), in the order ``--help`` lists them. A command's module is
#: imported only when that command runs (or when help lists them all): ``trajaudit audit`` does not
#: load what ``eval``, ``claims``, ``rules lint`` or ``cite`` need (networkx, z3, the report and
#: citation code), which was most of a fresh audit process's start-up.
COMMANDS: dict[str, tuple[str, str]] = {
    "show": ("trajaudit.cli.traces", "show"),
    "convert": ("trajaudit.cli.traces", "convert"),
    "audit": ("trajaudit.cli.audit", "audit"),
    "eval": ("trajaudit.cli.eval", "eval_cmd"),
    "judge": ("trajaudit.cli.judge", "judge"),
    "cite": ("trajaudit.cli.cite", "cite"),
    "claims": ("trajaudit.cli.claims", "claims"),
    "check": ("trajaudit.cli.check", "check"),
    "rules": ("trajaudit.cli.rules", "rules"),
    "llm": ("trajaudit.cli.llm", "llm"),
    "repair": ("trajaudit.cli.repair", "repair"),
    "watch": ("trajaudit.cli.online", "watch_cmd"),
    "guard": ("trajaudit.cli.online", "guard_cmd"),
    "serve": ("trajaudit.cli.serve", "serve"),
}


#: exit code of a command stopped by Ctrl-C (SIGINT), the shell's convention (128 + 2); also
#: ``trajaudit.cli.common.EXIT_INTERRUPTED``, which the commands' ``handle_errors`` exits with
EXIT_INTERRUPTED = 130


def _interrupted() -> NoReturn:
    click.echo("interrupted", err=True)
    sys.exit(EXIT_INTERRUPTED)


class LazyGroup(click.Group):
    """A click group whose subcommands (:data:`COMMANDS`) are imported on first use.

    Ctrl-C while click parses the command line or dispatches a command (imports its module, runs
    the group's callback) says ``interrupted`` and exits 130, as it does once the command runs
    (``handle_errors``): click's standalone mode would turn the ``KeyboardInterrupt`` into
    ``Aborted!`` and exit 1, which ``audit`` and ``check`` use for "some run was skipped"."""

    def make_context(self, info_name: str | None, args: list[str], parent: click.Context | None = None,
                     **extra: Any) -> click.Context:
        try:
            return super().make_context(info_name, args, parent, **extra)
        except KeyboardInterrupt:
            _interrupted()

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except KeyboardInterrupt:
            _interrupted()

    def list_commands(self, ctx: click.Context) -> list[str]:
        return [*COMMANDS, *(n for n in super().list_commands(ctx) if n not in COMMANDS)]

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        spec = COMMANDS.get(cmd_name)
        if spec is None:
            return super().get_command(ctx, cmd_name)
        cmd: Any = getattr(importlib.import_module(spec[0]), spec[1])
        return cmd


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="trajaudit")
@click.option("-v", "--verbose", count=True, help="More log output (-v info, -vv debug).")
def main(verbose: int) -> None:
    """trajaudit: audit LLM-agent trajectories.

    Finds where a failed run broke (the critical step), why (a root-cause category), who (the
    responsible agent), with an auditable validation log of evidence.
    """
    for stream in (sys.stdout, sys.stderr):  # a lone surrogate in trace text prints as \ud800, no traceback
        if isinstance(stream, io.TextIOWrapper):
            stream.reconfigure(errors="backslashreplace")
    level = logging.WARNING if verbose == 0 else logging.INFO if verbose == 1 else logging.DEBUG
    logging.basicConfig(level=level, format="%(levelname)s %(name)s: %(message)s")


__all__ = ["main"]
