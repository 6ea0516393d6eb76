"""The ``trajaudit`` command line: a thin layer over the library (one module per command group)."""

from __future__ import annotations

import importlib
import io
import logging
import sys
from typing import Any, NamedTuple, NoReturn

import click
from click.utils import make_default_short_help

from trajaudit import __version__
from trajaudit.cli.signals import stop_message
from trajaudit.cli.terminal import SafeLogFormatter


class LazyCommand(NamedTuple):
    """Where a subcommand lives and what ``trajaudit --help`` says of it without importing it.

    ``summary`` is the command's own help up to its first blank line (what click shortens for the
    command list); ``tests/cli/test_help.py`` renders the list both ways and fails when they differ.
    """

    module: str
    attribute: str
    summary: str


#: command name -> where it lives, in the order ``--help`` lists them. A command's module is imported
#: only when that command runs: ``trajaudit audit`` does not load what ``eval``, ``claims``, ``rules
#: lint`` or ``cite`` need (networkx, z3, the report and citation code), which was most of a fresh
#: audit process's start-up, and ``trajaudit --help`` lists them from their summaries (importing every
#: command made it ~2x slower than ``trajaudit audit --help``).
COMMANDS: dict[str, LazyCommand] = {
    "show": LazyCommand(
        "trajaudit.cli.traces",
        "show",
        "Print the outline of each trajectory in FILE: index, agent, kind, tool, one-line preview.",
    ),
    "convert": LazyCommand(
        "trajaudit.cli.traces",
        "convert",
        "Convert FILE to the trajaudit IR (validated against trajectory.schema.json).",
    ),
    "audit": LazyCommand(
        "trajaudit.cli.audit",
        "audit",
        "Audit every run under PATHS (files, folders, globs) and write one diagnosis per run.",
    ),
    "eval": LazyCommand(
        "trajaudit.cli.eval",
        "eval_cmd",
        "Score diagnoses against gold labels with the metrics of AgentRx, SearchAuditor, Who&When and DRIFT.",
    ),
    "judge": LazyCommand(
        "trajaudit.cli.judge",
        "judge",
        "The offline judge's weights: fit them to your own labelled failures.",
    ),
    "cite": LazyCommand(
        "trajaudit.cli.cite",
        "cite",
        "Trace citation and faithfulness errors of a deep-research run back to the agent that made them.",
    ),
    "claims": LazyCommand(
        "trajaudit.cli.claims",
        "claims",
        "Print the claim ledger of each run in FILE (DRIFT: claims, support, dependency trace).",
    ),
    "check": LazyCommand(
        "trajaudit.cli.check",
        "check",
        "Evaluate rule packs on every run in FILES and print the validation logs.",
    ),
    "rules": LazyCommand(
        "trajaudit.cli.rules",
        "rules",
        "Work with rule packs (YAML files or shipped pack names).",
    ),
    "llm": LazyCommand(
        "trajaudit.cli.llm",
        "llm",
        "LLM endpoint utilities (any OpenAI-compatible server).",
    ),
    "repair": LazyCommand(
        "trajaudit.cli.repair",
        "repair",
        "Write the messages of FILE's run before its critical step, in the run's own "
        "format, plus a repair directive as a user message: OpenAI messages for openai "
        "and tau inputs (tau's 'info' is not copied), the Who&When document with its "
        "history prefix (labels not copied), or the Magentic-One list (see "
        "docs/llm.md).",
    ),
    "watch": LazyCommand(
        "trajaudit.cli.online",
        "watch_cmd",
        "Follow FILE, a growing JSONL file of one run's messages, and print each violation as it is settled.",
    ),
    "guard": LazyCommand(
        "trajaudit.cli.online",
        "guard_cmd",
        "Serve an OpenAI-compatible proxy that checks each answer's tool calls before the agent gets them.",
    ),
    "serve": LazyCommand(
        "trajaudit.cli.serve",
        "serve",
        "Receive traces from instrumented agents and audit each trace once it is complete.",
    ),
}


#: exit code of a command stopped by Ctrl-C (SIGINT), the shell's convention (128 + 2); also
#: ``trajaudit.cli.common.EXIT_INTERRUPTED``, which the commands' ``handle_errors`` exits with
EXIT_INTERRUPTED = 130


def _interrupted(exc: KeyboardInterrupt) -> NoReturn:
    text, code = stop_message(exc)  # "terminated" and 143 for SIGTERM
    click.echo(text, err=True)
    sys.exit(code)


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
        except KeyboardInterrupt as e:
            _interrupted(e)

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except KeyboardInterrupt as e:
            _interrupted(e)

    def list_commands(self, ctx: click.Context) -> list[str]:
        return [*COMMANDS, *(n for n in super().list_commands(ctx) if n not in COMMANDS)]

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        spec = COMMANDS.get(cmd_name)
        if spec is None:
            return super().get_command(ctx, cmd_name)
        cmd: Any = getattr(importlib.import_module(spec.module), spec.attribute)
        return cmd

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """The "Commands" section, as :meth:`click.Group.format_commands` writes it, from the summaries.

        Only commands added to the group directly (not in :data:`COMMANDS`) are looked up.
        """
        rows: list[tuple[str, str]] = []
        for name in self.list_commands(ctx):
            spec = COMMANDS.get(name)
            if spec is not None:
                rows.append((name, spec.summary))
                continue
            cmd = super().get_command(ctx, name)
            if cmd is not None and not cmd.hidden:
                rows.append((name, cmd.get_short_help_str(10**6)))
        if not rows:
            return
        limit = formatter.width - 6 - max(len(name) for name, _ in rows)
        with formatter.section("Commands"):
            formatter.write_dl([(name, make_default_short_help(text, limit)) for name, text in rows])


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
    handler = logging.StreamHandler()  # (stderr) a log line can quote trace text (a run id): shown, not obeyed
    handler.setFormatter(SafeLogFormatter("%(levelname)s %(name)s: %(message)s"))
    logging.basicConfig(level=level, handlers=[handler])  # (as before: nothing when logging is set up already)


__all__ = ["main"]
