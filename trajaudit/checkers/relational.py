"""z3-backed relational checks over numbers that rules extract (AgentRx RELATIONAL_POST constraints).

Plain evaluation decides ``claimed == len(list)``; z3 is used where plain evaluation cannot: exact
rational arithmetic over decimal prices (no float drift: ``0.1 + 0.2 == 0.3``) and existential
questions such as "is the refund the agent states the sum of *some* of the order's item prices?"
(a subset-sum over linear integer/real arithmetic).
"""

from __future__ import annotations

from fractions import Fraction
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import z3

from trajaudit import run_budget

MAX_SUBSET_ITEMS = 64
SOLVER_TIMEOUT_MS = 2000


def _exact(x: int | float) -> Fraction:
    """The decimal a number was written as (``50.88`` → 5088/100), not its binary float value."""
    return Fraction(str(x)) if isinstance(x, float) else Fraction(x)


def _real(q: Fraction) -> z3.ArithRef:
    import z3  # z3 (a third-party solver, ~30 ms to import) loads only when a rule uses it

    return z3.RealVal(f"{q.numerator}/{q.denominator}")


def subset_summing_to(values: list[int | float], target: int | float) -> list[int | float] | None:
    """A sub-list of ``values`` whose exact (decimal) sum equals ``target``, or ``None`` if none exists.

    Args:
        values: the numbers (e.g. item prices); at most ``MAX_SUBSET_ITEMS``.
        target: the stated total.

    Returns:
        The chosen values in their original order, or ``None`` when no subset sums to ``target``.

    Raises:
        ValueError: too many values, or z3 could not decide within ``SOLVER_TIMEOUT_MS`` (or what is left
            of the run's time budget, :mod:`trajaudit.run_budget`).
    """
    import z3  # loaded on the first subset question, not when the rule language is imported

    if len(values) > MAX_SUBSET_ITEMS:
        raise ValueError(f"subset_sum over {len(values)} values (limit {MAX_SUBSET_ITEMS})")
    picks = [z3.Bool(f"pick_{i}") for i in range(len(values))]
    total = z3.Sum([z3.If(p, _real(_exact(v)), z3.RealVal(0)) for p, v in zip(picks, values, strict=True)]) \
        if values else z3.RealVal(0)
    limit = run_budget.remaining_ms(SOLVER_TIMEOUT_MS)  # solver time counts against the run's budget
    if limit <= 0:
        raise ValueError("z3 was not asked: the run's time budget (--run-timeout) is used up")
    s = z3.Solver()
    s.set("timeout", limit)
    s.add(total == _real(_exact(target)))
    res = s.check()
    if res == z3.unknown:
        raise ValueError("z3 could not decide subset_sum within the time limit")
    if res == z3.unsat:
        return None
    m = s.model()
    return [v for p, v in zip(picks, values, strict=True) if z3.is_true(m.eval(p, model_completion=True))]
