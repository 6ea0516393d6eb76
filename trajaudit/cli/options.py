"""Option parsing shared by the commands: one meaning per flag.

- ``--input-format NAME`` is the only spelling that names an input trace format (every command that
  reads traces). The older spellings keep working for one release with a deprecation warning:
  ``--format NAME`` with an input format's name (on show, convert, audit, repair, claims, check, eval)
  and ``--trace-format NAME`` (eval).
- ``--format`` (alias ``--output-format``) only chooses the output format, on every command.
- ``--record N`` (0-based position in a multi-run file) and ``--id RUN_ID`` (the run id the tables
  show) choose one run wherever a run is chosen.
- Inputs are checked before anything runs or is written: a path that does not exist (or a glob that
  matches nothing) is a usage error, exit 2.
- ``--run-timeout SECONDS`` (audit, check, eval) is one option (:func:`run_timeout_option`): a finite
  number of seconds in (0, 86400]; ``nan``, ``inf``, 0 and negative values are usage errors.
- Every other duration (``--until-idle``, ``--poll``, ``--quiet-period``, ``--max-wait``, ``--timeout``,
  ``--cache-idle``) is a :func:`seconds` type, and a threshold a :class:`FiniteRange`: ``nan`` and
  ``inf`` are usage errors there too.
"""

from __future__ import annotations

import functools
import glob
import math
import os
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import click

from trajaudit.cli.common import console, fail, print_line
from trajaudit.engine.trace.adapters import default_adapters
from trajaudit.engine.trace.ir import Trajectory
from trajaudit.regular_files import TRACE_SUFFIXES, unread_files
from trajaudit.run_budget import DEFAULT_RUN_TIMEOUT, MAX_RUN_TIMEOUT, MIN_RUN_TIMEOUT, in_range

#: The warning printed when ``--format``/``--trace-format`` names an input format.
DEPRECATED = ("{flag} {name} as the input format is deprecated and will be removed in the next release: "
              "use --input-format {name} ({flag_now})")


def input_format_names() -> list[str]:
    """The registered input formats (adapters), in registry order."""
    return list(default_adapters())


class LegacyInputFormat(str):
    """An input format's name given to ``--format`` (the deprecated spelling); resolved by
    :func:`io_options`' wrapper into the input format, with a warning."""


class OutputFormat(click.ParamType):
    """``--format`` values: one of the command's output formats; an input format's name is accepted
    (deprecated, see :class:`LegacyInputFormat`) only where ``legacy_input`` is set."""

    name = "format"

    def __init__(self, choices: Sequence[str], legacy_input: bool) -> None:
        self.choices = tuple(choices)
        self.legacy_input = legacy_input

    def get_metavar(self, param: click.Parameter, ctx: click.Context | None = None) -> str:  # noqa: ARG002
        return "[" + "|".join(self.choices) + "]"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, LegacyInputFormat) or value in self.choices:
            return value
        names = input_format_names()
        if value in names:
            if self.legacy_input:
                return LegacyInputFormat(value)
            self.fail(f"{value!r} is an input format: name it with --input-format {value} (--format chooses "
                      f"the output: {', '.join(self.choices)})", param, ctx)
        self.fail(f"{value!r} is not one of {', '.join(self.choices)} (input formats are named with --input-format: "
                  f"{', '.join(names)})", param, ctx)


def _warn(message: str) -> None:
    print_line(console(err=True), f"warning: {message}")


#: output file suffixes that name an output format when --format is not given (``-o x.sarif``)
_SUFFIX_FORMATS = ((".sarif", "sarif"), (".sarif.json", "sarif"), (".xml", "junit"), (".json", "json"))


def _format_of_name(output: Any, outputs: Sequence[str] | None) -> str | None:
    """The output format an ``-o`` name implies (``x.sarif`` -> sarif, ``x.xml`` -> junit, ``x.json`` ->
    json) when the command offers it, else ``None`` (the command's default applies)."""
    if not outputs or not isinstance(output, str):
        return None
    name = output.lower()
    for suffix, fmt in sorted(_SUFFIX_FORMATS, key=lambda p: -len(p[0])):
        if name.endswith(suffix):
            return fmt if fmt in outputs else None
    return None


