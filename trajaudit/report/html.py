"""Self-contained HTML batch report (``audit --report x.html``; ``eval --report`` adds the gold).

The page is rendered from jinja2 templates (:mod:`trajaudit.report.page`) with the one stylesheet
and one small script inlined. The runs are data: a summary per run embedded as JSON (the runs table
with sorting, filters and search, and the charts, are drawn from it by the script), and each run's
detail (timeline, evidence, violations) in its own JSON block, parsed only when the run is opened —
so a report of ten thousand runs stays usable. Deep links: ``report.html#run=ID&step=N``.

Streaming: :class:`HtmlReport` turns each result into its summary and its detail JSON when the result
arrives and spools the detail (see :class:`~trajaudit.report.stream.SectionSpool`); only the summaries
stay in memory.
"""

from __future__ import annotations

import base64
import zlib
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from functools import cache
from typing import Any, NamedTuple

from markupsafe import Markup

from trajaudit.engine.diagnosis import Diagnosis
from trajaudit.engine.packs.pack import load_pack, shipped_rule_specs
from trajaudit.engine.run.pipeline import AuditResult
from trajaudit.engine.trace.ir import Trajectory
from trajaudit.engine.validation_log import ValidationLog
from trajaudit.errors import Problem, RulePackError
from trajaudit.report import rundata
from trajaudit.report.page import script, stylesheet, template
from trajaudit.report.stream import SectionSpool

#: Runs above which :class:`HtmlReport` compresses the run details (see ``compress_above``).
COMPRESS_ABOVE = 500
#: Runs per compressed chunk of details.
CHUNK = 64


def _chunk(k: int, details: list[str]) -> DetailBlock:
    """Chunk ``k``: the JSON array of ``details``, gzip-compressed, base64 (no markup can occur in it)."""
    raw = ("[" + ",".join(details) + "]").encode("utf-8")
    z = zlib.compressobj(6, zlib.DEFLATED, 31)  # 31: a gzip stream, which DecompressionStream("gzip") reads
    return DetailBlock("application/gzip-base64", f"c{k}", Markup(base64.b64encode(z.compress(raw) + z.flush()).decode()))


class DetailBlock(NamedTuple):
    """One ``<script>`` data block of run details (the template writes the element)."""

    type: str
    id: str
    text: Markup


@cache
def _shipped_titles() -> dict[str, str]:
    return {r.id: r.title for r in shipped_rule_specs() if r.title}


def rule_titles(packs: Iterable[Any] = ()) -> dict[str, str]:
    """``{rule id: title}`` of the shipped rules and of ``packs`` (paths, shipped names or loaded
    packs; a pack that does not load is left out — the audit itself reports it)."""
    titles = dict(_shipped_titles())
    for p in packs:
        try:
            pack = load_pack(p) if isinstance(p, str) else p
        except (RulePackError, OSError):
            continue
        titles.update({r.id: r.title for r in getattr(pack, "rules", ()) if r.title})
    return titles


