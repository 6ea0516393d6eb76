"""Fitting the offline judge's weights to labelled failures (``trajaudit judge fit``; issue 17).

A team with annotated failures of its own agents fits the offline judge's ranker to them:

1. **Label.** Each run's evidence is gathered as ``audit`` gathers it, its candidate steps become
   feature rows (:func:`~trajaudit.engine.strategies.judge_features.features`), and the candidate at the gold
   critical step is the positive one (:func:`label_runs`). A run whose gold step is no candidate (a
   user turn no finding blames, a tool output) adds negatives only.
2. **Model.** A logistic regression (scikit-learn, L2) over the standardized rows, each data set
   weighing the same in total (one large set must not drown a small one); the judge picks the
   highest-scoring candidate of a run. The standardization is folded into the exported weights.
3. **Selection.** The regularization strength ``C`` is chosen by cross-validation: with two or more
   data sets, **leave-one-dataset-out** (fit on all sets but one, score the one left out — what
   unseen frameworks look like); with one, k-fold over its runs. The criterion is the mean over the
   held-out folds of exact-step accuracy, then of ±3 accuracy, then the smaller ``C``.
4. **Calibration.** Platt scaling (a logistic regression on the winner's score and its margin over
   the runner-up) fitted on the held-out predictions of the chosen ``C``, so the confidence is a
   probability of being right on runs the ranker did not see.
5. **Output.** :class:`FitResult`: the final :class:`~trajaudit.engine.strategies.judge_weights.JudgeWeights`
   (fitted on every run given, with the calibration), the cross-validated figures it expects, and the
   held-out predictions.

scikit-learn is imported inside the fitting functions (optional extra ``trajaudit[fit]``); nothing
else of trajaudit needs it. Gold is read here, in the eval package, never by a strategy.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from trajaudit.engine.diagnosis import Diagnosis
from trajaudit.engine.run.evidence import gather
from trajaudit.engine.strategies.context import AuditContext
from trajaudit.engine.strategies.judge_features import FEATURES, FeatureTable, features
from trajaudit.engine.strategies.judge_weights import Calibration, JudgeWeights
from trajaudit.engine.trace.ir import Trajectory
from trajaudit.errors import TrajauditError
from trajaudit.eval.calibration import reliability as calibration_table
from trajaudit.eval.gold import suffix_aliases
from trajaudit.eval.gold_items import GoldItem, GoldSet
from trajaudit.eval.runs import step_positions

#: Regularization strengths tried (inverse L2 strength of scikit-learn's LogisticRegression).
C_GRID: tuple[float, ...] = (0.0005, 0.001, 0.002, 0.005, 0.01, 0.03, 0.1, 1.0)
#: Inverse L2 strength of the Platt calibration (a regularized calibration transfers better to another
#: data set: leave-one-dataset-out ECE on the dev sets, tau-retail / Who&When, 11.3% / 18.8% at 1.0,
#: 8.8% / 14.6% at 0.3, 8.3% / 20.3% at 0.01).
CALIBRATION_C = 0.3
#: Bins of the reliability table.
RELIABILITY_BINS = 10


class FitError(TrajauditError):
    """Fitting cannot start: no labelled run, no positive example, scikit-learn missing."""


@dataclass
class LabelledRun:
    """One run ready for fitting.

    Attributes:
        dataset: the label of the data set it came from (a fold of leave-one-dataset-out).
        key: its gold key.
        table: its candidate steps and feature rows.
        positive: the position in ``table.candidates`` of the gold critical step, or ``None`` when
            the gold step is no candidate.
        gold_agent: the annotated responsible agent, or ``None``.
        gold_step: the gold critical step as a step index (``None`` when it names no step of the run).
    """

    dataset: str
    key: str
    table: FeatureTable
    positive: int | None
    gold_agent: str | None = None
    gold_step: int | None = None


@dataclass
class Prediction:
    """The ranker's pick on a held-out run.

    Attributes:
        run: the run.
        pick: the chosen candidate's position in ``run.table.candidates``.
        score, margin: the winner's score and its margin over the runner-up.
        confidence: the calibrated probability (filled once a calibration exists).
    """

    run: LabelledRun
    pick: int
    score: float
    margin: float
    confidence: float | None = None

    @property
    def correct(self) -> bool:
        """The pick is the gold critical step."""
        return self.pick == self.run.positive

    @property
    def step(self) -> int:
        """The chosen step index."""
        return self.run.table.candidates[self.pick].step

    def within(self, k: int) -> bool:
        """The pick is within ``k`` steps of the gold step (``False`` when the gold step is unknown)."""
        g = self.run.gold_step
        if g is None and self.run.positive is not None:
            g = self.run.table.candidates[self.run.positive].step
        return g is not None and abs(self.step - g) <= k

    @property
    def agent_ok(self) -> bool | None:
        """The chosen step's producer is the annotated agent (``None`` when not annotated)."""
        if self.run.gold_agent is None:
            return None
        s = self.run.table.trajectory.steps[self.step]
        return _norm_agent(s.agent or s.kind) == _norm_agent(self.run.gold_agent)