#: what an output name's suffix says the file holds (longest suffix first)
_NAME_SAYS = ((".sarif.json", "sarif"), (".markdown", "markdown"), (".ndjson", "jsonl"), (".jsonl", "jsonl"),
              (".sarif", "sarif"), (".json", "json"), (".html", "html"), (".xml", "junit"), (".htm", "html"),
              (".md", "markdown"), (".parquet", "parquet"))
#: names of compressed files: outputs are never compressed
_COMPRESSED = (".gz", ".tgz", ".bz2", ".xz", ".zst", ".zip")
_WHAT = {"jsonl": "JSON Lines", "json": "one JSON document", "sarif": "a SARIF log", "junit": "JUnit XML",
         "markdown": "Markdown", "html": "HTML", "table": "a text table", "text": "text", "graphml": "GraphML",
         "parquet": "a Parquet table"}
_SUFFIX = {"jsonl": ".jsonl", "json": ".json", "sarif": ".sarif", "junit": ".xml", "markdown": ".md", "html": ".html",
           "table": ".txt", "text": ".txt", "graphml": ".graphml",
           "parquet": ".parquet"}
#: click-context key where io_options leaves the command's output formats and whether --format was given
_FORMAT_META = "trajaudit.output_format"


def output_name_warning(option: str, output: Any, out_format: str, *, offered: Sequence[str] = (),
                        chosen: bool = False) -> str | None:
    """What is wrong with the name of output ``output`` for a ``out_format`` file, in words (``None``:
    nothing). A name ending in ``.gz`` (``.bz2``, ``.xz``, ``.zst``, ``.zip``) gets a file written
    uncompressed; ``.jsonl`` a SARIF log, ``.json`` JUnit XML …: a reader of the name expects another
    format. ``x.json`` for JSON Lines is named unless ``--format jsonl`` was ``chosen``; a SARIF log
    under ``.json`` is one JSON document (no warning). ``offered``: the command's ``--format`` choices
    (the warning suggests the one the name says). Names without a known suffix, ``-`` and ``None`` pass.
    """
    if not isinstance(output, str) or output == "-":
        return None
    name = os.path.basename(output.rstrip("/")).lower()
    what = _WHAT.get(out_format, out_format)
    for ext in _COMPRESSED:
        if name.endswith(ext):
            return (f"{option} {output}: the file is written uncompressed ({what}), though its name ends in {ext}; "
                    f"drop {ext} from the name (and compress the file afterwards if you need to)")
    says = next((fmt for ext, fmt in _NAME_SAYS if name.endswith(ext)), None)
    if says is None or says == out_format or (says, out_format) == ("json", "sarif"):
        return None
    if (says, out_format) == ("json", "jsonl"):
        if chosen:
            return None
        keep = ", or give --format jsonl to keep this name without this warning" if "jsonl" in offered else ""
        return (f"{option} {output}: writing JSON Lines (one JSON document per line), not one JSON document; "
                f"name the file .jsonl{keep}")
    other = f", or give --format {says} for {_WHAT[says]}" if says in offered else ""
    ext = next(e for e, fmt in _NAME_SAYS if name.endswith(e))
    return (f"{option} {output}: writing {what}, but a name ending in {ext} says {_WHAT[says]}; name the file "
            f"{_SUFFIX.get(out_format, '.' + out_format)}{other}")


def warn_output_name(option: str, output: Any, out_format: str) -> None:
    """Print :func:`output_name_warning` on stderr (``warning: …``), when there is one. Call it after the
    output was checked (refused outputs get their error alone). The command's ``--format`` choices and
    whether ``--format`` was given come from :func:`io_options` (through the click context)."""
    ctx = click.get_current_context(silent=True)
    offered, chosen = ctx.meta.get(_FORMAT_META, ((), False)) if ctx is not None else ((), False)
    message = output_name_warning(option, output, out_format, offered=offered, chosen=chosen)
    if message is not None:
        _warn(message)


