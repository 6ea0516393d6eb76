"""Rule-pack authoring mistakes get plain, located messages (the fresh-user packs in rules_data/fresh_user).

Covers: unknown parameter overrides (API and include entries), jsonschema errors reworded one per
problem at the key's line and sorted, a compile error caused by an include override reported at the
override, `rules lint` on an unreadable pack (exit 2) and its YAML caret, `rules explain` params,
`rules test -k` selecting nothing, and `check`'s warning about a rule that is never evaluated.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from trajaudit.cli import main
from trajaudit.engine.packs.cache import code_files
from trajaudit.engine.packs.compile import compile_rules
from trajaudit.engine.packs.lint import lint_pack
from trajaudit.engine.packs.pack import load_pack
from trajaudit.errors import RulePackError, TrajauditError

ROOT = Path(__file__).resolve().parents[3]
EXAMPLE = ROOT / "examples" / "rules" / "tau_retail_example.yaml"
FRESH = Path(__file__).resolve().parents[2] / "rules_data" / "fresh_user"


# ---- 8: unknown parameter overrides ----------------------------------------------------------

def test_unknown_api_param_is_an_error_with_a_suggestion():
    with pytest.raises(RulePackError) as ei:
        load_pack(EXAMPLE, params={"yes_wordz": "x"})
    msg = ei.value.message
    assert "yes_wordz (did you mean 'yes_words'?)" in msg
    assert "known: auth_tools, count_claim, refund_claim, required_status, user_tools, write_tools, yes_words" in msg
    # a known name still overrides, an empty mapping is fine
    assert load_pack(EXAMPLE, params={"yes_words": "(?i)sure"}).rules[0].params["yes_words"] == "(?i)sure"
    assert load_pack(EXAMPLE, params={}).name == "example.tau"


@pytest.mark.parametrize("bad", [["yes_words"], "yes_words=x", 3])
def test_params_that_is_not_a_mapping_is_a_clear_error(bad):
    # main's API argument checks (api_args) raise ArgumentTypeError, a TrajauditError, for this
    with pytest.raises(TrajauditError, match=r"load_pack\(\): argument 'params' must be None or a mapping"):
        load_pack(EXAMPLE, params=bad)
    with pytest.raises(RulePackError, match=r"params: parameter names are strings, got \['1'\]"):
        load_pack(EXAMPLE, params={1: "x"})


def test_unknown_include_param_suggests_and_points_at_the_key():
    with pytest.raises(RulePackError) as ei:
        load_pack(FRESH / "p6b.yaml")
    assert (ei.value.line, ei.value.column) == (4, 14)
    assert "unknown parameter(s) yes_wordz (did you mean 'yes_words'?)" in ei.value.message


# ---- 11: schema errors in plain words --------------------------------------------------------

def test_lint_rewords_schema_errors_one_per_problem_sorted_by_line():
    found = lint_pack(FRESH / "p3_types.yaml")
    got = [(f.location.rsplit("/", 1)[-1], f.rule_id, f.message.split("\n")[0]) for f in found
           if f.code == "schema"]
    assert got == [
        ("p3_types.yaml:5:15", "sev", "severity 'fatal' is not one of info, warning, error, critical"),
        ("p3_types.yaml:8:11", "typ", "type 'PROTOCL' is not one of SCHEMA, PROTOCOL, RELATIONAL_POST, PROVENANCE, "
                                      "TEMPORAL, CAPABILITY (did you mean 'PROTOCOL'?)"),
        ("p3_types.yaml:13:5", "both", "rule 'both': give exactly one of assert: or check:, not both"),
        ("p3_types.yaml:14:5", "none", "rule 'none': give exactly one of assert: or check: (it has neither)"),
        ("p3_types.yaml:18:14", "targets-str", "targets must be a list, got the string "
                                               "'misinterpretation_of_tool_output'"),
        ("p3_types.yaml:26:13", "assert-int", "assert must be a string, got the number 5 (YAML read this as a "
                                              "non-string: quote it)"),
        # the typo is reported once, at the key (29:5), not also as "neither assert nor check" at the rule (27:5)
        ("p3_types.yaml:29:5", "unknown-key", "unknown field 'asert' (did you mean 'assert'?)"),
        ("p3_types.yaml:30:9", "bad checker", "id 'bad checker': use lower-case words of a-z, 0-9 and _ joined by "
                                              "'.' or '-' (e.g. 'no-refund-talk')"),
    ]
    assert all(f.message.count("\n") == 2 and f.message.endswith("^") for f in found if f.code == "schema")  # carets
    # the rules without schema problems are linted in the same pass (their errors came only after a fix)
    assert {(f.code, f.rule_id) for f in found if f.level == "error" and f.code != "schema"} == \
        {("compile", "p3.bad-checker-args")}
    text = "\n".join(f.message for f in found)
    assert "is not valid under" not in text and "{'id'" not in text and "$.rules" not in text


EXAMPLES_PACK = """pack: e
rules:
  - id: r
    type: PROTOCOL
    check: {semantic: ""}
    examples:
      - name: both
        expect: pass
        trace: {messages: []}
        messages: []
      - expect: fail
