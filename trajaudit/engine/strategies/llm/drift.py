"""DRIFT (seed 001): LLM Claim Keeper → Support Seeker → Dependency Backtrace, span-level output.

DRIFT audits a run as a ledger of claims. Here the deterministic claim graph
(:mod:`trajaudit.engine.claims`) does what it can without a model and the LLM does the rest, so
calls and characters go only where the ledger is blind:

1. **Claim Keeper** (1 call): the model sees the decision steps (tool outputs left out: claims are
   made in decisions) and the claims the regex ledger already holds, and lists the decision-relevant
   claims it missed (relations, negative facts, scope judgements, conclusions), each with a verbatim
   quote. They join the ledger through the :class:`~.drift_claims.LLMClaimExtractor` (the claim
   graph's pluggable ``ClaimExtractor``), so reuse, consequence and derivation are computed as for
   every other claim.
2. **Support Seeker** (0–1 call): only the consequential claims the ledger marks MISSING / WEAK /
   CONFLICTING are re-checked, against the evidence steps shown before each of them.
3. **Dependency Backtrace** (1 call, DRIFT's final reducer): the deterministic tracer
   (:func:`~trajaudit.engine.claims.propagate.propagate`) proposes the error steps; the model sees the
   unsupported claims with their chains, the candidates, the outline and windows around the
   candidates and the final answer, and decides the error steps and the first one.

Output: ``Diagnosis.error_steps`` (all error decision steps), ``critical_step`` = the first of them,
``category`` for the first error. Calls: 2–3 per run.
"""

from __future__ import annotations

import copy
import dataclasses
from dataclasses import dataclass
from typing import Any

from trajaudit.engine.claims import RegexExtractor, build_claim_graph
from trajaudit.engine.claims.propagate import propagate
from trajaudit.engine.diagnosis import Candidate, Diagnosis
from trajaudit.engine.strategies.llm.base import (
    LLMStrategy,
    StrategyRun,
    categories_text,
    category_schema,
    normalize_category,
)
from trajaudit.engine.strategies.llm.drift_claims import (
    LLMClaimExtractor,
    apply_support,
    claim_row,
    claims_to_check,
)
from trajaudit.engine.strategies.llm.views import (
    final_answer_index,
    final_answer_text,
    outline_view,
    snap_step,
    whole_chars,
    window_indices,
)
from trajaudit.engine.trace.ir import Trajectory
from trajaudit.llm.prompt_run import PromptRun
from trajaudit.llm.prompting import load_prompt


@dataclass(frozen=True)
class DriftSettings:
    """Options of :class:`Drift` (override per run with ``AuditContext.strategy_options["drift"]``).

    Attributes:
        max_ledger_rows: deterministic claims listed to the keeper (consequential and unsupported first).
        max_checks: claims sent to the support seeker (earliest first; the rest keep their status, noted).
        keeper_share, evidence_share, window_share: evidence budgets of the keeper's decision steps, the
            seeker's evidence steps and the backtrace's windows, as fractions of the whole run's size.
        min_budget: floor of those budgets in characters.
        max_windows: candidate error steps that get an evidence window in the backtrace.
        radius: steps shown on each side of a window's anchor; evidence steps shown before a checked claim.
    """

    max_ledger_rows: int = 40
    max_checks: int = 16
    keeper_share: float = 0.5
    evidence_share: float = 0.4
    window_share: float = 0.25
    min_budget: int = 3000
    max_windows: int = 4
    radius: int = 1


