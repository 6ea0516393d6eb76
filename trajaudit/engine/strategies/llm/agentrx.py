"""The ``agentrx`` strategy: synthesized + pack rules → validation log → checklist judge.

AgentRx (Barke et al., 2026), §3: dynamic constraints C^D are synthesized from the task and the run
(§3.1; :class:`~trajaudit.engine.packs.synthesis.RuleSynthesizer`, one-shot by default, step-by-step on
request), checked and compiled by the rule engine, and evaluated with the pack rules the context
carries (the shipped default packs included, through :func:`trajaudit.engine.run.evidence.gather`) into
one validation log V (§3.2-3.3). An LLM judge then receives the task, the run, the taxonomy checklist
K (each category's definition, boundary and yes/no questions) and the violations of V as evidence,
not verdicts (§3.4), and names the critical step, category and agent with a rationale citing
evidence addresses. Its answer is schema-validated JSON; the step is snapped to a decision step.

Semantic checks of synthesized rules are answered by the LLM semantic oracle, at most
``max_semantic_checks`` per run (beyond that: ``unknown`` records saying so). The synthesized
rules' records (origin ``synthesized``) join the run's evidence log, so the report shows them.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any

from trajaudit.checkers.semantic import SemanticAnswer
from trajaudit.checkers.semantic_llm import LLMSemanticOracle
from trajaudit.engine.diagnosis import Candidate, Diagnosis
from trajaudit.engine.packs.synthesis import RuleSynthesizer, SynthesisResult
from trajaudit.engine.strategies.base import INCONCLUSIVE
from trajaudit.engine.strategies.context import AuditContext, EvidenceBundle
from trajaudit.engine.strategies.llm.base import (
    category_schema,
    make_diagnosis,
    no_decision_diagnosis,
    normalize_category,
    require_llm,
    snap_to_decision,
)
from trajaudit.engine.taxonomy import load_taxonomy
from trajaudit.engine.trace.ir import Step, Trajectory
from trajaudit.engine.validation.rule_eval import evaluate
from trajaudit.engine.validation_log import Evidence, Record, ValidationLog
from trajaudit.errors import LLMError, LLMUnreachableError
from trajaudit.llm.fitting import cut_text
from trajaudit.llm.prompt_run import PromptRun
from trajaudit.llm.usage import tracking

ORIGIN = "synthesized"
_ADDRESS = re.compile(r"^steps\.(\d+)(?:[.\[].*)?$")


class BudgetedOracle:
    """A semantic oracle that answers at most ``limit`` predicates, then ``unknown`` with the reason."""

    def __init__(self, inner: Any, limit: int) -> None:
        self.inner = inner
        self.limit = limit
        self.used = 0

    def judge(self, predicate: str, trajectory: Trajectory, step: Step, bindings: dict[str, Any]) -> SemanticAnswer:
        """Delegate while under the limit."""
        if self.used >= self.limit:
            return SemanticAnswer("unknown", (), f"semantic-check budget of {self.limit} per run used up")
        self.used += 1
        return self.inner.judge(predicate, trajectory, step, bindings)


def checklist_text(taxonomy: Any) -> str:
    """The taxonomy checklist K as prompt text: per category its id, name, definition, boundary and questions."""
    blocks = []
    for c in taxonomy.categories:
        lines = [f"- {c.id} ({c.name}): {' '.join(c.definition.split())}"]
        if c.boundary:
            lines.append(f"  boundary: {' '.join(c.boundary.split())}")
        lines += [f"  ? {q}" for q in c.checklist]
        blocks.append("\n".join(lines))
    return "\n".join(blocks)


def violation_rows(records: list[Record], limit: int) -> tuple[list[dict[str, Any]], int]:
    """Compact JSON rows of violations for the judge (earliest first), at most ``limit``; messages
    longer than 300 characters are cut visibly (``[…N chars cut…]``), evidence to four addresses.

    Returns:
        ``(rows, number left out)``.
    """
    rows = []
    for r in records[:limit]:
        rows.append({"step": r.step, "rule": r.rule_id, "type": r.rule_type, "severity": r.severity,
                     "targets": list(r.targets), "message": cut_text(" ".join(r.message.split()), 300),
                     "evidence": [e.address for e in r.evidence[:4]], "origin": r.origin})
    return rows, max(0, len(records) - limit)


class AgentRx:
    """AgentRx: constraint synthesis + validation log + checklist judge (2-3 calls per run one-shot,
    plus the semantic checks of synthesized rules).

    Args:
        mode: dynamic synthesis mode, ``one-shot`` or ``step-by-step`` (``context.strategy_options["agentrx"]["mode"]``
            overrides it per audit).
        max_rules: rules asked for per synthesis call.
        max_violations: violations shown to the judge (earliest first; the rest are counted in a note).
        max_semantic_checks: LLM semantic checks of synthesized rules per run.
        reflect: run the reflection pass over the synthesized rules.
        repair_rules: run the one repair round for synthesized rules that were rejected.
    """

    name = "agentrx"
    description = ("LLM (AgentRx): synthesized + pack rules give a validation log; a judge with the taxonomy "
                   "checklist reads the violations as evidence")
    needs_llm = True

    def __init__(self, *, mode: str = "one-shot", max_rules: int = 8, max_violations: int = 60,
                 max_semantic_checks: int = 8, reflect: bool = False, repair_rules: bool = True) -> None:
        self.mode = mode
        self.max_rules = max_rules
        self.max_violations = max_violations
        self.max_semantic_checks = max_semantic_checks
        self.reflect = reflect
        self.repair_rules = repair_rules

    def diagnose(self, trajectory: Trajectory, evidence: EvidenceBundle, context: AuditContext) -> Diagnosis:
        """Synthesize, validate, judge. The synthesized rules' records join ``evidence.log`` (replaced by
        the merged log, which the pipeline reports).

        Raises:
            ConfigError: no LLM client in ``context``.
            LLMError: a synthesis or judge call failed or its answer was invalid twice.
        """
        client = require_llm(context, self.name)
        taxonomy = load_taxonomy(context.config.taxonomy)
        run = PromptRun()
        mode = str(context.strategy_options.get(self.name, {}).get("mode", self.mode))
        with tracking() as usage:
            bundle = evidence
            known = sorted({r.spec.title or r.id for r in _pack_rules(trajectory, context)})
            synthesizer = RuleSynthesizer(client, taxonomy=taxonomy, max_rules=self.max_rules, reflect=self.reflect,
                                          repair=self.repair_rules)
            try:
                synth = synthesizer.from_run(trajectory, mode=mode, known_rules=known)
            except LLMUnreachableError:  # the endpoint is down: stop, do not degrade
                raise
            except LLMError as e:  # the pack rules and the judge still work: degrade, and say so
                synth = SynthesisResult("synthesized.run", taxonomy.id, model=client.config.model,
                                        notes=[f"synthesis failed: {e}"])
                run.notes.append(f"no rule synthesized: {e}")
            oracle = BudgetedOracle(LLMSemanticOracle(client), self.max_semantic_checks)
            dyn = evaluate(trajectory, synth.compiled(), oracle=oracle, config=context.config, tools=context.tools)
            merged = _merge(bundle.log, dyn)
            evidence.log = merged
            violations = [r for r in merged.violations(context.config.min_violation_severity)
                          if 0 <= r.step < len(trajectory.steps)]
            rows, left_out = violation_rows(violations, self.max_violations)
            if left_out:
                run.notes.append(f"{left_out} later violation(s) not shown to the judge (max_violations="
                                 f"{self.max_violations})")
            decisions = [s.index for s in trajectory.decision_steps]
            if not decisions:
                return no_decision_diagnosis(trajectory, context, self.name, usage, run)
            messages, view = run.fitted(
                client, "agentrx_judge", trajectory, "trajectory", range(len(trajectory.steps)),
                focus=tuple(sorted({r["step"] for r in rows}))[:6], task=trajectory.task,
                violations=rows or [{"note": "no check failed"}], checklist=checklist_text(taxonomy),
                labeling_policy=" ".join(taxonomy.labeling_policy.split()) or "(none)",
                decision_steps=", ".join(map(str, decisions)), agents=", ".join(trajectory.agents) or "(unnamed)")
            answer = client.chat_json(messages, category_schema("agentrx_judge", taxonomy.ids), name=self.name)
        run.versions.update(synth.prompts)
        step, snap_note = snap_to_decision(trajectory, answer["critical_step"])
        cats = [(c.id, c.definition) for c in taxonomy.categories]
        category, cat_note = normalize_category(answer["category"], cats)
        run.notes += [n for n in (snap_note, cat_note) if n]
        step_agent = trajectory.steps[step].agent if step is not None else None
        if answer["agent"] != step_agent:
            run.notes.append(f"model named agent {answer['agent']!r}; step {step} was produced by {step_agent!r}")
        d = make_diagnosis(
            trajectory, context, strategy=self.name, step=step, category=category, confidence=answer["confidence"],
            rationale=answer["rationale"], usage=usage.to_dict(),
            metadata=run.metadata(model_step=answer["critical_step"], model_agent=answer["agent"],
                                  synthesis=synth.summary(), validation=_log_summary(merged, violations, rows),
                                  violations_used=[str(v) for v in answer["violations_used"]],
                                  semantic_checks=oracle.used))
        shown = {r["step"] for r in view.records if "step" in r}
        return dataclasses.replace(d, evidence=d.evidence + _cited(answer, trajectory, shown, violations, step),
                                   candidates=d.candidates + _other_candidates(violations, trajectory, step, d))


def _pack_rules(trajectory: Trajectory, context: AuditContext) -> list[Any]:
    called = {name for s in trajectory.steps for name in s.tool_names}
    rules = list(context.rules)
    for dp in context.domain_packs:
        if dp.applies(called):
            rules.extend(dp.rules)
    return rules


def _merge(base: ValidationLog, dyn: ValidationLog) -> ValidationLog:
    """The pack/claims log plus the synthesized rules' records (origin ``synthesized``); re-running
    on the same context replaces, never duplicates, earlier synthesized records."""
    merged = ValidationLog(base.trajectory_id, [r for r in base.records if r.origin != ORIGIN],
                           skipped=base.skipped + dyn.skipped,
                           incomplete=[n for n in base.incomplete if not n.startswith("synthesized.")] + dyn.incomplete)
    merged.extend([dataclasses.replace(r, origin=ORIGIN) for r in dyn.records])
    merged.sort()
    return merged


def _log_summary(log: ValidationLog, violations: list[Record], rows: list[dict[str, Any]]) -> dict[str, Any]:
    by_origin: dict[str, int] = {}
    for r in violations:
        by_origin[r.origin] = by_origin.get(r.origin, 0) + 1
    return {"records": len(log.records), "violations": len(violations), "shown": len(rows),
            "violations_by_origin": by_origin, "violation_steps": sorted({r.step for r in violations})}


def _cited(answer: dict[str, Any], trajectory: Trajectory, shown: set[int], violations: list[Record],
           step: int | None) -> tuple[Evidence, ...]:
    """Evidence: addresses the judge cited (only well-formed addresses of shown steps), then the
    violations at the critical step."""
    out: list[Evidence] = []
    seen: set[str] = set()
    for a in answer["evidence"]:
        a = str(a).strip()
        m = _ADDRESS.match(a)
        if m and int(m.group(1)) in shown and a not in seen and a != f"steps.{step}":
            seen.add(a)
            out.append(Evidence(address=a, value=trajectory.steps[int(m.group(1))].preview(120),
                                note="cited by the agentrx judge"))
    for r in violations:
        if r.step == step:
            out.append(Evidence(address=r.evidence[0].address if r.evidence else f"steps.{r.step}",
                                value=r.message[:200], note=f"violation of {r.rule_id} ({r.origin})"))
    return tuple(out[:16])


def _other_candidates(violations: list[Record], trajectory: Trajectory, step: int | None,
                      d: Diagnosis) -> tuple[Candidate, ...]:
    """Up to four other decision steps with violations, as lower-ranked candidates (earliest first)."""
    out: list[Candidate] = []
    done = {step}
    for r in violations:
        s = trajectory.steps[r.step]
        if r.step in done or not s.is_decision:
            continue
        done.add(r.step)
        cat = r.targets[0] if r.targets else INCONCLUSIVE
        out.append(Candidate(step=r.step, category=cat, score=round(d.confidence * 0.5, 4), agent=s.agent,
                             reason=f"violation of {r.rule_id}: {r.message[:200]}", evidence=(s.address,)))
        if len(out) == 4:
            break
    return tuple(out)
