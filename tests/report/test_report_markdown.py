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


# Fresh-user pass: `audit --report x.md` never said a run was degraded (its rule evaluation ran out of
# time, --run-timeout), where the HTML report shows the run's "incomplete" notes. Now the summary counts
# the degraded runs, the run list marks them and each run's section says so with the budget's note.

def test_markdown_report_says_which_runs_are_degraded(tmp_path):
    from hostile_kit import good_run, write_json

    runs = write_json(tmp_path / "runs.json", [good_run("r1"), good_run("r2", item="X2")])
    md = tmp_path / "r.md"
    r = run("audit", runs, "-o", tmp_path / "o.jsonl", "--report", md, "--run-timeout", "0.000001", "-q")
    assert r.exit_code == 0, r.stderr
    text = md.read_text()
    assert ("2 run(s) audited, 0 skipped. 2 run(s) degraded: their rule evaluation ran out of time (--run-timeout), "
            "so their diagnoses rest on partial evidence (marked in the run list).") in text
    assert "| r1 (degraded) |" in text and "| r2 (degraded) |" in text
    assert text.count("- **degraded**: rule evaluation ran out of time (--run-timeout), the checks left were "
                      "'unknown', so this diagnosis rests on partial evidence (run time budget of 1e-06 s exceeded") == 2
    whole = tmp_path / "w.md"
    assert run("audit", runs, "-o", tmp_path / "w.jsonl", "--report", whole, "-q").exit_code == 0
    assert "degraded" not in whole.read_text()
