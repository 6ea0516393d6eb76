"""Metric primitives of the four papers, on plain values (0-based step indexes, category ids).

Each function says where the metric comes from. Conventions shared by all of them:

- A missing prediction (no diagnosis, or ``critical_step is None``) is passed as ``None`` and counts
  as wrong for every accuracy; it is left out of distance means (whose ``n`` says so).
- Rates over an empty set are ``None`` (not 0): "nothing to score" is not "all wrong".

Sources: AgentRx (arXiv 2602.02475) §4.1/§4.6; SearchAuditor (arXiv 2608.05212) §5.1; Who&When
(Zhang et al., ICML 2025) step/agent accuracy; DRIFT / TELBench span P/R/F1 and first-error accuracy.
"""

from __future__ import annotations

import math
import random
import re
from collections.abc import Iterable, Sequence
from statistics import fmean

_PAREN = re.compile(r"\s*\([^()]*\)\s*$")


def normalize_agent(name: str | None) -> str | None:
    """Agent name for exact comparison: case-insensitive, separators unified, role suffix dropped.

    ``"Excel_Expert"``, ``"excel expert"`` and ``"Excel-Expert"`` compare equal;
    ``"Orchestrator (-> WebSurfer)"`` becomes ``"orchestrator"``. No substring matching (Who&When's
    own scorer counts ``"1"`` in ``"10"``; we do not).
    """
    if name is None:
        return None
    text = _PAREN.sub("", str(name)).strip().casefold()
    text = re.sub(r"[\s_\-]+", "_", text)
    return text or None


def step_within(pred: int | None, gold: int, k: int = 0) -> bool:
    """``|pred - gold| <= k`` (k = 0: exact). AgentRx §4.1 Acc@±r; Who&When step-level accuracy (k=0);
    SearchAuditor CS-Strict (k=0). ``None`` is wrong."""
    return pred is not None and abs(pred - gold) <= k


def step_distance(pred: int | None, gold: int) -> int | None:
    """``|pred - gold|`` in steps (AgentRx §4.1 step distance), ``None`` without a prediction."""
    return None if pred is None else abs(pred - gold)


def nearest_distance(pred: int | None, golds: Iterable[int]) -> int | None:
    """Distance to the nearest annotated failure step (the AgentRx release scorer's variant).

    Raises:
        ValueError: ``golds`` is empty.
    """
    steps = list(golds)
    if not steps:
        raise ValueError("golds must be non-empty")
    return None if pred is None else min(abs(pred - g) for g in steps)


def normalized_distance(pred: int | None, gold: int, n_steps: int) -> float | None:
    """Step distance divided by the run's length in messages, in [0, 1] (length-normalized distance).

    Our definition (the AgentRx summary names the metric without a formula): ``|pred - gold| / n_steps``,
    so a miss by 5 in a 10-message run weighs more than in a 100-message run.

    Raises:
        ValueError: ``n_steps`` < 1.
    """
    if n_steps < 1:
        raise ValueError("n_steps must be >= 1")
    return None if pred is None else abs(pred - gold) / n_steps


def in_span(pred: int | None, span: tuple[int, int]) -> bool:
    """SearchAuditor CS-Loose: ``lo <= pred <= hi`` for the inclusive tolerance span. ``None`` is wrong."""
    return pred is not None and span[0] <= pred <= span[1]


def rate(flags: Sequence[bool]) -> float | None:
    """Fraction of true flags, ``None`` for an empty sequence."""
    return sum(flags) / len(flags) if flags else None


def mean(values: Iterable[float | None]) -> float | None:
    """Mean of the non-``None`` values, ``None`` when there are none."""
    vals = [v for v in values if v is not None]
    return fmean(vals) if vals else None


def per_class_prf(pairs: Sequence[tuple[str | None, str | None]],
                  labels: Iterable[str] | None = None) -> dict[str, dict[str, float | int]]:
    """Per-class precision, recall, F1 and support from ``(gold, predicted)`` label pairs.

    A ``None`` prediction (missing) is a false negative for its gold class and a false positive for
    nothing. Classes are ``labels`` if given, else every label seen in gold or predictions (the
    scikit-learn convention). 0/0 is 0.

    Returns:
        ``{label: {"precision", "recall", "f1", "support"}}`` (support = gold count).
    """
    classes = sorted(set(labels) if labels is not None else {x for pair in pairs for x in pair if x is not None})
    out: dict[str, dict[str, float | int]] = {}
    for c in classes:
        tp = sum(1 for g, p in pairs if g == c and p == c)
        fp = sum(1 for g, p in pairs if g != c and p == c)
        fn = sum(1 for g, p in pairs if g == c and p != c)
        prec = tp / (tp + fp) if tp + fp else 0.0
        rec = tp / (tp + fn) if tp + fn else 0.0
        f1 = 2 * prec * rec / (prec + rec) if prec + rec else 0.0
        out[c] = {"precision": prec, "recall": rec, "f1": f1, "support": tp + fn}
    return out


