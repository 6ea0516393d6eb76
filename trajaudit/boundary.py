"""The per-run boundary: whatever goes wrong while one run is read, checked or judged becomes that
run's error record (:class:`~trajaudit.errors.Problem`: file, record, stage, message), and the batch
goes on.

Documented errors (:class:`~trajaudit.errors.TrajauditError`, ``LookupError``) keep their message;
anything else is a bug in trajaudit or a checker and is reported as ``internal error while STAGE:
Type: message``, with its traceback kept in ``Problem.details["traceback"]`` (the CLI prints it only
with ``--debug``; it is logged at DEBUG level, never printed by default). :func:`stage` names the
stage an exception escaped from (the pipeline wraps its evidence, judge and repair steps in it).
"""

from __future__ import annotations

import contextlib
import traceback
from collections.abc import Callable, Iterable, Iterator
from typing import Any, TypeVar

from trajaudit.errors import LLMUnreachableError, Problem, TraceFormatError, TrajauditError

T = TypeVar("T")
R = TypeVar("R")

_ATTR = "trajaudit_stage"


@contextlib.contextmanager
def stage(name: str) -> Iterator[None]:
    """Tag an exception escaping the block with the stage ``name`` (the innermost tag wins)."""
    try:
        yield
    except Exception as e:
        if not hasattr(e, _ATTR):
            with contextlib.suppress(AttributeError, TypeError):
                setattr(e, _ATTR, name)
        raise


def stage_of(e: BaseException, default: str) -> str:
    """The stage ``e`` was tagged with by :func:`stage`, else ``default``."""
    return getattr(e, _ATTR, None) or default


def expected(e: BaseException) -> bool:
    """Whether ``e`` is a documented error (its message is the report) rather than a bug: a
    :class:`TrajauditError`, a registry's plain ``LookupError`` (an unknown name, with suggestions), an
    ``OSError`` or a ``UnicodeDecodeError`` (a file). A ``KeyError`` or ``IndexError`` is a bug."""
    return isinstance(e, (TrajauditError, OSError, UnicodeDecodeError)) or type(e) is LookupError


def describe(e: BaseException, default_stage: str) -> tuple[str, str, dict[str, str]]:
    """``(stage, message, details)`` for an exception caught at the per-run boundary.

    A documented error's message is its text (a ``LookupError``'s first argument); any other
    exception is ``internal error while STAGE: Type: message`` and ``details`` carries its traceback
    (``{"traceback": text}``).
    """
    where = stage_of(e, default_stage)
    if expected(e):
        if isinstance(e, LookupError) and e.args:
            return where, str(e.args[0]), {}
        if isinstance(e, OSError) and e.strerror:
            return where, f"{e.filename + ': ' if e.filename else ''}{e.strerror}", {}
        return where, str(e), {}
    text = str(e)
    if len(text) > 500:
        text = text[:500] + f"… ({len(text) - 500} more characters)"
    tb = "".join(traceback.format_exception(type(e), e, e.__traceback__))
    return where, f"internal error while {_GERUND.get(where, where)}: {type(e).__name__}: {text}", {"traceback": tb}


_GERUND = {"read": "reading", "load": "loading", "evidence": "gathering evidence", "judge": "judging",
           "repair": "writing the repair", "check": "checking", "claims": "extracting claims", "show": "showing"}


def load_problem(e: BaseException, file: str | None, record: int | None, details: dict | None = None) -> Problem:
    """The :class:`~trajaudit.errors.Problem` for an exception while loading one run (or file): the
    message names the file and record (``FILE, record N: …``), ``details`` gets the traceback."""
    where, message, extra = describe(e, "load")
    located = TraceFormatError(message, file=file, record=record)
    return Problem(file or "<input>", record, str(located), {**(details or {}), **extra}, stage=where)


def run_problem(t: Any, e: BaseException, default_stage: str) -> Problem:
    """The :class:`~trajaudit.errors.Problem` of run ``t`` (a Trajectory) for an exception caught at
    its boundary: ``FILE, record N (run ID): message`` as the pipeline words it."""
    where_stage, message, details = describe(e, default_stage)
    where = t.source.file or ""
    if where and t.source.record is not None:
        where += f", record {t.source.record}"
    text = f"{where} (run {t.id}): {message}" if where else f"{t.id}: {message}"
    return Problem(t.source.file or t.id, t.source.record, text, details, stage=where_stage)


def each_run(runs: Iterable[T], fn: Callable[[T], R], default_stage: str) -> tuple[list[tuple[T, R]], list[Problem]]:
    """``fn(run)`` for every run inside the per-run boundary: ``([(run, result)], [problem])`` — a run
    whose ``fn`` raises is a problem (:func:`run_problem`), the others go on. ``LLMUnreachableError``
    (every further run would fail the same way) is raised."""
    done: list[tuple[T, R]] = []
    problems: list[Problem] = []
    for t in runs:
        try:
            with stage(default_stage):
                done.append((t, fn(t)))
        except LLMUnreachableError:
            raise
        except Exception as e:  # noqa: BLE001 - the per-run boundary
            problems.append(run_problem(t, e, default_stage))
    return done, problems
