"""Score diagnoses against gold: :func:`evaluate` -> :class:`~trajaudit.eval.report.EvalReport`.

Matching: a diagnosis belongs to the gold run whose key equals its ``trajectory_id`` (else whose
file name and record equal its ``file``/``record``, else whose key its id ends with after a ``_``
when that pairing is unambiguous: :func:`~trajaudit.eval.gold.suffix_aliases`); an id match is
refused when both name a trace file and the files differ (:meth:`GoldSet.match`). When more than half of the predictions match no
gold run, ``EvalReport.problems["pairing"]`` says the predictions probably come from another data set. Every gold run is scored; a run without a
prediction counts as wrong and is listed. Predictions for runs not in the gold, duplicates (the
first is kept) and gold runs without a critical step are reported in ``EvalReport.problems``.

Steps are compared as source message positions (:func:`~trajaudit.eval.runs.scored_step`): a diagnosis's
``metadata.source_message`` when it has one (a run whose step indexes are not message positions:
split Anthropic messages, AgentRx step records), else its ``critical_step``.
Metric definitions and sources: :mod:`trajaudit.eval.metrics` and ``docs/eval.md``.
"""

from __future__ import annotations

import logging
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

from trajaudit.engine.diagnosis import Diagnosis
from trajaudit.engine.taxonomy import Taxonomy, TaxonomyError, load_taxonomy
from trajaudit.engine.trace.ir import Trajectory
from trajaudit.eval import metrics as M
from trajaudit.eval.calibration import reliability
from trajaudit.eval.gold import GoldItem, GoldSet
from trajaudit.eval.pairing import pair_predictions, scored_run
from trajaudit.eval.report import EvalReport, MetricValue, RunScore
from trajaudit.eval.runs import (
    ScoredRun,
    index_trajectories,
)

log = logging.getLogger(__name__)

AGENTRX = "AgentRx §4.1"
SA = "SearchAuditor §5.1"
DRIFT = "DRIFT (TELBench) span metrics"
TOLERANCES = (1, 3, 5)


@runtime_checkable
class RepairGrader(Protocol):
    """Grades a repair directive against expert rubrics (SearchAuditor §5.1: an LLM grader; a case
    passes only if every rubric is satisfied). No grader ships: a caller passes one to :func:`evaluate`
    (``grader=``); without one Rep@Diag and FPS are skipped with a note."""

    def grade(self, repair: str, rubrics: Sequence[str], *, gold: GoldItem) -> bool: ...


def _as_diagnosis(d: Diagnosis | Mapping[str, Any]) -> Diagnosis:
    return d if isinstance(d, Diagnosis) else Diagnosis.from_dict(dict(d))


def _preview(t: Trajectory | None, step: int | None, width: int = 90) -> str:
    if t is None or step is None or not 0 <= step < len(t.steps):
        return ""
    s = t.steps[step]
    return f"{s.agent or s.kind}: {s.preview(width)}"


def _rate(key: str, label: str, flags: list[bool], source: str, *, resamples: int, seed: int,
          note: str = "") -> MetricValue:
    return MetricValue(key, label, M.rate(flags), len(flags),
                       M.bootstrap_ci([float(f) for f in flags], resamples=resamples, seed=seed) if flags else None,
                       "rate", source, note if flags or note else "no gold runs carry this annotation")


def _taxonomy_for(gold: Mapping[str, GoldItem], taxonomy: str | Taxonomy | None) -> Taxonomy | None:
    """The taxonomy to normalize predicted categories with: the argument, else the gold's (if loadable)."""
    if isinstance(taxonomy, Taxonomy):
        return taxonomy
    if taxonomy:
        return load_taxonomy(taxonomy)
    name = next((g.taxonomy for g in gold.values() if g.taxonomy), None)
    try:
        return load_taxonomy(name) if name else None
    except TaxonomyError:
        log.warning("gold taxonomy %r cannot be loaded; categories are compared verbatim", name)
        return None


