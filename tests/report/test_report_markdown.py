"""trajaudit/report/markdown.py: the Markdown report escapes what the runs put in it (run ids in
headings, file names in code spans, HTML in messages)."""

from __future__ import annotations

import json

from click.testing import CliRunner

from trajaudit.cli import main


def invoke(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


def run(*args):
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)


def test_markdown_report_escapes_run_id_in_heading_and_code_spans(tmp_path):
    rid = "<img src=x onerror=alert(1)> | pipe"
    p = tmp_path / "we`ird.json"
    p.write_text(json.dumps({"id": rid, "messages": [
        {"role": "user", "content": "a | b\n# heading\n<script>alert(1)</script>"},
        {"role": "assistant", "content": "There are 3 | 4 `x` <b>bold</b>"}]}))
    md = tmp_path / "r.md"
    r = run("audit", p, "-o", tmp_path / "o.jsonl", "--report", md)
    assert r.exit_code == 0, r.stderr
    text = md.read_text()
    assert "<img" not in text and "<script" not in text and "<b>" not in text
    assert "## &lt;img src=x onerror=alert(1)&gt; \\| pipe" in text.splitlines()
    assert f"- file: ``{p}``" in text  # a backtick in the name cannot close the code span


def test_markdown_report_escapes_trace_html(tmp_path):
    p = tmp_path / "x.json"
    p.write_text(json.dumps([{"role": "user", "content": "hi"},
                             {"role": "assistant", "content": "<script>alert(1)</script> done"}]))
    md = tmp_path / "r.md"
    assert invoke("audit", p, "--report", md, "-o", tmp_path / "d.jsonl", "-q").exit_code == 0
    text = md.read_text()
    assert "<script>" not in text and "&lt;script&gt;" in text
