"""Rendering an :class:`~trajaudit.eval.report.EvalReport`: rich tables for the terminal, Markdown for files.

Both show the same sections: header, metrics (value, 95% bootstrap CI, n, expected random baseline,
source), per-category and per-agent breakdowns, the category confusion matrix, the misses with
one-line previews of the gold and predicted steps, LLM usage, problems and notes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.table import Table

from trajaudit.report.markdown import visible

if TYPE_CHECKING:  # annotations only: the report's methods call this module
    from trajaudit.eval.report import EvalReport, MetricValue, RunScore

MAX_AGENTS = 20
MAX_PROBLEM_LINES = 12


def fmt_value(m: MetricValue | None, value: float | None = None) -> str:
    """A metric's value for display: ``12.5%`` for rates, ``3.41`` steps for distances, ``0.280`` ratios,
    ``—`` when missing."""
    v = m.value if m is not None and value is None else value
    if v is None or m is None:
        return "—"
    if m.kind == "rate":
        return f"{100 * v:.1f}%"
    if m.kind == "distance":
        return f"{v:.2f}"
    return f"{v:.3f}"


def fmt_ci(m: MetricValue | None) -> str:
    """The interval as ``[lo, hi]`` in the metric's unit, or ``""``."""
    if m is None or m.ci is None:
        return ""
    lo, hi = m.ci
    return f"[{100 * lo:.1f}, {100 * hi:.1f}]" if m.kind == "rate" else f"[{lo:.3f}, {hi:.3f}]"


def _pct(v: float | None) -> str:
    return "—" if v is None else f"{100 * v:.1f}%"


def abbreviations(labels: list[str]) -> dict[str, str]:
    """Short, unique column labels from snake_case ids (initials: ``intent_plan_misalignment`` -> ``IPM``)."""
    out: dict[str, str] = {}
    used: set[str] = set()
    for lab in labels:
        base = "".join(p[0] for p in lab.replace("(", "").replace(")", "").split("_") if p).upper() or lab[:3]
        abbr, i = base, 2
        while abbr in used:
            abbr, i = f"{base}{i}", i + 1
        used.add(abbr)
        out[lab] = abbr
    return out


def _header(r: EvalReport) -> list[str]:
    lines = [f"gold: {r.gold_source or '(in memory)'} [{r.gold_format or '?'}]"
             + (f"  taxonomy: {r.taxonomy}" if r.taxonomy else ""),
             f"strategies: {', '.join(r.strategies) or '?'}  ·  gold runs {r.n_gold}  ·  predictions "
             f"{r.n_predictions}  ·  scored with a prediction {r.n_matched}  ·  missing {r.n_gold - r.n_matched}"]
    return lines


def _metric_rows(r: EvalReport) -> list[tuple[str, ...]]:
    """One row per metric that could be scored (n > 0) or was skipped for a stated reason."""
    rows = []
    rnd = r.expected_random or {}
    for m in r.metrics.values():
        if m.n == 0 and not m.note.startswith("skipped"):
            continue
        exp = rnd.get(m.key)
        rows.append((m.label, fmt_value(m), fmt_ci(m), str(m.n), fmt_value(exp) if exp else "",
                     m.source + (f" — {m.note}" if m.note else "")))
    return rows


def _confusion(r: EvalReport) -> tuple[list[str], list[list[str]], str]:
    """Header, body rows and a legend of the column abbreviations."""
    preds = sorted({p for row in r.confusion.values() for p in row})
    abbr = abbreviations(sorted(set(preds) | set(r.confusion)))
    header = ["gold \\ predicted"] + [abbr[p] for p in preds]
    body = [[f"{abbr[g]} {g}"] + [str(r.confusion[g].get(p, "")) for p in preds] for g in r.confusion]
    legend = "columns: " + ", ".join(f"{abbr[p]} = {p}" for p in preds)
    return header, body, legend


def _miss_rows(r: EvalReport, max_misses: int | None) -> list[RunScore]:
    misses = r.misses
    return misses if max_misses is None else misses[:max_misses]


def _unscored_line(r: EvalReport) -> list[str]:
    gone = [m.label for m in r.metrics.values() if m.n == 0 and not m.note.startswith("skipped")]
    return [f"not scored (no such gold annotation, or no trajectories given): {', '.join(gone)}"] if gone else []


def _usage_lines(r: EvalReport) -> list[str]:
    if not r.usage:
        return []
    tot = ", ".join(f"{k} {v:g}" for k, v in r.usage["totals"].items())
    per = ", ".join(f"{k} {v:.1f}" for k, v in r.usage["per_run"].items())
    return [f"LLM usage over {r.usage['runs']} run(s): {tot}", f"per run: {per}"]


USAGE_COLUMNS = (("calls", "calls"), ("cache_hits", "cache hits"), ("input_tokens", "input tokens"),
                 ("output_tokens", "output tokens"), ("input_chars", "input chars"), ("output_chars", "output chars"),
                 ("latency_s", "latency s"))
USAGE_NOTE = ("LLM accounting per run (mean) by strategy. chars: tokenizer-free character counts of every prompt "
              "and answer, cache hits included; tokens: as reported by the API (0 for cache hits); calls: HTTP "
              "calls actually sent (0 when served from the cache).")


