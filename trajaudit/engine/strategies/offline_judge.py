"""The offline judge (default strategy, no LLM): validation log + claim graph → ranked candidate steps.

AgentRx defines the critical step as the *first unrecoverable failure* (AgentRx §2, §3.4). The
offline judge ranks every candidate step of a run (:mod:`trajaudit.engine.strategies.judge_features`: the
decision steps, plus a user turn a finding blames) with a linear model whose weights are data
(:mod:`trajaudit.engine.strategies.judge_weights`; the shipped file is fitted on annotated failures and chosen by
leave-one-dataset-out cross-validation, ``trajaudit judge fit`` fits a team's own). No threshold or
weight in this module was set by hand against a data set:

1. **Findings.** Every ``fail`` record of the validation log is blamed on a step
   (:func:`~trajaudit.engine.strategies.judge_features.blame`: a tool output's finding goes to the step that
   issued the call or wrote the code; a user turn's to the next decision step unless its target says
   the user caused it), marked *recovered* when the run repaired it
   (:func:`~trajaudit.engine.strategies.judge_features.recovered`), and becomes features of that step: counts by
   severity, recovery, rule type and family, the claims the step introduced by support status, its
   place among the run's findings (first error, errors before and after).
2. **Structure.** Position (relative), the producer's role derived from the run (does it address
   other agents, does it call tools or run code, how much of the run it speaks), what follows
   (errored outputs, later steps reusing its claims), loops (a call or message repeated).
3. **Choice.** The candidate with the highest score. Its ``basis`` says what decided it:
   ``finding`` (an unrecovered error-level finding is blamed on it), ``weak`` (weaker findings
   only) or ``fallback`` (no finding: a prior position chosen by the structural features).
4. **Confidence.** Platt scaling of the winner's score and margin, fitted on held-out folds
   (:class:`~trajaudit.engine.strategies.judge_weights.Calibration`): a probability that the step is right.
5. **Category.** A weighted vote over the targets of the findings at the chosen step (severity
   weights, recovered findings ×0.25: an order of evidence, not a tuned constant); ties are broken by
   the votes of the findings' first-listed targets (a rule lists its most likely category first),
   then by ``CATEGORY_PRECEDENCE`` (most specific, most actionable first). A ``fallback`` step has no
   finding to vote: a consequential action in a dialogue with a user is ``underspecified_user_intent``
   (the agent did what it was asked; the agent is then ``user``, consistent with the category), any
   other consequential action ``intent_plan_misalignment``, anything else ``inconclusive``.
"""

from __future__ import annotations

import dataclasses
import operator
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from itertools import compress, repeat
from typing import Any

from trajaudit.engine.claims.origin import OriginTrace, RunMemo, is_outcome_finding, origin_of
from trajaudit.engine.diagnosis import Candidate, Diagnosis
from trajaudit.engine.strategies.base import INCONCLUSIVE
from trajaudit.engine.strategies.context import AuditContext, EvidenceBundle
from trajaudit.engine.strategies.judge_features import (
    PROPAGATION_RULE,
    USER_CAUSED,
    FeatureTable,
    Finding,
    blame,
    features,
    is_consequential_action,
    last_success,
    recovered,
)
from trajaudit.engine.strategies.judge_features import Candidate as FeatureCandidate
from trajaudit.engine.strategies.judge_weights import WEIGHTS_KEY, JudgeWeights, shipped_weights
from trajaudit.engine.trace.ir import Step, Trajectory
from trajaudit.engine.validation_log import VERDICTS, Evidence, ValidationLog, severity_rank

__all__ = ["BASES", "CATEGORY_PRECEDENCE", "JudgeSettings", "OfflineJudge", "FirstViolation", "blame",
           "is_consequential_action", "PROPAGATION_RULE", "USER_CAUSED"]

#: Vote weight of a finding by severity (an order of evidence strength for the category vote).
SEVERITY_WEIGHT = {"info": 0.0, "warning": 1.0, "error": 2.0, "critical": 3.0}
#: Vote factor of a recovered finding.
RECOVERED_VOTE = 0.25
#: What decided a diagnosis (``Diagnosis.basis``).
BASES = ("finding", "weak", "fallback")

# Tie-break order for categories with equal vote weight (documented in docs/judge.md).
CATEGORY_PRECEDENCE = (
    "invalid_invocation",
    "misinterpretation_of_tool_output",
    "invention_of_new_information",
    "instruction_adherence_failure",
    "intent_not_supported",
    "guardrails_triggered",
    "system_failure",
    "intent_plan_misalignment",
    "underspecified_user_intent",
)

