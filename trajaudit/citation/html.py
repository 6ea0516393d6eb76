"""HTML of a citation audit: agent error rates, report citation recall/precision, and the
propagation chain of every traced final-report error (seed 003 §6, App. D "full propagation chains").

Rendered from the jinja2 templates of :mod:`trajaudit.report.page` with the project's one
stylesheet: :func:`render_html` returns one ``<section class="ta-cite">`` (no style, no script) that
the batch report embeds; :func:`render_page` wraps it in a self-contained page. All trace text is
escaped, control and bidi-override characters shown by name.
"""

from __future__ import annotations

import html

from markupsafe import Markup

from trajaudit.citation.local import ERROR_TYPES, SentenceResult
from trajaudit.citation.trace import CitationReport, Hop
from trajaudit.report.markdown import visible
from trajaudit.report.page import stylesheet, template


def escape(text: str) -> str:
    """Trace text as inert HTML (escaped; control and bidi-override characters shown by name)."""
    return html.escape(visible(text), quote=True)


def _pct(x: float | None) -> str:
    return "–" if x is None else f"{100 * x:.1f}%"


def _lookup(report: CitationReport, hop: Hop) -> SentenceResult | None:
    rs = report.results.get(hop.ref.invocation, ())
    return rs[hop.ref.output] if hop.ref.output < len(rs) else None


def render_html(report: CitationReport) -> str:
    """Render a :class:`~trajaudit.citation.trace.CitationReport` as one HTML ``<section class="ta-cite">``.

    Returns:
        HTML text (str) styled by the project's stylesheet (class prefix ``ta-``); no scripts or assets.
    """

    def spans_of(hop: Hop) -> tuple:
        r = _lookup(report, hop)
        return tuple(r.spans) if r else ()

    needing = sum(1 for f in report.final if f.needs_citation)
    return template("cite_section.html.j2").render(report=report, run=report.run, pct=_pct, needing=needing,
                                                   error_types=ERROR_TYPES, spans_of=spans_of).strip()


def render_page(report: CitationReport) -> str:
    """A complete self-contained HTML page around :func:`render_html` (for ``trajaudit cite --html``)."""
    return template("cite.html.j2").render(title=f"Citation audit — {report.run.id}", css=stylesheet(),
                                           section=Markup(render_html(report))) + "\n"