def usage_table(r: EvalReport) -> tuple[list[str], list[list[str]]]:
    """Per-strategy LLM accounting: header and rows (``strategy``, ``runs``, then the per-run mean of each
    counter present, then total calls and total input characters). Empty when no diagnosis carries usage."""
    if not r.usage_by_strategy:
        return [], []
    present = [(k, label) for k, label in USAGE_COLUMNS
               if any(k in u["per_run"] for u in r.usage_by_strategy.values())]
    header = ["strategy", "runs", *(f"{label}/run" for _, label in present), "total calls", "total input chars"]
    rows = []
    for name, u in r.usage_by_strategy.items():
        per, tot = u["per_run"], u["totals"]
        cells = [f"{per[k]:,.3f}" if k == "latency_s" and k in per else (f"{per[k]:,.1f}" if k in per else "—")
                 for k, _ in present]
        rows.append([name, str(u["runs"]), *cells, f"{tot.get('calls', 0):,g}", f"{tot.get('input_chars', 0):,g}"])
    return header, rows


def calibration_table(r: EvalReport) -> tuple[list[str], list[list[str]], str]:
    """The reliability table (confidence bins: runs, mean confidence, exact accuracy) and a summary line
    (ECE, accuracy at 50% coverage, Brier score, accuracy per basis). Empty without confidences."""
    c = r.calibration
    if not c or not c.get("table"):
        return [], [], ""
    header = ["confidence", "runs", "mean confidence", "exact"]
    rows = [[f"{b['lo']:.1f}–{b['hi']:.1f}", str(b["n"]), _pct(b["confidence"]), _pct(b["accuracy"])] for b in c["table"]]
    basis = ", ".join(f"{k} {v['runs']} runs {_pct(v['step_exact'])}" for k, v in c.get("by_basis", {}).items())
    summary = (f"ECE {_pct(c['ece'])} (0 = calibrated); accuracy {_pct(c['accuracy'])}, mean confidence "
               f"{_pct(c['mean_confidence'])}; accuracy at 50% coverage (the most confident half) "
               f"{_pct(c['accuracy_at_50'])}; Brier {c['brier']:.3f}" + (f"; by basis: {basis}" if basis else ""))
    return header, rows, summary


def _problem_lines(r: EvalReport) -> list[str]:
    lines = []
    for kind, items in r.problems.items():
        shown = items[:MAX_PROBLEM_LINES]
        more = f" … and {len(items) - len(shown)} more" if len(items) > len(shown) else ""
        lines.append(f"{kind.replace('_', ' ')} ({len(items)}): " + "; ".join(shown) + more)
    return lines


def render_rich(r: EvalReport, console: Console, *, max_misses: int | None = 20) -> None:
    """Print the report as rich tables on ``console``."""
    for line in _header(r):
        console.print(line, markup=False, highlight=False)
    t = Table(title="Metrics", title_justify="left")
    for col, just in (("metric", "left"), ("value", "right"), ("95% CI", "right"), ("n", "right"),
                      ("random (expected)", "right"), ("source", "left")):
        t.add_column(col, justify=just, overflow="fold")
    for row in _metric_rows(r):
        t.add_row(*row)
    console.print(t)
    if r.per_category:
        t = Table(title="By gold category", title_justify="left")
        for col in ("category", "n", "step exact", "step ±3", "category ok", "most predicted"):
            t.add_column(col)
        for c in r.per_category:
            t.add_row(c["category"], str(c["n"]), _pct(c["step_exact"]), _pct(c["step_within_3"]),
                      _pct(c["category_ok"]), c["top_predicted"])
        console.print(t)
    if r.per_agent:
        t = Table(title="By gold agent", title_justify="left")
        for col in ("agent", "n", "step exact", "agent ok"):
            t.add_column(col)
        for a in r.per_agent[:MAX_AGENTS]:
            t.add_row(a["agent"], str(a["n"]), _pct(a["step_exact"]), _pct(a["agent_ok"]))
        console.print(t)
        if len(r.per_agent) > MAX_AGENTS:
            console.print(f"… {len(r.per_agent) - MAX_AGENTS} more agents (see --format json)", markup=False)
    if r.confusion:
        header, body, legend = _confusion(r)
        t = Table(title="Category confusion (rows: gold, columns: predicted)", title_justify="left",
                  caption=legend, caption_justify="left")
        for h in header:
            t.add_column(h, justify="left" if h == header[0] else "right")
        for row in body:
            t.add_row(*row)
        console.print(t)
    misses = _miss_rows(r, max_misses)
    if misses:
        t = Table(title=f"Misses ({len(r.misses)}; showing {len(misses)})", title_justify="left", show_lines=True)
        for col in ("run", "gold", "pred", "Δ", "gold step", "predicted step"):
            t.add_column(col, overflow="fold")
        for m in misses:
            t.add_row(m.key, str(m.gold_step), "—" if m.pred_step is None else str(m.pred_step),
                      "missing" if m.missing else ("—" if m.distance is None else str(m.distance)),
                      m.gold_preview, m.pred_preview)
        console.print(t)
    header, rows, summary = calibration_table(r)
    if rows:
        t = Table(title="Reliability of the confidence (exact step)", title_justify="left", caption=summary,
                  caption_justify="left")
        for h in header:
            t.add_column(h, justify="right")
        for row in rows:
            t.add_row(*row)
        console.print(t)
    header, rows = usage_table(r)
    if rows:
        t = Table(title="LLM usage by strategy", title_justify="left", caption=USAGE_NOTE, caption_justify="left")
        for h in header:
            t.add_column(h, justify="left" if h == "strategy" else "right")
        for row in rows:
            t.add_row(*row)
        console.print(t)
    for line in _unscored_line(r) + _usage_lines(r) + _problem_lines(r) + [f"note: {n}" for n in r.notes]:
        console.print(line, markup=False, highlight=False)