_PRECEDENCE = {cat: i for i, cat in enumerate(CATEGORY_PRECEDENCE)}

# kept for callers of the earlier names
_last_success = last_success
_recovered = recovered


@dataclass(frozen=True)
class JudgeSettings:
    """Options of the offline judge (the ranking itself is the weights file's).

    Attributes:
        max_candidates: ranked candidates listed in the diagnosis.
        user_prior: in a dialogue with a user, a fallback consequential action is
            ``underspecified_user_intent`` (:func:`_dialogue_request`, AgentRx §5); ``False`` keeps
            ``intent_plan_misalignment``.
        weights: the :class:`JudgeWeights` to rank with; ``None``: the context's
            (``context.strategy_options["offline"]["judge_weights"]``), else the shipped ones.
        redirect_to_origin: when the chosen step's findings are all outcome findings (a late
            symptom: :func:`trajaudit.engine.claims.origin.is_outcome_finding`), choose the origin its
            dependencies lead back to (:func:`trajaudit.engine.claims.origin.origin_of`) instead (AgentRx:
            the first unrecoverable failure, not where it surfaced). Off by default: the ranker
            already weighs the origin quantities (``late_symptom``, ``origin_of_late_symptom``, …) as
            fitted features, and redirecting its choice afterwards lost steps on the dev data
            (Who&When in-sample 57 → 52 of 126; 7 runs redirected). The trace is reported in
            ``metadata["origin"]`` and the origin added to the candidates either way.
    """

    max_candidates: int = 10
    user_prior: bool = True
    weights: JudgeWeights | None = None
    redirect_to_origin: bool = False


@dataclass
class _Votes:
    votes: dict[str, float] = field(default_factory=lambda: defaultdict(float))
    primary: dict[str, float] = field(default_factory=lambda: defaultdict(float))  # first-listed targets' votes


def _votes(findings: list[Finding], floor: int) -> _Votes:
    v = _Votes()
    for f in findings:
        if f.level < max(floor, 1):
            continue
        w = SEVERITY_WEIGHT.get(f.record.severity, 1.0) * (RECOVERED_VOTE if f.recovered else 1.0)
        targets = f.record.targets or (INCONCLUSIVE,)
        for target in targets:
            v.votes[target] += w
        v.primary[targets[0]] += w
    return v


def _category(c: _Votes, taxonomy_ids: frozenset[str] | None) -> str:
    if not c.votes:
        return INCONCLUSIVE
    order = _PRECEDENCE
    ranked = sorted(c.votes.items(),
                    key=lambda kv: (-kv[1], -c.primary.get(kv[0], 0.0), order.get(kv[0], len(order)), kv[0]))
    for cat, _ in ranked:
        if taxonomy_ids is None or cat in taxonomy_ids:
            return cat
    return INCONCLUSIVE


def _producer(t: Trajectory, step: int) -> str:
    s = t.steps[step]
    return s.agent or s.kind


