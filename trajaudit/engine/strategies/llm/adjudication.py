"""Deterministic organisation of audit reports before adjudication (SearchAuditor seed 000 §4).

"Deterministic rules first organize the three reports into a structured adjudication context:
disagreements are tabulated into a summary, and nearby critical-step proposals are grouped into
clusters for comparison." Each proposal only anchors where evidence is extracted; it does not fix
the final localization (the adjudicator re-decides).

Clustering policy: proposals are sorted by step; two proposals are *nearby* when their steps are at
most ``gap`` positions apart in the run's list of decision steps (default 1: the same or adjacent
decision steps). No LLM, no randomness: the same reports always give the same clusters and summary.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Proposal:
    """One audit report's candidate diagnosis.

    Attributes:
        source: the report's name (``holistic``, ``backward``, ``forward`` …).
        step: the proposed critical step, already mapped onto a decision step.
        category: the proposed root cause (a taxonomy id, or ``inconclusive``).
        confidence: the report's own confidence, 0..1.
        reason: its failure rationale.
        notes: its intermediate analysis (audit notes for the adjudicator), JSON-ready.
    """

    source: str
    step: int
    category: str
    confidence: float
    reason: str
    notes: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """JSON form (what the adjudicator and the diagnosis metadata see)."""
        out: dict[str, Any] = {"report": self.source, "critical_step": self.step, "category": self.category,
                               "confidence": self.confidence, "reason": self.reason}
        out.update(self.notes)
        return out


def cluster_proposals(proposals: list[Proposal], decisions: list[int], gap: int = 1) -> list[dict[str, Any]]:
    """Group nearby proposals (see the module docstring).

    Args:
        proposals: the reports' proposals (any order).
        decisions: the run's decision-step indices, ascending.
        gap: the largest distance, in decision-step positions, between neighbours of one cluster.

    Returns:
        Clusters in step order: ``{"steps": [...], "reports": [...], "categories": {id: [reports]}}``.
    """
    pos = {d: i for i, d in enumerate(decisions)}
    ordered = sorted(proposals, key=lambda p: (p.step, p.source))
    clusters: list[list[Proposal]] = []
    for p in ordered:
        if clusters and pos.get(p.step, p.step) - pos.get(clusters[-1][-1].step, clusters[-1][-1].step) <= gap:
            clusters[-1].append(p)
        else:
            clusters.append([p])
    out = []
    for c in clusters:
        cats: dict[str, list[str]] = {}
        for p in c:
            cats.setdefault(p.category, []).append(p.source)
        out.append({"steps": sorted({p.step for p in c}), "reports": [p.source for p in c], "categories": cats})
    return out


def disagreement_summary(proposals: list[Proposal], clusters: list[dict[str, Any]]) -> dict[str, Any]:
    """Tabulate agreement and disagreement between the reports.

    Returns:
        ``{"same_step", "same_category", "clusters", "lines"}``: whether every report proposed the same
        step / category, the number of clusters, and one plain-language line per finding (which
        reports agree, which stand apart and whether they are earlier, category splits).
    """
    steps = {p.step for p in proposals}
    cats = {p.category for p in proposals}
    lines: list[str] = []
    if not proposals:
        return {"same_step": False, "same_category": False, "clusters": 0, "lines": ["no report was produced"]}
    if len(steps) == 1:
        lines.append(f"all {len(proposals)} reports propose step {next(iter(steps))}")
    else:
        biggest = max(clusters, key=lambda c: (len(c["reports"]), -c["steps"][0]))
        for c in clusters:
            where = f"step {c['steps'][0]}" if len(c["steps"]) == 1 else f"steps {c['steps'][0]}-{c['steps'][-1]}"
            who = ", ".join(c["reports"])
            if c is biggest and len(c["reports"]) > 1:
                lines.append(f"{who} agree on {where}")
            else:
                rel = "earlier than" if c["steps"][0] < biggest["steps"][0] else "later than"
                suffix = "" if c is biggest else f" ({rel} the largest cluster)"
                lines.append(f"{who} propose{'s' if len(c['reports']) == 1 else ''} {where}{suffix}")
        earliest = min(proposals, key=lambda p: (p.step, p.source))
        lines.append(f"earliest proposal: step {earliest.step} by {earliest.source}")
    if len(cats) == 1:
        lines.append(f"all reports name category {next(iter(cats))}")
    else:
        by_cat: dict[str, list[str]] = {}
        for p in proposals:
            by_cat.setdefault(p.category, []).append(p.source)
        lines.append("categories differ: " + "; ".join(f"{c} ({', '.join(r)})" for c, r in sorted(by_cat.items())))
    return {"same_step": len(steps) == 1, "same_category": len(cats) == 1, "clusters": len(clusters),
            "lines": lines}
