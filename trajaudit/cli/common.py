"""Shared CLI pieces: options, consoles, error reporting, exit codes.

Exit codes: 0 success; 1 findings at or above the requested level (or runs that failed in a batch, or
— ``check`` — runs whose rule evaluation ran out of time, ``--run-timeout``); 2 usage or input errors.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import socket
import sys
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

import click

import trajaudit.llm as llm_layer
from trajaudit import disk_cache
from trajaudit.cli import EXIT_INTERRUPTED  # noqa: F401 - re-exported (watch, tests)
from trajaudit.cli.outputs import OutputSet, atomic_write, is_special_file, output_problem, refuse_clobbering
from trajaudit.cli.signals import COMMITTED, stop_message
from trajaudit.cli.terminal import terminal_safe
from trajaudit.engine.trace.loader import FLAG_NON_UTF8
from trajaudit.errors import ConfigError, Problem, TrajauditError
from trajaudit.llm.config import OFFLINE_ADVICE, build_config, load_config_file

if TYPE_CHECKING:
    from rich.console import Console

EXIT_FINDINGS = 1
EXIT_USAGE = 2
# EXIT_INTERRUPTED (130, from trajaudit.cli): a command (watch, audit, …) stopped by Ctrl-C; 143 by SIGTERM
# (trajaudit.cli.signals.EXIT_TERMINATED)


MAX_MESSAGE_CHARS = 3000


@functools.cache
def _safe_console_class() -> type[Console]:
    from rich.console import Console

    class SafeConsole(Console):
        """A rich console whose strings (printed, or cells of a table) are passed through
        :func:`terminal_safe` before rich renders them: rich's own styling codes are unaffected."""

        def render_str(self, text: str, **kwargs: Any) -> Any:
            return super().render_str(terminal_safe(text), **kwargs)

    return SafeConsole


#: ``$COLUMNS`` below this is ignored like a value that is not a number: ``COLUMNS=0`` made rich draw
#: every line (an error message too) in zero columns, i.e. print nothing, and 5 a word per line
MIN_COLUMNS = 20
#: the width of output that goes to no terminal (a pipe, a file) without a usable ``$COLUMNS``
PIPE_WIDTH = 160


def console_width(stream: Any) -> int:
    """The width a console on ``stream`` draws to: ``$COLUMNS`` when it is a number of at least
    :data:`MIN_COLUMNS`; else a terminal's own width (80 when it reports none, or a useless one);
    else :data:`PIPE_WIDTH`."""
    columns = os.environ.get("COLUMNS", "")
    if columns.isdigit() and int(columns) >= MIN_COLUMNS:
        return int(columns)
    if not stream.isatty():
        return PIPE_WIDTH
    try:
        size = os.get_terminal_size(stream.fileno()).columns
    except (AttributeError, ValueError, OSError):
        size = 0
    return size if size >= MIN_COLUMNS else 80


def console(err: bool = False) -> Console:
    """A rich console on the current (test-injectable) stdout or stderr.

    Markup is off: trace text, agent names and paths are printed literally (a message containing
    ``[/bold]`` must not be read as a style tag), and control characters are shown as ``\\xNN``
    (:func:`terminal_safe`: an ESC sequence in a message must not drive the terminal). Styled labels
    use :func:`rich.markup.escape` on the data they interpolate. ``rich`` is imported on the first
    call: ``audit -q`` with nothing to say prints nothing and does not import it (≈ 0.1G instructions).
    Its width is :func:`console_width`'s.
    """
    stream = sys.stderr if err else sys.stdout
    # the width is given, never left to rich, which takes any digits in $COLUMNS (0 included) as the width
    return _safe_console_class()(file=stream, soft_wrap=False, width=console_width(stream), highlight=False,
                                 markup=False)


def file_console(file: Any, width: int = PIPE_WIDTH) -> Console:
    """A console as :func:`console`'s (markup off, control characters shown as ``\\xNN`` by
    :func:`terminal_safe`) that writes to ``file`` (a text stream, e.g. a buffer to be written to an
    output file) at ``width`` columns: a report file is read on a terminal too (``cat``), and a
    plain rich console read ``[/x]`` in a step preview as markup (an internal error)."""
    return _safe_console_class()(file=file, soft_wrap=False, width=width, highlight=False, markup=False)


