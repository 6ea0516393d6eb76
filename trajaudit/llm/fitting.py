"""Trace content for prompts, fitted to a character budget — cut visibly, never silently.

A trajectory (or a range of its steps) becomes a list of JSON step records that a prompt quotes as
evidence. When the records exceed the budget, :func:`fit_steps` shortens them in stages and
reports every cut (:class:`EvidenceView.report`), which strategies put in
``Diagnosis.metadata["context"]``:

1. ``full``: everything fits.
2. ``capped``: long texts (content, tool-call arguments) of non-focus steps are cut to a common cap
   (head and tail kept, ``[…N chars cut…]`` in between), the largest cap that fits ("water-filling").
3. ``capped_all``: the focus steps are capped too.
4. ``window``: at the minimum cap it still does not fit: whole steps farthest from the anchor are
   left out (an explicit note record says which).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from trajaudit.llm.prompting import quote_evidence

if TYPE_CHECKING:  # the run's types only annotate here: llm/ imports nothing of engine/ at run time
    from trajaudit.engine.trace.ir import Step, Trajectory

MIN_CAP = 160  # characters kept of a cut text at the tightest level (head + tail)


def cut_text(text: str, cap: int) -> str:
    """``text`` if it fits ``cap``, else its head and tail around a ``[…N chars cut…]`` marker."""
    if cap <= 0 or len(text) <= cap:
        return text
    head = max(1, cap * 2 // 3)
    tail = max(0, cap - head)
    return f"{text[:head]} […{len(text) - head - tail} chars cut…] {text[len(text) - tail:] if tail else ''}".rstrip()


def step_record(step: Step, cap: int | None = None) -> tuple[dict[str, Any], dict[str, int] | None]:
    """One step as a JSON-ready evidence record, its long texts cut to ``cap`` (``None`` = no cap).

    Returns:
        ``(record, cut)`` where ``cut`` is ``{"step", "original_chars", "kept_chars"}`` or ``None``.
        Record keys: ``step``, ``kind``, ``agent`` (if any), ``content`` (if any), ``tool_calls``
        (``[{"name", "arguments"}]``), ``tool`` and ``error`` for tool outputs.
    """
    rec: dict[str, Any] = {"step": step.index, "kind": step.kind}
    if step.agent:
        rec["agent"] = step.agent
    original = kept = 0
    if step.content:
        text = cut_text(step.content, cap) if cap is not None else step.content
        original, kept = len(step.content), len(text)
        rec["content"] = text
    if step.tool_calls:
        calls = []
        for c in step.tool_calls:
            args: Any = c.raw_arguments if c.arguments_error else c.arguments
            flat = args if isinstance(args, str) else json.dumps(args, ensure_ascii=False, default=str)
            if cap is not None and len(flat) > cap:
                original, kept = original + len(flat), kept + len(cut_text(flat, cap))
                args = cut_text(flat, cap)
            calls.append({"name": c.name, "arguments": args})
        rec["tool_calls"] = calls
    if step.tool_output is not None:
        if step.tool_output.name:
            rec["tool"] = step.tool_output.name
        if step.tool_output.is_error:
            rec["error"] = True
    cut = {"step": step.index, "original_chars": original, "kept_chars": kept} if kept < original else None
    return rec, cut


@dataclass
class EvidenceView:
    """Fitted evidence and what was cut to fit.

    Attributes:
        records: the step records to quote (possibly with a ``{"note": …}`` record for left-out steps).
        budget_chars: the budget it was fitted to (characters of the quoted block).
        full_chars, shown_chars: size of the quoted block before and after fitting.
        mode: ``full``, ``capped``, ``capped_all`` or ``window`` (see the module docstring).
        cap: the per-text cap applied, or ``None``.
        cuts: ``[{"step", "original_chars", "kept_chars"}]`` for every shortened step.
        omitted: indices of steps left out entirely.
    """

    records: list[dict[str, Any]]
    budget_chars: int
    full_chars: int
    shown_chars: int
    mode: str = "full"
    cap: int | None = None
    cuts: list[dict[str, int]] = field(default_factory=list)
    omitted: list[int] = field(default_factory=list)

    @property
    def complete(self) -> bool:
        """True when nothing was cut or left out."""
        return self.mode == "full"

    def report(self) -> dict[str, Any]:
        """JSON summary of the cuts, for diagnosis metadata."""
        return {"mode": self.mode, "budget_chars": self.budget_chars, "full_chars": self.full_chars,
                "shown_chars": self.shown_chars, "cap": self.cap, "cut_steps": self.cuts,
                "omitted_steps": self.omitted}


def _size(records: list[dict[str, Any]]) -> int:
    return len(quote_evidence(records, "x"))


def _build(steps: list[Step], cap: int | None, focus: set[int]) -> tuple[list[dict[str, Any]], list[dict[str, int]]]:
    recs, cuts = [], []
    for s in steps:
        rec, cut = step_record(s, None if s.index in focus else cap)
        recs.append(rec)
        if cut:
            cuts.append(cut)
    return recs, cuts


def _largest_cap(steps: list[Step], budget: int, focus: set[int]) -> int | None:
    longest = max([len(s.content) for s in steps] + [len(c.raw_arguments or json.dumps(c.arguments, default=str))
                                                     for s in steps for c in s.tool_calls] + [MIN_CAP])
    lo, hi, best = MIN_CAP, longest, None
    while lo <= hi:
        mid = (lo + hi) // 2
        if _size(_build(steps, mid, focus)[0]) <= budget:
            best, lo = mid, mid + 1
        else:
            hi = mid - 1
    return best


def fit_steps(trajectory: Trajectory, indices: list[int] | range, budget_chars: int, *,
              focus: tuple[int, ...] = (), anchor: int | None = None) -> EvidenceView:
    """Step records for ``indices`` that fit ``budget_chars`` when quoted, with a report of the cuts.

    Args:
        trajectory: the run.
        indices: the steps to show, in order.
        budget_chars: maximum characters of the quoted evidence block.
        focus: steps kept whole as long as possible (e.g. the step being judged).
        anchor: in ``window`` mode, steps farthest from it are left out first (default: the last
            index, so the most recent context survives).

    Returns:
        An :class:`EvidenceView`; ``view.report()`` says what was cut.
    """
    steps = [trajectory.steps[i] for i in indices]
    focus_set = set(focus)
    full, _ = _build(steps, None, focus_set)
    full_size = _size(full)
    if full_size <= budget_chars:
        return EvidenceView(full, budget_chars, full_size, full_size)
    for mode, fset in (("capped", focus_set), ("capped_all", set())):
        if mode == "capped_all" and not focus_set:
            continue
        cap = _largest_cap(steps, budget_chars, fset)
        if cap is not None:
            recs, cuts = _build(steps, cap, fset)
            return EvidenceView(recs, budget_chars, full_size, _size(recs), mode, cap, cuts)
    # window: minimum cap, then leave out whole steps farthest from the anchor (never the focus)
    anchor = anchor if anchor is not None else (steps[-1].index if steps else 0)
    kept = list(steps)
    order = sorted((s for s in steps if s.index not in focus_set), key=lambda s: (-abs(s.index - anchor), s.index))
    omitted: list[int] = []
    recs, cuts = _build(kept, MIN_CAP, set())
    for s in order:
        if _size(recs) <= budget_chars:
            break
        kept.remove(s)
        omitted.append(s.index)
        recs, cuts = _build(kept, MIN_CAP, set())
        recs = recs + [{"note": f"{len(omitted)} step(s) left out to fit the context budget: {sorted(omitted)}"}]
    return EvidenceView(recs, budget_chars, full_size, _size(recs), "window", MIN_CAP, cuts, sorted(omitted))


def merge_reports(reports: list[dict[str, Any]]) -> dict[str, Any]:
    """Combine the reports of several prompts of one diagnosis.

    Returns:
        ``{"prompts", "prompts_cut", "budget_chars", "cut_steps", "omitted_steps"}`` — the steps ever
        shortened or left out (sorted, unique), or ``{"prompts": n, "prompts_cut": 0}`` when nothing was.
    """
    cut = [r for r in reports if r.get("mode") != "full"]
    out: dict[str, Any] = {"prompts": len(reports), "prompts_cut": len(cut)}
    if cut:
        out["budget_chars"] = min(r["budget_chars"] for r in cut)
        out["cut_steps"] = sorted({c["step"] for r in cut for c in r["cut_steps"]})
        out["omitted_steps"] = sorted({i for r in cut for i in r["omitted_steps"]})
        out["modes"] = sorted({r["mode"] for r in cut})
    return out
