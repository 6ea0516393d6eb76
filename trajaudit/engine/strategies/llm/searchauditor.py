"""SearchAuditor (seed 000 §4): heterogeneous audits → deterministic clustering → evidence-grounded
adjudication → (optional) diagnosis-conditioned repair.

1. **Multi-perspective auditing** (§4 (a)–(c)): three reports in parallel (``LLMClient.map``), same
   model, different procedures — *holistic* (the whole run), *backward constraint* (task constraints
   checked against the evidence, traced back to the earliest unverified commitment) and *forward
   timeline* (a minimal plan, then the earliest decision that establishes the failure path).
2. **Deterministic organisation** (:mod:`.adjudication`): proposals snapped to decision steps,
   nearby ones clustered, disagreements tabulated.
3. **Adjudication** (Eq. 3): one call sees the reports, the summary, the decision-step outline
   (``Trajectory.outline``-style previews), evidence windows around every proposed step and the
   final-answer step, and the final answer; it follows the paper's three rules (agreement is a
   signal, not a vote; step and cause consistent; earliest supported decision step, never a tool
   message — also enforced by :func:`~.views.snap_step`).
4. **Repair** (optional, ``repair=True``): a synthesizer that sees only the task, the final answer,
   the diagnosis and windows at the critical step and the final answer fills ``Diagnosis.repair``.

Cost (deliberately below the paper's, which sends the whole run to every branch and to the
adjudicator): only the holistic report sees the whole run; the backward and forward reports see
compressed views of every step (evidence steps, resp. decision steps, kept whole as far as
``branch_share`` × the whole run allows; the rest cut visibly); the adjudicator sees the outline and
windows (``window_share``). The reports get a one-line category menu; only the adjudicator, which
decides the category, gets the full definitions. Calls: 4 (5 with repair). See
``benchmarks/llm_cost.md``.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from trajaudit.engine.diagnosis import Candidate, Diagnosis
from trajaudit.engine.strategies.llm.adjudication import Proposal, cluster_proposals, disagreement_summary
from trajaudit.engine.strategies.llm.base import (
    LLMStrategy,
    StrategyRun,
    categories_text,
    category_schema,
    normalize_category,
)
from trajaudit.engine.strategies.llm.views import (
    categories_brief,
    final_answer_index,
    final_answer_text,
    outline_view,
    snap_step,
    whole_chars,
    window_indices,
)
from trajaudit.engine.trace.ir import Trajectory
from trajaudit.engine.validation_log import Evidence
from trajaudit.errors import LLMError
from trajaudit.llm.prompt_run import PromptRun
from trajaudit.llm.prompting import load_prompt

BRANCHES = ("holistic", "backward", "forward")


@dataclass(frozen=True)
class SearchAuditorSettings:
    """Options of :class:`SearchAuditor` (override per run with ``AuditContext.strategy_options["searchauditor"]``).

    Attributes:
        branch_share: evidence budget of the backward and forward reports, as a fraction of the whole
            run's quoted size (their views are compressed; the holistic report sees everything).
        window_share: evidence budget of the adjudicator's and the repair synthesizer's windows, same unit.
        min_budget: floor of those budgets in characters (short runs are shown whole).
        radius: steps shown on each side of a window's anchor.
        cluster_gap: proposals at most this many decision steps apart form one cluster.
        repair: run the repair synthesizer (one more call) and fill ``Diagnosis.repair``.
    """

    branch_share: float = 0.2
    window_share: float = 0.2
    min_budget: int = 2500
    radius: int = 1
    cluster_gap: int = 1
    repair: bool = False


class SearchAuditor(LLMStrategy):
    """SearchAuditor: three parallel audits, clustering, adjudication, optional repair (4–5 calls).

    One failed audit report is noted and the others go on; ``LLMError`` is raised when every audit
    report failed, or the adjudication (or repair) call failed.
    """

    name = "searchauditor"
    description = ("LLM (SearchAuditor): holistic, backward-constraint and forward-timeline audits in parallel, "
                   "then evidence-grounded adjudication over an outline and windows")

    def __init__(self, settings: SearchAuditorSettings | None = None) -> None:
        self.settings = settings or SearchAuditorSettings()

    def _diagnose(self, r: StrategyRun) -> Diagnosis:
        """Audit, organise, adjudicate (and repair when enabled)."""
        t, client, cats, run, st = r.trajectory, r.client, r.cats, r.run, r.settings
        decisions = [s.index for s in t.decision_steps]
        whole = whole_chars(t)
        final = final_answer_text(t, run.notes)
        common = {"task": t.task, "final_answer": final, "decision_steps": ", ".join(map(str, decisions))}
        proposals = self._audit(client, t, run, st, whole, common, cats)
        clusters = cluster_proposals(proposals, decisions, st.cluster_gap)
        summary = disagreement_summary(proposals, clusters)
        answer, step, category = self._adjudicate(client, t, run, st, whole, proposals, summary, cats)
        repair = self._repair(client, t, run, st, whole, step, category, answer["reason"], final) \
            if st.repair else None
        named = answer["supporting_steps"]
        outside = [k for k in named if not 0 <= k < len(t.steps)]  # not snapped: a citation of nothing
        supporting = sorted({s for s in (snap_step(t, k)[0] for k in named if k not in outside) if s is not None})
        d = r.diagnosis(step=step, category=category, confidence=answer["confidence"], rationale=answer["reason"],
                        note="critical step chosen by the adjudicator",
                        reports=[p.to_dict() for p in proposals], clusters=clusters, disagreement=summary,
                        adjudication={"model_step": answer["critical_step"], "supporting_steps": supporting,
                                      "sources": list(answer["sources"]),
                                      **({"supporting_steps_outside_run": outside} if outside else {})})
        evidence = d.evidence + tuple(Evidence(t.steps[k].address, t.steps[k].preview(160), "cited by the adjudicator")
                                      for k in supporting if k != step)
        others: dict[int, list[Proposal]] = {}
        for p in sorted(proposals, key=lambda p: -p.confidence):
            if p.step != step:
                others.setdefault(p.step, []).append(p)
        cands = d.candidates + tuple(
            Candidate(step=k, category=ps[0].category, score=round(ps[0].confidence, 3), agent=t.steps[k].agent,
                      reason=f"{', '.join(p.source for p in ps)} report: {ps[0].reason}"[:300],
                      evidence=(t.steps[k].address,))
            for k, ps in others.items())
        return dataclasses.replace(d, evidence=evidence, candidates=cands, repair=repair)

    # -- stage 1 ----------------------------------------------------------------------------------
    def _audit(self, client: Any, t: Trajectory, run: PromptRun, st: SearchAuditorSettings, whole: int,
               common: dict[str, Any], cats: list[tuple[str, str]]) -> list[Proposal]:
        n = len(t.steps)
        budget = max(st.min_budget, int(st.branch_share * whole))
        evidence_steps = tuple(s.index for s in t.steps if not s.is_decision)
        decision_steps = tuple(s.index for s in t.decision_steps)
        jobs = []
        for branch, focus, limit in (("holistic", (), None), ("backward", evidence_steps, budget),
                                     ("forward", decision_steps, budget)):
            prompt = f"sa_{branch}"
            messages, _ = run.fitted(client, prompt, t, "trajectory", range(n), focus=focus, budget_chars=limit,
                                     categories=categories_brief(cats), **common)
            schema = category_schema(prompt, [c for c, _ in cats])
            jobs.append((branch, messages, schema))
        answers = client.map(lambda job: client.chat_json(job[1], job[2], name=f"{self.name}-{job[0]}"), jobs,
                             return_exceptions=True)
        failed = [f"{job[0]}: {a}" for job, a in zip(jobs, answers, strict=True) if isinstance(a, Exception)]
        if len(failed) == len(jobs):
            raise LLMError(f"{self.name}: all three audit reports failed: " + "; ".join(failed))
        run.notes.extend(f"audit report failed and was left out: {f}" for f in failed)
        proposals = []
        for (branch, _, _), a in zip(jobs, answers, strict=True):
            if isinstance(a, Exception):
                continue
            step, snap = snap_step(t, a["critical_step"])
            category, cat_note = normalize_category(a["category"], cats)
            run.notes.extend(f"{branch}: {x}" for x in (snap, cat_note) if x)
            notes = {k: a[k] for k in ("constraints", "plan") if k in a}
            assert step is not None  # the run has decision steps
            proposals.append(Proposal(branch, step, category, float(a["confidence"]), a["reason"], notes))
        return proposals

    # -- stage 2 ----------------------------------------------------------------------------------
    def _adjudicate(self, client: Any, t: Trajectory, run: PromptRun, st: SearchAuditorSettings, whole: int,
                    proposals: list[Proposal], summary: dict[str, Any],
                    cats: list[tuple[str, str]]) -> tuple[dict[str, Any], int, str]:
        fin = final_answer_index(t)
        anchors = tuple(sorted({p.step for p in proposals} | ({fin} if fin is not None else set())))
        outline, report = outline_view(t, max(2000, client.config.context_chars // 4), anchors)
        if report["mode"] != "full":
            run.notes.append(f"outline {report['mode']}: previews cut to {report['cap']} chars"
                             + (f", {len(report['omitted_steps'])} rows left out" if report["omitted_steps"] else ""))
        schema = category_schema("sa_adjudicate", [c for c, _ in cats])
        schema["properties"]["sources"]["items"] = {"enum": [p.source for p in proposals]}
        messages, _ = run.fitted(
            client, "sa_adjudicate", t, "windows", window_indices(t, anchors, st.radius), focus=anchors,
            anchor=anchors[0], budget_chars=max(st.min_budget, int(st.window_share * whole)), task=t.task,
            final_answer=final_answer_text(t), reports=[p.to_dict() for p in proposals],
            summary=summary["lines"], outline=outline, categories=categories_text(cats))
        answer = client.chat_json(messages, schema, name=f"{self.name}-adjudicate")
        step, snap = snap_step(t, answer["critical_step"])
        category, cat_note = normalize_category(answer["category"], cats)
        run.notes.extend(f"adjudicator: {x}" for x in (snap, cat_note) if x)
        assert step is not None
        return answer, step, category

    # -- stage 3 ----------------------------------------------------------------------------------
    def _repair(self, client: Any, t: Trajectory, run: PromptRun, st: SearchAuditorSettings, whole: int,
                step: int, category: str, reason: str, final: str) -> str:
        fin = final_answer_index(t)
        anchors = tuple(sorted({step} | ({fin} if fin is not None else set())))
        diagnosis = {"critical_step": step, "agent": t.steps[step].agent, "category": category, "rationale": reason}
        messages, _ = run.fitted(client, "sa_repair", t, "windows", window_indices(t, anchors, st.radius),
                                 focus=anchors, anchor=step,
                                 budget_chars=max(st.min_budget, int(st.window_share * whole)),
                                 task=t.task, final_answer=final, diagnosis=diagnosis)
        answer = client.chat_json(messages, load_prompt("sa_repair").schema, name=f"{self.name}-repair")
        return "\n".join(f"{i}. {d.strip()}" for i, d in enumerate(answer["directives"], 1))
