"""Catastrophic-backtracking regexes are refused at compile time, in every pack."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner
from conftest import ROOT

from trajaudit import compile_rules, load_pack
from trajaudit.citation import load_run
from trajaudit.cli import main
from trajaudit.engine.dsl.regex.safety import nested_unbounded, regex_risk
from trajaudit.errors import RulePackError, TraceFormatError

EX = ROOT / "examples"
SAMPLE = EX / "data" / "tau_retail_sample.json"  # 3 runs


def run(*args):
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)


def one_line(text: str) -> str:
    return " ".join(text.split())


def _pack(regex: str) -> str:
    return ("pack: r3\nrules:\n  - id: evil\n    type: PROTOCOL\n    guard: step.kind == \"agent\"\n"
            f"    assert: content !~ /{regex}/\n")


@pytest.mark.parametrize("pattern, risky", [
    ("(A+)+B", True), (r"(\w*\s?)*", True), (r"(a|\s+)*", True),
    (r"(\d+,)*", False), (r"(?:currently\s+|still\s+)*x", False), (r"\d{3}-\d{4}", False),
])
def test_nested_unbounded(pattern, risky):
    assert nested_unbounded(pattern) is risky


def test_pack_with_redos_regex_is_rejected_with_location():
    pack = load_pack({"pack": "r", "rules": [{"id": "redos", "type": "PROTOCOL", "severity": "error",
                                              "targets": ["system_failure"], "guard": 'step.kind == "tool"',
                                              "assert": 'not (content ~ "(A+)+B")', "message": "m"}]})
    with pytest.raises(RulePackError, match="catastrophic backtracking") as e:
        compile_rules(pack)
    assert e.value.rule_id == "r.redos"


def test_shipped_packs_compile():
    for name in ("generic", "tau_retail"):
        assert len(compile_rules(load_pack(name))) > 10


def test_lint_warns_on_unknown_targets_and_empty_packs():
    from trajaudit.engine.packs.lint import lint_pack

    rule = {"id": "x", "type": "PROTOCOL", "severity": "error", "targets": ["no_such_category", "system_failure"],
            "guard": 'step.kind == "tool"', "assert": "not output.is_error", "message": "m"}
    (f,) = [f for f in lint_pack({"pack": "p", "rules": [rule]}) if f.code != "no-examples"]
    assert (f.level, f.code, f.rule_id) == ("warning", "unknown-target", "p.x") and "no_such_category" in f.message
    (e,) = lint_pack({"pack": "p"})
    assert (e.level, e.code) == ("warning", "empty-pack")


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