def io_options(outputs: Sequence[str] | None, default: str | None = None, *, help: str = "Output format.",
               input_format: bool = True, mapping: bool = True, trace_format_alias: bool = False
               ) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Add the format options to a command; it receives ``out_format`` and (with ``input_format``)
    ``fmt`` (the input format or ``None``) and ``mapping``.

    Args:
        outputs: the command's output formats for ``--format``/``--output-format`` (``None``: the
            command has no output choice; ``--format NAME`` is then only the deprecated input spelling).
        default: the default output format (``None``: the command decides, e.g. from a file suffix).
        input_format: add ``--input-format NAME`` (a registered adapter) and accept the deprecated
            ``--format NAME``.
        mapping: add ``--mapping FILE``.
        trace_format_alias: also accept the deprecated ``--trace-format NAME`` (eval).
    """

    def deco(f: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(f)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            out = kwargs.pop("out_format", None)
            chosen = out is not None and not isinstance(out, LegacyInputFormat)
            fmt = kwargs.pop("fmt", None) if input_format else None
            legacy = kwargs.pop("legacy_trace_format", None) if trace_format_alias else None
            if legacy is not None:
                _warn(DEPRECATED.format(flag="--trace-format", name=legacy, flag_now="same meaning"))
                if fmt is not None and fmt != legacy:
                    fail(f"--input-format {fmt} and --trace-format {legacy} disagree")
                fmt = legacy
            if isinstance(out, LegacyInputFormat):
                _warn(DEPRECATED.format(flag="--format", name=str(out),
                                        flag_now="--format now chooses the output format"))
                if fmt is not None and fmt != out:
                    fail(f"--input-format {fmt} and --format {out} disagree")
                fmt, out = str(out), default
            ctx = click.get_current_context(silent=True)
            if ctx is not None:  # for warn_output_name, once the command checked its outputs
                ctx.meta[_FORMAT_META] = (tuple(outputs or ()), chosen)
            if out is None:
                out = _format_of_name(kwargs.get("output"), outputs) or default
            kwargs["out_format"] = out
            if input_format:
                kwargs["fmt"] = fmt
            return f(*args, **kwargs)

        g: Callable[..., Any] = wrapper
        if mapping:
            g = click.option("--mapping", "mapping", type=click.Path(exists=True, dir_okay=False),
                             help="YAML mapping of jmespath expressions for a custom trace format.")(g)
        if trace_format_alias:
            g = click.option("--trace-format", "legacy_trace_format", type=click.Choice(input_format_names()),
                             hidden=True, help="Deprecated: use --input-format.")(g)
        if input_format:
            names = input_format_names()
            g = click.option("--input-format", "fmt", type=click.Choice(names), metavar="NAME",
                             help=f"Force the input trace format ({', '.join(names)}); default: auto-detect.")(g)
        choices = tuple(outputs or ())
        if outputs is not None or input_format:
            text = help + (f" (default: {default})" if default and outputs else "")
            if not outputs:
                text = "Deprecated spelling of --input-format (this command has one output format)."
            g = click.option("--format", "--output-format", "out_format", type=OutputFormat(choices, input_format),
                             default=None, hidden=not outputs, help=text)(g)
        return g

    return deco


class RunTimeout(click.ParamType):
    """``--run-timeout`` values: a finite number of seconds, ``MIN_RUN_TIMEOUT <= x <= MAX_RUN_TIMEOUT``
    (below a microsecond, e.g. the denormal ``1e-320``, is refused too). ``nan`` is
    refused by name (``click.FloatRange`` let it through: every comparison with it is false, so it
    acted as no timeout at all), as are ``inf``, 0 and negative numbers."""

    name = "seconds"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, float) and in_range(value):
            return value
        try:
            seconds = float(value)
        except OverflowError:  # an int too large for a float
            seconds = math.inf
        except (TypeError, ValueError):
            self.fail(f"{value!r} is not a number of seconds", param, ctx)
        if not in_range(seconds):
            self.fail(f"{value!r} is not a time budget: give a number of seconds from {MIN_RUN_TIMEOUT:g} to "
                      f"{MAX_RUN_TIMEOUT:g} (default {DEFAULT_RUN_TIMEOUT:g})", param, ctx)
        return seconds


#: the longest duration a ``SECONDS`` option takes (about 116 days): beyond it a wait overflows the
#: clock arithmetic of ``time.sleep`` and ``threading`` waits instead of meaning "forever"
MAX_SECONDS = 1e7


class FiniteRange(click.FloatRange):
    """A ``click.FloatRange`` that refuses ``nan`` and ``±inf`` by name: ``FloatRange`` lets ``nan``
    through (every comparison with it is false: a wait of ``nan`` seconds never ends, a threshold of
    ``nan`` never fires) and, without a maximum, ``inf``."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        try:
            number = float(value)
        except (TypeError, ValueError, OverflowError):
            number = 0.0  # the range check below says what is wrong
        if not math.isfinite(number):
            self.fail(f"{value!r} is not a finite number", param, ctx)
        return super().convert(value, param, ctx)