def clip(message: str, limit: int = MAX_MESSAGE_CHARS) -> str:
    """Cut a message to ``limit`` characters, saying how much was cut (errors can quote whole inputs)."""
    return message if len(message) <= limit else f"{message[:limit]}… ({len(message) - limit} more characters)"


def display_width(c: Console) -> int | None:
    """The width of the display ``c`` prints to — a terminal's, or the ``$COLUMNS`` the user gave —
    or ``None`` when it prints to a pipe or a file (its width is then :data:`PIPE_WIDTH`, no display's)."""
    columns = os.environ.get("COLUMNS", "")
    return c.width if c.file.isatty() or (columns.isdigit() and int(columns) >= MIN_COLUMNS) else None


def print_line(c: Console, text: str, *, markup: bool = False) -> None:
    """Print a message line — an error, a ``skipped:`` line, a warning, a note (not a table) — on
    ``c``: wrapped between words at the width of a display (:func:`display_width`: a terminal, or
    ``$COLUMNS``), and never wrapped off one (a log file, a CI log, a pipe: one line per message, to
    ``grep``), where rich broke it at :data:`PIPE_WIDTH` columns, mid-sentence. ``markup``: ``text``
    holds rich style tags (its data escaped with :func:`escape`)."""
    c.print(text, markup=markup, highlight=False, soft_wrap=display_width(c) is None)


def wrap_words(text: str, width: int | None, indent: int = 2) -> str:
    """``text`` wrapped at ``width`` columns between words (a word, a path or a rule id, is never
    split, nor cut at its hyphens; one wider than a line stands alone on its line), continuation lines
    indented by ``indent`` spaces: a long note or warning printed as one line was broken mid-word by
    the terminal. ``width=None`` (no display, :func:`display_width`): ``text`` as it is, one line for a log."""
    import textwrap

    if width is None:
        return text
    return "\n".join(textwrap.wrap(text, max(width, indent + 1), subsequent_indent=" " * indent,
                                   break_long_words=False, break_on_hyphens=False)) or text.strip()


def wrap_items(head: str, items: Iterable[str], width: int, indent: int = 2) -> str:
    """``head`` (wrapped between words, as :func:`wrap_words`) followed by ``items`` joined with ", ",
    wrapped at ``width`` columns *between* items (an item, e.g. ``invalid_invocation 1`` or a rule id,
    is never split), continuation lines indented by ``indent`` spaces; an item wider than a line stands
    alone on its line."""
    lines = wrap_words(" ".join(head.split()), width, indent).split("\n")
    line = lines.pop()
    items = list(items)
    for i, item in enumerate(items):
        piece = item + ("," if i < len(items) - 1 else "")
        if len(line) + 1 + len(piece) > width and line.strip():
            lines.append(line)
            line = " " * indent + piece
        else:
            line = f"{line} {piece}" if line else piece
    lines.append(line)
    return "\n".join(lines)


def escape(text: str) -> str:
    """:func:`rich.markup.escape` (``rich`` imported on first use, as by :func:`console`)."""
    from rich.markup import escape as rich_escape

    return rich_escape(text)


def fail(message: str, code: int = EXIT_USAGE) -> None:
    """Print ``error: message`` to stderr and exit with ``code`` (default 2, a usage error)."""
    print_line(console(err=True), f"[bold red]error:[/] {escape(clip(message))}", markup=True)
    sys.exit(code)


def check_can_listen(host: str, port: int) -> None:
    """Exit with a usage error (code 2, the address and the system's reason named) when a server
    cannot listen on ``host:port`` (the port is in use, or the host is not an address of this
    machine), before anything is started: uvicorn would otherwise print its own log line and exit.
    The probe socket sets ``SO_REUSEADDR`` as uvicorn does, so a port left in TIME_WAIT is not refused.
    """
    try:
        with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            probe.bind((host, port))
    except OSError as e:
        fail(f"cannot listen on {host}:{port}: {e.strerror or e}")


def write_text(path: str | os.PathLike[str], text: str, outs: OutputSet | None = None) -> None:
    """Write an output file as UTF-8. A lone surrogate (``"\\ud800"`` is a legal JSON escape, so a
    trace can carry one into a message, a preview or a resumed run) is written as the escape
    ``\\ud800``: in JSON output that is the same string again, in HTML/Markdown visible text; a
    strict ``write_text`` raised ``UnicodeEncodeError`` (a traceback) instead. With ``outs`` the file is
    staged there, replaced when ``outs`` commits (with the command's other outputs).

    Raises:
        OSError: the file cannot be written (``handle_errors`` reports it).
    """
    write_parts(path, (text,), outs)