def macro_f1(pairs: Sequence[tuple[str | None, str | None]], labels: Iterable[str] | None = None) -> float | None:
    """SearchAuditor RC-F1: the unweighted mean of per-class F1 (see :func:`per_class_prf`).

    ``None`` when there are no pairs or no classes.
    """
    if not pairs:
        return None
    per = per_class_prf(pairs, labels)
    return fmean(v["f1"] for v in per.values()) if per else None


def span_prf(pred: Iterable[int], gold: Iterable[int]) -> tuple[float, float, float]:
    """DRIFT span-level precision, recall, F1 of one run's predicted vs gold erroneous steps.

    Edge cases: both empty -> (1, 1, 1) (a clean run correctly left clean); gold empty, prediction
    not -> precision 0, recall 1, F1 0; prediction empty, gold not -> (0, 0, 0). DRIFT macro-averages
    these over runs (:func:`mean`).
    """
    p, g = set(pred), set(gold)
    if not p and not g:
        return 1.0, 1.0, 1.0
    tp = len(p & g)
    prec = tp / len(p) if p else 0.0
    rec = tp / len(g) if g else 1.0
    f1 = 2 * prec * rec / (prec + rec) if prec + rec else 0.0
    return prec, rec, f1


def first_error_correct(pred: Iterable[int], gold: Iterable[int]) -> bool:
    """DRIFT first-error accuracy for one run: the earliest predicted error step is the earliest gold
    one (both empty also counts as correct)."""
    p, g = set(pred), set(gold)
    if not p or not g:
        return not p and not g
    return min(p) == min(g)


def earliest_categories(failures: Sequence[tuple[int, str]]) -> set[str]:
    """Categories of the failure(s) at the smallest step (AgentRx §4.6 "earliest"); a tie at that
    step yields every tied category, any of which counts as a match."""
    if not failures:
        return set()
    first = min(s for s, _ in failures)
    return {c for s, c in failures if s == first}


def terminal_categories(failures: Sequence[tuple[int, str]]) -> set[str]:
    """Categories of the failure(s) at the largest step (AgentRx §4.6 "terminal"); ties as above."""
    if not failures:
        return set()
    last = max(s for s, _ in failures)
    return {c for s, c in failures if s == last}


def bootstrap_ci(values: Sequence[float], *, resamples: int = 2000, seed: int = 0,
                 level: float = 0.95) -> tuple[float, float] | None:
    """Percentile bootstrap confidence interval of the mean of ``values`` (0/1 flags for a rate).

    Resamples ``len(values)`` items with replacement ``resamples`` times with ``random.Random(seed)``,
    so the interval is reproducible. ``None`` for fewer than 2 values or ``resamples`` < 1.
    """
    n = len(values)
    if n < 2 or resamples < 1:
        return None
    rng = random.Random(seed)
    data = list(values)
    means = sorted(math.fsum(rng.choices(data, k=n)) / n for _ in range(resamples))
    alpha = (1 - level) / 2
    lo = means[max(0, math.floor(alpha * resamples))]
    hi = means[min(resamples - 1, math.ceil((1 - alpha) * resamples) - 1)]
    return lo, hi


def expected_random_hit(decision_steps: Sequence[int], gold: int, k: int = 0) -> float:
    """Expected Acc@±k of a uniformly random decision step for one run: the share of decision steps
    within ``k`` of the gold step (0 when the gold step is out of reach, e.g. a user turn).

    For k = 0 this is ``1/#decision steps`` when the gold step is a decision step, else 0.
    """
    if not decision_steps:
        return 0.0
    return sum(1 for d in decision_steps if abs(d - gold) <= k) / len(decision_steps)


__all__ = ["bootstrap_ci", "earliest_categories", "expected_random_hit", "first_error_correct", "in_span",
           "macro_f1", "mean", "nearest_distance", "normalize_agent", "normalized_distance", "per_class_prf",
           "rate", "span_prf", "step_distance", "step_within", "terminal_categories"]
