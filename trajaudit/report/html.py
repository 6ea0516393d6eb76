"""Self-contained HTML batch report (no network assets, no JavaScript needed).

Layout: a summary (runs, categories, agents, skipped runs), then per run a header with the diagnosis
(critical step, category, agent, confidence, rationale), and a timeline of steps with the critical
step highlighted, violations and unsupported claims marked at their steps, and the evidence quoted.
Evidence addresses ``steps.N…`` link to ``#<run>-step-N``.
"""

from __future__ import annotations

import html
import re
from collections import Counter
from collections.abc import Iterator, Sequence

from trajaudit.engine.run.pipeline import AuditResult
from trajaudit.errors import Problem
from trajaudit.report.markdown import evidence_text, visible
from trajaudit.report.stream import RUN_TOKEN, RunRow, SectionSpool

_CSS = """
body{font:14px/1.45 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:0;color:#1d2330;background:#f6f7f9}
header.top{background:#1d2330;color:#fff;padding:14px 24px}header.top h1{margin:0;font-size:20px}
main{padding:16px 24px;max-width:1200px}section.run{background:#fff;border:1px solid #dde1e7;border-radius:8px;
margin:18px 0;padding:12px 16px}table{border-collapse:collapse;width:100%}td,th{border-bottom:1px solid #eceef2;
padding:4px 8px;text-align:left;vertical-align:top}th{background:#f0f2f5}.kind{font-size:12px;color:#667}
.step.critical{background:#fff1f0;outline:2px solid #d93025}.step.critical td:first-child::before{content:"▶ ";color:#d93025}
.badge{display:inline-block;border-radius:10px;padding:0 8px;font-size:12px;margin:1px 2px;background:#e8eaed}
.badge.critical,.badge.error{background:#fce8e6;color:#a50e0e}.badge.warning{background:#fef7e0;color:#8a5a00}
.badge.claim{background:#e8f0fe;color:#174ea6}.preview{white-space:pre-wrap;word-break:break-word;max-height:9em;overflow:auto}
.diag{display:grid;grid-template-columns:max-content 1fr;gap:2px 12px}.diag dt{font-weight:600}.diag dd{margin:0}
code{background:#f0f2f5;padding:0 3px;border-radius:3px}nav{display:flex;flex-wrap:wrap;gap:2px 10px}.evidence{font-size:12px;color:#333}
"""

_ADDR = re.compile(r"\bsteps\.(\d+)((?:\.[\w\[\]:-]+)*)")


def _e(x: object) -> str:
    """Text as inert HTML: escaped, control and bidi-override characters shown by name (:func:`visible`)."""
    return html.escape(visible(str(x)), quote=True)


def _anchor(run_idx: int | str) -> str:
    return f"run-{run_idx}"


def _link_addresses(text: str, run_idx: int | str) -> str:
    """Escape ``text`` and turn ``steps.N…`` addresses into links to the step rows of the same run."""
    out, pos = [], 0
    for m in _ADDR.finditer(text):
        out.append(_e(text[pos:m.start()]))
        out.append(f'<a href="#{_anchor(run_idx)}-step-{m.group(1)}"><code>{_e(m.group(0))}</code></a>')
        pos = m.end()
    out.append(_e(text[pos:]))
    return "".join(out)


