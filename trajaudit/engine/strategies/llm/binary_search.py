"""The Who&When "binary search" baseline: halve the run until one decision step remains.

Zhang et al., "Which Agent Causes Task Failures and When?" (ICML 2025), §4 (binary search); used
as a baseline in the SearchAuditor paper (seed 000, §5.1). The search runs over the decision steps:
each call shows a segment (its steps, tool outputs included) split at a decision step and asks
which half holds the decisive mistake. Binary search localizes but does not label, so one final
call names the category of the chosen step (``classify_step`` prompt). Calls: ceil(log2 n) + 1 for
n decision steps.
"""

from __future__ import annotations

from trajaudit.engine.diagnosis import Diagnosis
from trajaudit.engine.strategies.llm.base import (
    LLMStrategy,
    StrategyRun,
    categories_text,
    no_decision_diagnosis,
    normalize_category,
)
from trajaudit.llm.prompting import load_prompt


class BinarySearch(LLMStrategy):
    """Who&When binary search over the decision steps, then one labelling call."""

    name = "binary-search"
    description = "LLM (Who&When baseline): halve the run until one decision step remains, then label it"

    def _diagnose(self, r: StrategyRun) -> Diagnosis:
        """Localize by halving, then classify the chosen step."""
        trajectory, client, run = r.trajectory, r.client, r.run
        d = [s.index for s in trajectory.decision_steps]
        n_steps = len(trajectory.steps)
        path: list[dict] = []
        lo, hi = 0, len(d) - 1
        while lo < hi:
            mid = (lo + hi) // 2
            seg_lo = 0 if lo == 0 else d[lo]
            seg_hi = d[hi + 1] - 1 if hi + 1 < len(d) else n_steps - 1
            split = d[mid + 1]
            messages, _ = run.fitted(client, "binary_search", trajectory, "segment", range(seg_lo, seg_hi + 1),
                                     anchor=split, task=trajectory.task, first_lo=str(seg_lo),
                                     first_hi=str(split - 1), second_lo=str(split), second_hi=str(seg_hi))
            answer = client.chat_json(messages, load_prompt("binary_search").schema, name=self.name)
            path.append({"segment": [seg_lo, seg_hi], "split": split, "half": answer["half"]})
            lo, hi = (lo, mid) if answer["half"] == "first" else (mid + 1, hi)
        k = d[lo]
        step = trajectory.steps[k]
        window_lo = d[max(0, lo - 2)] if lo > 0 else 0
        window_hi = d[lo + 1] - 1 if lo + 1 < len(d) else n_steps - 1
        messages, _ = run.fitted(client, "classify_step", trajectory, "context", range(window_lo, window_hi + 1),
                                 focus=(k,), anchor=k, task=trajectory.task, categories=categories_text(r.cats),
                                 step=str(k), agent=step.agent or "the agent")
        answer = client.chat_json(messages, r.schema("classify_step"), name=f"{self.name}-classify")
        category, note = normalize_category(answer["category"], r.cats)
        if note:
            run.notes.append(note)
        return r.diagnosis(step=k, category=category, confidence=answer["confidence"], rationale=answer["reason"],
                           path=path)

    def _no_decision(self, r: StrategyRun) -> Diagnosis:
        return no_decision_diagnosis(r.trajectory, r.context, self.name, r.usage, r.run, path=[])
