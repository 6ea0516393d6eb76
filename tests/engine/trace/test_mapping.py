"""trajaudit/engine/trace/adapters/mapping.py through the CLI: a --mapping that cannot read a file
skips it with the reason, one whose messages expression finds nothing names the expression, one that
raises at run time is reported per run, and one too deep or too long is refused when loaded (robustness
classes 2 and 3)."""

from __future__ import annotations

import json

import pytest
from conftest import ROOT
from hostile_kit import cli, good_run, ids, one_line, snapshot, write_json, write_jsonl

from trajaudit.engine.trace.adapters.mapping import MAX_EXPRESSION_CHARS, MAX_EXPRESSION_DEPTH
from trajaudit.engine.trace.loader import load_path
from trajaudit.errors import TraceFormatError

EX = ROOT / "examples"
MAPPING = EX / "mappings" / "events.yaml"


def test_mapping_reports_every_file_it_cannot_read_in_a_folder(tmp_path):
    out = tmp_path / "m.jsonl"
    r = cli("audit", EX / "traces", "--mapping", MAPPING, "-o", out)
    assert r.exit_code == 1, r.stderr
    err = one_line(r.stderr)
    assert "1 run(s) audited, 2 skipped" in err
    for name, fmt in (("magentic_one.json", "magentic"), ("openai_chat.json", "openai")):
        line = next(ln for ln in r.stderr.splitlines() if name in ln)
        assert line.startswith("skipped: ") and f"does not match the mapping {MAPPING}" in one_line(r.stderr)
        assert f"looks like the built-in {fmt!r} format" in one_line(r.stderr)
    assert "'runs' expression 'runs' yields" in err
    assert [json.loads(x)["trajectory_id"] for x in out.read_text().splitlines()] == ["refund-0042"]


def test_mapping_on_a_file_it_cannot_read_skips_it_with_the_reason(tmp_path):
    sample = EX / "data" / "tau_retail_sample.json"
    r = cli("audit", sample, "--mapping", MAPPING, "-o", "-", "-q")
    # as without --mapping when no run can be read: each file is reported and skipped, then exit 2
    assert r.exit_code == 2, r.stderr
    err = one_line(r.stderr)
    assert "no trace files found" not in err and f"error: no trajectory could be loaded from {sample}" in err
    assert f"skipped: {sample}: does not match the mapping {MAPPING}: the 'runs' expression 'runs' yields null" \
        in err
    assert "looks like the built-in 'tau' format" in err
    assert r.stdout == ""
    baseline = cli("audit", tmp_path / "none.json", "-o", "-", "-q")  # a path that does not exist: a usage error
    assert baseline.exit_code == 2


def test_mapping_whose_messages_expression_misses_names_it(tmp_path):
    mapping = tmp_path / "m.yaml"
    mapping.write_text("messages: events\n")
    with pytest.raises(TraceFormatError) as e:
        load_path(EX / "traces" / "openai_chat.json", mapping=mapping)
    msg = str(e.value)
    assert msg.startswith(f"{EX / 'traces' / 'openai_chat.json'}: does not match the mapping {mapping}:")
    assert "the 'messages' expression 'events' yields null, not a list" in msg


# Class 2: a --mapping expression that raises a jmespath error at run time (``task: "abs(goal)"``).
#
# Was: ``JMESPathTypeError`` traceback; the file's good runs were lost. Now: the runs on which the
# expression fails are reported (naming the mapping key, the expression and the types), the others load.

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


# Class 3: a --mapping with a deeply nested expression (thousands of parentheses, nested filters).
#
# Was: ``RecursionError`` while it compiled. Now: refused when the mapping is loaded (size and depth
# of each expression), exit 2 naming the file, the key and the limit, before any output is opened.

def test_deep_and_long_expressions_are_refused_before_any_output(tmp_path):
    run = write_json(tmp_path / "run.json", good_run("a"))
    out = tmp_path / "d.jsonl"
    out.write_text("old\n")
    cases = {
        "parens": ("(" * 3000 + "messages" + ")" * 3000, "expression too long"),
        "filters": ("messages" + "[?a" * 60 + "]" * 60, f"expression too deeply nested (60 levels; the limit is "
                                                           f"{MAX_EXPRESSION_DEPTH})"),
        "or-chain": (" || ".join(["messages"] * 150), "expression too deeply nested (150 levels"),  # the tree's depth
        "literal": ("`" + "9" * 5000 + "`", "expression too long"),
    }
    for name, (expr, said) in cases.items():
        mapping = tmp_path / f"{name}.yaml"
        mapping.write_text(f"messages: '{expr}'\n")
        for args in (("audit", run, "--mapping", mapping, "-q", "-o", out), ("show", run, "--mapping", mapping),
                     ("check", run, "--mapping", mapping, "--rules", "generic", "-o", out)):
            r = cli(*args)
            assert r.exit_code == 2, (name, args, r.output)
            text = one_line(r.stderr)
            assert f"error: {mapping}: bad jmespath for 'messages': {said}" in text, (name, text)
            assert "Traceback" not in r.output and "RecursionError" not in r.output
            assert out.read_text() == "old\n"
    assert MAX_EXPRESSION_CHARS >= 200  # real mappings (examples/mappings) stay far below


def test_a_nested_literal_within_the_size_limit_is_refused_by_depth(tmp_path):
    run = write_json(tmp_path / "run.json", good_run("a"))
    mapping = tmp_path / "m.yaml"
    mapping.write_text("messages: '`" + "[" * 80 + "]" * 80 + "`'\n")
    r = cli("show", run, "--mapping", mapping)
    assert r.exit_code == 2 and "expression too deeply nested (80 levels" in one_line(r.stderr)
