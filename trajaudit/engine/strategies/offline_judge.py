"""The offline judge (default strategy, no LLM): validation log + claim graph → critical step.

AgentRx defines the critical step as the *first unrecoverable failure* (AgentRx §2, §3.4). The
offline judge implements that definition deterministically:

1. **Findings.** Every ``fail`` record of the validation log at or above
   ``AuditConfig.min_violation_severity`` is a finding, weighted by severity
   (warning 1, error 2, critical 3) times the rule's ``metadata.weight`` (default 1).
2. **Blame attribution.** A finding on a tool output is blamed on the decision step that issued the
   call (``Trajectory.call_for``), or the nearest earlier decision step; never on the tool message.
   A finding on a user turn blames the next decision step (the agent acted on it), except findings
   whose targets say the user is the cause (``underspecified_user_intent``) and findings on a final
   user turn that no agent step follows (the run ended on it).
3. **Recovery.** A finding is *recovered* (weight × ``recovered_factor``) when the run repaired it:
   the blamed step's call errored and a later call of the same tool by the same agent succeeded;
   or the rule itself says so (``bindings.recovered``). Claim findings that never become
   consequential arrive as ``info`` and are ignored (DRIFT: benign exploration is not an error).
4. **Propagation.** Claim-propagation records (``claims.propagates-unsupported``) are consequences,
   not roots: they add ``propagation_bonus`` to the step that introduced the claim.
5. **Choice.** Candidates are scored per step (one rule counts once per step); the critical step is
   the *earliest* step with an unrecovered error-level finding whose score reaches ``threshold`` —
   warnings add weight but never make a step critical on their own. Without such a step the judge falls back to the earliest warning-level
   candidate, then to the first consequential action (a write-like tool call or code to execute:
   where a plan becomes irreversible), then to the last decision step — each fallback lowers the
   confidence and says so in the rationale.
6. **Category.** A weighted vote over the targets of the findings at the chosen step; ties are broken
   by the votes of the findings' first-listed targets (a rule lists its most likely category first),
   then by ``CATEGORY_PRECEDENCE`` (most specific, most actionable first). The first-action fallback says
   ``intent_plan_misalignment``, or ``underspecified_user_intent`` in a dialogue with a user
   (:func:`_dialogue_request`).
"""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass, field

from trajaudit.engine.claims.origin import is_outcome_finding, origin_of
from trajaudit.engine.diagnosis import Candidate, Diagnosis
from trajaudit.engine.strategies.base import INCONCLUSIVE
from trajaudit.engine.strategies.context import AuditContext, EvidenceBundle
from trajaudit.engine.trace.ir import FENCE_RE, Step, Trajectory
from trajaudit.engine.validation_log import Evidence, Record, severity_rank

SEVERITY_WEIGHT = {"info": 0.0, "warning": 1.0, "error": 2.0, "critical": 3.0}

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
USER_CAUSED = frozenset({"underspecified_user_intent"})
PROPAGATION_RULE = "claims.propagates-unsupported"

_WRITE_VERB = re.compile(
    r"^(cancel|modify|update|exchange|return|book|send|delete|remove|create|transfer|pay|refund|submit|"
    r"write|post|put|place|purchase|buy|order|set|add|edit|change|reserve|schedule|execute|run)", re.I)
# Code to execute: a Markdown fence opening a line (an inline ``` in prose, as in Magentic-One's
# team description "provided to it quoted in ```python code blocks", is not code) or a code-like line.
_CODE = re.compile(FENCE_RE.pattern + r"|^\s*(import |def |SELECT |curl |pip install)", re.M)


@dataclass(frozen=True)
class JudgeSettings:
    """Weights of the offline judge (see the module docstring for their roles).

    Attributes:
        user_prior: in a dialogue with a user, the first-action fallback's category is
            ``underspecified_user_intent`` (:func:`_dialogue_request`, AgentRx §5); ``False`` keeps
            ``intent_plan_misalignment``.
        redirect_to_origin: when the chosen step's findings are all outcome findings (a late
            symptom: :func:`trajaudit.engine.claims.origin.is_outcome_finding`), choose the origin its
            dependencies lead back to (:func:`trajaudit.engine.claims.origin.origin_of`) instead (AgentRx:
            the first unrecoverable failure, not where it surfaced). Off by default: the dev sets
            have no such decisive finding to choose it on, and AgentRx's taxonomy makes a block
            (``guardrails_triggered``) or an environment fault (``system_failure``) the root cause
            itself when the plan was valid. Either way the trace is reported in
            ``metadata["origin"]``, the origin is added to the candidates, and
            :func:`trajaudit.engine.claims.origin.origin_features` gives a ranker what it needs to decide.
    """

    threshold: float = 2.0
    recovered_factor: float = 0.25
    propagation_bonus: float = 0.5
    max_candidates: int = 10
    weak_before_prior: bool = False
    user_prior: bool = True
    redirect_to_origin: bool = False


