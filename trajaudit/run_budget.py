"""The per-run time budget of rule evaluation (``AuditConfig.run_timeout``, ``--run-timeout``).

Each rule already has an operation budget (``AuditConfig.rule_budget``), but a rule whose z3 question
cannot be decided costs its solver limit (2 s) at every guarded step: 84 s for a run of 40 agent steps,
over an hour for 2,500. :func:`deadline` opens a wall-clock budget for one run's rule evaluation;
:func:`remaining` is what is left of it (z3 queries take ``min(their limit, remaining)``, so solver
time counts against the run's budget), and :func:`expired` tells the evaluator to stop: the checks not
made are ``unknown`` and the diagnosis is marked degraded (``metadata["degraded"]``).
"""

from __future__ import annotations

import contextlib
import contextvars
import math
import numbers
import time
from collections.abc import Iterator
from typing import Any

#: Seconds of rule evaluation per run by default (real runs take well under a second).
DEFAULT_RUN_TIMEOUT = 60.0
#: The largest budget accepted (a day): ``--run-timeout`` and ``AuditConfig.run_timeout``.
MAX_RUN_TIMEOUT = 86400.0
#: The smallest budget accepted (a microsecond): below it a budget means nothing (it is used up before
#: the first check) and ``1e-320`` is a denormal float, echoed as ``9.99989e-321 s``.
MIN_RUN_TIMEOUT = 1e-6

_DEADLINE: contextvars.ContextVar[float | None] = contextvars.ContextVar("trajaudit_run_deadline", default=None)


def check_run_timeout(value: Any, name: str = "AuditConfig.run_timeout") -> float | None:
    """A run's time budget as given to the Python API: ``None`` (no budget), else a finite number of
    seconds, ``MIN_RUN_TIMEOUT <= value <= MAX_RUN_TIMEOUT`` — the range of the CLI's ``--run-timeout``
    (``cli.options.RunTimeout``). ``nan`` (every comparison with it is false: it meant no budget at
    all), ``inf``, 0, negative numbers, values below a microsecond and integers too large for a float
    (``10**400``) are refused, as there.

    Returns:
        ``value`` as a ``float``, or ``None``.

    Raises:
        TypeError: ``value`` is not a real number (a ``bool``, a string), naming ``name``.
        ValueError: ``value`` is out of range, naming ``name`` and the range.
    """
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a number of seconds or None (no budget), got {value!r}")
    try:
        seconds = float(value)
    except OverflowError:  # 10**400: no float holds it
        seconds = math.inf
    if not in_range(seconds):
        shown = (f"an integer of {int(value).bit_length()} bits" if isinstance(value, numbers.Integral)
                 and int(value).bit_length() > 128 else repr(value))  # repr() of a 5,000-digit int raises
        raise ValueError(f"{name} must be a number of seconds from {MIN_RUN_TIMEOUT:g} to {MAX_RUN_TIMEOUT:g}, or "
                         f"None for no budget (default {DEFAULT_RUN_TIMEOUT:g}); got {shown}")
    return seconds


def in_range(seconds: float) -> bool:
    """Whether ``seconds`` is an accepted time budget: finite, from :data:`MIN_RUN_TIMEOUT` to
    :data:`MAX_RUN_TIMEOUT` (``nan`` is not: every comparison with it is false)."""
    return math.isfinite(seconds) and MIN_RUN_TIMEOUT <= seconds <= MAX_RUN_TIMEOUT


@contextlib.contextmanager
def deadline(seconds: float | None) -> Iterator[float | None]:
    """Open a budget of ``seconds`` (``None``: unlimited) for the block; a budget already open (an
    outer run) keeps the earlier of the two deadlines. Yields the deadline (``time.monotonic``) or
    ``None``."""
    outer = _DEADLINE.get()
    mine = None if seconds is None else time.monotonic() + seconds
    at = mine if outer is None else outer if mine is None else min(outer, mine)
    token = _DEADLINE.set(at)
    try:
        yield at
    finally:
        _DEADLINE.reset(token)


def remaining() -> float | None:
    """Seconds left of the open budget (may be negative), or ``None`` when none is open."""
    at = _DEADLINE.get()
    return None if at is None else at - time.monotonic()


def remaining_ms(cap: int) -> int:
    """Milliseconds a bounded step (a z3 query) may take: ``cap``, or less when the run's budget has
    less left (at least 1 when any is left, 0 when it is used up)."""
    left = remaining()
    if left is None:
        return cap
    return 0 if left <= 0 else max(1, min(cap, int(left * 1000)))


def expired() -> bool:
    """Whether the open budget (if any) is used up."""
    at = _DEADLINE.get()
    return at is not None and time.monotonic() >= at
