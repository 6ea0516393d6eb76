"""The result of an evaluation: :class:`EvalReport` (metrics, breakdowns, misses, problems).

Built by :func:`trajaudit.eval.evaluate.evaluate`; rendered by :mod:`trajaudit.eval.render`
(rich table, Markdown) or serialized with :meth:`EvalReport.to_dict` / :meth:`EvalReport.to_json`.
All steps are 0-based message indexes.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any

from trajaudit.eval.render import render_rich, to_markdown

EVAL_REPORT_VERSION = 1


@dataclass(frozen=True)
class MetricValue:
    """One metric.

    Attributes:
        key: stable name (``step_exact``, ``cs_loose``, ``category_critical``, ...).
        label: display name.
        value: the value (a rate in [0, 1], a mean distance in steps, ...), ``None`` when nothing
            could be scored (``n == 0``) or the metric was skipped (``note`` says why).
        n: how many runs it was computed over.
        ci: 95% percentile-bootstrap interval ``(lo, hi)`` for rates, else ``None``.
        kind: ``rate`` (shown as %), ``distance`` (steps), ``ratio`` (unitless, shown as is).
        source: the paper (and section) that defines it.
        note: why it is missing or how it differs from the paper.
    """

    key: str
    label: str
    value: float | None
    n: int
    ci: tuple[float, float] | None = None
    kind: str = "rate"
    source: str = ""
    note: str = ""

    def to_dict(self) -> dict[str, Any]:
        """JSON form."""
        d = asdict(self)
        d["ci"] = list(self.ci) if self.ci else None
        return d


@dataclass(frozen=True)
class RunScore:
    """How one gold run was scored (one row per gold item).

    Attributes:
        key: the run's gold key (trajectory id).
        gold_step, pred_step: 0-based critical step of gold and prediction (``None``: none given).
        gold_category, pred_category, gold_agent, pred_agent: as compared (categories normalized).
        missing: no prediction for this run (counted wrong).
        exact: ``pred_step == gold_step``.
        distance: ``|pred_step - gold_step|`` or ``None``.
        category_ok, agent_ok: the category / agent matched (``None`` when gold has none).
        gold_preview, pred_preview: one-line previews ("agent: text") of the two steps, when the
            trajectory was available.
        n_steps: run length in messages, when known.
        confidence, basis: the prediction's confidence and basis (``None`` when missing).
    """

    key: str
    gold_step: int | None
    pred_step: int | None
    gold_category: str | None = None
    pred_category: str | None = None
    gold_agent: str | None = None
    pred_agent: str | None = None
    missing: bool = False
    exact: bool = False
    distance: int | None = None
    category_ok: bool | None = None
    agent_ok: bool | None = None
    gold_preview: str = ""
    pred_preview: str = ""
    n_steps: int | None = None
    confidence: float | None = None
    basis: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON form."""
        return asdict(self)