class OfflineJudge:
    """The default strategy: a fitted ranker over the validation log and the claim graph (no LLM)."""

    name = "offline"
    description = "rules + claim graph + fitted ranker of candidate steps (weights are data); no LLM"
    needs_llm = False

    def __init__(self, settings: JudgeSettings | None = None) -> None:
        self.settings = settings or JudgeSettings()

    def weights(self, context: AuditContext) -> JudgeWeights:
        """The weights in use: the settings', else the context's (``--judge-weights``:
        ``context.strategy_options["offline"]["judge_weights"]``), else the shipped ones."""
        given = context.strategy_options.get(self.name, {}).get(WEIGHTS_KEY)
        return self.settings.weights or given or shipped_weights()

    def candidates(self, t: Trajectory, records: list[Any], min_severity: str = "warning") -> list[FeatureCandidate]:
        """The run's candidate steps (every decision step, plus a user turn a finding blames) with the
        findings at or above ``min_severity`` blamed on them (``has_error``, ``basis``, feature rows),
        in step order — what :meth:`diagnose` ranks (without the claim graph's features)."""
        return features(t, records, None, min_severity=min_severity).candidates

    def table(self, t: Trajectory, evidence: EvidenceBundle) -> FeatureTable:
        """The run's candidate table from the evidence the pipeline gathered."""
        return features(t, evidence.log.records, getattr(evidence, "graph", None))

    def diagnose(self, trajectory: Trajectory, evidence: EvidenceBundle, context: AuditContext) -> Diagnosis:
        """Rank the candidates and explain the winner (see the module docstring). Never raises on valid IR."""
        t = trajectory
        graph = getattr(evidence, "graph", None)
        # one read of the log's verdicts: the failures are all the features read of it (the same table as
        # self.table(t, evidence)), and the counts are the metadata's
        records = evidence.log.records
        verdicts = [r.verdict for r in records]
        table = features(t, list(compress(records, map(operator.eq, verdicts, repeat("fail")))), graph)
        spans = tuple(evidence.error_steps)
        log_meta = _log_meta(evidence.log, verdicts)
        weights = self.weights(context)
        taxonomy_ids = context.taxonomy_ids
        floor = severity_rank(context.config.min_violation_severity)
        base: dict[str, Any] = dict(trajectory_id=t.id, file=t.source.file, record=t.source.record,
                                    taxonomy=context.config.taxonomy, strategy=self.name)
        if not table.candidates:
            return Diagnosis(critical_step=None, category=INCONCLUSIVE, confidence=0.0, basis="fallback",
                             rationale="no decision step", metadata=log_meta, **base)
        ranked = weights.rank(table)
        best = table.candidates[ranked[0][0]]
        conf = weights.confidence(ranked)
        basis = best.basis
        trace = _origin_trace(t, best, basis, graph, table.origin_memo)
        step, category, shown, rationale = self._explain(t, best, basis, len(table.candidates), trace, floor,
                                                         taxonomy_ids)
        agent = responsible_agent(t, step, category)
        listed = _with_origin(t, _listed(t, table, ranked[: self.settings.max_candidates], floor, taxonomy_ids), trace)
        errors = {c.step for c in table.candidates if c.has_error}
        return Diagnosis(
            critical_step=step, agent=agent, category=category, confidence=round(conf, 3), rationale=rationale,
            evidence=shown, candidates=listed, basis=basis, error_steps=tuple(sorted(errors | set(spans))),
            metadata={"findings": sum(1 for c in table.candidates for f in c.findings if f.level >= floor),
                      "weights": weights.source, **log_meta, **({"origin": trace.to_dict()} if trace is not None else {})},
            **base)

    def _explain(self, t: Trajectory, best: FeatureCandidate, basis: str, n: int, trace: OriginTrace | None,
                 floor: int, taxonomy_ids: frozenset[str] | None) -> tuple[int, str, tuple[Evidence, ...], str]:
        """``(step, category, evidence, rationale)`` of the ranker's choice ``best`` (one of ``n``
        candidates): a ``fallback`` choice by :meth:`_fallback`, else by its findings
        (:meth:`_from_findings`); a category outside the taxonomy (``taxonomy_ids``) is ``inconclusive``."""
        if basis == "fallback":
            step = best.step
            category, evidence, rationale, _ = self._fallback(t, best, n)
        else:
            step, category, evidence, rationale = self._from_findings(t, best, basis, n, trace, floor, taxonomy_ids)
        if taxonomy_ids is not None and category not in taxonomy_ids:
            category = INCONCLUSIVE
        return step, category, evidence, rationale

    def _from_findings(self, t: Trajectory, best: FeatureCandidate, basis: str, n: int, trace: OriginTrace | None,
                       floor: int, taxonomy_ids: frozenset[str] | None) -> tuple[int, str, tuple[Evidence, ...], str]:
        """``(step, category, evidence, rationale)`` of a choice with findings: the category voted by its
        findings at ``floor`` and above, the evidence of its findings (12 at most), a rationale naming
        five of them; with ``redirect_to_origin`` and an origin ``trace``, the step is the origin."""
        category = _category(_votes(best.findings, floor), taxonomy_ids)
        shown = [f for f in best.findings if f.level >= 1]
        evidence = tuple(e for f in shown for e in f.record.evidence)[:12]
        how = ("an unrecovered error-level finding" if basis == "finding"
               else "weaker findings only (warnings, or errors the run recovered from)")
        reasons = "; ".join(
            f"{f.record.rule_id} ({f.record.severity}{', recovered later' if f.recovered else ''}) at "
            f"steps.{f.record.step}: {f.record.message}" for f in shown[:5])
        step = best.step
        rationale = (f"ranked first of {n} candidate steps on {how}: step {step} "
                     f"({_producer(t, step)}). {reasons}")
        if trace is not None and self.settings.redirect_to_origin:
            step = trace.step
            rationale = (f"origin of a late symptom at steps.{trace.symptom} "
                         f"({' <- '.join(f'{x.relation} {x.step}' for x in trace.chain)}): step {step}. {rationale}")
        return step, category, evidence, rationale

    def _fallback(self, t: Trajectory, c: FeatureCandidate, n: int) -> tuple[str, tuple[Evidence, ...], str, str]:
        """Category, evidence, rationale and agent of a step chosen with no finding (a prior position)."""
        s = t.steps[c.step]
        agent = _producer(t, c.step)
        evidence: tuple[Evidence, ...] = (Evidence(s.address, s.preview(120), "chosen step"),)
        why = (f"no finding at any candidate strong enough: fallback (a prior position, not evidence) — step "
               f"{c.step} ({agent}) ranked first of {n} by position and role: {s.preview(80)}")
        if not is_consequential_action(s):
            return INCONCLUSIVE, evidence, why, agent
        request = _dialogue_request(t, s) if self.settings.user_prior else None
        if request is None:
            return "intent_plan_misalignment", evidence, f"{why}; a consequential action (where the plan became irreversible)", agent
        evidence += (Evidence(request.address, request.preview(120), "the user's request it carried out"),)
        return ("underspecified_user_intent", evidence,
                f"{why}; in a dialogue with a user and with nothing wrong found on the agent's side, the "
                f"likeliest root cause is the request this action carried out (step {request.index}: "
                f"{request.preview(80)}): underspecified user intent, so the responsible agent is the user", "user")

    def _prior(self, t: Trajectory) -> tuple[int | None, str, float, tuple[Evidence, ...], str]:
        """The fallback of a run without evidence under the shipped weights: ``(step, category,
        confidence, evidence, rationale)`` (what :meth:`diagnose` says when no candidate has a finding)."""
        table = features(t, [], None)
        if not table.candidates:
            return None, INCONCLUSIVE, 0.0, (), "no decision step"
        w = self.settings.weights or shipped_weights()
        ranked = w.rank(table)
        best = table.candidates[ranked[0][0]]
        category, evidence, why, _ = self._fallback(t, best, len(table.candidates))
        return best.step, category, w.confidence(ranked), evidence, why