@dataclass
class FitResult:
    """What :func:`fit_judge` returns.

    Attributes:
        weights: the final weights (all runs) with the calibration fitted on held-out predictions.
        c: the chosen regularization strength.
        scheme: ``leave-one-dataset-out`` or ``k-fold (k=N)``.
        grid: ``{C: {fold label: {"exact": rate, "within3": rate, "runs": n}}}`` for every C tried.
        heldout: the held-out predictions of the chosen C (calibrated confidence filled).
        calibration: reliability figures of those predictions (:func:`reliability`).
    """

    weights: JudgeWeights
    c: float
    scheme: str
    grid: dict[float, dict[str, dict[str, float]]]
    heldout: list[Prediction]
    calibration: dict[str, Any] = field(default_factory=dict)

    def summary(self) -> dict[str, Any]:
        """JSON-ready figures (stored in the weights file's ``fit`` section)."""
        per_fold: dict[str, dict[str, Any]] = {}
        for label in sorted({p.run.dataset for p in self.heldout} if "dataset" in self.scheme else {"all"}):
            preds = [p for p in self.heldout if label == "all" or p.run.dataset == label]
            per_fold[label] = figures(preds)
        return {"scheme": self.scheme, "C": self.c, "heldout": per_fold,
                "calibration": {k: v for k, v in self.calibration.items() if k != "table"},
                "runs": len({(p.run.dataset, p.run.key) for p in self.heldout}),
                "features": len(FEATURES)}


def _norm_agent(a: str | None) -> str:
    text = (a or "").casefold().replace("_", " ").replace("-", " ")
    if "(" in text:
        text = text.split("(")[0]
    return " ".join(text.split())


def figures(preds: Sequence[Prediction]) -> dict[str, Any]:
    """``{"runs", "exact", "within3", "agent"}`` over ``preds`` (rates in 0..1; agent ``None`` without labels)."""
    n = len(preds)
    agents = [p.agent_ok for p in preds if p.agent_ok is not None]
    return {"runs": n, "exact": sum(p.correct for p in preds) / n if n else None,
            "within3": sum(p.within(3) for p in preds) / n if n else None,
            "agent": sum(agents) / len(agents) if agents else None}


def label_runs(trajectories: Iterable[Trajectory], gold: GoldSet | Mapping[str, GoldItem], context: AuditContext,
               dataset: str, *, on_run: Callable[[], None] | None = None) -> tuple[list[LabelledRun], list[str]]:
    """Pair runs with their gold labels and build their candidate tables.

    Args:
        trajectories: the loaded runs.
        gold: their gold set (matched by trajectory id, else file and record, else the suffix
            alias of AgentRx releases; as ``eval`` pairs diagnoses).
        context: the audit context (rules, tools) the evidence is gathered with.
        dataset: the data set's label (its fold in leave-one-dataset-out).
        on_run: called after each run (a progress bar).

    Returns:
        ``(labelled runs, problems)``: a run with no gold label or without a gold critical step is
        left out and named in ``problems``.
    """
    runs = list(trajectories)
    gs = gold if isinstance(gold, GoldSet) else GoldSet(gold.values())
    aliases = suffix_aliases(gs.keys(), [t.id for t in runs])
    out: list[LabelledRun] = []
    problems: list[str] = []
    for t in runs:
        probe = Diagnosis(trajectory_id=t.id, critical_step=None, category="inconclusive", strategy="fit",
                          file=t.source.file, record=t.source.record)
        key = gs.match(probe, aliases)
        if key is None:
            problems.append(f"{dataset}: run {t.id} has no gold label (left out)")
        elif gs[key].critical_step is None:
            problems.append(f"{dataset}: run {t.id}: the gold gives no critical step (left out)")
        else:
            bundle = gather(t, context)
            table = features(t, bundle.log.records, getattr(bundle, "graph", None))
            if not table.candidates:
                problems.append(f"{dataset}: run {t.id} has no decision step (left out)")
            else:
                pos = step_positions(t)
                g = gs[key].critical_step
                hit = next((i for i, c in enumerate(table.candidates)
                            if (pos[c.step] if pos is not None else c.step) == g), None)
                gold_index = next((k for k, p in enumerate(pos) if p == g), None) if pos is not None else g
                out.append(LabelledRun(dataset, key, table, hit, gs[key].agent, gold_index))
        if on_run is not None:
            on_run()
    return out, problems


