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
import time
from collections.abc import Iterator

#: Seconds of rule evaluation per run by default (real runs take well under a second).
DEFAULT_RUN_TIMEOUT = 60.0

_DEADLINE: contextvars.ContextVar[float | None] = contextvars.ContextVar("trajaudit_run_deadline", default=None)


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