def _log_meta(log: ValidationLog, verdicts: Sequence[str] | None = None) -> dict[str, Any]:
    """The diagnosis metadata about the validation log: its verdict counts, and the rules it could
    not finish (``incomplete``) when there are any. ``verdicts``: the records' verdicts, when read already."""
    return {"log_summary": verdict_counts(log, verdicts),
            **({"incomplete": list(log.incomplete)} if log.incomplete else {})}


def verdict_counts(log: ValidationLog, verdicts: Sequence[str] | None = None) -> dict[str, int]:
    """``log.summary()["verdicts"]`` (the same dict, keys in :data:`VERDICTS` order) without the rest of
    the summary (failures by severity and by rule). ``verdicts``: ``[r.verdict for r in log.records]``
    when the caller has it."""
    if verdicts is None:
        verdicts = [r.verdict for r in log.records]
    # the summary's Counter, skip replaced and passes added; list.count compares as the Counter's keys do
    counts = {v: verdicts.count(v) for v in VERDICTS}
    counts["skip"] = log.skipped
    counts["pass"] += log.dropped_passes
    return counts


def _origin_trace(t: Trajectory, best: FeatureCandidate, basis: str, graph: Any,
                  memo: RunMemo | None = None) -> OriginTrace | None:
    """The origin trace of the chosen step when all its findings (warning and above) are outcome
    findings — a late symptom (:func:`~trajaudit.engine.claims.origin.origin_of`, sharing the features'
    ``memo`` of the run); ``None`` for a ``fallback`` choice, for other findings, or when the trace
    leads back to the step itself."""
    if basis == "fallback" or not all(is_outcome_finding(t, f.record) for f in best.findings if f.level >= 1):
        return None
    trace = origin_of(t, best.step, graph, memo=memo)
    return None if trace.step == best.step else trace


def _listed(t: Trajectory, table: FeatureTable, ranked: list[tuple[int, float]], floor: int,
            taxonomy_ids: frozenset[str] | None) -> tuple[Candidate, ...]:
    """The ranked candidates the diagnosis lists (``ranked``: ``(row, score)`` pairs, best first)."""
    return tuple(_listed_candidate(t, table.candidates[i], s, floor, taxonomy_ids) for i, s in ranked)


def _listed_candidate(t: Trajectory, c: FeatureCandidate, score: float, floor: int,
                      taxonomy_ids: frozenset[str] | None) -> Candidate:
    """One listed candidate: the category its findings vote for (``inconclusive`` without a finding at
    warning level or above), its score (3 decimals), producer, four of its rules as the reason, and
    the addresses of their evidence (two per finding, six at most)."""
    shown = [f for f in c.findings if f.level >= 1]
    return Candidate(step=c.step, category=_category(_votes(c.findings, floor), taxonomy_ids) if c.has_finding
                     else INCONCLUSIVE, score=round(score, 3), agent=_producer(t, c.step),
                     reason="; ".join([f"{f.record.rule_id}{' (recovered)' if f.recovered else ''}"
                                       for f in shown][:4]) or f"{c.basis}: no finding",
                     evidence=tuple(e.address for f in shown for e in f.record.evidence[:2])[:6])