def write_parts(path: str | os.PathLike[str], parts: Iterable[str], outs: OutputSet | None = None) -> None:
    """:func:`write_text` of the concatenation of ``parts``, written piece by piece (a batch report
    is never held whole), atomically (:func:`trajaudit.cli.outputs.atomic_write`: a temporary file in
    the same folder, fsynced, renamed over the target — a full disk leaves the old file intact); with
    ``outs``, staged there (:class:`~trajaudit.cli.outputs.OutputSet`: renamed with the command's other
    outputs when it commits).

    Raises:
        OSError: the file cannot be written.
    """
    if outs is None:
        atomic_write(path, parts)
    else:
        outs.write(path, parts)


def check_output_folder(output: str | None, option: str = "-o/--output") -> None:
    """Refuse, before a batch runs, an output path whose folder does not exist, is no folder or cannot
    be written: the write comes after every run is audited, so a typo in the folder cost the whole
    batch's work (``audit -o missing/d.jsonl`` wrote nothing at all, not even the report), and a path
    the system would not open as a file (:func:`~trajaudit.cli.outputs.output_problem`: ``x.json/``,
    ``sub/../x.json`` with ``sub`` missing).

    Raises:
        TrajauditError: naming the option, the path and the folder.
    """
    if not output or output == "-":
        return
    problem = output_problem(output)  # also a trailing '/' and a '..' after a missing folder
    if problem is not None:
        raise TrajauditError(f"{option} {output!r}: {problem}")
    if is_special_file(output):  # /dev/stdout, a FIFO: written through, nothing is made in /dev
        return
    folder = os.path.dirname(os.path.abspath(output))
    if not os.access(folder, os.W_OK):
        raise TrajauditError(f"{option} {output!r}: the folder {folder!r} is not writable")


def refuse_overwriting_input(output: str | None, inputs: Iterable[str], option: str = "-o/--output",
                             roles: dict[str, str] | None = None) -> None:
    """Refuse an output path that is one of the input files (the same file, also through a link),
    including the files found by expanding the folders and globs among ``inputs``: writing it would
    destroy the input being read. :func:`refuse_same_outputs` compares a command's outputs. ``roles``
    names what an input is (``input_roles``); the others are traces.

    Raises:
        TrajauditError: naming the option and the file.
    """
    refuse_clobbering({option: output}, inputs, roles)


def input_roles(*, rules: Iterable[str] = (), tools: Iterable[str | None] = (), mapping: str | None = None,
                gold: Iterable[str] = (), pred: str | None = None) -> dict[str, str]:
    """What each non-trace input is, for :func:`refuse_overwriting_input`'s message: a rule pack, the
    ``--tools`` file, the ``--mapping`` file, the gold file, the ``--pred`` file (a refused ``-o tools.json``
    said "would overwrite the trace")."""
    roles = {str(g): "the gold file" for g in gold}
    roles.update({str(r): "the rule pack" for r in rules})
    roles.update({str(t): "the --tools file" for t in tools if t})
    if mapping:
        roles[mapping] = "the --mapping file"
    if pred:
        roles[pred] = "the --pred file"
    return roles


def refuse_dash(output: str | None, option: str, why: str) -> None:
    """Refuse ``-`` for an output that cannot go to stdout (``why`` says what it is written as): the
    command would have made a file literally named ``-``.

    Raises:
        TrajauditError: naming the option, and ``./-`` for a file of that name.
    """
    if output == "-":
        raise TrajauditError(f"{option} '-': {why}, not to stdout; give a file name (./- for a file named '-')")


def refuse_resume_into(output: str | None, option: str = "-o") -> None:
    """Refuse ``--resume`` into an output that is not a regular file: ``-`` (stdout), or a path that
    exists and is a device, a FIFO, a socket or a link to one (``/dev/stdout``). The journal reads the
    file back before appending to it, and reading the pipe it is about to write to waited forever
    (``audit X -o /dev/stdout --resume | head`` hung). Checked before the output is opened.

    Raises:
        TrajauditError: naming the option and the path.
    """
    if output == "-":
        raise TrajauditError(f"--resume appends to the {option} file: give a file, not '-'")
    if output and is_special_file(output):
        raise TrajauditError(f"--resume reads {option} {output!r} back before appending to it, and it is not a "
                             "regular file (a device, a pipe, a socket or a link to one): give a regular file, "
                             "or drop --resume")


