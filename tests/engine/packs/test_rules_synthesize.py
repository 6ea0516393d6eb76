"""Constraint synthesis checks (AgentRx §3.1) and `trajaudit rules synthesize`: rules an LLM writes are
data; each is parsed, linted and compiled, rejected with the reason, repaired once; nothing runs."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner
from llm_server import evidence_of, schema_name

from trajaudit.cli import main
from trajaudit.engine.packs.compile import compile_rules
from trajaudit.engine.packs.lint import lint_pack
from trajaudit.engine.packs.pack import load_pack
from trajaudit.engine.packs.synthesis_check import check_rule, check_rules, drop_conflicts
from trajaudit.engine.taxonomy import load_taxonomy
from trajaudit.engine.validation.rule_tests import run_examples

TAX = load_taxonomy("agentrx")
AUTH = {"id": "authenticate-first", "title": "authenticate before reading user data", "type": "TEMPORAL",
        "severity": "error", "targets": ["Instruction Adherence Failure"],
        "guard": 'call.name in ["get_user_details", "get_order_details"]',
        "assert": 'exists a in earlier where a.tool in ["find_user_id_by_email", "find_user_id_by_name_zip"]',
        "message": "{call.name} before authentication", "source": "authenticate the user identity first",
        "examples": [
            {"name": "no auth", "expect": "fail", "messages": [
                {"role": "assistant", "content": None, "tool_calls": [{"id": "c1", "type": "function", "function": {
                    "name": "get_order_details", "arguments": '{"order_id": "#W1"}'}}]}]}]}


def test_check_rule_accepts_a_good_rule_and_normalizes_it():
    rule, rej = check_rule(AUTH, pack="p", taxonomy=TAX)
    assert rej is None
    assert rule["targets"] == ["instruction_adherence_failure"]  # a spelling of the category, normalized
    assert rule["metadata"] == {"source": "authenticate the user identity first"} and "source" not in rule
    assert list(rule)[:4] == ["id", "title", "type", "severity"]


@pytest.mark.parametrize(("change", "stage", "needle"), [
    ({"assert": "__import__('os').system('touch x')"}, "lint", "compile"),
    ({"assert": "lambda s: s.kind == 'user'"}, "lint", "compile"),
    ({"assert": '[c for c in calls(earlier) if c.name == "x"]'}, "lint", "compile"),
    ({"assert": "call.name.startswith('get')"}, "lint", "compile"),
    ({"guard": 'step.kind == "agent" and step.kind == "tool"'}, "lint", "unsatisfiable-guard"),
    ({"assert": "true"}, "lint", "tautology"),
    ({"rationale": "because"}, "parse", "unknown field 'rationale'"),
    ({"type": "POLICY"}, "parse", "schema"),
    ({"targets": ["made_up"]}, "targets", "unknown target(s) 'made_up'"),
    ({"assert": "not (content ~ /(\\w+\\s?)*$/)"}, "regex", "catastrophic backtracking"),
    ({"guard": 'content ~ "(a+)+b"'}, "regex", "'(a+)+b' repeats a group that itself repeats"),
    ({"examples": [{"name": "wrongly expected", "expect": "pass", "messages": AUTH["examples"][0]["messages"]}]},
     "examples", "expected pass, got fail@0"),
])
def test_bad_rules_are_rejected_with_the_reason(change, stage, needle):
    rule, rej = check_rule({**AUTH, **change}, pack="p", taxonomy=TAX)
    assert rule is None and rej.stage == stage and needle in rej.reason, rej.reason


def test_unambiguous_repetition_is_accepted():
    rule, rej = check_rule({**AUTH, "guard": 'step.kind == "agent"', "assert": 'not (content ~ /([a-z]+\\.)+com/)',
                            "examples": []}, pack="p", taxonomy=TAX)
    assert rej is None and rule["assert"] == 'not (content ~ /([a-z]+\\.)+com/)'


def test_text_is_never_a_rule_duplicates_and_conflicts_are_dropped():
    out = check_rules(["rules:\n- id: x", AUTH, dict(AUTH, id="again")], pack="p", taxonomy=TAX)
    assert [r["id"] for r in out.accepted] == ["authenticate-first"]
    assert [(r.stage, r.rule_id) for r in out.rejected] == [("shape", "?"), ("duplicate", "again")]
    long = {"id": "long", "title": "t", "type": "PROTOCOL", "guard": 'step.kind == "agent"', "assert": "len(content) > 10"}
    short = {"id": "short", "title": "t", "type": "PROTOCOL", "guard": 'step.kind == "agent"', "assert": "len(content) < 5"}
    kept, rejected = drop_conflicts([long, short], pack="p", taxonomy="agentrx")
    assert [r["id"] for r in kept] == ["long"] and rejected[0].stage == "conflict" and "contradict" in rejected[0].reason


def _model_rules(marker):
    return [
        AUTH,
        {"id": "item-lists-same-length", "title": "!!python/object/apply:os.system ['touch " + str(marker) + "']",
         "type": "SCHEMA", "targets": ["invalid_invocation"],
         "guard": 'call.name in ["modify_pending_order_items", "exchange_delivered_order_items"]',
         "assert": "len(call.args.item_ids) == len(call.args.new_item_ids)"},
        {"id": "payload", "title": "x", "type": "PROTOCOL", "assert": f"__import__('os').system('touch {marker}')"},
        {"id": "explicit-yes", "title": "writes follow a yes", "type": "PROTOCOL", "rationale": "policy",
         "guard": 'call.name == "cancel_pending_order"',
         "let": {"answer": 'latest u in earlier where u.kind == "user"'},
         "assert": "answer != null and answer.content ~ /\\byes\\b/i"},
        {"id": "short-replies", "title": "agents answer briefly", "type": "PROTOCOL", "guard": 'step.kind == "agent"',
         "assert": "len(content) < 2000"},
    ]


def test_cli_writes_a_reviewable_pack_that_loads_lints_and_runs(llm_server, tau_file, tmp_path):
    marker = tmp_path / "pwned"
    policy, tools = tau_file.parent / "policy.md", tau_file.parent / "tools.json"

    def respond(req):
        name = schema_name(req)
        if name == "rule-synthesis-global":
            return {"rules": _model_rules(marker)}
        if name == "rule-synthesis-repair":
            fixed = []
            for item in evidence_of(req)["rejected"]:
                rule = {k: v for k, v in item["rule"].items() if k != "rationale"}
                fixed.append(rule)  # the payload comes back unchanged
            return {"rules": fixed}
        if name == "rule-reflection":
            return {"reviews": [{"id": r["id"], "keep": r["id"] != "short-replies",
                                 "reason": "the policy sets no length limit" if r["id"] == "short-replies" else "ok"}
                                for r in evidence_of(req)["rules"]]}
        raise AssertionError(name)

    llm_server.responder = respond
    out = tmp_path / "pack.yaml"
    args = ["rules", "synthesize", "--policy", str(policy), "--tools", str(tools), "-o", str(out), "--reflect",
            "--base-url", llm_server.url, "--model", "scripted-model", "--cache", str(tmp_path / "c.sqlite3")]
    r = CliRunner().invoke(main, args, catch_exceptions=False)
    assert r.exit_code == 0, r.output
    assert llm_server.calls == 3 and [schema_name(q) for q in llm_server.requests] == [
        "rule-synthesis-global", "rule-synthesis-repair", "rule-reflection"]
    sent = evidence_of(llm_server.requests[0])
    assert sent["policy"] == policy.read_text() and len(sent["tools"]) == 16
    assert {t["name"] for t in sent["tools"]} >= {"cancel_pending_order", "find_user_id_by_email"}
    text = out.read_text()
    assert text.startswith("# SYNTHESIZED by `trajaudit rules synthesize` (AgentRx §3.1 global constraints).")
    assert "# model: scripted-model\n" in text and "# tools: tools.json (16 tools)\n" in text
    assert f"# policy: policy.md ({len(policy.read_text())} chars, sha256 " in text
    assert "3 kept (1 after one repair round), 2 rejected (1 by the reflection pass)" in text
    assert "# - payload [lint, 2 attempt(s)]:\n#     compile [synthesized.policy.payload]: in assert: unexpected '('" in text
    assert "(unchanged after one repair round)" in text
    assert "# - short-replies [reflection, 1 attempt(s)]:\n#     reflection: the policy sets no length limit" in text
    assert "#     assert: __import__('os').system(" in text  # the rejected rule, commented out for the reviewer
    pack = load_pack(str(out))
    assert [x.id for x in pack.rules] == ["synthesized.policy.authenticate-first",
                                          "synthesized.policy.item-lists-same-length", "synthesized.policy.explicit-yes"]
    assert pack.rules[1].title.startswith("!!python/object/apply:os.system")  # a string, never constructed
    assert pack.metadata["synthesized_by"] == "scripted-model"
    assert [f for f in lint_pack(str(out)) if f.level == "error"] == []
    assert all(x.ok for x in run_examples(compile_rules(pack)))
    assert not marker.exists()
    # the pack is usable as is
    r = CliRunner().invoke(main, ["check", str(tau_file), "--rules", str(out), "--format", "json", "-o",
                                  str(tmp_path / "log.json")])
    assert r.exit_code in (0, 1), r.output
    logs = json.loads((tmp_path / "log.json").read_text())
    assert any(rec["rule_id"].startswith("synthesized.policy.") for lg in logs for rec in lg["records"])
    # again: every answer from the cache, the same file
    llm_server.reset_counts()
    out2 = tmp_path / "pack2.yaml"
    r = CliRunner().invoke(main, args[:7] + [str(out2)] + args[8:], catch_exceptions=False)
    assert r.exit_code == 0 and llm_server.calls == 0 and out2.read_text() == text
    assert "(0 call(s), 3 from the cache)" in r.output


def test_cli_without_endpoint_or_inputs_exits_2(tau_file, tmp_path, monkeypatch):
    for var in ("TRAJAUDIT_BASE_URL", "TRAJAUDIT_MODEL", "TRAJAUDIT_LLM_CONFIG"):
        monkeypatch.delenv(var, raising=False)
    r = CliRunner().invoke(main, ["rules", "synthesize", "--policy", str(tau_file.parent / "policy.md"),
                                  "-o", str(tmp_path / "p.yaml")])
    assert r.exit_code == 2 and "no LLM endpoint configured" in r.output and "Traceback" not in r.output
    r = CliRunner().invoke(main, ["rules", "synthesize", "-o", str(tmp_path / "p.yaml")])
    assert r.exit_code == 2 and "give --policy, --tools, or both" in r.output
