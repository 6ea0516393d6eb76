"""The Who&When "step-by-step" baseline: judge each decision step in order, stop at the first "yes".

Zhang et al., "Which Agent Causes Task Failures and When?" (ICML 2025), §4 (step-by-step); used as
a baseline in the SearchAuditor paper (seed 000, §5.1). For decision step k the judge sees the task,
the run before k (fitted to the budget, most recent steps kept longest) and step k itself, and
says whether k is the decisive mistake. Calls: one per decision step up to the first "yes".
"""

from __future__ import annotations

import copy

from trajaudit.engine.diagnosis import Diagnosis
from trajaudit.engine.ir import Trajectory
from trajaudit.engine.strategy import INCONCLUSIVE, AuditContext
from trajaudit.llm.evidence import step_record
from trajaudit.llm.prompting import load_prompt
from trajaudit.llm.strategies.base import (
    categories_text,
    make_diagnosis,
    normalize_category,
    setup,
)
from trajaudit.llm.usage import tracking


class StepByStep:
    """Who&When step-by-step: one call per decision step until one is judged decisive."""

    name = "step-by-step"
    description = "LLM (Who&When baseline): judge each decision step in order; the first decisive one wins"
    needs_llm = True

    def diagnose(self, trajectory: Trajectory, context: AuditContext) -> Diagnosis:
        """Walk the decision steps in order.

        When no step is judged decisive, the last decision step is returned with confidence 0 and
        category ``inconclusive`` (noted in the metadata).

        Raises:
            ConfigError: no LLM client in ``context``.
            LLMError: a call failed or its answer was invalid twice.
        """
        client, cats, run = setup(context, self.name)
        schema = copy.deepcopy(load_prompt("step_by_step").schema)
        schema["properties"]["category"]["enum"] = [c for c, _ in cats]
        decisions = [s.index for s in trajectory.decision_steps]
        judged: list[dict] = []
        with tracking() as usage:
            for k in decisions:
                step = trajectory.steps[k]
                current, cut = step_record(step, cap=client.config.context_chars // 3)
                if cut:
                    run.notes.append(f"step {k} shown cut to {cut['kept_chars']} of {cut['original_chars']} chars")
                messages, _ = run.fitted(client, "step_by_step", trajectory, "history", range(k),
                                         task=trajectory.task, categories=categories_text(cats), step=str(k),
                                         agent=step.agent or "the agent", current=current)
                answer = client.chat_json(messages, schema, name=self.name)
                judged.append({"step": k, "decisive": answer["decisive"], "confidence": answer["confidence"]})
                if answer["decisive"]:
                    category, note = normalize_category(answer["category"], cats)
                    if note:
                        run.notes.append(note)
                    return make_diagnosis(trajectory, context, strategy=self.name, step=k, category=category,
                                          confidence=answer["confidence"], rationale=answer["reason"],
                                          usage=usage.to_dict(), metadata=run.metadata(judged=judged))
        last = decisions[-1] if decisions else None
        why = "no decision step was judged decisive; the last decision step is reported" if decisions \
            else "the run has no decision step"
        run.notes.append(why)
        return make_diagnosis(trajectory, context, strategy=self.name, step=last, category=INCONCLUSIVE,
                              confidence=0.0, rationale=why, usage=usage.to_dict(), metadata=run.metadata(judged=judged))