def evaluate(gold: Mapping[str, GoldItem], diagnoses: Iterable[Diagnosis | Mapping[str, Any]], *,
             trajectories: Iterable[Trajectory] | Mapping[str, Trajectory] | None = None,
             taxonomy: str | Taxonomy | None = None, grader: RepairGrader | None = None,
             resamples: int = 2000, seed: int = 0) -> EvalReport:
    """Score ``diagnoses`` against ``gold`` with the metrics of AgentRx, SearchAuditor, Who&When and DRIFT.

    Args:
        gold: ``{key: GoldItem}`` from :func:`trajaudit.eval.gold.load_gold` (a :class:`GoldSet`
            also contributes its loading problems and source).
        diagnoses: :class:`Diagnosis` objects or their dicts (a diagnoses.jsonl line each).
        trajectories: the runs, for step previews, run lengths (normalized distance), the producer
            of a predicted step when a diagnosis names no agent, and the random baseline's expected
            value. Optional: without them those parts are left out (with a note).
        taxonomy: taxonomy for normalizing predicted categories (default: the gold's; a gold taxonomy
            that cannot be loaded means verbatim comparison).
        grader: repair grader for Rep@Diag and FPS; without one they are skipped with a note.
        resamples, seed: bootstrap resamples and seed for the 95% intervals (reproducible).

    Returns:
        :class:`EvalReport`.

    Raises:
        TaxonomyError: an explicitly given ``taxonomy`` name is unknown.
        KeyError: a diagnosis dict without ``trajectory_id`` (use :func:`~trajaudit.eval.runner.read_diagnoses`
            to read files with per-line error reporting).
    """
    tax = _taxonomy_for(gold, taxonomy)
    index = index_trajectories(trajectories)
    gs = gold if isinstance(gold, GoldSet) else GoldSet(gold.values())
    problems: dict[str, list[str]] = defaultdict(list)
    diags = [_as_diagnosis(d) for d in diagnoses]
    preds = pair_predictions(gold, gs, diags, problems)
    unknown_pred: set[str] = set()
    runs = [scored_run(key, g, preds.get(key), index, tax, problems, unknown_pred) for key, g in gold.items()]
    problems["predictions"] += [f"category {c!r} is not in taxonomy {tax.id!r} (compared verbatim)"
                                for c in sorted(unknown_pred) if tax]
    problems["gold"] = list(getattr(gold, "problems", []))
    report = EvalReport(
        gold_source=getattr(gold, "source", None), gold_format=getattr(gold, "format", ""),
        taxonomy=tax.id if tax and any(g.category for g in gold.values()) else None,
        strategies=tuple(sorted({d.strategy for d in diags})), n_gold=len(gold), n_predictions=len(diags),
        n_matched=sum(1 for r in runs if r.diag is not None),
        problems={k: v for k, v in problems.items() if v})
    _metrics(report, runs, tax, grader, resamples, seed)
    given = bool(index[0] or index[1])
    report.expected_random = _expected_random(runs, resamples, seed) if given else None
    if not given:
        report.notes.append("no trajectories given: previews, normalized distance and the random baseline's "
                            "expected value are left out")
    elif report.expected_random is None:  # it said "no trajectories given" beside the runs given
        report.notes.append("no gold run with a usable critical step was found among the trajectories given: "
                            "the random baseline's expected value is left out")
    _breakdowns(report, runs)
    report.calibration = _calibration(report)
    report.usage = _usage(diags)
    by_strategy = {name: _usage([d for d in diags if d.strategy == name]) for name in sorted({d.strategy for d in diags})}
    report.usage_by_strategy = {k: v for k, v in by_strategy.items() if v is not None}
    return report


def _calibration(report: EvalReport) -> dict[str, Any] | None:
    """Reliability of the confidences against exact-step hits over runs with a gold critical step (a
    missing prediction counts as confidence 0, wrong); ``None`` when no prediction has a confidence > 0
    (the trivial baselines)."""
    rows = [r for r in report.rows if r.gold_step is not None]
    if not any((r.confidence or 0.0) > 0 for r in rows):
        return None
    out = reliability([(r.confidence or 0.0, r.exact) for r in rows])
    by_basis: dict[str, dict[str, Any]] = {}
    for r in rows:
        b = by_basis.setdefault(r.basis or "(none)", {"runs": 0, "exact": 0})
        b["runs"] += 1
        b["exact"] += r.exact
    out["by_basis"] = {k: {"runs": v["runs"], "step_exact": v["exact"] / v["runs"]} for k, v in sorted(by_basis.items())}
    return out


