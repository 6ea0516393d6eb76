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
from collections.abc import Iterator

from trajaudit.errors import TrajauditError

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
    """Whether ``e`` is a documented error (its message is the report) rather than a bug."""
    return isinstance(e, (TrajauditError, LookupError, OSError, UnicodeDecodeError))


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