def render_html(
    results: Sequence[AuditResult],
    problems: Sequence[Problem] = (),
    *,
    title: str = "trajaudit report",
    preview_chars: int = rundata.STEP_CHARS,
    extra_sections: Sequence[str] = (),
) -> str:
    """Render a self-contained HTML report.

    Args:
        results: audited runs.
        problems: runs reported and skipped.
        preview_chars: characters of each step's text kept in the report.
        extra_sections: trusted HTML fragments (e.g. citation-tracing sections) shown after the runs.

    Returns:
        The whole HTML document (inline CSS and script, run data as JSON; no external assets). A batch
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
    ``on_result``): each run's detail JSON is made when its result arrives and spooled; a summary
    row per run stays in memory. :meth:`render` gives exactly what :func:`render_html` gives for the
    results in index order.

    Args:
        title: the page title.
        preview_chars: characters of each step's text kept in the report.
        titles: ``{rule id: title}`` for the evidence (default: :func:`rule_titles` of the shipped packs).
        compress_above: with more runs than this, the details are written gzip-compressed, base64, in
            chunks of :data:`CHUNK` runs (the page decompresses a chunk when one of its runs is opened):
            ~3x smaller for large batches. Smaller reports keep one plain JSON block per run.
    """

    def __init__(self, *, title: str = "trajaudit report", preview_chars: int = rundata.STEP_CHARS,
                 titles: Mapping[str, str] | None = None, compress_above: int = COMPRESS_ABOVE) -> None:
        super().__init__()
        self.compress_above = compress_above
        self.with_logs = False  # whether any run came with a validation log (eval's runs do not)
        self.title = title
        self.preview_chars = preview_chars
        self.titles = dict(titles) if titles is not None else rule_titles()

    def add(self, index: int, result: AuditResult) -> None:
        """Take run ``index``'s result (its position in the report is that of ``index`` among all
        indexes added)."""
        self.add_run(index, result.trajectory, result.diagnosis, result.log, result.claims)

    def add_run(self, index: int, trajectory: Trajectory | None, diagnosis: Diagnosis,
                log: ValidationLog | None = None, claims: Sequence[Mapping[str, Any]] = (),
                gold: Mapping[str, Any] | None = None) -> None:
        """Take one run from its parts (``eval --report``: no validation log, a gold ``{step, cat,
        agent}``; ``trajectory`` ``None`` when the trace was not given)."""
        self.with_logs = self.with_logs or log is not None
        row = rundata.summary(trajectory, diagnosis, log, gold)
        det = rundata.detail(trajectory, diagnosis, log, claims, self.titles, gold, step_chars=self.preview_chars)
        self.put(index, row, rundata.script_json(det))

    def render(self, problems: Sequence[Problem] = (), *, extra_sections: Sequence[str] = ()) -> str:
        """The whole document (see :func:`render_html`)."""
        return "".join(self.render_parts(problems, extra_sections=extra_sections))

    def context(self, problems: Sequence[Problem] = (), extra_sections: Sequence[str] = ()) -> dict[str, Any]:
        """The template variables of the page (the runs' details as a lazy iterator)."""
        rows = self.rows()
        bases = Counter(r["basis"] for r in rows)
        violated = sum(1 for r in rows if r["nviol"])
        confs = [r["conf"] for r in rows]
        tiles: list[tuple[str, int | str]] = [("runs audited", len(rows)), ("skipped", len(problems)),
                 ("backed by a finding", bases.get("finding", 0)), ("weak evidence", bases.get("weak", 0)),
                 ("fallback guesses", bases.get("fallback", 0))]
        if self.with_logs:
            tiles.append(("runs with violations", violated))
        tiles.append(("mean confidence", f"{sum(confs) / len(confs):.2f}" if confs else "—"))
        dists = [r["dist"] for r in rows if r.get("dist") is not None]
        if dists:
            tiles += [("exact step (Δ = 0)", sum(1 for x in dists if x == 0)), ("within 3 steps", sum(1 for x in dists if x <= 3))]
        return {
            "title": self.title, "css": stylesheet(), "js": script(), "n_runs": len(rows),
            "n_problems": len(problems), "strategies": sorted({r["strat"] for r in rows}), "tiles": tiles,
            "problems": [p.message for p in problems], "extra_sections": list(extra_sections),
            "meta": Markup(rundata.script_json({"title": self.title, "chunk": CHUNK, "logs": self.with_logs})),
            "runs": Markup(rundata.script_json(rows)),
            "details": self._details(len(rows)),
        }

    def _details(self, n: int) -> Iterator[DetailBlock]:
        """The runs' detail blocks, in order (plain JSON per run, or compressed chunks)."""
        if n <= self.compress_above:
            for pos, d in enumerate(self.sections()):
                yield DetailBlock("application/json", f"d{pos}", Markup(d))
            return
        chunk: list[str] = []
        k = 0
        for d in self.sections():
            chunk.append(d)
            if len(chunk) == CHUNK:
                yield _chunk(k, chunk)
                chunk, k = [], k + 1
        if chunk:
            yield _chunk(k, chunk)

    def render_parts(self, problems: Sequence[Problem] = (), *, extra_sections: Sequence[str] = (),
                     template_name: str = "runs.html.j2", **extra: Any) -> Iterator[str]:
        """The document in pieces, to write without holding it whole; their concatenation is
        :meth:`render`. ``template_name`` and ``extra`` variables: ``eval --report``'s page."""
        ctx = self.context(problems, extra_sections)
        ctx.update(extra)
        yield from template(template_name).generate(**ctx)


__all__ = ["HtmlReport", "render_html", "rule_titles"]