def refuse_same_outputs(outputs: dict[str, str | None]) -> None:
    """Refuse two outputs of one command naming the same file (``-o X.html --report X.html``).

    Raises:
        TrajauditError: naming both options and the file.
    """
    refuse_clobbering(outputs)


#: Print the traceback of unexpected errors (``--debug`` on a command, or ``TRAJAUDIT_DEBUG=1``).
DEBUG = {"on": False}


#: Skipped lines (records) printed per input file; the rest are counted in one line (``--debug`` prints
#: them all). ``eval --pred x.sarif`` printed one "invalid JSON" line per line of the SARIF log.
MAX_SKIPPED_LINES = 5


def more_skipped(file: str, messages: list[str]) -> str:
    """The line standing for the skipped lines of ``file`` not printed (``messages``): ``… and N more
    lines of FILE skipped (not JSON Lines?)`` when every one is invalid JSON, else ``… records …``."""
    if all("invalid JSON" in m for m in messages):
        return f"… and {len(messages)} more lines of {file} skipped (not JSON Lines?; --debug lists them all)"
    return f"… and {len(messages)} more records of {file} skipped (--debug lists them all)"


def report_problems(problems: list[Problem]) -> None:
    """Print skipped runs to stderr, one line each (with ``--debug``, an unexpected error's traceback
    after its line). Of one file's skipped lines or records the first :data:`MAX_SKIPPED_LINES` are
    printed, then one line counting the rest (:func:`more_skipped`); ``--debug`` prints every one.
    The counts in the commands' summaries still count every skipped run."""
    if not problems:
        return
    c = console(err=True)
    shown: dict[str, int] = {}
    hidden: dict[str, list[str]] = {}
    for p in problems:
        if p.record is not None and not DEBUG["on"]:
            shown[p.file] = shown.get(p.file, 0) + 1
            if shown[p.file] > MAX_SKIPPED_LINES:
                hidden.setdefault(p.file, []).append(p.message)
                continue
        print_line(c, f"[yellow]skipped:[/] {escape(clip(p.message))}", markup=True)
        if DEBUG["on"] and p.details.get("traceback"):
            c.print(p.details["traceback"].rstrip(), markup=False, highlight=False, soft_wrap=True)
    for file, messages in hidden.items():
        print_line(c, f"[yellow]skipped:[/] {escape(clip(more_skipped(file, messages)))}", markup=True)


def warn_non_utf8(trajectories: Iterable[Any], problems: Iterable[Problem] = ()) -> None:
    """Print one ``warning: FILE is not valid UTF-8 …`` line to stderr per file whose runs carry the
    loader's ``non_utf8`` flag (bytes were replaced by U+FFFD, so quoted text may differ from the
    original), including runs that were then skipped (``problems`` whose ``details`` say
    ``non_utf8``). The exit code is not affected."""
    files = dict.fromkeys(t.source.file or t.id for t in trajectories if FLAG_NON_UTF8 in t.flags)
    files.update(dict.fromkeys(p.file for p in problems if p.details.get(FLAG_NON_UTF8)))
    if not files:
        return
    c = console(err=True)
    for f in files:
        print_line(c, f"[yellow]warning:[/] {escape(f)} is not valid UTF-8; undecodable bytes were replaced",
                   markup=True)


@dataclasses.dataclass
class RuleUse:
    """Which rules the validation logs of a batch show applied, gathered run by run (:meth:`add`).

    A check that the run's time budget (``--run-timeout``) left ``unknown`` (:attr:`Record.out_of_time
    <trajaudit.engine.validation_log.Record.out_of_time>`) is put at a rule's first candidate step
    whether or not its guard would hold there: it says the rule was not evaluated, not that it applied.

    Attributes:
        fired: rule ids with a check made (pass, fail or unknown) on some run.
        cut: rule ids left not evaluated (to the end) on some run by the time budget.
        runs_cut: the ids of the runs whose rule evaluation ran out of time.
    """

    fired: set[str] = dataclasses.field(default_factory=set)
    cut: set[str] = dataclasses.field(default_factory=set)
    runs_cut: list[str] = dataclasses.field(default_factory=list)

    def add(self, log: Any) -> None:
        """Count one run's :class:`~trajaudit.engine.validation_log.ValidationLog`."""
        for r in log.records:
            (self.cut if r.out_of_time else self.fired).add(r.rule_id)
        if log.out_of_time:
            self.runs_cut.append(log.trajectory_id)

    def never_fired(self, applied: Iterable[str]) -> list[str]:
        """The ``applied`` rules (in order) whose guard never held: no check made on any run, and
        none left unevaluated by the time budget (where it is not known whether the guard would hold)."""
        return [rid for rid in dict.fromkeys(applied) if rid not in self.fired and rid not in self.cut]

    def not_evaluated(self, applied: Iterable[str]) -> list[str]:
        """The ``applied`` rules (in order) with no check made on any run because the time budget
        ran out first on the runs where they had candidate steps."""
        return [rid for rid in dict.fromkeys(applied) if rid in self.cut and rid not in self.fired]


