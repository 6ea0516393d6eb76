"""The ``unknown`` checks of a batch's validation logs, counted for ``check``'s gate and ``audit``'s warning.

A check left ``unknown`` because its rule could not be evaluated (an evaluation error: a division by
zero, ``len()`` of a step range, a checker that raised) is a defect of the rule, not a fact about the
run; ``check`` fails its gate on it (``--fail-on-unknown``) and ``audit`` warns that the diagnoses rest
on partial evidence. Both count them here, run by run (:meth:`Unknowns.add`), and say it in the same words.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from dataclasses import dataclass, field

from trajaudit.engine.validation_log import ValidationLog

__all__ = ["Unknowns"]

#: how many rules a warning names (the rest are counted)
NAMED_RULES = 5


@dataclass
class Unknowns:
    """The ``unknown`` checks of a batch's logs (those of the time budget, :attr:`Record.out_of_time
    <trajaudit.engine.validation_log.Record.out_of_time>`, left out: they are checks not made).

    Attributes:
        checks: the unknown checks.
        errors: those made because the rule could not be evaluated (:attr:`Record.eval_error
            <trajaudit.engine.validation_log.Record.eval_error>`).
        by_rule: ``{rule id: (evaluation-error checks, first reason)}``, in order of first appearance.
        runs_with_errors: the runs (ids, in order) with an evaluation error.
    """

    checks: int = 0
    errors: int = 0
    by_rule: dict[str, tuple[int, str]] = field(default_factory=dict)
    runs_with_errors: list[str] = field(default_factory=list)

    @classmethod
    def of(cls, logs: Iterable[ValidationLog]) -> Unknowns:
        """Count the unknown checks of ``logs``."""
        u = cls()
        for lg in logs:
            u.add(lg)
        return u

    def add(self, log: ValidationLog) -> None:
        """Count the unknown checks of one run's ``log`` (``audit`` adds each run as it finishes)."""
        errors = self.errors
        for r in log.records:
            if r.verdict != "unknown" or r.out_of_time:
                continue
            self.checks += 1
            if r.eval_error:
                self.errors += 1
                n, first = self.by_rule.get(r.rule_id, (0, r.reason or "-"))
                self.by_rule[r.rule_id] = (n + 1, first)
        if self.errors > errors:
            self.runs_with_errors.append(log.trajectory_id)

    def split(self) -> str:
        """Why the checks are unknown, in the words of the warnings: "14 could not be evaluated" (an
        evaluation error: a defect of the rule), "6 could not be decided" (for want of data: no LLM
        configured, an assertion on missing data), the parts that are not zero."""
        parts = [f"{n} could not be {what}" for n, what in ((self.errors, "evaluated"),
                                                            (self.checks - self.errors, "decided")) if n]
        return ", ".join(parts)

    def fail_gate(self, mode: str) -> bool:
        """Whether these unknowns fail the gate under ``--fail-on-unknown mode`` (error, any, never)."""
        return bool(self.errors if mode == "error" else self.checks if mode == "any" else 0)

    def named_rules(self, said: Collection[str] = ()) -> str:
        """The rules with evaluation errors, "bad.div at 6 step(s), first reason: …; …", the first
        :data:`NAMED_RULES` (the rest counted); the first reason of each rule not in ``said`` (those a
        warning has already named with their reason)."""
        rules = [f"{rid} at {n} step(s)" + ("" if rid in said else f", first reason: {reason}")
                 for rid, (n, reason) in self.by_rule.items()]
        return "; ".join(rules[:NAMED_RULES]) + (f"; … ({len(rules) - NAMED_RULES} more rule(s))"
                                                 if len(rules) > NAMED_RULES else "")

    def gate_warning(self, mode: str, said: Collection[str] = ()) -> str:
        """``check``'s warning that says which unknowns fail the gate (``mode`` as :meth:`fail_gate`);
        the rules named as :meth:`named_rules`."""
        named = self.named_rules(said)
        head = (f"{self.errors} check(s) could not be evaluated ({named})" if mode == "error" else
                f"{self.checks} check(s) are 'unknown' ({self.split()}"
                + (f"; could not be evaluated: {named})" if self.by_rule else ")"))
        return (f"{head}; the result is incomplete, so the exit code is 1 (--fail-on-unknown {mode}; "
                "'never' lets unknown checks pass)")

    def audit_warning(self, runs: int) -> str | None:
        """``audit``'s warning that rules could not be evaluated on some of its ``runs`` (``None``: every
        rule was): the checks, the runs and the rules (as :meth:`named_rules`). Those checks gave no
        verdict, so the diagnoses of those runs rest on partial evidence; the rule is what to fix
        (``trajaudit check --rules PACK`` lists every such check)."""
        if not self.errors:
            return None
        return (f"{self.errors} check(s) could not be evaluated in {len(self.runs_with_errors)} of {runs} run(s) "
                f"({self.named_rules()}): those rules gave no verdict there, so the diagnoses rest on partial "
                "evidence (`trajaudit check` lists each such check)")
