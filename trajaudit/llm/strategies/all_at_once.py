"""The Who&When "all-at-once" baseline: one LLM call over the whole run.

Zhang et al., "Which Agent Causes Task Failures and When?" (ICML 2025), §4 (all-at-once); used as a
baseline in the SearchAuditor paper (seed 000, §5.1). The judge sees the task and every step (fitted
to the context budget, cuts reported) and names the critical step, the agent and the category.
The gold answer is never shown (the "without ground truth" setting).
"""

from __future__ import annotations

import copy

from trajaudit.engine.diagnosis import Diagnosis
from trajaudit.engine.ir import Trajectory
from trajaudit.engine.strategy import AuditContext
from trajaudit.llm.prompting import load_prompt
from trajaudit.llm.strategies.base import (
    categories_text,
    make_diagnosis,
    no_decision_diagnosis,
    normalize_category,
    setup,
    snap_to_decision,
)
from trajaudit.llm.usage import tracking


class AllAtOnce:
    """Who&When all-at-once: a single holistic judge call (1 call per run)."""

    name = "all-at-once"
    description = "LLM (Who&When baseline): one call over the whole run names the step, agent and category"
    needs_llm = True

    def diagnose(self, trajectory: Trajectory, context: AuditContext) -> Diagnosis:
        """Diagnose ``trajectory`` with one ``chat_json`` call.

        Raises:
            ConfigError: no LLM client in ``context``.
            LLMError: the call failed or its answer was invalid twice.
        """
        client, cats, run = setup(context, self.name)
        decisions = [s.index for s in trajectory.decision_steps]
        with tracking() as usage:
            if not decisions:
                return no_decision_diagnosis(trajectory, context, self.name, usage, run)
            messages, _ = run.fitted(
                client, "all_at_once", trajectory, "trajectory", range(len(trajectory.steps)),
                task=trajectory.task, categories=categories_text(cats),
                decision_steps=", ".join(map(str, decisions)), agents=", ".join(trajectory.agents) or "(unnamed)")
            schema = copy.deepcopy(load_prompt("all_at_once").schema)
            schema["properties"]["category"]["enum"] = [c for c, _ in cats]
            answer = client.chat_json(messages, schema, name=self.name)
        step, snap_note = snap_to_decision(trajectory, answer["critical_step"])
        category, cat_note = normalize_category(answer["category"], cats)
        for note in (snap_note, cat_note):
            if note:
                run.notes.append(note)
        step_agent = trajectory.steps[step].agent if step is not None else None
        if answer["agent"] != step_agent:
            run.notes.append(f"model named agent {answer['agent']!r}; step {step} was produced by {step_agent!r}")
        return make_diagnosis(trajectory, context, strategy=self.name, step=step, category=category,
                              confidence=answer["confidence"], rationale=answer["reason"], usage=usage.to_dict(),
                              metadata=run.metadata(model_step=answer["critical_step"], model_agent=answer["agent"]))