def _metrics(report: EvalReport, runs: list[ScoredRun], tax: Taxonomy | None, grader: RepairGrader | None,
             resamples: int, seed: int) -> None:
    """``report.metrics``: step, category, agent and diagnosis, repair, and span metrics, in that order."""
    kw: dict[str, Any] = {"resamples": resamples, "seed": seed}
    stepped = [r for r in runs if r.gold.critical_step is not None]
    out = _step_metrics(stepped, kw) + _category_metrics(runs, kw)
    agent_runs = [r for r in runs if r.gold.agent]
    out.append(_rate("agent_exact", "Agent (exact match)",
                     [M.normalize_agent(r.agent) == M.normalize_agent(r.gold.agent) for r in agent_runs],
                     "Who&When agent-level acc. (exact, not substring)", **kw))
    diag_runs = [r for r in stepped if r.gold.category]
    diag = [r.category == r.gold.category and M.in_span(r.step, r.gold.tolerance_span or (
        r.gold.critical_step, r.gold.critical_step)) for r in diag_runs]
    out.append(_rate("diag", "Diag (category ∧ step in span)", diag, SA, **kw))
    out += _repair_metrics(report, diag_runs, diag, grader, kw)
    out += _span_metrics(runs, kw)
    report.metrics = {m.key: m for m in out}


def _step_metrics(stepped: list[ScoredRun], kw: dict[str, Any]) -> list[MetricValue]:
    """Critical-step metrics over the runs whose gold has a critical step: exact, within ±k, in the
    tolerance span, any annotated failure, mean and normalized distance."""
    out: list[MetricValue] = []
    exact = [M.step_within(r.step, r.gold.critical_step) for r in stepped]
    out.append(_rate("step_exact", "Exact step (= CS-Strict)", exact,
                     f"{AGENTRX}; Who&When step-level acc.; {SA} CS-Strict", **kw))
    for k in TOLERANCES:
        out.append(_rate(f"step_within_{k}", f"Step within ±{k}",
                         [M.step_within(r.step, r.gold.critical_step, k) for r in stepped], f"{AGENTRX} Acc@±{k}", **kw))
    spans = [M.in_span(r.step, r.gold.tolerance_span or (r.gold.critical_step, r.gold.critical_step)) for r in stepped]
    n_spans = sum(1 for r in stepped if r.gold.tolerance_span)
    out.append(_rate("cs_loose", "CS-Loose (in tolerance span)", spans, SA, **kw,
                     note="" if n_spans else "gold has no tolerance spans: equals exact"))
    multi = [r for r in stepped if any(f.step is not None for f in r.gold.failures)]
    out.append(_rate("step_exact_any_failure", "Step = any annotated failure",
                     [r.step in {f.step for f in r.gold.failures} for r in multi],
                     "AgentRx release scorer (nearest annotated failure)", **kw))
    dists = [M.step_distance(r.step, r.gold.critical_step) for r in stepped]
    out.append(MetricValue("step_distance_mean", "Mean step distance", M.mean(dists),
                           sum(d is not None for d in dists), None, "distance", AGENTRX,
                           "over runs with a predicted step"))
    normd = [M.normalized_distance(r.step, r.gold.critical_step, r.gold.n_steps or r.length or 1)
             for r in stepped if r.gold.n_steps or r.traj is not None]
    out.append(MetricValue("step_distance_normalized", "Mean distance / run length", M.mean(normd),
                           sum(d is not None for d in normd), None, "ratio", "AgentRx §4.1 (length-normalized)",
                           "over runs with a predicted step and a known length"))
    return out


