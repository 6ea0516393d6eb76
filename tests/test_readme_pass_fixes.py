"""Fixes from a fresh-user pass over the README (eval options, eval warnings, show's task line)."""

from __future__ import annotations

import json

from click.testing import CliRunner

from trajaudit.cli import main


def test_eval_refuses_two_strategies_instead_of_keeping_the_last(tau_file):
    r = CliRunner().invoke(main, ["eval", str(tau_file), "--gold", str(tau_file.parent / "ground_truth.json"),
                                  "-s", "first", "-s", "last"])
    assert r.exit_code == 2 and "one --strategy per eval (got first, last)" in r.output


def test_predictions_of_another_data_set_get_no_step_range_warnings(tmp_path, tau_file, ww_dir):
    """tau diagnoses scored against Who&When gold share ids ("4", "12") with other runs: they pair with
    nothing, so no run's length is used to judge their steps; one warning says what happened."""
    preds = tmp_path / "d.jsonl"
    r = CliRunner().invoke(main, ["audit", str(tau_file), "-o", str(preds), "-q"])
    assert r.exit_code == 0, r.output
    r = CliRunner().invoke(main, ["eval", "--gold", str(ww_dir), "--pred", str(preds)])
    assert r.exit_code == 1
    assert "outside the run" not in r.stderr
    assert "29 of 29 predictions match no gold run" in r.stderr


def test_show_prints_the_task_after_the_run_cut_at_a_word(tmp_path):
    task = "Please find the cheapest flight from Lisbon to Oslo " * 5
    msgs = {"task": task, "messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]}
    p = tmp_path / "run.json"
    p.write_text(json.dumps(msgs), encoding="utf-8")
    r = CliRunner().invoke(main, ["show", str(p), "--width", "20"])
    assert r.exit_code == 0, r.output
    lines = r.output.splitlines()
    (line,) = [x for x in lines if x.startswith("task: ")]
    assert lines.index(line) > max(i for i, x in enumerate(lines) if "hello" in x)
    assert line == "task: Please find the cheapest flight from …"