def say_never_fired(ids: list[str], runs: int, limit: int = 20, not_evaluated: list[str] | None = None) -> None:
    """Print the rules that never fired (stderr), the first ``limit`` by name; then the rules that
    were ``not_evaluated`` because the runs ran out of time (``--run-timeout``): whether their guard
    holds is not known, so they are not counted as never applied."""
    if not runs:
        return
    err = console(err=True)
    for head, rids in ((f"note: {len(ids)} rule(s) never applied on these {runs} run(s) (their guard never held):",
                        ids),
                       (f"note: {len(not_evaluated or ())} rule(s) not evaluated on these {runs} run(s) (rule "
                        "evaluation ran out of time first, --run-timeout; whether they apply is not known):",
                        not_evaluated or [])):
        if not rids:
            continue
        shown = rids[:limit] + ([f"… ({len(rids) - limit} more)"] if len(rids) > limit else [])
        # wrapped at the terminal's width between rule ids (an id never split), continuation lines indented
        width = display_width(err)  # off a display, one line for a log
        err.print(wrap_items(head, shown, width) if width else f"{head} {', '.join(shown)}", markup=False,
                  highlight=False, soft_wrap=True)


def warn_incomplete(message: str) -> None:
    """Print ``warning: message`` on stderr — with ``-q`` too: ``-q`` hides progress and summaries,
    not a warning that the results are incomplete (rule evaluation ran out of time, ``--run-timeout``).
    Wrapped between words at a terminal's width (:func:`wrap_words`); one line in a log file."""
    err = console(err=True)
    err.print(wrap_words(f"warning: {message}", display_width(err)), markup=False, highlight=False, soft_wrap=True)


def warn_degraded(diagnoses: Iterable[Any]) -> int:
    """The warning (stderr, also with ``-q``) that some ``diagnoses`` rest on partial evidence: their
    run's rule evaluation ran out of time (``--run-timeout``; ``metadata.degraded``). ``audit`` and
    ``eval`` say it alike. Returns how many were degraded (0: nothing printed)."""
    n = sum(1 for d in diagnoses if d.metadata.get("degraded"))
    if n:
        warn_incomplete(f"{n} run(s) ran out of rule-evaluation time (--run-timeout): the checks left were "
                        "'unknown', so their diagnoses rest on partial evidence (metadata.degraded)")
    return n


def report_load(trajectories: Iterable[Any], problems: list[Problem]) -> None:
    """After reading traces: the skipped runs (:func:`report_problems`), then the files that were not
    valid UTF-8 (:func:`warn_non_utf8`), on stderr."""
    report_problems(problems)
    warn_non_utf8(trajectories, problems)