@dataclass
class _Cand:
    step: int
    score: float = 0.0
    votes: dict[str, float] = field(default_factory=lambda: defaultdict(float))
    primary: dict[str, float] = field(default_factory=lambda: defaultdict(float))  # first-listed targets' votes
    findings: list[tuple[Record, float, bool]] = field(default_factory=list)
    per_rule: dict[str, float] = field(default_factory=dict)

    @property
    def has_error(self) -> bool:
        """At least one unrecovered error-level (or critical) finding: warnings alone never suffice."""
        return any(not ok and severity_rank(r.severity) >= 2 for r, _, ok in self.findings)


def is_consequential_action(step: Step) -> bool:
    """A decision step that acts irreversibly or executes: a write-like tool call, or code to run."""
    if not step.is_decision:
        return False
    if any(_WRITE_VERB.match(c.name) for c in step.tool_calls):
        return True
    return bool(_CODE.search(step.content))


def blame(t: Trajectory, rec: Record) -> int | None:
    """The decision step (or, for user-caused targets, the user step) a record is attributed to."""
    k = rec.step
    if not 0 <= k < len(t.steps):
        return None
    s = t.steps[k]
    if s.is_decision:
        return k
    if s.kind == "tool":
        hit = t.call_for(s)
        if hit is not None:
            return hit[0].index
        if k in t.code_authors:  # a code runner's output: the step whose code it ran
            return t.code_authors[k]
        earlier = [d.index for d in t.steps[:k] if d.is_decision]
        return earlier[-1] if earlier else None
    if s.kind == "user" and USER_CAUSED & set(rec.targets):
        return k
    later = [d.index for d in t.steps[k + 1:] if d.is_decision]
    if later:
        return later[0]
    return k if s.kind == "user" else None  # a run that ends on this user turn: nothing later to blame


def _last_success(t: Trajectory) -> dict[tuple[str | None, str], int]:
    """``{(agent, tool name): index of the last step where that agent's call of that tool, with a call
    id, got an output that is not an error}`` — what :func:`_recovered` asks of every later step."""
    last: dict[tuple[str | None, str], int] = {}
    for s in t.steps:
        for c in s.tool_calls:
            if c.id is None:
                continue
            res = t.output_after(c.id, s.index)
            if res is not None and not res.tool_output.is_error:
                last[(s.agent, c.name)] = s.index
    return last


def _recovered(t: Trajectory, step: int, rec: Record, last_success: dict[tuple[str | None, str], int]) -> bool:
    """A finding is recovered when its rule says so (binding ``recovered``) or when a call of the step
    failed and the same agent later called the same tool successfully (AgentRx: a failed call retried
    successfully is not the critical failure). ``last_success`` is :func:`_last_success` of ``t``."""
    if rec.bindings.get("recovered") is True:
        return True
    s = t.steps[step]
    for call in s.tool_calls:
        out = t.output_after(call.id, step)
        if out is not None and out.tool_output.is_error and last_success.get((s.agent, call.name), -1) > out.index:
            return True
    return False


def _category(c: _Cand, taxonomy_ids: frozenset[str] | None) -> str:
    if not c.votes:
        return INCONCLUSIVE
    order = {cat: i for i, cat in enumerate(CATEGORY_PRECEDENCE)}
    ranked = sorted(c.votes.items(),
                    key=lambda kv: (-kv[1], -c.primary.get(kv[0], 0.0), order.get(kv[0], len(order)), kv[0]))
    for cat, _ in ranked:
        if taxonomy_ids is None or cat in taxonomy_ids:
            return cat
    return INCONCLUSIVE