def seconds(min: float = 0.0, *, min_open: bool = False) -> FiniteRange:  # noqa: A002 - click's word
    """The type of a duration option: a finite number of seconds from ``min`` (excluded when
    ``min_open``) to :data:`MAX_SECONDS`; ``nan``, ``inf`` and values out of range are usage errors."""
    return FiniteRange(min, MAX_SECONDS, min_open=min_open)


def run_timeout_option(help: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:  # noqa: A002
    """The ``--run-timeout SECONDS`` option (parameter ``run_timeout``, default
    :data:`~trajaudit.run_budget.DEFAULT_RUN_TIMEOUT`) of the commands that evaluate rules, checked by
    :class:`RunTimeout`; ``help`` says what the command does when the budget is used up."""
    return click.option("--run-timeout", "run_timeout", type=RunTimeout(), default=DEFAULT_RUN_TIMEOUT,
                        show_default=True, metavar="SECONDS", help=help)


def run_options(what: str = "Only this run") -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Add ``--record N`` and ``--id RUN_ID`` (the command receives ``record`` and ``run_id``)."""

    def deco(f: Callable[..., Any]) -> Callable[..., Any]:
        f = click.option("--id", "run_id", metavar="RUN_ID",
                         help=f"{what}: the run with this id (the id the tables show).")(f)
        return click.option("--record", type=click.IntRange(min=0), metavar="N",
                            help=f"{what}: the N-th run of a multi-run file (0-based position).")(f)

    return deco


def check_run_choice(record: int | None, run_id: str | None) -> None:
    """``--record`` and ``--id`` together are a usage error (exit 2)."""
    if record is not None and run_id is not None:
        fail("give --record N or --id RUN_ID, not both")


def select_run_id(trajectories: list[Trajectory], file: str, run_id: str | None) -> list[Trajectory]:
    """The runs of ``file`` with id ``run_id`` (all of them when ``run_id`` is ``None``).

    Exits 2 (usage error) naming up to ten of the file's ids when no run has that id.
    """
    if run_id is None:
        return trajectories
    chosen = [t for t in trajectories if t.id == run_id]
    if not chosen:
        ids = [t.id for t in trajectories]
        more = f" … ({len(ids)} runs)" if len(ids) > 10 else ""
        fail(f"{file}: no run with id {run_id!r}" + (f" (ids: {', '.join(ids[:10])}{more})" if ids else ""))
    return chosen


_GLOB = frozenset("*?[")


def check_input_paths(paths: Iterable[str], what: str = "input") -> None:
    """Exit 2 (usage error) before any work or output when a path does not exist, or a glob matches
    nothing: a typo must not replace ``-o`` with an empty batch."""
    for p in paths:
        if any(c in _GLOB for c in p) and not os.path.exists(p):
            if not glob.glob(p, recursive=True):
                fail(f"{what} {p!r}: the pattern matches no file")
        elif not os.path.exists(p):
            fail(f"{what} {p!r}: no such file or folder")


def note_unread_files(paths: Iterable[str], limit: int = 3) -> None:
    """Say (stderr) which files under the folders among ``paths`` are not read as traces: only
    ``.json``, ``.jsonl``, ``.ndjson`` and ``.eval`` files are (:func:`~trajaudit.regular_files.unread_files`),
    so a ``.json.gz`` or ``.log`` trace among them was left out of the batch without a word. The first
    ``limit`` are named, the rest counted; hidden files are not."""
    unread = unread_files(paths)
    if not unread:
        return
    shown = ", ".join(str(p) for p in unread[:limit]) + (f" and {len(unread) - limit} more" if len(unread) > limit
                                                          else "")
    suffixes = ", ".join(TRACE_SUFFIXES)
    print_line(console(err=True), f"note: {len(unread)} file(s) in the input folder(s) not read (only {suffixes} "
                                  f"files are traces there; name a file to read it): {shown}")


__all__ = ["DEPRECATED", "LegacyInputFormat", "OutputFormat", "check_input_paths", "check_run_choice",
           "input_format_names", "io_options", "note_unread_files", "output_name_warning", "run_options", "select_run_id",
           "warn_output_name"]