def _summary(rows: Sequence[RunRow], problems: Sequence[Problem]) -> str:
    cats = Counter(r.category for r in rows)
    agents = Counter(r.agent or "—" for r in rows)
    body = "".join(
        f'<tr><td><a href="#{_anchor(i)}">{_e(r.id)}</a></td><td>{_e(r.critical_step)}</td>'
        f"<td>{_e(r.category)}</td><td>{_e(r.agent or '—')}</td>"
        f"<td>{r.confidence:.2f}</td><td>{_e(r.file or '')}</td></tr>"
        for i, r in enumerate(rows)
    )
    cat_rows = "".join(f"<tr><td>{_e(k)}</td><td>{v}</td></tr>" for k, v in cats.most_common())
    agent_rows = "".join(f"<tr><td>{_e(k)}</td><td>{v}</td></tr>" for k, v in agents.most_common())
    prob = ""
    if problems:
        prob = "<h3>Skipped runs</h3><ul>" + "".join(f"<li>{_e(p.message)}</li>" for p in problems) + "</ul>"
    return (
        f'<section class="run" id="summary"><h2>Summary</h2><p>{len(rows)} run(s) audited, '
        f"{len(problems)} skipped.</p>"
        '<div style="display:flex;gap:24px;flex-wrap:wrap"><div><h3>Categories</h3><table>'
        f"<tr><th>category</th><th>runs</th></tr>{cat_rows}</table></div><div><h3>Agents</h3><table>"
        f"<tr><th>agent</th><th>runs</th></tr>{agent_rows}</table></div></div>"
        "<h3>Runs</h3><table><tr><th>run</th><th>critical step</th><th>category</th><th>agent</th>"
        f"<th>confidence</th><th>file</th></tr>{body}</table>{prob}</section>"
    )


def _run_section(i: int | str, r: AuditResult, preview_chars: int) -> str:
    t, d = r.trajectory, r.diagnosis
    marks: dict[int, list[str]] = {}
    if r.log is not None:
        for rec in r.log.violations("info"):
            marks.setdefault(rec.step, []).append(
                f'<span class="badge {_e(rec.severity)}" title="{_e(rec.message)}">{_e(rec.rule_id)}</span>')
    for c in r.claims:
        if c.get("status") in ("MISSING", "CONFLICTING") and isinstance(c.get("step"), int):
            marks.setdefault(c["step"], []).append(
                f'<span class="badge claim" title="{_e(c.get("evidence") or "")}">{_e(c["status"].lower())}: '
                f'{_e(str(c.get("value"))[:40])}</span>')
    rows = []
    for s in t.steps:
        cls = "step critical" if s.index == d.critical_step else "step"
        tool = ", ".join(s.tool_names) or (s.tool_output.name if s.tool_output else "") or ""
        text = s.content if s.content else s.preview(preview_chars)
        if len(text) > preview_chars:
            text = text[:preview_chars] + f"… [{len(s.content) - preview_chars} more chars]"
        badges = "".join(marks.get(s.index, []))
        rows.append(
            f'<tr class="{cls}" id="{_anchor(i)}-step-{s.index}"><td>{s.index}</td><td class="kind">{_e(s.kind)}</td>'
            f"<td>{_e(s.agent or '')}</td><td>{_e(tool)}</td><td>{badges}<div class='preview'>{_e(text)}</div></td></tr>"
        )
    ev = "".join(
        f"<li>{_link_addresses(e.address, i)} {_e(e.note or '')}: <code>{_e(evidence_text(e.value, 300))}</code></li>"
        for e in d.evidence
    )
    cands = "".join(
        f'<li><a href="#{_anchor(i)}-step-{c.step}">step {c.step}</a> · {_e(c.category)} · score {c.score:.2f} · '
        f"{_link_addresses(c.reason, i)}</li>"
        for c in d.candidates[:8]
    )
    crit = (f'<a href="#{_anchor(i)}-step-{d.critical_step}">step {d.critical_step}</a>'
            if d.critical_step is not None else "none")
    repair = f"<dt>repair</dt><dd>{_e(d.repair)}</dd>" if d.repair else ""
    if r.log is not None and r.log.incomplete:
        repair += "<dt>incomplete</dt><dd>" + "<br>".join(_link_addresses(n, i) for n in r.log.incomplete) + "</dd>"
    return (
        f'<section class="run" id="{_anchor(i)}"><h2>{_e(t.id)} <span class="kind">{_e(t.source.format)} · '
        f"{_e(t.source.file or '')}{'' if t.source.record is None else ' #' + str(t.source.record)}</span></h2>"
        f'<dl class="diag"><dt>critical step</dt><dd class="critical-step">{crit}</dd>'
        f"<dt>category</dt><dd>{_e(d.category)} ({_e(d.taxonomy)})</dd><dt>agent</dt><dd>{_e(d.agent or '—')}</dd>"
        f"<dt>confidence</dt><dd>{d.confidence:.2f}</dd><dt>strategy</dt><dd>{_e(d.strategy)}</dd>"
        f"<dt>rationale</dt><dd>{_link_addresses(d.rationale, i)}</dd>{repair}</dl>"
        f"<h3>Evidence</h3><ul class='evidence'>{ev or '<li>none</li>'}</ul>"
        f"<h3>Candidates</h3><ol class='evidence'>{cands or '<li>none</li>'}</ol>"
        f"<h3>Timeline</h3><table><tr><th>#</th><th>kind</th><th>agent</th><th>tool</th><th>content</th></tr>"
        f"{''.join(rows)}</table><p><a href='#summary'>back to summary</a></p></section>"
    )


