"""Markdown batch report: a summary table and, per run, the diagnosis, evidence and candidates."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator, Sequence

from trajaudit.engine.run.pipeline import AuditResult
from trajaudit.errors import Problem
from trajaudit.report.stream import RunRow, SectionSpool


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


#: Characters a report shows by name instead of passing them through: C0 controls other than tab and
#: line breaks (NUL, ESC ...), DEL and the C1 controls (U+0080-009F: U+009B is the 8-bit CSI that
#: starts a terminal control sequence as ESC [ does), the Unicode bidi controls — overrides, embeddings
#: and isolates, which reorder what is shown after them ("Trojan Source": an audit report must show the
#: text as it is, not as it pretends to be), and the marks U+061C, U+200E/F —, the line and paragraph
#: separators U+2028/2029, and the noncharacters U+FFFE/FFFF (XML 1.0 cannot hold them: a JUnit report
#: with one did not parse). The set of the terminal's ``terminal_safe`` (``cli.common``), plus U+FFFE/F.
_HIDDEN = {c: f"⟨U+{c:04X}⟩" for c in [*range(0x00, 0x09), 0x0B, 0x0C, *range(0x0E, 0x20), *range(0x7F, 0xA0),
                                       0x061C, 0x200E, 0x200F, 0x2028, 0x2029, *range(0x202A, 0x202F),
                                       *range(0x2066, 0x206A), 0xFFFE, 0xFFFF]}


def visible(text: str) -> str:
    """``text`` with control, bidi-control and separator characters written as ``⟨U+XXXX⟩``
    (:data:`_HIDDEN`; shared by the Markdown, HTML and citation reports and the SARIF and JUnit
    outputs): what is left can be shown as it is and written in XML 1.0."""
    return text.translate(_HIDDEN)


def _cell(x: object) -> str:
    """Trace text as inert Markdown: no table breaks (``|``, and line breaks: a lone CR ends a line in
    Markdown too), no raw HTML (a trace may contain <script>), no links or images (``[x](javascript:…)``:
    brackets escaped), control characters shown by name."""
    return (visible(str(x)).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace("|", "\\|")
            .replace("[", "\\[").replace("]", "\\]").replace("\r", " ").replace("\n", " "))


def _code(x: object) -> str:
    """Text as one inline code span: a fence longer than any backtick run inside (CommonMark), one line;
    inside a code span nothing is Markdown or HTML, so a file name or address cannot inject either."""
    text = visible(str(x).replace("\r", " ").replace("\n", " "))
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
        The document text. A batch that streams its results builds the same text with
        :class:`MarkdownReport`.
    """
    report = MarkdownReport(title=title)
    try:
        for i, r in enumerate(results):
            report.add(i, r)
        return report.render(problems)
    finally:
        report.close()


def _section(r: AuditResult) -> str:
    d = r.diagnosis
    src = r.trajectory.source
    lines = [f"## {_cell(r.trajectory.id)}", "", f"- file: {_code(src.file)}"
             + (f" record {_cell(src.record)}" if src.record is not None else ""),
             f"- critical step: **{_cell(d.critical_step)}** ({_cell(d.agent or '—')}), category "
             f"**{_cell(d.category)}**, confidence {d.confidence:.2f}, basis {_cell(d.basis or '—')}, "
             f"strategy {_code(d.strategy)}",
             f"- rationale: {_cell(d.rationale)}"]
    if d.metadata.get("degraded"):
        notes = "; ".join(str(n) for n in d.metadata["degraded"]) if isinstance(d.metadata["degraded"], list) else ""
        lines.append("- **degraded**: rule evaluation ran out of time (--run-timeout), the checks left were "
                     "'unknown', so this diagnosis rests on partial evidence" + (f" ({_cell(notes)})" if notes else ""))
    if d.repair:
        lines.append(f"- repair: {_cell(d.repair)}")
    for e in d.evidence[:10]:
        value = evidence_text(e.value, 160)
        lines.append(f"  - evidence {_code(e.address)} {_cell(e.note or '')}" + (f": {_cell(value)}" if value else ""))
    for c in d.candidates[1:5]:
        lines.append(f"  - alternative: step {_cell(c.step)} ({_cell(c.category)}, score {c.score:.2f}) — "
                     f"{_cell(c.reason)}")
    lines.append("")
    return "\n".join(lines)


class MarkdownReport(SectionSpool):
    """The Markdown report of a batch whose results arrive one at a time, in any order: as
    :class:`~trajaudit.report.html.HtmlReport` (sections spooled, a summary row per run kept);
    :meth:`render` gives exactly what :func:`render_markdown` gives for the results in index order.

    Args:
        title: the document's heading.
    """

    def __init__(self, *, title: str = "trajaudit report") -> None:
        super().__init__()
        self.title = title

    def add(self, index: int, result: AuditResult) -> None:
        """Render run ``index``'s section."""
        self.put(index, RunRow.of(result), _section(result))

    def render(self, problems: Sequence[Problem] = ()) -> str:
        """The whole document (see :func:`render_markdown`)."""
        return "".join(self.render_parts(problems))

    def render_parts(self, problems: Sequence[Problem] = ()) -> Iterator[str]:
        """The document in pieces (summary, one piece per run, skipped runs), to write without holding
        it whole; their concatenation is :meth:`render`."""
        rows = self.rows()
        degraded = [r.id for r in rows if r.degraded]
        said = (f" {len(degraded)} run(s) degraded: their rule evaluation ran out of time (--run-timeout), so their "
                "diagnoses rest on partial evidence (marked in the run list)." if degraded else "")
        lines = [f"# {_cell(self.title)}", "", f"{len(rows)} run(s) audited, {len(problems)} skipped.{said}", ""]
        cats = Counter(r.category for r in rows)
        lines += ["| category | runs |", "|---|---|"] + [f"| {_cell(k)} | {v} |" for k, v in cats.most_common()] + [""]
        lines += ["| run | critical step | category | agent | confidence | basis | preview |",
                  "|---|---|---|---|---|---|---|"]
        for r in rows:
            lines.append(f"| {_cell(r.id)}{' (degraded)' if r.degraded else ''} | {_cell(r.critical_step)} | {_cell(r.category)} | {_cell(r.agent or '—')} | "
                         f"{r.confidence:.2f} | {_cell(r.basis or '—')} | {_cell(r.preview)} |")
        lines.append("")
        yield "\n".join(lines)
        for section in self.sections():
            yield "\n" + section
        if problems:
            yield "\n" + "\n".join(["## Skipped runs", ""] + [f"- {_cell(p.message)}" for p in problems])
        yield "\n"