include:
  - {pack: x.yaml, severity: {some-rule: fatal}, paramz: {}}
"""


def test_examples_check_and_include_entries_get_plain_messages():
    found = [(f.location, f.message.split("\n")[0]) for f in lint_pack(EXAMPLES_PACK)]
    assert found == [
        ("<rules>:5:24", "check.semantic must not be empty"),
        ("<rules>:9:9", "example 0 ('both'): give exactly one of messages: or trace:, not both"),
        ("<rules>:11:9", "example 1: give exactly one of messages: or trace: (it has neither)"),
        ("<rules>:13:42", "severity 'fatal' for some-rule is not one of info, warning, error, critical"),
        ("<rules>:13:50", "unknown field 'paramz' in include[0] (did you mean 'params'?)"),
    ]


def test_load_reports_the_first_problem_and_counts_the_rest():
    with pytest.raises(RulePackError) as ei:
        load_pack(FRESH / "p3_types.yaml")
    e = ei.value
    assert (e.line, e.column, e.rule_id) == (5, 15, "sev")
    assert e.message == ("schema: severity 'fatal' is not one of info, warning, error, critical (and 8 more "
                         "error(s): `trajaudit rules lint` lists them all)")  # 8 schema + 1 compile error
    with pytest.raises(RulePackError) as ei:
        load_pack(FRESH / "p6_params.yaml")
    assert (ei.value.line, ei.value.column) == (6, 39)
    assert ei.value.message == "schema: severity 'fatal' for variant-count-matches is not one of info, warning, " \
                               "error, critical"


# ---- 12: an include override that breaks a rule is reported at the override -------------------

def test_override_compile_error_points_at_the_override():
    pack = load_pack(FRESH / "p6e.yaml")
    with pytest.raises(RulePackError) as ei:
        compile_rules(pack)
    e = ei.value
    assert e.file.endswith("p6e.yaml") and (e.line, e.column) == (4, 43)
    assert e.rule_id == "example.tau.variant-count-matches"
    assert "params.count_claim = '(unclosed', set here" in e.message
    assert "(used at tau_retail_example.yaml:36:54): in guard: invalid regex" in e.message
    assert e.context.splitlines()[0].strip() == "params: {yes_words: 42, count_claim: '(unclosed'}"
    compile_found = [f for f in lint_pack(FRESH / "p6e.yaml") if f.code == "compile"]
    assert [(f.location.rsplit("/", 1)[-1], f.rule_id) for f in compile_found] == [
        ("p6e.yaml:4:25", "example.tau.explicit-yes-before-write"),
        ("p6e.yaml:4:43", "example.tau.variant-count-matches")]
    assert "params.yes_words = 42, set here, does not suit rule example.tau.explicit-yes-before-write (used at " \
           "tau_retail_example.yaml:95:56): in assert: a regex must be" in compile_found[0].message


def test_own_rule_errors_are_not_moved(tmp_path):
    """A parameter the rule's own pack sets (nobody overrode it) keeps the error at the expression."""
    p = tmp_path / "own.yaml"
    p.write_text("pack: own\nparams: {w: 42}\nrules:\n  - id: r\n    type: PROTOCOL\n    assert: content ~ params.w\n")
    with pytest.raises(RulePackError) as ei:
        compile_rules(load_pack(p))
    assert (ei.value.line, ei.value.column) == (6, 30) and "set here" not in ei.value.message


def test_override_locations_survive_the_pack_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("TRAJAUDIT_CACHE_DIR", str(tmp_path / "cache"))
    from trajaudit.engine.packs import cache as pack_cache

    outer = tmp_path / "outer.yaml"
    outer.write_text(f"pack: outer\ninclude:\n  - pack: {EXAMPLE}\n    params: {{yes_words: '(?i)sure'}}\n")
    cold = pack_cache.load(outer)
    pack_cache.compile_loaded(cold)
    warm = pack_cache.load(outer)
    assert warm.pack == cold.pack == load_pack(outer)
    spec = warm.pack.rule("explicit-yes-before-write")
    assert (spec.field_locs["params.yes_words"].line, spec.field_locs["params.yes_words"].column) == (4, 26)
    assert "engine/packs/messages.py" in code_files()  # its messages are part of what a load produces


