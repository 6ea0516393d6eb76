"""Hybrid: the offline evidence as a compact log for one LLM judge call, over an outline and windows.

The offline pipeline is cheap and exact where it fires (rule violations, claims the ledger cannot
support, the offline judge's first-unrecoverable-failure ranking), and blind to semantic mistakes.
The LLM judge is the reverse. ``hybrid`` gives the judge:

- the offline judge's diagnosis and ranked candidates (:class:`~trajaudit.engine.strategies.offline_judge.OfflineJudge`);
- the validation log's violations at or above the context's ``min_violation_severity``, each with the
  decision step it is blamed on (:func:`~trajaudit.engine.strategies.offline_judge.blame`), most severe first when capped;
- the claim graph's unsupported claims (:func:`~trajaudit.engine.run.evidence.gather`);
- the decision-step outline and windows around the candidates, the offline choice and the final answer

— never the whole run. The findings are framed as evidence, not verdicts (AgentRx §3.3: violations
inform the judge, which decides). One call per run.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from trajaudit.engine.diagnosis import Diagnosis
from trajaudit.engine.strategies.context import AuditContext, EvidenceBundle
from trajaudit.engine.strategies.llm.base import LLMStrategy, StrategyRun, categories_text, normalize_category
from trajaudit.engine.strategies.llm.views import (
    final_answer_index,
    final_answer_text,
    outline_view,
    snap_step,
    whole_chars,
    window_indices,
)
from trajaudit.engine.strategies.offline_judge import OfflineJudge, blame
from trajaudit.engine.trace.ir import Trajectory
from trajaudit.engine.validation_log import severity_rank


@dataclass(frozen=True)
class HybridSettings:
    """Options of :class:`Hybrid` (override per run with ``AuditContext.strategy_options["hybrid"]``).

    Attributes:
        max_records: violations listed (most severe first, then in step order; the rest counted).
        max_claims: unsupported claims listed.
        max_candidates: offline candidates listed and given a window.
        window_share: evidence budget of the windows, as a fraction of the whole run's quoted size.
        min_budget: floor of that budget in characters.
        radius: steps shown on each side of a window's anchor.
    """

    max_records: int = 30
    max_claims: int = 20
    max_candidates: int = 5
    window_share: float = 0.35
    min_budget: int = 3000
    radius: int = 1


def compact_log(t: Trajectory, evidence: EvidenceBundle, context: AuditContext, st: HybridSettings) -> dict[str, Any]:
    """The offline evidence of ``t`` (``evidence``, gathered by the pipeline) as JSON-ready rows, with
    the offline judge's reading of it.

    Returns:
        ``{"offline", "violations", "claims", "anchors", "counts", "offline_diagnosis"}``: JSON-ready
        rows for the prompt (the offline summary with its ranked candidates, violation rows, claim
        rows), ``anchors`` = the offline choice and candidate steps, ``counts`` of everything before
        capping, and the offline :class:`Diagnosis` itself.
    """
    offline = OfflineJudge().diagnose(t, evidence, context)
    bundle = evidence
    recs = bundle.log.violations(context.config.min_violation_severity)
    picked = sorted(recs, key=lambda r: (-severity_rank(r.severity), r.step))[: st.max_records]
    picked.sort(key=lambda r: (r.step, r.rule_id))
    violations: list[dict[str, Any]] = [
        {"step": r.step, "blamed_step": blame(t, r), "rule": r.rule_id, "severity": r.severity, "type": r.rule_type,
         "targets": list(r.targets), "message": r.message[:160]} for r in picked]
    if len(recs) > len(picked):
        violations.append({"note": f"{len(recs) - len(picked)} less severe violations not listed"})
    claims: list[dict[str, Any]] = [
        {"claim": c["claim"], "step": c["step"], "status": c["status"], "kind": c["kind"],
         "consequential": c["consequential"], "reused_in": c["reused_in"][:6]}
        for c in bundle.claim_rows[: st.max_claims]]
    if len(bundle.claim_rows) > st.max_claims:
        claims.append({"note": f"{len(bundle.claim_rows) - st.max_claims} more unsupported claims not listed"})
    cands = list(offline.candidates[: st.max_candidates])
    summary = {"critical_step": offline.critical_step, "category": offline.category,
               "confidence": offline.confidence, "rationale": offline.rationale[:300],
               "candidates": [{"step": c.step, "category": c.category, "score": c.score, "reason": c.reason[:120]}
                              for c in cands]}
    anchors = sorted({c.step for c in cands} | ({offline.critical_step} if offline.critical_step is not None else set()))
    return {"offline": summary, "violations": violations, "claims": claims, "anchors": anchors,
            "offline_diagnosis": offline,
            "counts": {"violations": len(recs), "unsupported_claims": len(bundle.claim_rows),
                       "offline_candidates": len(offline.candidates)}}


class Hybrid(LLMStrategy):
    """Offline evidence → compact log → one LLM judge call over an outline and windows."""

    name = "hybrid"
    description = ("LLM + offline evidence: validation log, unsupported claims and offline candidates as a "
                   "compact log for one judge call over an outline and windows")

    def __init__(self, settings: HybridSettings | None = None) -> None:
        self.settings = settings or HybridSettings()

    def _diagnose(self, r: StrategyRun) -> Diagnosis:
        """Gather the offline evidence, then one ``chat_json`` call decides."""
        t, client, cats, run, st = r.trajectory, r.client, r.cats, r.run, r.settings
        log = compact_log(t, r.evidence, r.context, st)
        fin = final_answer_index(t)
        anchors = tuple(sorted(set(log["anchors"]) | ({fin} if fin is not None else set())))
        outline, report = outline_view(t, max(2000, client.config.context_chars // 4), anchors)
        if report["mode"] != "full":
            run.notes.append(f"outline {report['mode']}: previews cut to {report['cap']} chars")
        messages, _ = run.fitted(
            client, "hybrid", t, "windows", window_indices(t, anchors, st.radius), focus=anchors,
            anchor=anchors[0], budget_chars=max(st.min_budget, int(st.window_share * whole_chars(t))),
            task=t.task, final_answer=final_answer_text(t, run.notes), offline=log["offline"],
            violations=log["violations"], claims=log["claims"], outline=outline, categories=categories_text(cats))
        answer = client.chat_json(messages, r.schema("hybrid"), name=self.name)
        step, snap = snap_step(t, answer["critical_step"])
        category, note = normalize_category(answer["category"], cats)
        run.notes.extend(x for x in (snap, note) if x)
        offline: Diagnosis = log["offline_diagnosis"]
        d = r.diagnosis(step=step, category=category, confidence=answer["confidence"], rationale=answer["reason"],
                        note="critical step chosen by the LLM judge over the offline evidence",
                        model_step=answer["critical_step"], offline_step=offline.critical_step,
                        offline_category=offline.category, agrees_with_offline=step == offline.critical_step,
                        model_says_agrees=answer["agrees_with_offline"], evidence_counts=log["counts"])
        others = tuple(dataclasses.replace(c, reason=f"offline: {c.reason}"[:300])
                       for c in offline.candidates[: st.max_candidates] if c.step != step)
        return dataclasses.replace(d, candidates=d.candidates + others)
