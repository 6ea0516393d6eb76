"""Shared CLI pieces: options, consoles, error reporting, exit codes.

Exit codes: 0 success; 1 findings at or above the requested level (or runs that failed in a batch);
2 usage or input errors.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

import click
from rich.console import Console

from trajaudit.errors import Problem, TrajauditError

EXIT_OK = 0
EXIT_FINDINGS = 1
EXIT_USAGE = 2


def console(err: bool = False) -> Console:
    """A rich console on click's (test-injectable) stdout or stderr."""
    stream = click.get_text_stream("stderr" if err else "stdout")
    return Console(file=stream, soft_wrap=False, width=None if stream.isatty() else 160, highlight=False)


def fail(message: str) -> None:
    """Print ``error: message`` to stderr and exit with code 2."""
    console(err=True).print(f"[bold red]error:[/] {message}", markup=True, highlight=False)
    sys.exit(EXIT_USAGE)


def report_problems(problems: list[Problem]) -> None:
    """Print skipped runs to stderr, one line each."""
    if not problems:
        return
    c = console(err=True)
    for p in problems:
        c.print(f"[yellow]skipped:[/] {p.message}", markup=True, highlight=False)


def format_options(f: Callable[..., Any]) -> Callable[..., Any]:
    """Add ``--format``/``--mapping`` input options to a command."""
    f = click.option("--mapping", "mapping", type=click.Path(exists=True, dir_okay=False),
                     help="YAML mapping of jmespath expressions for a custom trace format.")(f)
    f = click.option("--format", "fmt", metavar="NAME",
                     help="Force the input format (openai, tau, who_and_when, magentic); default: auto-detect.")(f)
    return f


def handle_errors(f: Callable[..., Any]) -> Callable[..., Any]:
    """Turn documented trajaudit errors into ``error: …`` + exit code 2 (never a traceback)."""
    import functools

    @functools.wraps(f)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return f(*args, **kwargs)
        except (TrajauditError, LookupError) as e:
            fail(str(e.args[0]) if isinstance(e, LookupError) and e.args else str(e))

    return wrapper
