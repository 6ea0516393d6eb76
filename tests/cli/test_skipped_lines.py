"""Skipped lines of one input file are printed up to ``cli.common.MAX_SKIPPED_LINES``, then counted in
one line. ``eval --pred x.sarif`` (a pretty-printed JSON log, not JSON Lines) printed one "invalid JSON"
line per line of the log — 1237 of them in a fresh-user pass — and ``audit`` of a JSONL file did the same
per bad record. The summaries still count every skipped line; ``--debug`` prints them all."""

from __future__ import annotations

import json

from hostile_kit import cli, good_run, one_line, write_json

MAX_SKIPPED_LINES = 5  # cli.common.MAX_SKIPPED_LINES


def _pretty(path, n_keys=40):
    """A pretty-printed JSON document (like a SARIF log): every line but the braces is invalid JSON Lines."""
    path.write_text(json.dumps({f"k{i}": i for i in range(n_keys)}, indent=2) + "\n", encoding="utf-8")
    return path


def _files(tmp_path):
    run = write_json(tmp_path / "a.json", good_run("a"))
    gold = tmp_path / "gold.jsonl"
    gold.write_text('{"trajectory_id": "a", "critical_step": 4}\n')
    return run, gold


def _skipped(stderr, prefix="skipped:"):
    return [x for x in stderr.splitlines() if x.startswith(prefix)]


def test_eval_pred_not_json_lines_prints_five_lines_and_a_count(tmp_path):
    run, gold = _files(tmp_path)
    pred = _pretty(tmp_path / "x.sarif")  # 42 lines, every one invalid as a JSON document
    r = cli("eval", run, "--gold", gold, "--pred", pred)
    assert r.exit_code == 2 and "no diagnosis could be read" in r.stderr
    lines = _skipped(r.stderr)
    assert len(lines) == MAX_SKIPPED_LINES + 1 == 6
    assert [x.split(": line ")[1].split(":")[0] for x in lines[:-1]] == ["1", "2", "3", "4", "5"]
    assert one_line(lines[-1]) == f"skipped: … and 37 more lines of {pred} skipped (not JSON Lines?; --debug lists them all)"
    # "skipped: …: line 1: invalid JSON (…) (skipped)" said it twice (fresh-user pass)
    assert all(x.count("skipped") == 1 for x in lines[:-1]) and lines[0].endswith(")")
    assert one_line(lines[0]) == f"skipped: {pred}: line 1: invalid JSON (Expecting property name enclosed in double quotes)"


def test_eval_pred_summary_counts_every_skipped_line(tmp_path):
    run, gold = _files(tmp_path)
    pred = tmp_path / "p.jsonl"
    pred.write_text('{"trajectory_id": "a", "critical_step": 4}\n' + "".join(f"{{x{i}\n" for i in range(20)))
    r = cli("eval", run, "--gold", gold, "--pred", pred)
    assert r.exit_code == 1
    assert len(_skipped(r.stderr)) == 6
    assert f"… and 15 more lines of {pred} skipped (not JSON Lines?" in one_line(r.stderr)
    assert "20 run(s) or prediction line(s) were skipped (see above); exit code 1" in one_line(r.stderr)
    r = cli("eval", run, "--gold", gold, "--pred", pred, "--debug")  # every one
    assert [x.split(": line ")[1].split(":")[0] for x in _skipped(r.stderr)] == [str(n) for n in range(2, 22)]


def test_eval_pred_lines_that_are_no_diagnosis_are_counted_as_records(tmp_path):
    run, gold = _files(tmp_path)
    pred = tmp_path / "p.jsonl"
    pred.write_text('{"trajectory_id": "a", "critical_step": 4}\n' + '{"x": 1}\n' * 8)
    r = cli("eval", run, "--gold", gold, "--pred", pred)
    assert len(_skipped(r.stderr)) == 6
    assert _skipped(r.stderr)[-1] == f"skipped: … and 3 more records of {pred} skipped (--debug lists them all)"


def test_gold_not_json_lines_prints_five_lines_and_a_count(tmp_path):
    run, _ = _files(tmp_path)
    gold = _pretty(tmp_path / "gold.json")
    r = cli("eval", run, "--gold", gold, "--gold-format", "jsonl", "-s", "offline")
    assert r.exit_code == 2
    lines = _skipped(r.stderr, "gold:")
    assert len(lines) == 6 and lines[0].startswith("gold: line 1: invalid JSON")
    assert one_line(lines[-1]) == f"gold: … and 37 more lines of {gold} skipped (not JSON Lines?; --debug lists them all)"


def test_audit_jsonl_with_many_bad_records(tmp_path):
    runs = tmp_path / "runs.jsonl"
    runs.write_text(json.dumps(good_run("a")) + "\n" + "".join(f"{{bad {i}\n" for i in range(30)))
    r = cli("audit", runs, "-o", tmp_path / "d.jsonl")
    assert r.exit_code == 1
    lines = _skipped(r.stderr)
    assert len(lines) == 6 and "record 1: invalid JSON on line 2" in lines[0]
    assert lines[-1] == f"skipped: … and 25 more lines of {runs} skipped (not JSON Lines?; --debug lists them all)"
    assert "1 run(s) audited, 30 skipped" in one_line(r.output)
