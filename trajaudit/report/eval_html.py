"""The HTML report of ``trajaudit eval --report x.html``: the metrics, then every gold run in the runs
page of :mod:`trajaudit.report.html` with its gold step next to the prediction and the distance
between them (the gold step is marked on the run's timeline)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from trajaudit.engine.diagnosis import Diagnosis
from trajaudit.engine.trace.ir import Trajectory
from trajaudit.eval.render import category_rows, header_lines, metric_rows
from trajaudit.eval.report import EvalReport
from trajaudit.report.html import HtmlReport


def _missing(key: str) -> Diagnosis:
    return Diagnosis(trajectory_id=key, critical_step=None, category="(no prediction)", strategy="—",
                     rationale="no prediction for this gold run (counted wrong)")


def eval_html_parts(report: EvalReport, diagnoses: Sequence[Diagnosis], trajectories: Sequence[Trajectory] = (),
                    *, title: str = "trajaudit evaluation") -> Iterator[str]:
    """The page in pieces (to write without holding it whole).

    Args:
        report: the evaluation (its ``rows`` give the gold runs, in gold order).
        diagnoses: the scored predictions (paired to gold rows by trajectory id, as ``report.rows`` were).
        trajectories: the runs, when given (timelines, previews); a run without its trace shows the
            diagnosis and the gold only.
    """
    preds: dict[str, Diagnosis] = {}
    for d in diagnoses:
        preds.setdefault(d.trajectory_id, d)
    runs: dict[str, Trajectory] = {}
    for t in trajectories:
        runs.setdefault(t.id, t)
    page = HtmlReport(title=title)
    try:
        for i, row in enumerate(report.rows):
            gold = {"step": row.gold_step, "cat": row.gold_category, "agent": row.gold_agent}
            page.add_run(i, runs.get(row.key), preds.get(row.key) or _missing(row.key), gold=gold)
        problems = [f"{kind.replace('_', ' ')}: {m}" for kind, items in report.problems.items() for m in items[:50]]
        yield from page.render_parts((), template_name="eval.html.j2", header=header_lines(report),
                                     metric_rows=metric_rows(report), per_category=category_rows(report),
                                     notes=[*problems, *report.notes])
    finally:
        page.close()


def render_eval_html(report: EvalReport, diagnoses: Sequence[Diagnosis], trajectories: Sequence[Trajectory] = (),
                     *, title: str = "trajaudit evaluation") -> str:
    """The whole page of :func:`eval_html_parts` as one string."""
    return "".join(eval_html_parts(report, diagnoses, trajectories, title=title))


__all__ = ["eval_html_parts", "render_eval_html"]