class Drift(LLMStrategy):
    """DRIFT: claim keeper, support seeker and dependency backtrace (2–3 calls), span-level output."""

    name = "drift"
    description = ("LLM (DRIFT): claim ledger (regex + LLM keeper) → LLM support check of unconfirmed claims → "
                   "dependency backtrace; error spans and the first error step")

    def __init__(self, settings: DriftSettings | None = None) -> None:
        self.settings = settings or DriftSettings()

    def _diagnose(self, r: StrategyRun) -> Diagnosis:
        """Keep, check and trace the claims of the run."""
        # the claim graph (and networkx) load only when a run is audited, not when strategies are listed
        t, client, cats, run, st = r.trajectory, r.client, r.cats, r.run, r.settings
        decisions = [s.index for s in t.decision_steps]
        whole = whole_chars(t)
        base = build_claim_graph(t, r.context.config)
        keeper = self._keep(client, t, run, st, whole, base.claims, decisions)
        cg = build_claim_graph(t, r.context.config, extractors=[RegexExtractor(), keeper])
        changes, checked = self._support(client, t, run, st, whole, cg.claims)
        prop = propagate(cg.claims, cg.brief_step)
        answer = self._backtrace(client, t, run, st, whole, cg.claims, prop, cats)
        snapped = [snap_step(t, k) for k in [answer["first_error_step"], *answer["error_steps"]]]
        run.notes.extend(f"backtrace: {n}" for _, n in snapped if n)
        errors = sorted({k for k, _ in snapped if k is not None})
        first = errors[0]
        category, note = normalize_category(answer["category"], cats)
        if note:
            run.notes.append(note)
        ledger = {"claims": len(cg.claims), "llm_claims": len(keeper.kept), "regex_claims": len(base.claims),
                  "checked": checked, "changed": changes, "keeper": keeper.kept,
                  "traced_error_steps": list(prop.error_steps), "roles": {str(k): v for k, v in prop.roles.items()}}
        d = r.diagnosis(step=first, category=category, confidence=answer["confidence"], rationale=answer["reason"],
                        note="first error step (DRIFT backtrace)", ledger=ledger,
                        model_first_error=answer["first_error_step"], model_error_steps=list(answer["error_steps"]))
        cands = d.candidates + tuple(
            Candidate(step=k, category=category, score=round(float(answer["confidence"]) * 0.5, 3),
                      agent=t.steps[k].agent,
                      reason=f"error span ({prop.roles.get(k, 'confirmed by the backtrace')})",
                      evidence=(t.steps[k].address,))
            for k in errors if k != first)
        return dataclasses.replace(d, error_steps=tuple(errors), candidates=cands)

    # -- Claim Keeper -----------------------------------------------------------------------------
    def _keep(self, client: Any, t: Trajectory, run: PromptRun, st: DriftSettings, whole: int,
              claims: list[Any], decisions: list[int]) -> Any:
        ordered = sorted(claims, key=lambda c: (not c.consequential, not c.status.unsupported, c.step))
        rows = [{"id": c.id, "step": c.step, "kind": c.kind, "value": c.value[:60], "status": c.status.value}
                for c in ordered[: st.max_ledger_rows]]
        rows.sort(key=lambda r: (r["step"], int(r["id"][1:])))
        if len(claims) > st.max_ledger_rows:
            rows.append({"note": f"{len(claims) - st.max_ledger_rows} more ledger claims not listed"})
            run.notes.append(f"keeper: {st.max_ledger_rows} of {len(claims)} ledger claims listed")
        messages, _ = run.fitted(client, "drift_keeper", t, "steps", decisions,
                                 budget_chars=max(st.min_budget, int(st.keeper_share * whole)),
                                 task=t.task, ledger=rows)
        answer = client.chat_json(messages, load_prompt("drift_keeper").schema, name=f"{self.name}-keeper")
        keeper = LLMClaimExtractor(t, answer["claims"])
        run.notes.extend(keeper.dropped)
        return keeper

    # -- Support Seeker ---------------------------------------------------------------------------
    def _support(self, client: Any, t: Trajectory, run: PromptRun, st: DriftSettings, whole: int,
                 claims: list[Any]) -> tuple[list[dict[str, Any]], int]:
        todo, more = claims_to_check(claims, st.max_checks)
        if more:
            run.notes.append(f"support seeker: {more} more unconfirmed consequential claims kept their ledger status")
        if not todo:
            run.notes.append("support seeker: no unconfirmed consequential claim; no call")
            return [], 0
        shown: set[int] = set()
        for c in todo:
            shown.add(c.step)
            before = [s.index for s in t.steps[: c.step] if not s.is_decision]
            shown.update(before[-(st.radius + 1):])
            addr = c.evidence_address or ""
            if addr.startswith("steps."):
                shown.add(int(addr.split(".")[1].split("[")[0]))
        schema = copy.deepcopy(load_prompt("drift_support").schema)
        schema["properties"]["judgments"]["maxItems"] = len(todo)
        schema["properties"]["judgments"]["items"]["properties"]["id"] = {"enum": [c.id for c in todo]}
        messages, _ = run.fitted(client, "drift_support", t, "evidence", sorted(shown),
                                 focus=tuple(s for s in sorted(shown) if not t.steps[s].is_decision),
                                 budget_chars=max(st.min_budget, int(st.evidence_share * whole)),
                                 task=t.task, claims=[claim_row(c) for c in todo])
        answer = client.chat_json(messages, schema, name=f"{self.name}-support")
        return apply_support(todo, answer["judgments"], len(t.steps)), len(todo)

    # -- Dependency Backtrace ---------------------------------------------------------------------
    def _backtrace(self, client: Any, t: Trajectory, run: PromptRun, st: DriftSettings, whole: int,
                   claims: list[Any], prop: Any, cats: list[tuple[str, str]]) -> dict[str, Any]:
        by_id = {c.id: c for c in claims}
        unsupported = [c for c in claims if c.status.unsupported and c.consequential]
        rows = [{**claim_row(c), "reused_in": c.reused_in[:8], "final_steps": c.final_steps[:8],
                 "derived_from": c.derived_from[:4]} for c in unsupported[: st.max_ledger_rows]]
        if len(unsupported) > st.max_ledger_rows:
            rows.append({"note": f"{len(unsupported) - st.max_ledger_rows} more unsupported claims not listed"})
        candidates = [{"step": k, "role": prop.roles[k],
                       "chain": [f"{i}: {(by_id[i].mention.context or by_id[i].value)[:60]}"
                                 for i in prop.chains.get(k, [])][:4]} for k in prop.error_steps[:12]]
        fin = final_answer_index(t)
        anchors = tuple(sorted(set(prop.error_steps[: st.max_windows]) | ({fin} if fin is not None else set())))
        outline, report = outline_view(t, max(2000, client.config.context_chars // 4), anchors)
        if report["mode"] != "full":
            run.notes.append(f"outline {report['mode']}: previews cut to {report['cap']} chars")
        schema = category_schema("drift_backtrace", [c for c, _ in cats])
        messages, _ = run.fitted(client, "drift_backtrace", t, "windows", window_indices(t, anchors, st.radius),
                                 focus=anchors, anchor=anchors[0] if anchors else None,
                                 budget_chars=max(st.min_budget, int(st.window_share * whole)),
                                 task=t.task, final_answer=final_answer_text(t, run.notes), claims=rows,
                                 candidates=candidates, outline=outline, categories=categories_text(cats))
        return client.chat_json(messages, schema, name=f"{self.name}-backtrace")
