"""The audit's explicit limits and choices (:class:`AuditConfig`), shared by the rule evaluator, the
claim extractor, the strategies and the pipeline — below all of them, so each imports it directly."""

from __future__ import annotations

from dataclasses import dataclass

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
    """

    taxonomy: str = "agentrx"
    seed: int = 0
    rule_budget: int = 200_000
    max_claims_per_step: int = 200
    min_violation_severity: str = "warning"
