"""Class 1: an integer literal longer than 4,300 digits in any JSON/YAML input.

Was: Python's int-conversion limit raised ``ValueError`` with a traceback; the good runs of the batch
were lost and no ``-o`` was written (audit, show, claims, convert, check, eval, also with --jobs 2).
Now: a trace line is that run's error naming the file, line and the limit; a pack, tools, gold or LLM
config file is a usage error (exit 2) naming the file and the limit, before anything is written."""

from __future__ import annotations

import json

import pytest
from hostile_kit import cli, good_run, ids, one_line, snapshot, write_json, write_jsonl

HUGE = "9" * 5000


@pytest.fixture
def batch(tmp_path):
    runs = tmp_path / "runs"
    runs.mkdir()
    write_jsonl(runs / "mixed.jsonl", [json.dumps(good_run("a")), '{"messages": [], "n": ' + HUGE + "}",
                                       json.dumps(good_run("b"))])
    (runs / "top.json").write_text('{"messages": [{"role": "user", "content": "x"}], "n": -' + HUGE + "}")
    write_json(runs / "good.json", good_run("c"))
    return runs


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_audit_reports_the_line_and_keeps_the_good_runs(batch, tmp_path, jobs):
    before = snapshot(batch)
    out = tmp_path / "d.jsonl"
    r = cli("audit", batch, "-q", "-o", out, "--jobs", jobs)
    assert r.exit_code == 1, r.output
    assert ids(out) == ["a", "b", "c"]
    err = one_line(r.stderr)
    assert f"skipped: {batch / 'mixed.jsonl'}, record 1: JSON on line 2: integer literal too long (5000 digits): " \
           "the limit is 4300 digits" in err
    assert f"skipped: {batch / 'top.json'}: integer literal too long (5000 digits): the limit is 4300 digits " \
           "(line 1)" in err
    assert "Traceback" not in r.output and snapshot(batch) == before


def test_show_claims_convert_check_read_the_good_lines(batch, tmp_path):
    f = batch / "mixed.jsonl"
    for args in (("show", f), ("claims", f), ("convert", f, "-o", tmp_path / "ir.jsonl"),
                 ("check", f, "--rules", "generic")):
        r = cli(*args)
        assert r.exit_code in (0, 1), (args, r.output)
        assert "integer literal too long (5000 digits): the limit is 4300 digits" in one_line(r.stderr), args
        assert "Traceback" not in r.output
    assert len((tmp_path / "ir.jsonl").read_text().splitlines()) == 2


def test_a_pack_tools_gold_or_config_with_a_huge_integer_is_refused_before_any_output(batch, tmp_path):
    pack = tmp_path / "pack.yaml"
    pack.write_text("pack: p\nparams:\n  n: " + HUGE + "\nrules: []\n")
    tools = tmp_path / "tools.json"
    tools.write_text('[{"type": "function", "function": {"name": "f", "parameters": {"maxLength": ' + HUGE + "}}}]")
    config = tmp_path / "llm.yaml"
    config.write_text("base_url: http://127.0.0.1:9/v1\nmodel: m\nmax_tokens: " + HUGE + "\n")
    gold = tmp_path / "gold.jsonl"
    gold.write_text('{"trajectory_id": "c", "critical_step": ' + HUGE + "}\n")
    out = tmp_path / "d.jsonl"
    out.write_text("old\n")
    for args, said in (((batch, "--rules", pack), f"{pack}"), ((batch, "--tools", tools), f"{tools}"),
                       ((batch, "--llm-config", config, "-s", "all-at-once"), f"{config}")):
        r = cli("audit", *args, "-q", "-o", out)
        assert r.exit_code == 2, (args, r.output)
        assert said in one_line(r.stderr) and "4300" in r.stderr and "Traceback" not in r.output, r.output
        assert out.read_text() == "old\n"
    r = cli("eval", batch, "--gold", gold, "-s", "offline")
    assert r.exit_code in (1, 2) and "integer literal too long" in one_line(r.output), r.output
    assert "Traceback" not in r.output
