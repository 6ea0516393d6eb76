"""The ``trajaudit`` command line: a thin layer over the library (one module per command group)."""

from __future__ import annotations

import io
import logging
import sys

import click

from trajaudit import __version__
from trajaudit.cli.audit import audit
from trajaudit.cli.check import check
from trajaudit.cli.cite import cite
from trajaudit.cli.claims import claims
from trajaudit.cli.eval import eval_cmd
from trajaudit.cli.judge import judge
from trajaudit.cli.llm import llm
from trajaudit.cli.repair import repair
from trajaudit.cli.rules import rules
from trajaudit.cli.traces import convert, show


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
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


for _cmd in (show, convert, audit, eval_cmd, judge, cite, claims, check, rules, llm, repair):
    main.add_command(_cmd)


__all__ = ["main"]