class OfflineJudge:
    """The default strategy: deterministic judge over the validation log and the claim graph."""

    name = "offline"
    description = "rules + claim graph + deterministic judge (first unrecoverable failure); no LLM"
    needs_llm = False

    def __init__(self, settings: JudgeSettings | None = None) -> None:
        self.settings = settings or JudgeSettings()

    def candidates(self, t: Trajectory, records: list[Record], min_severity: str = "warning") -> list[_Cand]:
        """Score findings per blamed step; returns candidates in step order."""
        floor = severity_rank(min_severity)
        cands: dict[int, _Cand] = {}
        bonus: dict[int, float] = defaultdict(float)
        last_success: dict[tuple[str | None, str], int] | None = None
        for rec in records:
            if rec.verdict != "fail":
                continue
            if rec.rule_id == PROPAGATION_RULE:
                root = rec.bindings.get("root_step")
                if isinstance(root, int):
                    bonus[root] += self.settings.propagation_bonus
                continue
            if severity_rank(rec.severity) < floor:
                continue
            step = blame(t, rec)
            if step is None:
                continue
            w = SEVERITY_WEIGHT.get(rec.severity, 1.0) * float(rec.bindings.get("weight", 1.0) or 1.0)
            if last_success is None:
                last_success = _last_success(t)
            rec_ok = _recovered(t, step, rec, last_success)
            if rec_ok:
                w *= self.settings.recovered_factor
            c = cands.setdefault(step, _Cand(step))
            c.findings.append((rec, w, rec_ok))
            prev = c.per_rule.get(rec.rule_id, 0.0)
            if w > prev:  # one rule counts once per step: repeated hits of a rule are one finding
                c.score += w - prev
                c.per_rule[rec.rule_id] = w
                for target in rec.targets or (INCONCLUSIVE,):
                    c.votes[target] += w - prev
                c.primary[(rec.targets or (INCONCLUSIVE,))[0]] += w - prev
        for step, b in bonus.items():
            if step in cands:
                cands[step].score += b
        return [cands[k] for k in sorted(cands)]

    def diagnose(self, trajectory: Trajectory, evidence: EvidenceBundle, context: AuditContext) -> Diagnosis:
        """Pick the first unrecoverable failure (see the module docstring). Never raises on valid IR."""
        t = trajectory
        bundle = evidence
        cands = self.candidates(t, bundle.log.records, context.config.min_violation_severity)
        strong = [c for c in cands if c.score >= self.settings.threshold and c.has_error]
        taxonomy_ids = context.taxonomy_ids
        chosen: _Cand | None = None
        how = ""
        if strong:
            chosen, how = strong[0], "earliest unrecovered error-level failure"
        elif cands and (self.settings.weak_before_prior or not any(is_consequential_action(s) for s in t.decision_steps)):
            chosen = max(cands, key=lambda c: (c.score, -c.step))
            how = "no error-level failure; strongest weaker finding"
        ranked = sorted(cands, key=lambda c: (c is not chosen, -c.score, c.step))[: self.settings.max_candidates]
        trace = None
        if chosen is not None and all(is_outcome_finding(t, rec) for rec, _, _ in chosen.findings):
            trace = origin_of(t, chosen.step, bundle.graph)
            if trace.step == chosen.step:
                trace = None
            elif self.settings.redirect_to_origin:
                symptom = chosen
                chosen = next((c for c in cands if c.step == trace.step), None) or _Cand(trace.step)
                chosen.votes = chosen.votes or symptom.votes
                chosen.primary = chosen.primary or symptom.primary
                chosen.findings = chosen.findings or symptom.findings
                how = (f"origin of a late symptom at steps.{symptom.step} "
                       f"({' <- '.join(f'{x.relation} {x.step}' for x in trace.chain)})")
        if chosen is not None:
            step = chosen.step
            category = _category(chosen, taxonomy_ids)
            conf = min(0.95, 0.3 + 0.12 * chosen.score) * (1.0 if strong else 0.6)
            evidence = tuple(e for rec, _, _ in chosen.findings for e in rec.evidence)[:12]
            reasons = "; ".join(
                f"{rec.rule_id} ({rec.severity}{', recovered later' if ok else ''}) at steps.{rec.step}: {rec.message}"
                for rec, _, ok in chosen.findings[:5])
            rationale = f"{how}: step {step} ({t.steps[step].agent or t.steps[step].kind}). {reasons}"
        else:
            step, category, conf, evidence, rationale = self._prior(t)
            if taxonomy_ids is not None and category not in taxonomy_ids:
                category = INCONCLUSIVE
        cand_out = tuple(
            Candidate(step=c.step, category=_category(c, taxonomy_ids), score=round(c.score, 3),
                      agent=t.steps[c.step].agent or t.steps[c.step].kind,
                      reason="; ".join(f"{r.rule_id}{' (recovered)' if ok else ''}" for r, _, ok in c.findings[:4]),
                      evidence=tuple(e.address for r, _, _ in c.findings for e in r.evidence[:2])[:6])
            for c in ranked)
        if trace is not None and all(c.step != trace.step for c in cand_out):
            cand_out += (Candidate(step=trace.step, category=INCONCLUSIVE, score=0.0,
                                   agent=t.steps[trace.step].agent or t.steps[trace.step].kind,
                                   reason=f"origin of the late symptom at steps.{trace.symptom}: "
                                          + "; ".join(x.note for x in trace.chain[1:])[:300],
                                   evidence=tuple(f"steps.{x.step}" for x in trace.chain)),)
        agent = responsible_agent(t, step, category)
        return Diagnosis(
            trajectory_id=t.id, file=t.source.file, record=t.source.record, critical_step=step, agent=agent,
            category=category, taxonomy=context.config.taxonomy, confidence=round(conf, 3), rationale=rationale,
            evidence=evidence, candidates=cand_out, strategy=self.name,
            error_steps=tuple(sorted({c.step for c in strong} | set(bundle.error_steps))),
            metadata={"findings": sum(len(c.findings) for c in cands), "log_summary": bundle.log.summary()["verdicts"],
                      **({"incomplete": list(bundle.log.incomplete)} if bundle.log.incomplete else {}),
                      **({"origin": trace.to_dict()} if trace is not None else {})},
        )

    def _prior(self, t: Trajectory) -> tuple[int | None, str, float, tuple[Evidence, ...], str]:
        ds = t.decision_steps
        if not ds:
            return None, INCONCLUSIVE, 0.0, (), "no decision step"
        act = next((s for s in ds if is_consequential_action(s)), None)
        if act is not None:
            evidence = (Evidence(act.address, act.preview(120), "first action"),)
            why = (f"no rule or claim evidence; fallback: the first consequential action (step {act.index}: "
                   f"{act.preview(80)}) is where the plan became irreversible")
            request = _dialogue_request(t, act) if self.settings.user_prior else None
            if request is None:
                return act.index, "intent_plan_misalignment", 0.2, evidence, why
            evidence += (Evidence(request.address, request.preview(120), "the user's request it carried out"),)
            return (act.index, "underspecified_user_intent", 0.2, evidence,
                    f"{why}; in a dialogue with a user and with nothing wrong found on the agent's side, the "
                    f"likeliest root cause is the request it carried out (step {request.index}: "
                    f"{request.preview(80)}): underspecified user intent")
        last = ds[-1]
        return (last.index, INCONCLUSIVE, 0.1, (Evidence(last.address, last.preview(120), "last decision"),),
                "no evidence and no consequential action; fallback: the last decision step")


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
    customer), not only to pose the task (Who&When, Magentic-One, most tool-use runs). The request is
    the last user turn before ``act`` that follows the first decision step; ``None`` otherwise.

    Used by the fallback category (AgentRx §5: in conversations with a user, "Underspecified User
    Intent" is the most frequent root cause, a third of tau-bench's failures): when the audit finds
    no fault on the agent's side — no rule violation, no unsupported claim — the agent did what it
    was asked, and what it was asked is the likeliest cause. The critical step stays the first
    consequential action, where that request became irreversible: placing it on the user turn
    instead lost exact steps when no domain pack applies (tau with the generic pack only:
    11 -> 7 of 29), where the first action is often the agent's own mistake.
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
                                 evidence=rec.evidence, strategy=self.name)
        ds = t.decision_steps
        step = ds[0].index if ds else None
        return Diagnosis(trajectory_id=t.id, file=t.source.file, record=t.source.record, critical_step=step,
                         agent=t.steps[step].agent if step is not None else None, category=INCONCLUSIVE,
                         taxonomy=context.config.taxonomy, confidence=0.05,
                         rationale="no error-level violation; first decision step", strategy=self.name)
