"""Reports of streamed batches: sections rendered as results arrive (any order) and spooled give the
same document as rendering the whole list in index order."""

from __future__ import annotations

import dataclasses

import report_page

from trajaudit.engine.run.batch import audit_trajectories
from trajaudit.engine.run.pipeline import AuditSpec
from trajaudit.errors import Problem
from trajaudit.report import HtmlReport, MarkdownReport, render_html, render_markdown
from trajaudit.report.stream import RUN_TOKEN, RunRow, SectionSpool


def _results(tau_runs):
    runs = [tau_runs[i] for i in ("2", "12", "47", "105")]
    return audit_trajectories(runs, AuditSpec()).results


def test_out_of_order_arrival_gives_the_in_order_document(tau_runs):
    results = _results(tau_runs)
    problems = [Problem(file="x.json", record=3, message="x.json record 3: not a trace")]
    order = [2, 0, 3, 1]  # completion order under --jobs
    html, md = HtmlReport(title="t"), MarkdownReport(title="t")
    for i in order:
        html.add(i, results[i])
        md.add(i, results[i])
    assert html.render(problems) == render_html(results, problems, title="t")
    assert md.render(problems) == render_markdown(results, problems, title="t")
    doc = html.render(problems)
    # rows and details are in list order ("2" first), whatever arrived first
    assert [r["id"] for r in report_page.runs(doc)] == ["2", "12", "47", "105"]
    assert [d["steps"][0]["i"] for d in report_page.details(doc)] == [0, 0, 0, 0]
    assert [len(d["steps"]) for d in report_page.details(doc)] == [len(r.trajectory.steps) for r in results]
    assert doc.index('id="d0"') < doc.index('id="d1"') < doc.index('id="d3"') and RUN_TOKEN not in doc
    assert "x.json record 3: not a trace" in doc


def test_run_ids_with_the_token_are_escaped_not_replaced(tau_runs):
    r = _results(tau_runs)[0]
    t = dataclasses.replace(r.trajectory, id="<RUN> \ud800")
    rep = HtmlReport()
    rep.add(5, dataclasses.replace(r, trajectory=t))
    doc = rep.render()
    assert report_page.runs(doc)[0]["id"] == "<RUN> \ud800"  # JSON-escaped in the page, round-trips exactly
    assert "<RUN>" not in doc and 'id="d0"' in doc


def test_spool_rolls_to_disk_and_reads_back_in_index_order():
    spool = SectionSpool(position_token=RUN_TOKEN)
    big = "x" * (3 << 20)
    for i in (3, 1, 2):  # 9 MiB: past the in-memory limit
        spool.put(i, RunRow(str(i), None, "inconclusive", None, 0.0, "", ""), f"{i}:{RUN_TOKEN}:{big}")
    assert spool._file._rolled  # noqa: SLF001 - the spill to disk is the point
    got = list(spool.sections())
    assert [s[:4] for s in got] == ["1:0:", "2:1:", "3:2:"] and all(len(s) == len(big) + 4 for s in got)
    assert [r.id for r in spool.rows()] == ["1", "2", "3"] and len(spool) == 3
    spool.close()


def test_markdown_keeps_the_position_token_of_trace_text(tau_runs):
    """Only HTML sections carry the position token; Markdown writes file names in code spans as they are."""
    r = _results(tau_runs)[0]
    src = dataclasses.replace(r.trajectory.source, file="x<RUN>y.json")
    t = dataclasses.replace(r.trajectory, source=src)
    md = MarkdownReport()
    for i in range(2):
        md.add(i, dataclasses.replace(r, trajectory=t))
    assert md.render().count("`x<RUN>y.json`") == 2
