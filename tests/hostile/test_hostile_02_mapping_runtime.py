"""Class 2: a --mapping expression that raises a jmespath error at run time (``task: "abs(goal)"``).

Was: ``JMESPathTypeError`` traceback; the file's good runs were lost. Now: the runs on which the
expression fails are reported (naming the mapping key, the expression and the types), the others load."""

from __future__ import annotations

import json

from hostile_kit import cli, good_run, ids, one_line, snapshot, write_jsonl


def test_the_failing_runs_are_reported_and_the_good_ones_audited(tmp_path):
    runs = tmp_path / "runs"
    runs.mkdir()
    lines = [good_run("a"), good_run("b"), good_run("c")]
    for r in lines:
        r["goal"] = 3
    lines[1]["goal"] = "three"  # abs() of a string: a type error on this run only
    write_jsonl(runs / "events.jsonl", [json.dumps(r) for r in lines])
    mapping = tmp_path / "m.yaml"
    mapping.write_text('messages: "messages"\nid: "id"\ntask: "to_string(abs(goal))"\n')
    before = snapshot(tmp_path)
    out = tmp_path / "d.jsonl"
    for args in (("audit", runs, "--mapping", mapping, "-q", "-o", out), ("check", runs, "--mapping", mapping,
                                                                         "--rules", "generic")):
        r = cli(*args)
        assert r.exit_code == 1, r.output
        assert f"skipped: {runs / 'events.jsonl'}, record 1: the mapping expression 'task' ('to_string(abs(goal))') " \
               "failed: abs() expected number, got string" in one_line(r.stderr)
        assert "Traceback" not in r.output
    assert ids(out) == ["a", "c"]
    assert {k: v for k, v in snapshot(tmp_path).items() if k != str(out)} == before


def test_show_of_a_single_run_file_names_the_expression(tmp_path):
    run = tmp_path / "run.json"
    run.write_text(json.dumps({**good_run("a"), "goal": [1]}))
    mapping = tmp_path / "m.yaml"
    mapping.write_text('messages: "messages"\ntask: "abs(goal)"\n')
    r = cli("show", run, "--mapping", mapping)
    assert r.exit_code == 2
    assert "the mapping expression 'task' ('abs(goal)') failed: abs() expected number, got array" in one_line(r.stderr)
    assert "Traceback" not in r.output
