"""HTML fragment of a citation audit: agent error rates, report citation recall/precision, and the
propagation chain of every traced final-report error (seed 003 §6, App. D "full propagation chains").

:func:`render_html` returns one self-contained ``<section>`` (inline, scoped CSS; no scripts, fonts
or images from the network) that the batch report embeds; :func:`render_page` wraps it in a page.
All trace text is HTML-escaped.
"""

from __future__ import annotations

import html

from trajaudit.citation.local import ERROR_TYPES, SentenceResult
from trajaudit.citation.trace import CitationReport, Hop, TracedError
from trajaudit.report.markdown import visible


def escape(text: str) -> str:
    """Trace text as inert HTML (escaped; control and bidi-override characters shown by name)."""
    return html.escape(visible(text), quote=True)


_CSS = """
.ta-cite{font-family:system-ui,-apple-system,Segoe UI,sans-serif;color:#1d2330;line-height:1.45;max-width:1100px}
.ta-cite h2{font-size:1.3em;margin:.2em 0}.ta-cite h3{font-size:1.05em;margin:1.2em 0 .4em}
.ta-cite .ta-approx{background:#fff4d6;border:1px solid #e2b33c;padding:.4em .7em;border-radius:4px;margin:.5em 0}
.ta-cite table{border-collapse:collapse;font-size:.92em}.ta-cite th,.ta-cite td{border:1px solid #d6dae3;padding:.25em .55em;text-align:right}
.ta-cite th:first-child,.ta-cite td:first-child{text-align:left}.ta-cite th{background:#f1f3f8}
.ta-cite .ta-metrics span{display:inline-block;margin-right:1.6em;font-size:1.05em}
.ta-cite ol.ta-chain{margin:.3em 0 .8em;padding-left:1.6em}.ta-cite ol.ta-chain li{margin:.25em 0}
.ta-cite .ta-badge{display:inline-block;border-radius:3px;padding:0 .4em;font-size:.82em;font-weight:600;color:#fff;background:#6b7280}
.ta-cite .ta-hallucination{background:#b42318}.ta-cite .ta-uncited_input_reliance{background:#b54708}
.ta-cite .ta-uncited_output{background:#7a5af8}.ta-cite .ta-insufficient_citations{background:#c11574}
.ta-cite .ta-correct{background:#067647}.ta-cite .ta-unknown{background:#475467}
.ta-cite .ta-origin{outline:2px solid #b42318;outline-offset:2px;border-radius:3px}
.ta-cite blockquote{margin:.2em 0 .2em .4em;padding-left:.6em;border-left:3px solid #d6dae3;color:#344054}
.ta-cite code{font-size:.85em;color:#475467}.ta-cite .ta-reason{color:#475467;font-size:.9em}
.ta-cite details{font-size:.88em;margin-left:.4em}
"""


def _pct(x: float | None) -> str:
    return "–" if x is None else f"{100 * x:.1f}%"


def _badge(verdict: str) -> str:
    return f'<span class="ta-badge ta-{escape(verdict)}">{escape(verdict.replace("_", " "))}</span>'


def _spans(report: CitationReport, hop: Hop) -> str:
    if not hop.spans:
        return ""
    r = _lookup(report, hop)
    items = "".join(
        f"<li><code>{escape(s.address)}</code> "
        f"{'cited: ' + escape(', '.join(sorted(s.citations))) if s.cited else '<b>uncited</b>'}"
        f"<blockquote>{escape(s.text)}</blockquote></li>" for s in (r.spans if r else ()))
    return f"<details><summary>{len(hop.spans)} supporting span(s)</summary><ul>{items}</ul></details>"


def _lookup(report: CitationReport, hop: Hop) -> SentenceResult | None:
    rs = report.results.get(hop.ref.invocation, ())
    return rs[hop.ref.output] if hop.ref.output < len(rs) else None


