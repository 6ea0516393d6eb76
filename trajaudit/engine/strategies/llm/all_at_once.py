"""The Who&When "all-at-once" baseline: one LLM call over the whole run.

Zhang et al., "Which Agent Causes Task Failures and When?" (ICML 2025), §4 (all-at-once); used as a
baseline in the SearchAuditor paper (seed 000, §5.1). The judge sees the task and every step (fitted
to the context budget, cuts reported) and names the critical step, the agent and the category.
The gold answer is never shown (the "without ground truth" setting).
"""

from __future__ import annotations

from trajaudit.engine.diagnosis import Diagnosis
from trajaudit.engine.strategies.llm.base import (
    LLMStrategy,
    StrategyRun,
    categories_text,
    normalize_category,
    snap_to_decision,
)


class AllAtOnce(LLMStrategy):
    """Who&When all-at-once: a single holistic judge call (1 call per run)."""

    name = "all-at-once"
    description = "LLM (Who&When baseline): one call over the whole run names the step, agent and category"

    def _diagnose(self, r: StrategyRun) -> Diagnosis:
        """Diagnose the run with one ``chat_json`` call."""
        trajectory, run = r.trajectory, r.run
        decisions = [s.index for s in trajectory.decision_steps]
        messages, _ = run.fitted(
            r.client, "all_at_once", trajectory, "trajectory", range(len(trajectory.steps)),
            task=trajectory.task, categories=categories_text(r.cats),
            decision_steps=", ".join(map(str, decisions)), agents=", ".join(trajectory.agents) or "(unnamed)")
        answer = r.client.chat_json(messages, r.schema("all_at_once"), name=self.name)
        step, snap_note = snap_to_decision(trajectory, answer["critical_step"])
        category, cat_note = normalize_category(answer["category"], r.cats)
        for note in (snap_note, cat_note):
            if note:
                run.notes.append(note)
        step_agent = trajectory.steps[step].agent if step is not None else None
        if answer["agent"] != step_agent:
            run.notes.append(f"model named agent {answer['agent']!r}; step {step} was produced by {step_agent!r}")
        return r.diagnosis(step=step, category=category, confidence=answer["confidence"], rationale=answer["reason"],
                           model_step=answer["critical_step"], model_agent=answer["agent"])
