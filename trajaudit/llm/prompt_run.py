"""Prompt bookkeeping for one diagnosis or synthesis: which prompt versions were used, how the run's
steps were cut to fit the context budget, and notes — shared by the LLM strategies and rule synthesis.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from trajaudit.llm.client import LLMClient, messages_chars
from trajaudit.llm.fitting import EvidenceView, cut_text, fit_steps, merge_reports
from trajaudit.llm.prompting import load_prompt

if TYPE_CHECKING:  # the run's type only annotates here: llm/ imports nothing of engine/ at run time
    from trajaudit.engine.trace.ir import Trajectory

__all__ = ["TASK_SHARE", "PromptRun", "task_text"]

log = logging.getLogger(__name__)

TASK_SHARE = 4  # the task text may take at most 1/TASK_SHARE of the context budget


def task_text(trajectory: Trajectory, budget_chars: int) -> tuple[str, dict[str, int] | None]:
    """The run's task (or a placeholder), cut to ``budget_chars // TASK_SHARE`` with the cut reported."""
    task = trajectory.task or "(the task is not stated separately; see the steps)"
    cap = max(200, budget_chars // TASK_SHARE)
    if len(task) <= cap:
        return task, None
    return cut_text(task, cap), {"task_original_chars": len(task), "task_kept_chars": cap}


@dataclass
class PromptRun:
    """Bookkeeping of one diagnosis: context reports, prompt versions, notes."""

    reports: list[dict[str, Any]] = field(default_factory=list)
    versions: dict[str, int] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def fitted(self, client: LLMClient, prompt: str, trajectory: Trajectory, evidence_field: str,
               indices: list[int] | range, *, focus: tuple[int, ...] = (), anchor: int | None = None,
               budget_chars: int | None = None, **data: Any) -> tuple[list[dict[str, str]], EvidenceView]:
        """Render ``prompt`` with the steps ``indices`` as ``evidence_field``, fitted to the budget.

        The budget is ``client.config.context_chars`` minus the prompt's own size, or ``budget_chars``
        (characters of the quoted evidence block) when that is smaller — strategies that show a
        compressed view on purpose pass it; the task (data key ``task``) is first cut to a quarter of
        the context budget. Cuts are recorded in :attr:`reports`.
        """
        p = load_prompt(prompt)
        self.versions[prompt] = p.version
        if "task" in data:
            data["task"], task_cut = task_text(trajectory, client.config.context_chars)
            if task_cut:
                self.notes.append(f"task text cut to {task_cut['task_kept_chars']} of {task_cut['task_original_chars']} chars")
        overhead = messages_chars(p.render(**{**data, evidence_field: []}))
        if overhead + 1000 > client.config.context_chars:
            note = (f"{prompt}: the prompt without evidence is {overhead} chars; with the minimum evidence "
                    f"it exceeds the {client.config.context_chars}-char budget")
            if note not in self.notes:
                self.notes.append(note)
        budget = max(1000, client.config.context_chars - overhead)
        if budget_chars is not None:
            budget = max(1000, min(budget, budget_chars))
        view = fit_steps(trajectory, indices, budget, focus=focus, anchor=anchor)
        if not view.complete:
            log.info("%s: %s evidence cut to fit %d chars (%s)", trajectory.id, prompt, view.budget_chars, view.mode)
        self.reports.append(view.report())
        return p.render(**{**data, evidence_field: view.records}), view

    def metadata(self, **extra: Any) -> dict[str, Any]:
        """Diagnosis metadata: ``context`` (merged cut report), ``prompts`` (versions), ``notes``."""
        return {"context": merge_reports(self.reports), "prompts": dict(self.versions), "notes": list(self.notes),
                **extra}