def _category_metrics(runs: list[ScoredRun], kw: dict[str, Any]) -> list[MetricValue]:
    """Root-cause category metrics: of the critical failure (accuracy, macro-F1), of any, the earliest
    and the terminal annotated failure."""
    out: list[MetricValue] = []
    cat_runs = [r for r in runs if r.gold.category]
    cat_ok = [r.category == r.gold.category for r in cat_runs]
    out.append(_rate("category_critical", "Category (critical) = RC-Acc", cat_ok, f"AgentRx §4.6; {SA} RC-Acc", **kw))
    out.append(MetricValue("rc_macro_f1", "RC macro-F1", M.macro_f1([(r.gold.category, r.category) for r in cat_runs]),
                           len(cat_runs), None, "ratio", f"{SA} RC-F1", "classes: those seen in gold or predictions"))
    fail_runs = [r for r in runs if any(f.category for f in r.gold.failures)]
    out.append(_rate("category_any", "Category (any failure)", [
        r.category in {f.category for f in r.gold.failures if f.category} for r in fail_runs], "AgentRx §4.6", **kw))
    for which, fn in (("earliest", M.earliest_categories), ("terminal", M.terminal_categories)):
        pairs = [(r, [(f.step, f.category) for f in r.gold.failures if f.step is not None and f.category])
                 for r in fail_runs]
        out.append(_rate(f"category_{which}", f"Category ({which} failure)",
                         [r.category in fn(fs) for r, fs in pairs if fs], "AgentRx §4.6 (ties: any tied category)", **kw))
    return out


def _span_metrics(runs: list[ScoredRun], kw: dict[str, Any]) -> list[MetricValue]:
    """DRIFT's error-span precision, recall, F1 (macro) and first-error accuracy."""
    out: list[MetricValue] = []
    span_runs = [r for r in runs if r.gold.error_steps is not None]
    prf = [M.span_prf(_pred_span(r), r.gold.error_steps or ()) for r in span_runs]
    for i, name in enumerate(("precision", "recall", "f1")):
        out.append(MetricValue(f"span_{name}", f"Span {name} (macro)", M.mean(p[i] for p in prf), len(prf), None,
                               "ratio", DRIFT, "prediction = error_steps, else {critical_step}"))
    out.append(_rate("first_error", "First-error accuracy",
                     [M.first_error_correct(_pred_span(r), r.gold.error_steps or ()) for r in span_runs], DRIFT, **kw))
    return out


def _pred_span(r: ScoredRun) -> tuple[int, ...]:
    if r.diag is None:
        return ()
    if r.diag.error_steps:
        return tuple(dict.fromkeys(r.position(k) for k in r.diag.error_steps))
    return (r.step,) if r.step is not None else ()


def _repair_metrics(report: EvalReport, diag_runs: list[ScoredRun], diag: list[bool], grader: RepairGrader | None,
                    kw: dict[str, Any]) -> list[MetricValue]:
    rubric_runs = [(r, ok) for r, ok in zip(diag_runs, diag, strict=True) if r.gold.repair_rubrics]
    why = ""
    if not rubric_runs:
        why = "skipped: the gold has no repair rubrics"
    elif grader is None:
        why = "skipped: repair grading needs an LLM grader and none is configured"
    if why:
        report.notes.append(f"Rep@Diag and FPS {why}")
        return [MetricValue("rep_at_diag", "Rep@Diag", None, 0, None, "rate", SA, why),
                MetricValue("fps", "FPS (Diag × Rep@Diag)", None, 0, None, "rate", SA, why)]
    passed = {}
    for r, ok in rubric_runs:
        if ok:
            passed[r.gold.key] = bool(r.diag and r.diag.repair) and bool(
                grader.grade(r.diag.repair or "", r.gold.repair_rubrics, gold=r.gold))
    return [_rate("rep_at_diag", "Rep@Diag", list(passed.values()), SA, **kw),
            _rate("fps", "FPS (Diag × Rep@Diag)", [ok and passed.get(r.gold.key, False) for r, ok in rubric_runs],
                  SA, **kw)]