def _hop(report: CitationReport, hop: Hop, origin: bool) -> str:
    cls = ' class="ta-origin"' if origin else ""
    return (f"<li><span{cls}><b>{escape(hop.ref.invocation)}</b> ({escape(hop.agent)}) {_badge(hop.verdict)}</span> "
            f"<code>{escape(hop.ref.address)}</code><blockquote>{escape(hop.text)}</blockquote>"
            f'<div class="ta-reason">{escape(hop.reason)}</div>{_spans(report, hop)}</li>')


def _traced(report: CitationReport, t: TracedError) -> str:
    head = (f"<b>{escape(t.origin.ref.invocation)}</b> introduced {_badge(t.origin.verdict)}" if t.origin
            else f"{escape(t.status)}: no origin found")
    hops = "".join(_hop(report, h, origin=(t.origin is h)) for h in t.chain)
    up = ""
    if t.upstream:
        up = ("<div class=\"ta-reason\">Upstream errors feeding the origin (context, not attribution):</div>"
              f"<ol class=\"ta-chain\">{''.join(_hop(report, h, False) for h in t.upstream)}</ol>")
    return (f"<div class=\"ta-trace\"><p>Final-report sentence <code>{escape(t.sentence.address)}</code> — {head}</p>"
            f"<ol class=\"ta-chain\">{hops}</ol>{up}</div>")


def render_html(report: CitationReport) -> str:
    """Render a :class:`~trajaudit.citation.trace.CitationReport` as a self-contained HTML ``<section>``.

    Returns:
        HTML text (str) with inline scoped CSS (class prefix ``ta-``); no external assets or scripts.
    """
    run = report.run
    parts = [f'<section class="ta-cite" data-run="{escape(run.id)}"><style>{_CSS}</style>',
             f"<h2>Citation audit — {escape(run.id)}</h2>",
             f"<p>Judge: <b>{escape(report.judge['name'])}</b> — {escape(report.judge['description'])}</p>"]
    if report.approximate:
        parts.append('<div class="ta-approx"><b>Approximate.</b> Verdicts come from lexical and exact numeric '
                     "overlap, not from an entailment model; paraphrases and reasoning are not recognised.</div>")
    needing = sum(1 for f in report.final if f.needs_citation)
    parts.append(f'<p class="ta-metrics"><span>Final-report citation recall: <b>{_pct(report.recall)}</b></span>'
                 f"<span>Citation precision: <b>{_pct(report.precision)}</b></span>"
                 f"<span>Sentences needing a citation: <b>{needing}</b> of {len(report.final)}</span>"
                 f"<span>Final report written by <code>{escape(run.final)}</code></span></p>")
    cols = "".join(f"<th>{escape(t.replace('_', ' '))}</th>" for t in ERROR_TYPES)
    rows = []
    for a in report.agents:
        cells = "".join(f"<td>{a.errors[t]} ({_pct(a.rate(t))})</td>" for t in ERROR_TYPES)
        rows.append(f"<tr><td>{escape(a.agent)}</td><td>{a.invocations}</td><td>{a.evaluated}</td>"
                    f"<td>{_pct(a.error_rate)}</td>{cells}<td>{a.unknown}</td>"
                    f"<td>{a.final_errors} ({_pct(a.final_share)})</td></tr>")
    parts.append("<h3>Agents</h3><table><tr><th>agent</th><th>invocations</th><th>evaluated</th><th>error rate</th>"
                 f"{cols}<th>unknown</th><th>final-report errors originating here</th></tr>{''.join(rows)}</table>")
    parts.append(f"<h3>Propagation chains ({len(report.traced)} final-report error(s))</h3>")
    if not report.traced:
        parts.append("<p>Every final-report sentence that needs a citation is supported by its citations.</p>")
    parts.extend(_traced(report, t) for t in report.traced)
    parts.append("</section>")
    return "\n".join(parts)


def render_page(report: CitationReport) -> str:
    """A complete standalone HTML page around :func:`render_html` (for ``trajaudit cite --html``)."""
    return ("<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>Citation audit — {escape(report.run.id)}</title></head><body>"
            f"{render_html(report)}</body></html>\n")
