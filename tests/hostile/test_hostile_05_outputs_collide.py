"""Class 5: two outputs of one command naming the same file (``-o X.html --report X.html``).

Was: the JSONL was silently replaced by the HTML, exit 0. Now: exit 2 naming both options, before
the batch; an existing file there is untouched."""

from __future__ import annotations

import os

from hostile_kit import cli, good_run, one_line, write_json


def test_o_and_report_on_one_path_are_refused(tmp_path):
    run = write_json(tmp_path / "run.json", good_run("a"))
    for name in ("x.html", "x.md"):
        x = tmp_path / name
        for existing in (False, True):
            if existing:
                x.write_text("old\n")
            r = cli("audit", run, "-q", "-o", x, "--report", x)
            assert r.exit_code == 2, r.output
            assert f"-o/--output and --report name the same file '{x}'" in one_line(r.stderr)
            assert (x.read_text() == "old\n") if existing else not x.exists()


def test_a_link_to_the_other_output_is_the_same_file(tmp_path):
    run = write_json(tmp_path / "run.json", good_run("a"))
    report = tmp_path / "r.html"
    report.write_text("old report\n")
    alias = tmp_path / "d.jsonl"
    os.symlink(report, alias)
    r = cli("audit", run, "-q", "-o", alias, "--report", report)
    assert r.exit_code == 2 and "name the same file" in one_line(r.stderr)
    assert report.read_text() == "old report\n"


def test_eval_report_and_save_pred_on_one_path_are_refused(tmp_path):
    run = write_json(tmp_path / "a.json", good_run("a"))
    gold = tmp_path / "gold.jsonl"
    gold.write_text('{"trajectory_id": "a", "critical_step": 4}\n')
    out = tmp_path / "o.txt"
    r = cli("eval", run, "--gold", gold, "-s", "offline", "-o", out, "--save-pred", out)
    assert r.exit_code == 2 and "-o/--output and --save-pred name the same file" in one_line(r.stderr)
    assert not out.exists()


def test_different_outputs_are_written(tmp_path):
    run = write_json(tmp_path / "run.json", good_run("a"))
    r = cli("audit", run, "-q", "-o", tmp_path / "d.jsonl", "--report", tmp_path / "d.html")
    assert r.exit_code == 0 and (tmp_path / "d.jsonl").exists() and (tmp_path / "d.html").exists()
