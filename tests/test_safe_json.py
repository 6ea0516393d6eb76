"""trajaudit/safe_json.py: the nesting-depth limit (MAX_DEPTH) and every reader that applies it: a
document nested too deeply is a clear error naming the file (never a RecursionError), a deep tool
argument or output degrades instead of crashing, and documents at the limit still audit; and the
integer-digits limit (robustness class 1)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from hostile_kit import cli, good_run, ids, one_line, snapshot, write_json, write_jsonl

from trajaudit import safe_json
from trajaudit.cli import main
from trajaudit.engine.claims import sources
from trajaudit.engine.trace.adapters.base import parse_tool_call
from trajaudit.engine.trace.loader import load

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


def run(*args):
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)


def _deep_list(tmp_path: Path, name: str = "deep.json") -> Path:
    p = tmp_path / name
    p.write_text("[" * 5000 + "]" * 5000)
    return p


def _nest(levels: int, leaf: object = 1) -> object:
    d: object = leaf
    for _ in range(levels):
        d = {"a": d}
    return d


def test_too_deep_boundary():
    assert not safe_json.too_deep(_nest(safe_json.MAX_DEPTH)) and safe_json.too_deep(_nest(safe_json.MAX_DEPTH + 1))
    assert not safe_json.too_deep("x" * 10) and not safe_json.too_deep([])
    with pytest.raises(safe_json.NestedTooDeep, match="nested too deeply"):
        safe_json.loads("[" * 5000 + "]" * 5000)  # the parser's own stack
    with pytest.raises(safe_json.NestedTooDeep):
        safe_json.loads(json.dumps(_nest(300)))  # parses, but too deep for the walks after it


@pytest.mark.parametrize("cmd", [("audit", "-o", "{out}"), ("show",), ("claims",), ("convert", "-o", "{out}"),
                                 ("check", "--rules", "generic"), ("cite",)])
def test_every_command_reports_a_deep_file_without_a_traceback(tmp_path, cmd):
    p = _deep_list(tmp_path)
    args = [a.replace("{out}", str(tmp_path / "out.jsonl")) for a in cmd]
    r = CliRunner().invoke(main, [args[0], str(p), *args[1:]])
    assert r.exit_code in (1, 2) and isinstance(r.exception, SystemExit), r.exception
    assert f"{p}: nested too deeply" in one_line(r.stderr) and "Traceback" not in r.stderr


def test_deep_tool_arguments_and_outputs_degrade_instead_of_crashing(tmp_path):
    deep = '{"a": ' * 3000 + "1" + "}" * 3000
    call, degraded = parse_tool_call({"id": "c", "function": {"name": "t", "arguments": deep}}, "$")
    assert degraded and "nested too deeply" in call.arguments_error and call.raw_arguments == deep
    # a claims digest walks a JSON tool output for values; one nested too deeply is not walked (no crash)
    assert sources.digest(json.dumps(_nest(5, "W7654321")), "tool", 10**6).values == {"w7654321": ".a.a.a.a.a"}
    assert sources.digest(json.dumps(_nest(300, "W7654321")), "tool", 10**6).values == {}
    msgs = [{"role": "user", "content": "hi"},
            {"role": "assistant", "content": "", "tool_calls": [{"id": "c", "type": "function",
                                                                 "function": {"name": "t", "arguments": deep}}]},
            {"role": "tool", "tool_call_id": "c", "name": "t", "content": json.dumps(_nest(300))},
            {"role": "assistant", "content": "Done: order #W1234567 is delivered."}]
    p = tmp_path / "run.json"
    p.write_text(json.dumps(msgs))
    for cmd in (("audit", "-o", tmp_path / "o.jsonl"), ("claims",), ("check", "--rules", "generic")):
        r = CliRunner().invoke(main, [cmd[0], str(p), *map(str, cmd[1:])])
        assert r.exit_code in (0, 1) and isinstance(r.exception, (type(None), SystemExit)), r.exception


def test_documents_at_the_limit_still_audit(tmp_path):
    inner = json.dumps(_nest(safe_json.MAX_DEPTH - 1))  # a whole tool output / argument at the limit
    msgs = [{"role": "user", "content": "hi", "meta": _nest(safe_json.MAX_DEPTH - 3)},
            {"role": "assistant", "content": "", "tool_calls": [{"id": "c", "type": "function",
                                                                 "function": {"name": "t", "arguments": inner}}]},
            {"role": "tool", "tool_call_id": "c", "name": "t", "content": inner},
            {"role": "assistant", "content": "Done."}]
    p = tmp_path / "run.json"
    p.write_text(json.dumps(msgs))
    t = load(p)
    assert t.steps[1].tool_calls[0].arguments_error is None
    r = run("audit", p, "-o", tmp_path / "o.jsonl")
    assert r.exit_code == 0 and len((tmp_path / "o.jsonl").read_text().splitlines()) == 1


# Class 1: an integer literal longer than 4,300 digits in any JSON/YAML input.
#
# Was: Python's int-conversion limit raised ``ValueError`` with a traceback; the good runs of the batch
# were lost and no ``-o`` was written (audit, show, claims, convert, check, eval, also with --jobs 2).
# Now: a trace line is that run's error naming the file, line and the limit; a pack, tools, gold or LLM
# config file is a usage error (exit 2) naming the file and the limit, before anything is written.

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