def _sklearn() -> tuple[Any, Any]:
    try:
        import numpy as np
        from sklearn.linear_model import LogisticRegression
    except ImportError:
        raise FitError("fitting the judge needs scikit-learn: pip install 'trajaudit[fit]'") from None
    return np, LogisticRegression


def fit_ranker(runs: Sequence[LabelledRun], c: float) -> JudgeWeights:
    """Fit the ranker's weights (no calibration) on ``runs``.

    Rows are standardized; each data set's rows weigh ``1 / its number of runs`` (so every data set
    counts the same); the standardization is folded into the returned raw-scale weights.

    Raises:
        FitError: no positive example among ``runs``; scikit-learn missing.
    """
    np, LogisticRegression = _sklearn()
    rows: list[list[float]] = []
    ys: list[int] = []
    ws: list[float] = []
    sizes: dict[str, int] = {}
    for r in runs:
        sizes[r.dataset] = sizes.get(r.dataset, 0) + 1
    for r in runs:
        for i, row in enumerate(r.table.rows):
            rows.append(row)
            ys.append(int(i == r.positive))
            ws.append(1.0 / sizes[r.dataset])
    if not any(ys):
        raise FitError("no run's gold critical step is among its candidate steps: nothing to learn from")
    x = np.asarray(rows, dtype=float)
    y = np.asarray(ys)
    w = np.asarray(ws)
    w = w / w.mean()
    mu = x.mean(axis=0)
    sd = x.std(axis=0)
    sd[sd == 0] = 1.0
    model = LogisticRegression(C=c, max_iter=10_000).fit((x - mu) / sd, y, sample_weight=w)
    coef = model.coef_[0] / sd
    intercept = float(model.intercept_[0] - (coef * mu).sum())
    return JudgeWeights(weights={f: round(float(v), 8) for f, v in zip(FEATURES, coef, strict=True)},
                        intercept=round(intercept, 8))


def predict(weights: JudgeWeights, run: LabelledRun) -> Prediction:
    """The ranker's pick on one run (confidence from ``weights.calibration``)."""
    ranked = weights.rank(run.table)
    top = ranked[0][1]
    margin = top - ranked[1][1] if len(ranked) > 1 else 0.0
    return Prediction(run, ranked[0][0], top, margin, weights.calibration.probability(top, margin))


def folds(runs: Sequence[LabelledRun], k: int = 5, seed: int = 0) -> tuple[str, list[tuple[str, list[int], list[int]]]]:
    """The cross-validation scheme: ``(name, [(fold label, train indexes, test indexes)])``.

    Two or more data sets: leave-one-dataset-out (the label is the held-out set). One: ``k``-fold
    over runs, shuffled with ``seed`` (``k`` is capped at the number of runs).

    Raises:
        FitError: fewer than 2 runs.
    """
    if len(runs) < 2:
        raise FitError(f"cross-validation needs at least 2 labelled runs, got {len(runs)}")
    sets = sorted({r.dataset for r in runs})
    if len(sets) >= 2:
        return "leave-one-dataset-out", [
            (s, [i for i, r in enumerate(runs) if r.dataset != s], [i for i, r in enumerate(runs) if r.dataset == s])
            for s in sets]
    k = max(2, min(k, len(runs)))
    order = list(range(len(runs)))
    random.Random(seed).shuffle(order)
    parts = [sorted(order[j::k]) for j in range(k)]
    return f"{k}-fold", [(f"fold {j + 1}", sorted(set(order) - set(p)), p) for j, p in enumerate(parts)]


