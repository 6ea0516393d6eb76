"""Defects a fresh user hit: rule regexes that backtrack catastrophically yet passed the safety check
(an audit hung), deeply nested JSON that crashed every command with a RecursionError, and a run id
written raw into a Markdown heading.

The regex cases are decided statically (the refused patterns are never run here: they would hang)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from trajaudit import compile_rules, load_pack, safe_json
from trajaudit.citation import load_run
from trajaudit.cli import main
from trajaudit.engine.claims import sources
from trajaudit.engine.dsl.regex.safety import regex_risk
from trajaudit.engine.packs import cache as pack_cache
from trajaudit.engine.trace.adapters.base import parse_tool_call
from trajaudit.engine.trace.loader import load, load_path
from trajaudit.errors import RulePackError, TraceFormatError

EX = Path(__file__).resolve().parents[3] / "examples"
SAMPLE = EX / "data" / "tau_retail_sample.json"  # 3 runs


def run(*args):
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)


def one_line(text: str) -> str:
    return " ".join(text.split())


# --- 1. catastrophic backtracking ---------------------------------------------------------------

@pytest.mark.parametrize("pattern, shape", [
    (r"^(a|a)*$", "overlapping alternatives"),      # parsed as a(?:|): two empty branches
    (r"^(a|aa)+$", "overlapping alternatives"),     # a(?:|a): the empty branch may be followed by a
    (r"^(x(?:y|y)z)*$", "overlapping alternatives"),  # the alternation nested inside the repeated group
    (r"(?:foo|bar|fo)+", "overlapping alternatives"),
    (r"^(a|a){11}$", "overlapping alternatives"),   # a large count is as bad as *
    (r"^(.*a){25}$", "repeats 25 times"),
    (r"^(.*?,){11}P", "repeats 11 times"),
    (r"((.*a){5}){5}", "len**25"),                  # counts multiply
    (r"^(.*a)+$", "repeats a group that itself repeats without bound"),  # 'a' is no separator: .* eats it
    (r"(?=(a+)+b)", "repeats a group that itself repeats without bound"),  # inside a lookahead too
])
def test_refused_shapes(pattern, shape):
    assert shape in regex_risk(pattern)


@pytest.mark.parametrize("pattern", [
    r"(ab|ac)*", r"(?:foo|bar)+", r"(?:Mrs|Mr)+", r"(a|a){5}", r"(.*a){3}", r"(\d+,){20}", r"(a|b)*",
    r"(?:currently\s+|still\s+|already\s+|now\s+)*x", r"(?:[\w.-]+/)+[\w.-]+", r"[\w-]+(?:\.[\w-]+)+",
    r"(?i)available ((?:[\w-]+ ){0,1}[\w-]+) (?:options|variants)", r"(?i)refund (?:\w+ ){0,6}?is",
    r"#?\b[A-Za-z]{0,3}\d{5,}\b[^.?!\n]{0,80}?\btracking",
])
def test_accepted_shapes(pattern):
    assert regex_risk(pattern) == ""


def _pack(regex: str) -> str:
    return ("pack: r3\nrules:\n  - id: evil\n    type: PROTOCOL\n    guard: step.kind == \"agent\"\n"
            f"    assert: content !~ /{regex}/\n")


@pytest.mark.parametrize("regex, phrase", [("^(a|a)*$", "overlapping alternatives"),
                                           ("^(.*a){25}$", "repeats 25 times")])
def test_pack_with_backtracking_regex_is_refused_with_rule_and_line(tmp_path, regex, phrase):
    with pytest.raises(RulePackError, match="catastrophic backtracking") as ei:
        compile_rules(load_pack(_pack(regex)))
    assert ei.value.rule_id == "r3.evil" and ei.value.line == 6 and phrase in ei.value.message
    p = tmp_path / "r3.yaml"
    p.write_text(_pack(regex))
    r = run("rules", "lint", p)
    assert r.exit_code == 1 and f"{p}:6:" in r.output and "1 error(s)" in one_line(r.output + r.stderr)
    r = run("check", SAMPLE, "--rules", p)  # refused when the pack loads: the audit never runs the regex
    assert r.exit_code == 2 and f"{p}:6:" in one_line(r.stderr) and "catastrophic backtracking" in r.stderr


def test_checker_pattern_and_citation_pattern_are_checked_too(tmp_path):
    text = "pack: p\nrules:\n  - id: a\n    type: SCHEMA\n    check: {checker: regex_search, args: {pattern: '(a|aa)+$'}}\n"
    with pytest.raises(RulePackError, match="overlapping alternatives") as ei:
        compile_rules(load_pack(text))
    assert ei.value.rule_id == "p.a"
    doc = {"format": "trajaudit.citation-run", "citation_pattern": r"\[((?:\w+\s?)+)\]",
           "documents": [{"id": "D1", "text": "Sales rose."}],
           "invocations": [{"id": "a", "agent": "w", "inputs": [{"document": "D1"}], "outputs": ["Sales rose [D1]."]}]}
    p = tmp_path / "run.json"
    p.write_text(json.dumps(doc))
    with pytest.raises(TraceFormatError, match="catastrophic backtracking") as ei:
        load_run(p)
    assert ei.value.json_path == "$.citation_pattern" and ei.value.file == str(p)


def test_shipped_packs_still_compile_and_cached_verdicts_follow_the_code():
    assert len(compile_rules(load_pack("generic"))) > 10 and len(compile_rules(load_pack("tau_retail"))) > 10
    assert "engine/dsl/regex/safety.py" in pack_cache.code_files()


# --- 2. deeply nested JSON ----------------------------------------------------------------------

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


@pytest.mark.parametrize("doc", ["list", "meta"])
def test_load_refuses_deep_documents_with_the_file(tmp_path, doc):
    p = _deep_list(tmp_path) if doc == "list" else tmp_path / "deep.json"
    if doc == "meta":
        p.write_text('[{"role": "user", "content": "hi", "meta": ' + '{"a": ' * 5000 + "1" + "}" * 5000 + "}]")
    with pytest.raises(TraceFormatError, match="nested too deeply") as ei:
        load(p)
    assert ei.value.file == str(p)


@pytest.mark.parametrize("cmd", [("audit", "-o", "{out}"), ("show",), ("claims",), ("convert", "-o", "{out}"),
                                 ("check", "--rules", "generic"), ("cite",)])
def test_every_command_reports_a_deep_file_without_a_traceback(tmp_path, cmd):
    p = _deep_list(tmp_path)
    args = [a.replace("{out}", str(tmp_path / "out.jsonl")) for a in cmd]
    r = CliRunner().invoke(main, [args[0], str(p), *args[1:]])
    assert r.exit_code in (1, 2) and isinstance(r.exception, SystemExit), r.exception
    assert f"{p}: nested too deeply" in one_line(r.stderr) and "Traceback" not in r.stderr


def test_a_deep_file_in_a_folder_is_skipped_and_the_batch_goes_on(tmp_path):
    folder = tmp_path / "runs"
    folder.mkdir()
    _deep_list(folder, "a_deep.json")
    (folder / "b.json").write_text(SAMPLE.read_text())
    out = tmp_path / "d.jsonl"
    r = run("audit", folder, "-o", out)
    assert r.exit_code == 1
    assert f"skipped: {folder / 'a_deep.json'}: nested too deeply" in one_line(r.stderr)
    assert len(out.read_text().splitlines()) == 3


def test_deep_jsonl_line_is_skipped_alone(tmp_path):
    p = tmp_path / "runs.jsonl"
    good = json.loads(SAMPLE.read_text())[0]
    p.write_text("[" * 3000 + "]" * 3000 + "\n" + json.dumps(good) + "\n")
    res = load_path(p)
    assert len(res.trajectories) == 1 and len(res.problems) == 1
    assert "JSON on line 1 nested too deeply" in res.problems[0].message


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


# --- 3. Markdown report escaping ------------------------------------------------------------------

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