def _md_text(x: Any) -> str:
    """Text (run ids, previews of trace steps, file names, problem messages) as inert Markdown on one
    line: control and bidi characters by name (:func:`~trajaudit.report.markdown.visible`), no raw HTML
    (``<script>``), no link or image (``](`` escaped: ``[x](javascript:…)`` stays text; a bracket
    alone, as in a CI ``[12.5, 30.1]``, stays as it is), no line break (CR ends a line in Markdown)."""
    return (visible(str(x)).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace("](", "\\](")
            .replace("\r", " ").replace("\n", " "))


def _md_table(header: list[str], rows: list[Any]) -> list[str]:
    def cell(x: Any) -> str:
        return _md_text(x).replace("|", "\\|")

    return ["| " + " | ".join(cell(h) for h in header) + " |", "|" + "---|" * len(header)] + [
        "| " + " | ".join(cell(c) for c in row) + " |" for row in rows]


def to_markdown(r: EvalReport, *, max_misses: int | None = 20, title: str | None = "Evaluation") -> str:
    """The report as Markdown (GitHub tables)."""
    out: list[str] = [f"## {_md_text(title)}", ""] if title else []
    out += [f"- {_md_text(line)}" for line in _header(r)] + [""]
    out += _md_table(["metric", "value", "95% CI", "n", "random (expected)", "source"], _metric_rows(r)) + [""]
    if r.per_category:
        out += ["### By gold category", ""] + _md_table(
            ["category", "n", "step exact", "step ±3", "category ok", "most predicted"],
            [(c["category"], c["n"], _pct(c["step_exact"]), _pct(c["step_within_3"]), _pct(c["category_ok"]),
              c["top_predicted"]) for c in r.per_category]) + [""]
    if r.per_agent:
        out += ["### By gold agent", ""] + _md_table(
            ["agent", "n", "step exact", "agent ok"],
            [(a["agent"], a["n"], _pct(a["step_exact"]), _pct(a["agent_ok"])) for a in r.per_agent[:MAX_AGENTS]]) + [""]
    if r.confusion:
        header, body, legend = _confusion(r)
        out += ["### Category confusion (rows: gold, columns: predicted)", ""] + _md_table(header, body) + [
            "", legend, ""]
    misses = _miss_rows(r, max_misses)
    if misses:
        out += [f"### Misses ({len(r.misses)}; showing {len(misses)})", ""] + _md_table(
            ["run", "gold", "pred", "Δ", "gold step", "predicted step"],
            [(m.key, m.gold_step, "—" if m.pred_step is None else m.pred_step,
              "missing" if m.missing else ("—" if m.distance is None else m.distance), m.gold_preview, m.pred_preview)
             for m in misses]) + [""]
    header, rows, summary = calibration_table(r)
    if rows:
        out += ["### Reliability of the confidence (exact step)", ""] + _md_table(header, rows) + ["", summary, ""]
    header, rows = usage_table(r)
    if rows:
        out += ["### LLM usage by strategy", ""] + _md_table(header, rows) + ["", USAGE_NOTE, ""]
    extra = _unscored_line(r) + _usage_lines(r) + _problem_lines(r) + [f"note: {n}" for n in r.notes]
    out += [f"- {_md_text(line)}" for line in extra]
    return "\n".join(out).rstrip() + "\n"





def metric_rows(r: EvalReport) -> list[tuple[str, ...]]:
    """The metrics table's rows: ``(label, value, 95% CI, n, random expected, source and note)`` for each
    metric that could be scored or was skipped for a stated reason (shared by every renderer)."""
    return _metric_rows(r)


def header_lines(r: EvalReport) -> list[str]:
    """The report's header lines (gold source and format, strategies, counts)."""
    return _header(r)


def category_rows(r: EvalReport) -> list[tuple[str, ...]]:
    """The per-gold-category rows: ``(category, n, step exact, step ±3, category ok, most predicted)``."""
    return [(c["category"], str(c["n"]), _pct(c["step_exact"]), _pct(c["step_within_3"]), _pct(c["category_ok"]),
             c["top_predicted"]) for c in r.per_category]

__all__ = ["abbreviations", "calibration_table", "category_rows", "fmt_ci", "fmt_value", "header_lines", "metric_rows", "render_rich",
           "to_markdown", "usage_table"]