def fit_calibration(preds: Sequence[Prediction]) -> Calibration:
    """Platt scaling fitted on held-out predictions: ``P(correct) = σ(a·score + b·margin + c)``.

    With all predictions right (or all wrong) the calibration is the constant rate (Laplace-smoothed).
    """
    np, LogisticRegression = _sklearn()
    y = [int(p.correct) for p in preds]
    if not preds or len(set(y)) < 2:
        rate = (sum(y) + 1) / (len(y) + 2)
        return Calibration(0.0, 0.0, round(math.log(rate / (1 - rate)), 8))
    x = np.asarray([[p.score, p.margin] for p in preds], dtype=float)
    m = LogisticRegression(C=CALIBRATION_C, max_iter=10_000).fit(x, np.asarray(y))
    return Calibration(round(float(m.coef_[0][0]), 8), round(float(m.coef_[0][1]), 8), round(float(m.intercept_[0]), 8))


def reliability(preds: Sequence[Prediction], bins: int = RELIABILITY_BINS) -> dict[str, Any]:
    """Reliability of the calibrated confidences: see :func:`trajaudit.eval.calibration.reliability`."""
    return calibration_table([(p.confidence or 0.0, p.correct) for p in preds], bins)


def cross_validate(runs: Sequence[LabelledRun], c: float, scheme: list[tuple[str, list[int], list[int]]]) -> list[Prediction]:
    """Held-out predictions for regularization ``c`` over ``scheme`` (from :func:`folds`)."""
    preds: list[Prediction] = []
    for _label, train, test in scheme:
        w = fit_ranker([runs[i] for i in train], c)
        preds.extend(predict(w, runs[i]) for i in test)
    return preds


def fit_judge(runs: Sequence[LabelledRun], *, grid: Sequence[float] = C_GRID, k: int = 5, seed: int = 0,
              on_step: Callable[[str], None] | None = None) -> FitResult:
    """Choose ``C`` by cross-validation, calibrate on the held-out predictions, fit on every run.

    Args:
        runs: labelled runs (:func:`label_runs`), from one or more data sets.
        grid: the ``C`` values tried.
        k: folds when there is a single data set.
        seed: shuffling seed of the k-fold split.
        on_step: called with a short message per ``C`` tried (progress): its figures are what chooses
            ``C``, the mean of the folds' rates (each data set, or each k-fold, weighs the same), not
            the pooled rate over every held-out run that :meth:`FitResult.summary` gives for one data set.

    Raises:
        FitError: fewer than 2 runs, no positive example in a training fold, scikit-learn missing.
    """
    if not runs:
        raise FitError("no labelled run to fit on")
    scheme_name, scheme = folds(runs, k, seed)
    table: dict[float, dict[str, dict[str, float]]] = {}
    best: tuple[tuple[float, float, float], float, list[Prediction]] | None = None
    for c in grid:
        preds = cross_validate(runs, c, scheme)
        by_fold: dict[str, dict[str, float]] = {}
        for label, _train, test in scheme:
            ids = {id(runs[i]) for i in test}
            f = figures([p for p in preds if id(p.run) in ids])
            by_fold[label] = {"exact": f["exact"], "within3": f["within3"], "runs": f["runs"]}
        table[c] = by_fold
        key = (sum(v["exact"] for v in by_fold.values()) / len(by_fold),
               sum(v["within3"] for v in by_fold.values()) / len(by_fold), -c)
        if on_step is not None:
            parts = "data sets" if len({r.dataset for r in runs}) > 1 else "folds"
            on_step(f"C={c:g}: held-out exact {key[0]:.1%}, ±3 {key[1]:.1%} (mean of the {len(by_fold)} {parts}' rates)")
        if best is None or key > best[0]:
            best = (key, c, preds)
    assert best is not None
    _, c, preds = best
    cal = fit_calibration(preds)
    for p in preds:
        p.confidence = cal.probability(p.score, p.margin)
    final = fit_ranker(runs, c)
    weights = JudgeWeights(weights=final.weights, intercept=final.intercept, calibration=cal)
    result = FitResult(weights, c, scheme_name if len({r.dataset for r in runs}) > 1 else f"{scheme_name} (one data set)",
                       table, preds, reliability(preds))
    sizes: dict[str, int] = {}
    for r in runs:
        sizes[r.dataset] = sizes.get(r.dataset, 0) + 1
    fit_info = {"model": "scikit-learn LogisticRegression (L2), standardized rows folded into the weights",
                "data": [{"label": s, "runs": n} for s, n in sorted(sizes.items())], **result.summary()}
    result.weights = JudgeWeights(weights=final.weights, intercept=final.intercept, calibration=cal, fit=fit_info)
    return result
