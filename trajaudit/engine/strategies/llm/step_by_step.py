"""The Who&When "step-by-step" baseline: judge each decision step in order, stop at the first "yes".

Zhang et al., "Which Agent Causes Task Failures and When?" (ICML 2025), §4 (step-by-step); used as
a baseline in the SearchAuditor paper (seed 000, §5.1). For decision step k the judge sees the task,
the run before k (fitted to the budget, most recent steps kept longest) and step k itself, and
says whether k is the decisive mistake. Calls: one per decision step up to the first "yes".
"""

from __future__ import annotations

from trajaudit.engine.diagnosis import Diagnosis
from trajaudit.engine.strategies.base import INCONCLUSIVE
from trajaudit.engine.strategies.llm.base import (
    LLMStrategy,
    StrategyRun,
    categories_text,
    no_decision_diagnosis,
    normalize_category,
)
from trajaudit.llm.fitting import step_record


class StepByStep(LLMStrategy):
    """Who&When step-by-step: one call per decision step until one is judged decisive.

    When no step is judged decisive, the last decision step is returned with confidence 0 and
    category ``inconclusive`` (noted in the metadata).
    """

    name = "step-by-step"
    description = "LLM (Who&When baseline): judge each decision step in order; the first decisive one wins"

    def _diagnose(self, r: StrategyRun) -> Diagnosis:
        """Walk the decision steps in order."""
        trajectory, client, run = r.trajectory, r.client, r.run
        schema = r.schema("step_by_step")
        decisions = [s.index for s in trajectory.decision_steps]
        judged: list[dict] = []
        for k in decisions:
            step = trajectory.steps[k]
            current, cut = step_record(step, cap=client.config.context_chars // 3)
            if cut:
                run.notes.append(f"step {k} shown cut to {cut['kept_chars']} of {cut['original_chars']} chars")
            messages, _ = run.fitted(client, "step_by_step", trajectory, "history", range(k),
                                     task=trajectory.task, categories=categories_text(r.cats), step=str(k),
                                     agent=step.agent or "the agent", current=current)
            answer = client.chat_json(messages, schema, name=self.name)
            judged.append({"step": k, "decisive": answer["decisive"], "confidence": answer["confidence"]})
            if answer["decisive"]:
                category, note = normalize_category(answer["category"], r.cats)
                if note:
                    run.notes.append(note)
                return r.diagnosis(step=k, category=category, confidence=answer["confidence"],
                                   rationale=answer["reason"], judged=judged)
        why = "no decision step was judged decisive; the last decision step is reported"
        run.notes.append(why)
        return r.diagnosis(step=decisions[-1], category=INCONCLUSIVE, confidence=0.0, rationale=why, judged=judged)

    def _no_decision(self, r: StrategyRun) -> Diagnosis:
        r.run.notes.append("the run has no decision step")
        return no_decision_diagnosis(r.trajectory, r.context, self.name, r.usage, r.run, judged=[])
