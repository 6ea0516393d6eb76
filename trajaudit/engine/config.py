"""The audit's explicit limits and choices (:class:`AuditConfig`), shared by the rule evaluator, the
claim extractor, the strategies and the pipeline — below all of them, so each imports it directly."""

from __future__ import annotations

from dataclasses import dataclass

from trajaudit.run_budget import DEFAULT_RUN_TIMEOUT, check_run_timeout

__all__ = ["AuditConfig"]


@dataclass(frozen=True)
class AuditConfig:
    """Explicit limits and choices for an audit (no hidden configuration; limits are fields here).

    Attributes:
        taxonomy: taxonomy id the judge labels with.
        seed: seed for randomized strategies (the random baseline).
        rule_budget: maximum evaluation operations per rule per trajectory; hitting it yields
            ``unknown`` records with the reason.
        max_claims_per_step: cap on extracted claims per step (the cap is reported when hit).
        min_violation_severity: violations below this severity are ignored by the offline judge.
        run_timeout: seconds of rule evaluation per run (z3 time included; ``None``: unlimited); when
            used up, the checks left are ``unknown`` and the diagnosis is marked degraded
            (:mod:`trajaudit.run_budget`). A finite number from
            :data:`~trajaudit.run_budget.MIN_RUN_TIMEOUT` (a microsecond) to
            :data:`~trajaudit.run_budget.MAX_RUN_TIMEOUT` (a day), as ``--run-timeout``.

    Raises:
        ValueError: ``run_timeout`` is ``nan``, infinite, 0, negative or above a day (the message names
            the field).
        TypeError: ``run_timeout`` is not a number (nor ``None``).
    """

    taxonomy: str = "agentrx"
    seed: int = 0
    rule_budget: int = 200_000
    max_claims_per_step: int = 200
    min_violation_severity: str = "warning"
    run_timeout: float | None = DEFAULT_RUN_TIMEOUT

    def __post_init__(self) -> None:
        if self.run_timeout is not DEFAULT_RUN_TIMEOUT:  # the default needs no check (AuditConfig() is common)
            object.__setattr__(self, "run_timeout", check_run_timeout(self.run_timeout))