def _expected_random(runs: list[ScoredRun], resamples: int, seed: int) -> dict[str, MetricValue] | None:
    """Expected scores of a uniformly random decision step on the same runs (closed form, no sampling)."""
    usable = [r for r in runs if r.traj is not None and r.gold.critical_step is not None]
    if not usable:
        return None
    src = "expected value of the random decision-step baseline"
    out: dict[str, MetricValue] = {}
    for k in (0, *TOLERANCES):
        vals = [M.expected_random_hit([r.position(s.index) for s in r.traj.decision_steps], r.gold.critical_step, k)
                for r in usable]
        key = "step_exact" if k == 0 else f"step_within_{k}"
        out[key] = MetricValue(key, "Exact step" if k == 0 else f"Step within ±{k}", M.mean(vals), len(vals),
                               M.bootstrap_ci(vals, resamples=resamples, seed=seed), "rate", src)
    inv = [1 / len(r.traj.decision_steps) for r in usable if r.traj.decision_steps]
    out["mean_inverse_decision_steps"] = MetricValue(
        "mean_inverse_decision_steps", "mean 1/#decision steps", M.mean(inv), len(inv), None, "rate", src,
        "equals the exact-step expectation only if every gold step is a decision step")
    ag = [r for r in usable if r.gold.agent and r.traj.decision_steps]
    if ag:
        vals = [sum(M.normalize_agent(s.agent) == M.normalize_agent(r.gold.agent) for s in r.traj.decision_steps)
                / len(r.traj.decision_steps) for r in ag]
        out["agent_exact"] = MetricValue("agent_exact", "Agent (exact match)", M.mean(vals), len(vals),
                                         M.bootstrap_ci(vals, resamples=resamples, seed=seed), "rate", src)
    return out


def _breakdowns(report: EvalReport, runs: list[ScoredRun]) -> None:
    rows = []
    for r in runs:
        g = r.gold
        rows.append(RunScore(
            key=g.key, gold_step=g.critical_step, pred_step=r.step, gold_category=g.category, pred_category=r.category,
            gold_agent=g.agent, pred_agent=r.agent, missing=r.diag is None,
            exact=g.critical_step is not None and M.step_within(r.step, g.critical_step),
            distance=M.step_distance(r.step, g.critical_step) if g.critical_step is not None else None,
            category_ok=(r.category == g.category) if g.category else None,
            agent_ok=(M.normalize_agent(r.agent) == M.normalize_agent(g.agent)) if g.agent else None,
            gold_preview=_preview(r.traj, r.step_at(g.critical_step)), pred_preview=_preview(r.traj, r.index),
            n_steps=g.n_steps or r.length, confidence=r.diag.confidence if r.diag is not None else None,
            basis=r.diag.basis if r.diag is not None else None))
    report.rows = rows
    by_cat: dict[str, list[RunScore]] = defaultdict(list)
    for row in rows:
        if row.gold_category:
            by_cat[row.gold_category].append(row)
            report.confusion.setdefault(row.gold_category, Counter())[row.pred_category or "(none)"] += 1
    report.confusion = {g: dict(sorted(c.items(), key=lambda kv: (-kv[1], kv[0]))) for g, c in report.confusion.items()}
    for cat, rs in sorted(by_cat.items(), key=lambda kv: (-len(kv[1]), kv[0])):
        stepped = [x for x in rs if x.gold_step is not None]
        top = Counter(x.pred_category or "(none)" for x in rs).most_common(1)[0][0]
        report.per_category.append({
            "category": cat, "n": len(rs), "step_exact": M.rate([x.exact for x in stepped]),
            "step_within_3": M.rate([x.distance is not None and x.distance <= 3 for x in stepped]),
            "category_ok": M.rate([bool(x.category_ok) for x in rs]), "top_predicted": top})
    by_agent: dict[str, list[RunScore]] = defaultdict(list)
    names: dict[str, str] = {}
    for row in rows:
        a = M.normalize_agent(row.gold_agent)
        if a:
            by_agent[a].append(row)
            names.setdefault(a, row.gold_agent or a)
    for a, rs in sorted(by_agent.items(), key=lambda kv: (-len(kv[1]), kv[0])):
        report.per_agent.append({
            "agent": names[a], "n": len(rs), "step_exact": M.rate([x.exact for x in rs if x.gold_step is not None]),
            "agent_ok": M.rate([bool(x.agent_ok) for x in rs])})


def _usage(diags: list[Diagnosis]) -> dict[str, Any] | None:
    """Sum numeric ``usage`` fields over diagnoses (calls, tokens, cache hits, seconds ...)."""
    with_usage = [d for d in diags if d.usage]
    if not with_usage:
        return None
    totals: Counter[str] = Counter()
    for d in with_usage:
        for k, v in d.usage.items():
            if isinstance(v, (int, float)) and not isinstance(v, bool):
                totals[k] += v
    return {"runs": len(with_usage), "totals": dict(sorted(totals.items())),
            "per_run": {k: v / len(with_usage) for k, v in sorted(totals.items())}}


__all__ = ["RepairGrader", "evaluate"]