def render_html(
    results: Sequence[AuditResult],
    problems: Sequence[Problem] = (),
    *,
    title: str = "trajaudit report",
    preview_chars: int = 600,
    extra_sections: Sequence[str] = (),
) -> str:
    """Render a self-contained HTML report.

    Args:
        results: audited runs.
        problems: runs reported and skipped.
        preview_chars: characters of each step's content shown in the timeline.
        extra_sections: trusted HTML fragments (e.g. citation-tracing chains) appended after the runs.

    Returns:
        The whole HTML document as a string (UTF-8, inline CSS, no scripts or external assets). A batch
        that streams its results builds the same document with :class:`HtmlReport`.
    """
    report = HtmlReport(title=title, preview_chars=preview_chars)
    try:
        for i, r in enumerate(results):
            report.add(i, r)
        return report.render(problems, extra_sections=extra_sections)
    finally:
        report.close()


class HtmlReport(SectionSpool):
    """The HTML report of a batch whose results arrive one at a time, in any order (``audit_paths``'s
    ``on_result``): each run's section is rendered when its result arrives and spooled (see
    :class:`~trajaudit.report.stream.SectionSpool`); only a summary row per run stays in memory, so a
    report of thousands of runs does not keep their trajectories and validation logs.
    :meth:`render` gives exactly what :func:`render_html` gives for the results in index order.

    Args:
        title: the page title.
        preview_chars: characters of each step's content shown in the timeline.
    """

    def __init__(self, *, title: str = "trajaudit report", preview_chars: int = 600) -> None:
        super().__init__(position_token=RUN_TOKEN)
        self.title = title
        self.preview_chars = preview_chars

    def add(self, index: int, result: AuditResult) -> None:
        """Render run ``index``'s section (its position in the report is that of ``index`` among all
        indexes added)."""
        self.put(index, RunRow.of(result), _run_section(RUN_TOKEN, result, self.preview_chars))

    def render(self, problems: Sequence[Problem] = (), *, extra_sections: Sequence[str] = ()) -> str:
        """The whole document (see :func:`render_html`)."""
        return "".join(self.render_parts(problems, extra_sections=extra_sections))

    def render_parts(self, problems: Sequence[Problem] = (), *, extra_sections: Sequence[str] = ()) -> Iterator[str]:
        """The document in pieces (head and summary, one piece per run, the end), to write without
        holding it whole; their concatenation is :meth:`render`."""
        rows = self.rows()
        nav = "".join(f'<a href="#{_anchor(i)}">{_e(r.id)}</a>' for i, r in enumerate(rows[:200]))
        yield (
            "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"
            f"<meta name='viewport' content='width=device-width'><title>{_e(self.title)}</title><style>{_CSS}</style></head>"
            f"<body><header class='top'><h1>{_e(self.title)}</h1></header><main><nav>{nav}</nav>"
            + _summary(rows, problems)
        )
        yield from self.sections()
        yield f"{''.join(extra_sections)}</main></body></html>"
