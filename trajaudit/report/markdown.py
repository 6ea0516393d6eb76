"""Markdown batch report: a summary table and, per run, the diagnosis, evidence and candidates."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence

from trajaudit.engine.pipeline import AuditResult
from trajaudit.errors import Problem


def evidence_text(value: object, limit: int) -> str:
    """An evidence value as a reader sees it (shared by the Markdown and HTML reports): text as is,
    nothing for null, a step (``{"address", "preview"}``, its address is shown beside) as its preview,
    anything else as JSON (not a Python repr); cut at ``limit`` characters."""
    if value is None:
        return ""
    if isinstance(value, dict) and value.keys() == {"address", "preview"}:
        value = value["preview"]
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _cell(x: object) -> str:
    """Trace text as inert Markdown: no table breaks, no raw HTML (a trace may contain <script>)."""
    return str(x).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace("|", "\\|").replace("\n", " ")


def _code(x: object) -> str:
    """Text as one inline code span: a fence longer than any backtick run inside (CommonMark), one line;
    inside a code span nothing is Markdown or HTML, so a file name or address cannot inject either."""
    text = str(x).replace("\r", " ").replace("\n", " ")
    run = cur = 0
    for ch in text:
        cur = cur + 1 if ch == "`" else 0
        run = max(run, cur)
    fence = "`" * (run + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def render_markdown(results: Sequence[AuditResult], problems: Sequence[Problem] = (),
                    *, title: str = "trajaudit report") -> str:
    """Render the batch as Markdown (GitHub-flavoured tables).

    Returns:
        The document text.
    """
    lines = [f"# {_cell(title)}", "", f"{len(results)} run(s) audited, {len(problems)} skipped.", ""]
    cats = Counter(r.diagnosis.category for r in results)
    lines += ["| category | runs |", "|---|---|"] + [f"| {_cell(k)} | {v} |" for k, v in cats.most_common()] + [""]
    lines += ["| run | critical step | category | agent | confidence | preview |", "|---|---|---|---|---|---|"]
    for r in results:
        d, t = r.diagnosis, r.trajectory
        prev = t.steps[d.critical_step].preview(80) if d.critical_step is not None else ""
        lines.append(f"| {_cell(t.id)} | {_cell(d.critical_step)} | {_cell(d.category)} | {_cell(d.agent or '—')} | "
                     f"{d.confidence:.2f} | {_cell(prev)} |")
    lines.append("")
    for r in results:
        d = r.diagnosis
        src = r.trajectory.source
        lines += [f"## {_cell(r.trajectory.id)}", "", f"- file: {_code(src.file)}"
                  + (f" record {_cell(src.record)}" if src.record is not None else ""),
                  f"- critical step: **{_cell(d.critical_step)}** ({_cell(d.agent or '—')}), category "
                  f"**{_cell(d.category)}**, confidence {d.confidence:.2f}, strategy {_code(d.strategy)}",
                  f"- rationale: {_cell(d.rationale)}"]
        if d.repair:
            lines.append(f"- repair: {_cell(d.repair)}")
        for e in d.evidence[:10]:
            value = evidence_text(e.value, 160)
            lines.append(f"  - evidence {_code(e.address)} {_cell(e.note or '')}" + (f": {_cell(value)}" if value else ""))
        for c in d.candidates[1:5]:
            lines.append(f"  - alternative: step {_cell(c.step)} ({_cell(c.category)}, score {c.score:.2f}) — "
                         f"{_cell(c.reason)}")
        lines.append("")
    if problems:
        lines += ["## Skipped runs", ""] + [f"- {_cell(p.message)}" for p in problems]
    return "\n".join(lines) + "\n"
