"""Compact views of a run for the multi-stage LLM strategies (SearchAuditor, DRIFT, hybrid).

Instead of sending the whole run to every call, the staged strategies show:

- an **outline** (SearchAuditor seed 000 §4, "a deterministic outline that lists every decision
  step's message position with a truncated content preview"): :func:`outline_view`;
- **evidence windows**: the original steps immediately around a few anchors (proposed critical
  steps, the final answer), fitted to a budget with :func:`~trajaudit.llm.fitting.fit_steps`:
  :func:`window_indices`;
- the run's **final-answer step**: :func:`final_answer_index`.

Also: :func:`whole_chars` (the size of the whole run as quoted evidence, the unit of the
"× whole trajectory" cost ratio), :func:`snap_step` (adjudication rule iii: a tool output is
attributed to the decision step that issued the call) and :func:`strategy_settings` (per-run
strategy options from ``AuditContext.strategy_options``, defined in ``base``). Nothing here imports ``openai``.
"""

from __future__ import annotations

from typing import Any, TypeVar

from trajaudit.engine.claims.ledger import final_answer_step
from trajaudit.engine.claims.model import ClaimConfig
from trajaudit.engine.strategies.llm.base import snap_to_decision, strategy_settings  # noqa: F401 - re-exported
from trajaudit.engine.trace.ir import Trajectory
from trajaudit.llm.fitting import cut_text, step_record
from trajaudit.llm.prompting import quote_evidence

S = TypeVar("S")

FINAL_ANSWER_CHARS = 2000  # the final answer shown in prompts is cut to this (noted when it is)
OUTLINE_WIDTHS = (100, 60, 32)  # preview widths tried, widest first, until the outline fits its budget


def whole_chars(trajectory: Trajectory) -> int:
    """Characters of the whole run quoted as one evidence block (every step record, nothing cut).

    This is what sending "the whole trajectory" once costs in a prompt, without the prompt's own text.
    """
    return len(quote_evidence([step_record(s)[0] for s in trajectory.steps], "trajectory"))


def final_answer_index(trajectory: Trajectory) -> int | None:
    """The decision step holding the final answer (the claim ledger's rule: the last agent text that is
    not a bare termination token and states a value), else the last decision step with text, else the
    last decision step; ``None`` when the run has none."""
    step = final_answer_step(trajectory, ClaimConfig()) if trajectory.final_answer is not None else None
    if step is not None:
        return step.index
    decisions = trajectory.decision_steps
    texts = [s for s in decisions if s.content.strip()]
    return texts[-1].index if texts else (decisions[-1].index if decisions else None)


def final_answer_text(trajectory: Trajectory, notes: list[str] | None = None) -> str:
    """The run's final answer for prompts, cut to :data:`FINAL_ANSWER_CHARS` (the cut is appended to
    ``notes`` when given); a placeholder when the run records none."""
    text = trajectory.final_answer if trajectory.final_answer is not None else "(no final answer recorded)"
    if len(text) <= FINAL_ANSWER_CHARS:
        return text
    note = f"final answer cut to {FINAL_ANSWER_CHARS} of {len(text)} chars"
    if notes is not None and note not in notes:
        notes.append(note)
    return cut_text(text, FINAL_ANSWER_CHARS)


def snap_step(trajectory: Trajectory, step: Any) -> tuple[int | None, str | None]:
    """Map a step named by a model onto a decision step (SearchAuditor adjudication rule iii).

    A tool output goes to the decision step that issued its call (``Trajectory.call_for``), or, for a
    code runner's output, to the step that wrote the code (``Trajectory.code_authors``, as
    ``judge.blame`` attributes it), "never the tool message itself"; anything else not a decision step
    goes to the nearest decision step (:func:`~trajaudit.engine.strategies.llm.base.snap_to_decision`).

    Returns:
        ``(decision step or None when the run has none, note or None when unchanged)``.
    """
    if isinstance(step, int) and not isinstance(step, bool) and 0 <= step < len(trajectory.steps):
        s = trajectory.steps[step]
        if s.kind == "tool":
            hit = trajectory.call_for(s)
            if hit is not None and hit[0].is_decision:
                return hit[0].index, (f"model named tool output step {step}; attributed to step {hit[0].index}, "
                                      "which issued the call")
            author = trajectory.code_authors.get(step) if hit is None else None
            if author is not None:
                return author, (f"model named tool output step {step}; attributed to step {author}, "
                                "which wrote the code it ran")
    return snap_to_decision(trajectory, step)