def handle_errors(f: Callable[..., Any]) -> Callable[..., Any]:
    """Turn documented trajaudit errors into ``error: …`` + exit code 2, and add the command's
    ``--debug`` option. Any other exception is a bug: ``error: internal error: Type: message`` + exit
    code 2, its traceback printed only with ``--debug`` (or ``TRAJAUDIT_DEBUG=1``). Ctrl-C (a
    ``KeyboardInterrupt`` the command does not handle itself): ``interrupted`` + exit code 130; SIGTERM
    (:class:`~trajaudit.cli.signals.Terminated`, once the ``trajaudit`` command set it up):
    ``terminated`` + exit code 143 (:func:`~trajaudit.cli.signals.stop_message`, which also says when the
    outputs were already replaced)."""
    import functools
    import traceback

    @functools.wraps(f)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        DEBUG["on"] = bool(kwargs.pop("debug", False)) or os.environ.get("TRAJAUDIT_DEBUG", "") not in ("", "0")
        COMMITTED.clear()  # outputs replaced by an earlier command of this process (tests) are not this one's
        try:
            return f(*args, **kwargs)
        except (TrajauditError, LookupError) as e:
            fail(str(e.args[0]) if isinstance(e, LookupError) and e.args else str(e))
        except UnicodeDecodeError as e:
            fail(f"cannot read a file as UTF-8 text: {e}")
        except OSError as e:  # an output path that cannot be written, a file that vanished
            fail(f"{e.filename or ''}: {e.strerror or e}".lstrip(": "))
        except (click.exceptions.Exit, click.ClickException, click.Abort):
            raise
        except KeyboardInterrupt as e:  # Ctrl-C (SIGTERM: Terminated): as watch does, a line and the shell's
            # code for the signal (not click's "Aborted!" with exit 1, "some run was skipped" for audit and check)
            text, code = stop_message(e)
            click.echo(text, err=True)
            sys.exit(code)
        except Exception as e:  # noqa: BLE001 - the command's last boundary: no traceback without --debug
            if DEBUG["on"]:
                console(err=True).print(traceback.format_exc().rstrip(), markup=False, highlight=False, soft_wrap=True)
            fail(f"internal error: {type(e).__name__}: {e}" + ("" if DEBUG["on"] else " (--debug shows the traceback)"))

    return click.option("--debug", "debug", is_flag=True, envvar="TRAJAUDIT_DEBUG",
                        help="Print the traceback of unexpected errors (a bug report's details).")(wrapper)


# --- LLM endpoint options ----------------------------------------------------------------------------

DEFAULT_LLM_CACHE = "~/.cache/trajaudit/llm-cache.sqlite3"  # or $XDG_CACHE_HOME/trajaudit/… (disk_cache.cache_home)


@dataclasses.dataclass(frozen=True)
class LLMOptions:
    """The raw LLM options of a command (flags, or environment variables through the flags).

    Attributes:
        base_url, model, api_key: endpoint settings (``None`` = not given).
        config_file: a YAML/TOML file of :class:`~trajaudit.llm.config.LLMConfig` settings.
        cache: the sqlite cache path (``None`` = the config file's, else ``DEFAULT_LLM_CACHE``).
        no_cache: disable the cache.
    """

    base_url: str | None = None
    model: str | None = None
    api_key: str | None = None
    config_file: str | None = None
    cache: str | None = None
    no_cache: bool = False


def llm_options(f: Callable[..., Any]) -> Callable[..., Any]:
    """Add the LLM endpoint options to a command; it receives them as one ``llm_opts: LLMOptions``.

    Options: ``--base-url`` (env ``TRAJAUDIT_BASE_URL``), ``--model`` (``TRAJAUDIT_MODEL``),
    ``--api-key`` (``OPENAI_API_KEY``), ``--llm-config FILE`` (``TRAJAUDIT_LLM_CONFIG``),
    ``--cache PATH`` (``TRAJAUDIT_LLM_CACHE``), ``--no-cache``. Flags beat environment variables,
    which beat the config file. Build the client with :func:`client_from_options` only when an LLM
    is needed.
    """
    import functools

    names = ("llm_base_url", "llm_model", "llm_api_key", "llm_config", "llm_cache", "llm_no_cache")

    @functools.wraps(f)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        vals = [kwargs.pop(n) for n in names]
        kwargs["llm_opts"] = LLMOptions(*vals[:5], no_cache=bool(vals[5]))
        return f(*args, **kwargs)

    wrapper = click.option("--no-cache", "llm_no_cache", is_flag=True,
                           help="Do not read or write the LLM response cache.")(wrapper)
    wrapper = click.option("--cache", "llm_cache", metavar="PATH", envvar="TRAJAUDIT_LLM_CACHE", show_envvar=True,
                           help=f"sqlite file caching LLM answers (default {DEFAULT_LLM_CACHE}; $XDG_CACHE_HOME/trajaudit/ when set).")(wrapper)
    wrapper = click.option("--llm-config", "llm_config", metavar="FILE", envvar="TRAJAUDIT_LLM_CONFIG",
                           show_envvar=True, type=click.Path(dir_okay=False),
                           help="YAML or TOML file of LLM settings (base_url, model, temperature, "
                                "max_tokens, timeout, max_retries, concurrency, context_chars, ...).")(wrapper)
    wrapper = click.option("--api-key", "llm_api_key", metavar="KEY", envvar="OPENAI_API_KEY", show_envvar=True,
                           help="API key for the endpoint (local servers need none).")(wrapper)
    wrapper = click.option("--model", "llm_model", metavar="NAME", envvar="TRAJAUDIT_MODEL", show_envvar=True,
                           help="Model name at the endpoint.")(wrapper)
    wrapper = click.option("--base-url", "llm_base_url", metavar="URL", envvar="TRAJAUDIT_BASE_URL",
                           show_envvar=True,
                           help="OpenAI-compatible endpoint, e.g. http://127.0.0.1:8080/v1.")(wrapper)
    return wrapper