def _with_origin(t: Trajectory, listed: tuple[Candidate, ...], trace: OriginTrace | None) -> tuple[Candidate, ...]:
    """``listed`` with the origin of a late symptom (``trace``) on it: added at the end when it is not
    listed, else its reason and evidence say so (the trace's steps first)."""
    if trace is None:
        return listed
    why = f"origin of the late symptom at steps.{trace.symptom}: " + "; ".join(x.note for x in trace.chain[1:])
    chain = tuple(f"steps.{x.step}" for x in trace.chain)
    if all(c.step != trace.step for c in listed):
        return listed + (Candidate(step=trace.step, category=INCONCLUSIVE, score=0.0, agent=_producer(t, trace.step),
                                   reason=why[:300], evidence=chain),)
    return tuple(dataclasses.replace(c, reason=f"{why[:300]}; {c.reason}", evidence=chain + c.evidence)
                 if c.step == trace.step else c for c in listed)


def responsible_agent(t: Trajectory, step: int | None, category: str) -> str | None:
    """The agent a diagnosis names, consistent with its category (issue 17: a guess must not read
    like a finding that contradicts itself).

    - a user-caused category (``underspecified_user_intent``) names ``user``, also when the step is
      the agent's action that carried the request out (the first-action fallback in a dialogue);
    - a user turn blamed for another category (``run-ends-on-open-request``: the run stopped on an
      unanswered request, ``system_failure``) names the agent that should have answered it: the
      producer of the latest decision step before it (``user`` when there is none);
    - otherwise the step's producer (its agent name, else its kind).

    ``None`` when ``step`` is ``None``.
    """
    if step is None:
        return None
    s = t.steps[step]
    if category in USER_CAUSED:
        return "user"
    if s.kind == "user":
        prev = next((d for d in reversed(t.steps[:step]) if d.is_decision), None)
        return (prev.agent or prev.kind) if prev is not None else "user"
    return s.agent or s.kind


def _dialogue_request(t: Trajectory, act: Step) -> Step | None:
    """The user turn a consequential action carried out, when the run is a dialogue with a user.

    A dialogue: the user speaks again after the agent's first decision step (a user simulator or a
    customer), not only to pose the task (most multi-agent and tool-use runs). The request is the
    last user turn before ``act`` that follows the first decision step; ``None`` otherwise.

    Used by the fallback category (AgentRx §5: in conversations with a user, "Underspecified User
    Intent" is the most frequent root cause, a third of tau-bench's failures): when the audit finds
    no fault on the agent's side — no rule violation, no unsupported claim — the agent did what it
    was asked, and what it was asked is the likeliest cause.
    """
    ds = t.decision_steps
    first = ds[0].index if ds else act.index
    return next((s for s in reversed(t.steps[first + 1: act.index]) if s.kind == "user"), None)


class FirstViolation:
    """Baseline: the step of the first error-level violation in the validation log (else the first
    decision step)."""

    name = "first-violation"
    description = "baseline: the first error-level violation (blamed on its decision step)"
    needs_llm = False

    def diagnose(self, trajectory: Trajectory, evidence: EvidenceBundle, context: AuditContext) -> Diagnosis:
        """Earliest error-level failing record, attributed with :func:`blame`."""
        t = trajectory
        log = evidence.log
        for rec in log.violations("error"):
            step = blame(t, rec)
            if step is not None:
                return Diagnosis(trajectory_id=t.id, file=t.source.file, record=t.source.record, critical_step=step,
                                 agent=t.steps[step].agent or t.steps[step].kind,
                                 category=rec.targets[0] if rec.targets else INCONCLUSIVE,
                                 taxonomy=context.config.taxonomy, confidence=0.3,
                                 rationale=f"first error-level violation: {rec.rule_id} at steps.{rec.step}",
                                 evidence=rec.evidence, strategy=self.name, basis="finding")
        ds = t.decision_steps
        step = ds[0].index if ds else None
        return Diagnosis(trajectory_id=t.id, file=t.source.file, record=t.source.record, critical_step=step,
                         agent=t.steps[step].agent if step is not None else None, category=INCONCLUSIVE,
                         taxonomy=context.config.taxonomy, confidence=0.05,
                         rationale="no error-level violation; first decision step", strategy=self.name,
                         basis="fallback")
