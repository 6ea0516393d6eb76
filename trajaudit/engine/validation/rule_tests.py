"""Running each rule's ``examples`` (the pass/fail fixtures ``trajaudit rules test`` checks).

An example is a small trajectory (``messages``: an OpenAI chat list, or ``trace``: any document the
loader reads) and the expected verdict of the rule on it:

- ``fail``: some step fails (at step ``at`` when given);
- ``pass``: no step fails and some step passes (at ``at`` when given);
- ``unknown``: some step is ``unknown`` (at ``at``);
- ``skip``: the guard holds nowhere (no record; or none at ``at``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from trajaudit.engine.packs.compile import CompiledRule
from trajaudit.engine.trace.loader import load
from trajaudit.engine.validation.rule_eval import evaluate
from trajaudit.engine.validation_log import ValidationLog
from trajaudit.errors import TrajauditError


@dataclass(frozen=True)
class ExampleResult:
    """One example's outcome: ``ok`` and, when not ok, ``detail`` saying what happened instead."""

    rule_id: str
    name: str
    expect: str
    ok: bool
    detail: str = ""
    location: str = ""


def _verdicts(vlog: ValidationLog, at: int | None) -> list[str]:
    return [r.verdict for r in vlog.records if at is None or r.step == at]


def check_example(rule: CompiledRule, example: dict[str, Any], number: int, **kw: Any) -> ExampleResult:
    """Run one example of ``rule``; never raises for a bad example (it becomes a failed result)."""
    name = example.get("name") or f"example {number}"
    expect = example["expect"]
    at = example.get("at")
    loc = str(rule.spec.field_locs.get(f"examples.{number}", rule.spec.loc))
    try:
        doc = example["messages"] if "messages" in example else example["trace"]
        if not isinstance(doc, (dict, list)):
            raise KeyError("'trace' must be an inline document (a mapping or a list), not a path")
        traj = load(doc, format="openai" if "messages" in example else None)
    except (TrajauditError, KeyError) as e:
        return ExampleResult(rule.id, name, expect, False, f"example does not load: {e}", loc)
    if at is not None and not 0 <= at < len(traj.steps):
        return ExampleResult(rule.id, name, expect, False, f"'at: {at}' is outside the example's "
                                                           f"{len(traj.steps)} steps", loc)
    vlog = evaluate(traj, [rule], **kw)
    got = _verdicts(vlog, at)
    where = f" at step {at}" if at is not None else ""
    if expect == "fail":
        ok = "fail" in got
    elif expect == "pass":
        ok = "pass" in got and "fail" not in got
    elif expect == "unknown":
        ok = "unknown" in got
    else:
        ok = not got
    detail = ""
    if not ok:
        seen = ", ".join(f"{r.verdict}@{r.step}" for r in vlog.records) or "no records (guard never held)"
        msgs = "; ".join(f"{r.step}: {r.message or r.reason}" for r in vlog.records if r.verdict != "pass")[:300]
        detail = f"expected {expect}{where}, got {seen}" + (f" — {msgs}" if msgs else "")
    return ExampleResult(rule.id, name, expect, ok, detail, loc)


def run_examples(rules: list[CompiledRule], **kw: Any) -> list[ExampleResult]:
    """Every example of every rule, in pack order."""
    out = []
    for r in rules:
        for i, ex in enumerate(r.spec.examples):
            out.append(check_example(r, ex, i, **kw))
    return out