#: What the CLI says instead of the library's OFFLINE_ADVICE on commands that have --strategy.
_CLI_OFFLINE_ADVICE = "Without an LLM, use --strategy offline."


def llm_config_from_options(opts: LLMOptions, *, use_cache: bool = True, without_llm: str | None = None) -> Any:
    """The :class:`~trajaudit.llm.config.LLMConfig` for ``opts``.

    Args:
        without_llm: the advice for running without an LLM on this command, replacing the library's
            (which also names the Python API); ``None``: "use --strategy offline" (commands that have
            ``--strategy``); ``""`` drops the advice.

    Raises:
        ConfigError: no endpoint configured (the message names the flags and variables and the way
            to run without an LLM), or a bad config file.
    """
    try:
        return _llm_config(opts, use_cache)
    except ConfigError as e:
        msg = str(e)
        if OFFLINE_ADVICE not in msg:
            raise
        advice = _CLI_OFFLINE_ADVICE if without_llm is None else without_llm
        raise ConfigError(" ".join(msg.replace(OFFLINE_ADVICE, advice).split())) from None


def _llm_config(opts: LLMOptions, use_cache: bool) -> Any:
    file_values = load_config_file(opts.config_file) if opts.config_file else {}
    given = opts.cache or file_values.get("cache_path")
    home = None if given or opts.no_cache or not use_cache else disk_cache.cache_home()
    if opts.no_cache or not use_cache:
        cache = None
    elif given:
        cache = os.path.expanduser(given)
    elif home is None:  # HOME=/nonexistent or empty (a service account): no home folder is created
        print_line(console(err=True), f"warning: LLM answer cache off: no home folder (HOME={os.environ.get('HOME')!r}) "
                   "and no XDG_CACHE_HOME; give --cache FILE to keep answers")
        cache = None
    else:
        cache = str(home / "llm-cache.sqlite3")
    values = {"base_url": opts.base_url, "model": opts.model, "api_key": opts.api_key}
    config = build_config(values, config_file=opts.config_file)
    return dataclasses.replace(config, cache_path=cache)


def client_from_options(opts: LLMOptions, *, use_cache: bool = True, without_llm: str | None = None) -> Any:
    """An :class:`~trajaudit.llm.client.LLMClient` built from ``opts`` (see :func:`llm_config_from_options`,
    which also explains ``without_llm``).

    Raises:
        ConfigError: as :func:`llm_config_from_options`; ``openai`` missing; the cache cannot be opened.
    """
    return llm_layer.LLMClient(llm_config_from_options(opts, use_cache=use_cache, without_llm=without_llm))


def llm_configured(opts: LLMOptions) -> bool:
    """Whether the user gave any endpoint setting (a flag, its environment variable, or a config file)."""
    return bool(opts.base_url or opts.model or opts.config_file)


def llm_config_for(opts: LLMOptions, *, needed: bool, wanted: bool = False, what: str = "this command") -> Any:
    """The LLM configuration a command should use, or ``None``.

    Args:
        needed: an LLM is required (an LLM strategy): a missing endpoint is a ``ConfigError``.
        wanted: an LLM is used when configured (e.g. ``--repair``), else ``None``.
        what: named in the error (``"strategy 'agentrx'"``).

    Raises:
        ConfigError: needed and not configured (the message names the flags and variables and
            suggests ``--strategy offline``), or a bad config file.
    """
    if not needed and not (wanted and llm_configured(opts)):
        return None
    try:
        return llm_config_from_options(opts)
    except ConfigError as e:
        raise ConfigError(f"{what} needs an LLM; {e}") from None