@dataclass
class EvalReport:
    """An evaluation of predictions against gold.

    Attributes:
        gold_source, gold_format: where the gold came from and its format.
        taxonomy: the taxonomy categories were compared in (``None`` if the gold has no categories).
        strategies: the strategies that produced the predictions.
        n_gold: gold runs; n_predictions: diagnoses given; n_matched: gold runs with a prediction.
        metrics: ``{key: MetricValue}`` in display order.
        expected_random: the expected value of the random-decision-step baseline for the same runs
            (``{key: MetricValue}``), when trajectories were available.
        per_category: rows ``{category, n, step_exact, step_within_3, category_ok, top_predicted}``.
        per_agent: rows ``{agent, n, step_exact, agent_ok}``.
        confusion: ``{gold category: {predicted category: count}}`` (``"(none)"`` = no prediction).
        rows: one :class:`RunScore` per gold run, in gold order.
        problems: ``{kind: [message]}`` (missing_predictions, unmatched_predictions,
            duplicate_predictions, gold_without_critical_step, gold, predictions).
        notes: remarks (skipped metrics, conventions used).
        usage: summed LLM accounting over the diagnoses that carry ``usage``, else ``None``.
        calibration: is the confidence a probability of the exact step? Reliability figures over the
            runs with a gold critical step (:func:`trajaudit.eval.calibration.reliability`: ``ece``,
            ``accuracy_at_50``, ``brier``, the reliability ``table``) plus ``by_basis`` (runs and exact
            accuracy per diagnosis basis); ``None`` when no prediction carries a confidence.
        usage_by_strategy: the same per strategy: ``{strategy: {"runs", "totals", "per_run"}}`` (only
            strategies whose diagnoses carry usage). ``input_chars``/``output_chars`` are tokenizer-free
            character counts of every prompt and answer (cache hits included); ``input_tokens``/
            ``output_tokens`` are what the API reported (0 for cache hits).
    """

    gold_source: str | None = None
    gold_format: str = ""
    taxonomy: str | None = None
    strategies: tuple[str, ...] = ()
    n_gold: int = 0
    n_predictions: int = 0
    n_matched: int = 0
    metrics: dict[str, MetricValue] = field(default_factory=dict)
    expected_random: dict[str, MetricValue] | None = None
    per_category: list[dict[str, Any]] = field(default_factory=list)
    per_agent: list[dict[str, Any]] = field(default_factory=list)
    confusion: dict[str, dict[str, int]] = field(default_factory=dict)
    rows: list[RunScore] = field(default_factory=list)
    problems: dict[str, list[str]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    usage: dict[str, Any] | None = None
    usage_by_strategy: dict[str, dict[str, Any]] = field(default_factory=dict)
    calibration: dict[str, Any] | None = None

    @property
    def misses(self) -> list[RunScore]:
        """Runs with a gold critical step that the prediction did not hit exactly (missing included)."""
        return [r for r in self.rows if r.gold_step is not None and not r.exact]

    def value(self, key: str) -> float | None:
        """A metric's value by key (``None`` if absent or not computable)."""
        m = self.metrics.get(key)
        return m.value if m else None

    def to_dict(self) -> dict[str, Any]:
        """JSON form: everything, including per-run rows and the misses' keys."""
        return {
            "schema_version": EVAL_REPORT_VERSION,
            "gold_source": self.gold_source,
            "gold_format": self.gold_format,
            "taxonomy": self.taxonomy,
            "strategies": list(self.strategies),
            "n_gold": self.n_gold,
            "n_predictions": self.n_predictions,
            "n_matched": self.n_matched,
            "metrics": {k: m.to_dict() for k, m in self.metrics.items()},
            "expected_random": {k: m.to_dict() for k, m in self.expected_random.items()}
            if self.expected_random else None,
            "per_category": self.per_category,
            "per_agent": self.per_agent,
            "confusion": self.confusion,
            "misses": [r.key for r in self.misses],
            "rows": [r.to_dict() for r in self.rows],
            "problems": self.problems,
            "notes": self.notes,
            "usage": self.usage,
            "usage_by_strategy": self.usage_by_strategy,
            "calibration": self.calibration,
        }

    def to_json(self, indent: int | None = 1) -> str:
        """JSON text of :meth:`to_dict`."""
        return json.dumps(self.to_dict(), ensure_ascii=False, indent=indent)

    def to_markdown(self, *, max_misses: int | None = 20) -> str:
        """Markdown: summary metrics, random expectation, breakdowns, confusion matrix, misses, problems."""
        return to_markdown(self, max_misses=max_misses)

    def render(self, console: Any, *, max_misses: int | None = 20) -> None:
        """Print rich tables to a ``rich.console.Console``."""
        render_rich(self, console, max_misses=max_misses)


__all__ = ["EVAL_REPORT_VERSION", "EvalReport", "MetricValue", "RunScore"]
