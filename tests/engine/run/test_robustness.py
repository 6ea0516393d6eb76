"""Regressions from the fresh-user break-it pass: every one of these used to traceback or mislead."""

from __future__ import annotations

import json

from click.testing import CliRunner

from trajaudit import load_path
from trajaudit.cli import main


def invoke(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


def test_markup_like_text_is_printed_literally(tmp_path):
    p = tmp_path / "m.json"
    p.write_text(json.dumps([{"role": "user", "content": "[/bold] hi"},
                             {"role": "assistant", "name": "[/x]agent", "content": "[red]ok[/red]"}]))
    r = invoke("show", p)
    assert r.exit_code == 0 and "[red]ok[/red]" in r.output and "[/x]agent" in r.output
    r = invoke("audit", p, "-o", tmp_path / "d.jsonl")
    assert r.exit_code == 0 and "[/x]agent" in r.output


def test_unwritable_output_is_an_error_not_a_traceback(tmp_path, tau_file):
    r = invoke("audit", tau_file, "--strategy", "first", "-o", tmp_path / "no" / "such" / "d.jsonl")
    assert r.exit_code == 2 and "does not exist; create it first" in r.output and "Traceback" not in r.output
    r = invoke("convert", tau_file, "-o", tmp_path / "no" / "x.json")
    assert r.exit_code == 2


def test_convert_output_reads_back_everywhere(tmp_path, tau_file):
    out = tmp_path / "ir.jsonl"
    assert invoke("convert", tau_file, "-o", out).exit_code == 0
    res = load_path(out)
    assert len(res.trajectories) == 29 and res.trajectories[0].id == "2"
    assert res.trajectories[0].steps[6].content.startswith("Currently, there are 11")
    r = invoke("audit", out, "-o", tmp_path / "d.jsonl", "-q")
    assert r.exit_code == 0
    first = json.loads((tmp_path / "d.jsonl").read_text().splitlines()[0])
    assert (first["trajectory_id"], first["critical_step"]) == ("2", 6)


def test_forcing_a_format_that_does_not_fit_is_refused(tmp_path, tau_file):
    r = invoke("audit", tau_file, "--format", "openai", "-o", tmp_path / "d.jsonl", "-q")
    assert r.exit_code == 1 and "not in the 'openai' format" in r.output
    assert (tmp_path / "d.jsonl").read_text() == ""


def test_unknown_taxonomy_is_a_usage_error(tmp_path, tau_file):
    r = invoke("audit", tau_file, "--taxonomy", "bogus", "-o", tmp_path / "d.jsonl")
    assert r.exit_code == 2 and "bogus" in r.output


def test_markdown_report_escapes_trace_html(tmp_path):
    p = tmp_path / "x.json"
    p.write_text(json.dumps([{"role": "user", "content": "hi"},
                             {"role": "assistant", "content": "<script>alert(1)</script> done"}]))
    md = tmp_path / "r.md"
    assert invoke("audit", p, "--report", md, "-o", tmp_path / "d.jsonl", "-q").exit_code == 0
    text = md.read_text()
    assert "<script>" not in text and "&lt;script&gt;" in text


def test_eval_exit_codes(tmp_path, tau_file):
    gold = tau_file.parent / "ground_truth.json"
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    r = invoke("eval", "--gold", gold, "--pred", empty)
    assert r.exit_code == 2 and "nothing to score" in r.output
    pred = tmp_path / "p.jsonl"
    pred.write_text('{"trajectory_id": "2", "critical_step": 6, "category": "x", "strategy": "s"}\n{oops\n')
    r = invoke("eval", "--gold", gold, "--pred", pred, "--format", "json")
    assert r.exit_code == 1 and "skipped" in r.output