def categories_brief(cats: list[tuple[str, str]], width: int = 70) -> str:
    """A short category menu: one ``- id: definition`` line each, the definition cut to its first
    sentence and ``width`` characters (for calls that propose a category but do not decide it)."""
    lines = []
    for cid, definition in cats:
        first = definition.split(". ")[0].rstrip(".")
        lines.append(f"- {cid}: {first if len(first) <= width else first[: width - 1].rstrip() + '…'}")
    return "\n".join(lines)


def window_indices(trajectory: Trajectory, anchors: list[int] | tuple[int, ...], radius: int) -> list[int]:
    """The steps within ``radius`` positions of any anchor (sorted, unique, in range)."""
    n = len(trajectory.steps)
    out: set[int] = set()
    for a in anchors:
        out.update(range(max(0, a - radius), min(n, a + radius + 1)))
    return sorted(out)


def _rows(trajectory: Trajectory, width: int) -> list[dict[str, Any]]:
    rows = []
    for s in trajectory.decision_steps:
        row: dict[str, Any] = {"step": s.index, "agent": s.agent or s.role}
        if s.tool_calls:
            row["tool"] = ", ".join(s.tool_names)
        row["preview"] = s.preview(width)
        rows.append(row)
    return rows


def outline_view(trajectory: Trajectory, budget_chars: int,
                 anchors: tuple[int, ...] = ()) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The decision-step outline ``[{"step", "agent", "tool"?, "preview"}]`` fitted to ``budget_chars``.

    Previews are shortened first (widths :data:`OUTLINE_WIDTHS`); if the narrowest outline still does
    not fit, rows farthest from the nearest anchor (default: the last step) are left out and a
    ``{"note": …}`` row names how many. Never silent.

    Returns:
        ``(rows, report)``; ``report`` has the :func:`~trajaudit.llm.fitting.fit_steps` report keys
        (``mode`` ``full`` / ``outline_capped`` / ``outline_window``, ``omitted_steps`` …).
    """
    full = len(quote_evidence(_rows(trajectory, OUTLINE_WIDTHS[0]), "outline"))
    report: dict[str, Any] = {"mode": "full", "budget_chars": budget_chars, "full_chars": full,
                              "shown_chars": full, "cap": None, "cut_steps": [], "omitted_steps": []}
    for width in OUTLINE_WIDTHS:
        rows = _rows(trajectory, width)
        size = len(quote_evidence(rows, "outline"))
        if size <= budget_chars:
            if width != OUTLINE_WIDTHS[0]:
                report.update(mode="outline_capped", cap=width, shown_chars=size)
            return rows, report
    anchors = anchors or ((trajectory.steps[-1].index,) if trajectory.steps else (0,))
    order = sorted(rows, key=lambda r: (-min(abs(r["step"] - a) for a in anchors), r["step"]))
    kept = list(rows)
    omitted: list[int] = []
    for r in order:
        if len(quote_evidence(kept, "outline")) <= budget_chars or len(kept) <= 1:
            break
        kept.remove(r)
        omitted.append(r["step"])
        kept = [k for k in kept if "note" not in k] + [
            {"note": f"{len(omitted)} decision step(s) left out of the outline to fit the budget"}]
    report.update(mode="outline_window", cap=OUTLINE_WIDTHS[-1], omitted_steps=sorted(omitted),
                  shown_chars=len(quote_evidence(kept, "outline")))
    return kept, report