# ---- 13, 16: CLI ---------------------------------------------------------------------------

def test_lint_unreadable_pack_exits_2_and_shows_yaml_caret(tmp_path):
    r = CliRunner()
    res = r.invoke(main, ["rules", "lint", str(tmp_path / "nope.yaml")])
    assert res.exit_code == 2
    out = " ".join(res.output.split())  # rich wraps long lines
    assert re.search(r"error: \S*nope\.yaml: cannot read: rule pack '\S*nope\.yaml' not found", out)
    assert "<rules>:1:1" not in res.output
    res = r.invoke(main, ["rules", "lint", str(FRESH / "p1_yaml.yaml")])
    assert res.exit_code == 1
    assert "p1_yaml.yaml:7:13 yaml: YAML syntax error: mapping values are not allowed here\n" \
           "         message: bad indent\n                ^" in res.output


def test_explain_lists_only_the_params_the_rule_uses():
    res = CliRunner().invoke(main, ["rules", "explain", str(EXAMPLE), "variant-count-matches"])
    assert res.exit_code == 0
    (line,) = [x for x in res.output.splitlines() if x.startswith("  params:")]
    assert line == "  params: count_claim"
    res = CliRunner().invoke(main, ["rules", "explain", str(EXAMPLE), "explicit-yes-before-write"])
    assert [x for x in res.output.splitlines() if x.startswith("  params:")] == ["  params: write_tools, yes_words"]


def test_rules_test_k_that_selects_nothing_fails():
    r = CliRunner()
    res = r.invoke(main, ["rules", "test", str(EXAMPLE), "-k", "nomatch"])
    assert res.exit_code == 1
    assert "no example matched -k nomatch: no rule id contains 'nomatch' (8 rule(s))" in res.output
    res = r.invoke(main, ["rules", "test", str(EXAMPLE), "-k", "variant-count"])
    assert res.exit_code == 0 and "2 passed, 0 failed" in res.output


def test_check_warns_about_a_rule_never_evaluated(tmp_path):
    pack = tmp_path / "u.yaml"
    pack.write_text('pack: u\nrules:\n  - id: never\n    type: PROTOCOL\n    guard: step.kind == "agent"\n'
                    '    assert: len(step.json.nope) >= 0\n  - id: fine\n    type: PROTOCOL\n    assert: "true"\n')
    run = tmp_path / "run.json"
    run.write_text(json.dumps({"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "a"},
                                            {"role": "user", "content": "ok"}, {"role": "assistant", "content": "b"}]}))
    res = CliRunner().invoke(main, ["check", str(run), "--rules", str(pack)])
    assert res.exit_code == 1  # a rule that cannot be evaluated fails the gate (--fail-on-unknown error)
    assert "warning: rule u.never could not be evaluated at 2 step(s) where it applied (never pass or fail; " \
           "first reason: evaluation error: len() of a null)" in res.output
    assert "u.fine" not in res.output.split("violation(s)")[-1]


# The load error counted only the schema problems ("and 1 more problem(s)") while `rules lint` reported
# 5 errors: the schema problems hide the compile errors and duplicate ids of the other rules.
HIDING = """pack: bad
version: 1
taxonomy: agentrx
rules:
  - id: r1
    type: PROTOCOL
    guard: step.kind == "agent" and
    assert: true
  - id: r2
    type: NOPE
    assert: 1 / 0 == 1
  - id: r3
    type: PROTOCOL
    guard: false and step.kind == "agent"
    assert: content ~ "(unclosed"
  - id: r3
    type: PROTOCOL
    assert: undefined_name == 1
"""


def test_the_load_error_counts_the_errors_lint_reports_not_only_the_schema_ones(tmp_path):
    pack = tmp_path / "bad1.yaml"
    pack.write_text(HIDING)
    errors = [f.code for f in lint_pack(str(pack)) if f.level == "error"]
    assert sorted(errors) == ["compile", "compile", "pack", "schema", "schema"]
    with pytest.raises(RulePackError) as ei:
        load_pack(pack)
    assert (ei.value.line, ei.value.rule_id) == (8, "r1")
    assert ei.value.message.endswith("(and 4 more error(s): `trajaudit rules lint` lists them all)")
    r = CliRunner().invoke(main, ["check", str(ROOT / "examples" / "data" / "tau_retail_sample.json"), "--rules", str(pack)])
    assert r.exit_code == 2 and "(and 4 more error(s):" in " ".join(r.output.split()), r.output
