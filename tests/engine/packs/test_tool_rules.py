"""SCHEMA rules synthesized from OpenAI function schemas (`rules from-tools`, `check --tools`)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from trajaudit import compile_rules, evaluate, load, load_pack
from trajaudit.checkers.tool_schemas import ToolSchemaError
from trajaudit.cli import main
from trajaudit.engine.packs.tool_rules import rules_from_tools, synthesize_tool_rules
from trajaudit.engine.validation.rule_tests import run_examples

TAU = Path(__file__).resolve().parents[3].parent / "shared" / "data" / "tau_retail"

SCHEMAS = [
    {"type": "function", "function": {"name": "get_order", "parameters": {
        "type": "object", "required": ["order_id"],
        "properties": {"order_id": {"type": "string"}, "count": {"type": "integer"},
                       "tags": {"type": "array", "items": {"type": "string"}},
                       "reason": {"type": "string", "enum": ["a", "b"]}}}}},
    {"name": "ping"},  # bare function object without parameters
]


def _call(name: str, args: str, output: str) -> list[dict]:
    return [{"role": "user", "content": "go"},
            {"role": "assistant", "content": None,
             "tool_calls": [{"id": "c1", "type": "function", "function": {"name": name, "arguments": args}}]},
            {"role": "tool", "tool_call_id": "c1", "name": name, "content": output}]


def _fails(messages: list[dict], schemas=SCHEMAS) -> list[tuple[int, str, str]]:
    rules = compile_rules(rules_from_tools(schemas))
    log = evaluate(load(messages, format="openai"), rules)
    return [(r.step, r.rule_id, r.severity) for r in log.records if r.verdict == "fail"]


def test_tau_tools_pack_shape_and_examples(tau_file):
    tools = json.loads((TAU / "tools.json").read_text())
    tr = synthesize_tool_rules(tools)
    assert tr.skipped == [] and len(tr.tools) == 16
    schemas = tr.pack["params"]["schemas"]
    assert schemas["cancel_pending_order"]["enums"] == {"reason": ["no longer needed", "ordered by mistake"]}
    assert schemas["modify_pending_order_items"]["item_types"] == {"item_ids": ["string"], "new_item_ids": ["string"]}
    assert schemas["find_user_id_by_name_zip"]["required"] == ["first_name", "last_name", "zip"]
    pack = load_pack(tr.pack)
    assert [r.id for r in pack.rules] == [
        "tools.known-tool", "tools.arguments-json", "tools.required-arguments", "tools.argument-types",
        "tools.argument-enums", "tools.no-extra-arguments", "tools.schema-violation-tolerated"]
    assert all(r.type == "SCHEMA" and r.targets == ("invalid_invocation",) for r in pack.rules)
    results = run_examples(compile_rules(pack))
    assert len(results) == 14 and all(r.ok for r in results), [r.detail for r in results if not r.ok]


@pytest.mark.parametrize(("name", "args", "rule"), [
    ("get_ordr", '{"order_id": "#W1"}', "tools.known-tool"),
    ("get_order", '{"order_id": "#W1"', "tools.arguments-json"),
    ("get_order", '{}', "tools.required-arguments"),
    ("get_order", '{"order_id": 7}', "tools.argument-types"),
    ("get_order", '{"order_id": "#W1", "count": 1.5}', "tools.argument-types"),
    ("get_order", '{"order_id": "#W1", "tags": ["x", 2]}', "tools.argument-types"),
    ("get_order", '{"order_id": "#W1", "reason": "c"}', "tools.argument-enums"),
    ("get_order", '{"order_id": "#W1", "color": "red"}', "tools.no-extra-arguments"),
])
def test_each_invocation_error_fails_at_the_calling_step(name, args, rule):
    assert _fails(_call(name, args, "Error: bad request")) == [(1, rule, "error")]


def test_valid_calls_pass_and_tolerated_violations_are_warnings():
    assert _fails(_call("get_order", '{"order_id": "#W1", "count": 2, "tags": ["x"], "reason": "a"}', "{}")) == []
    assert _fails(_call("ping", "{}", "pong")) == []
    # the tool accepted the extra argument: no error, a warning
    assert _fails(_call("get_order", '{"order_id": "#W1", "color": "red"}', '{"ok": 1}')) == [
        (1, "tools.schema-violation-tolerated", "warning")]
    # a failing call corrected by a later successful call of the same tool
    retry = _call("get_order", "{}", "Error: order_id missing") + [
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c2", "type": "function", "function": {"name": "get_order", "arguments": '{"order_id": "#W1"}'}}]},
        {"role": "tool", "tool_call_id": "c2", "name": "get_order", "content": "{}"}]
    assert _fails(retry) == [(1, "tools.schema-violation-tolerated", "warning")]


def test_refs_and_unusual_keywords_are_resolved_or_skipped_and_counted():
    tools = [{"name": "f", "parameters": {
        "type": "object", "$defs": {"Id": {"type": "string"}},
        "properties": {"id": {"$ref": "#/$defs/Id"}, "n": {"anyOf": [{"type": "integer"}, {"type": "null"}]},
                       "x": {"oneOf": [{"type": "string", "pattern": "a"}, {"type": "object"}]},
                       "y": {"$ref": "other.json#/Y"}, "z": {"type": "decimal"}}}},
             {"name": "g", "parameters": {"type": "array"}}]
    tr = synthesize_tool_rules(tools)
    f = tr.pack["params"]["schemas"]["f"]
    assert f["types"] == {"id": ["string"], "n": ["null", "number"]} and f["integers"] == ["n"]
    assert tr.skipped == ["f.x: oneOf not checked", "f.y: unresolvable $ref other.json#/Y",
                          "f.z: unusual 'type' 'decimal' not checked",
                          "g: parameters is not an object schema; only the tool name and JSON are checked"]
    assert _fails(_call("f", '{"id": 3}', "Error"), tools) == [(1, "tools.argument-types", "error")]
    assert _fails(_call("g", '{"anything": 1}', "ok"), tools) == []


@pytest.mark.parametrize(("bad", "message"), [
    ({"name": "f"}, "must be a JSON list"),
    ([], "the tool list is empty"),
    (["f"], "element 0: not a function schema"),
    ([{"function": {"description": "no name"}}], "element 0: not a function schema"),
    ([{"name": "f"}, {"name": "f"}], "element 1: duplicate tool name 'f'"),
])
def test_bad_tool_lists_raise_documented_errors(bad, message):
    with pytest.raises(ToolSchemaError, match=message):
        synthesize_tool_rules(bad)


def test_no_schema_violation_in_the_29_tau_runs(tau_runs):
    tools = json.loads((TAU / "tools.json").read_text())
    rules = compile_rules(rules_from_tools(tools))
    verdicts = [r.verdict for t in tau_runs.values() for r in evaluate(t, rules).records]
    calls = sum(len(s.tool_calls) for t in tau_runs.values() for s in t.steps)
    assert calls == 284 and verdicts == ["pass"] * (7 * calls)  # every rule visits every call


def test_cli_from_tools_check_tools_and_list(tmp_path, tau_file):
    r = CliRunner()
    out = tmp_path / "pack.yaml"
    res = r.invoke(main, ["rules", "from-tools", str(TAU / "tools.json"), "-o", str(out)])
    assert res.exit_code == 0, res.output
    assert "7 rule(s) for 16 tool(s)" in res.stderr
    assert yaml.safe_load(out.read_text())["params"]["tool_names"][0] == "calculate"
    assert r.invoke(main, ["rules", "test", str(out)]).exit_code == 0
    res = r.invoke(main, ["check", str(tau_file), "--tools", str(TAU / "tools.json"), "--no-default-packs"])
    assert res.exit_code == 0 and "29 run(s), 7 rule(s): 0 violation(s)" in res.stderr
    bad_run = tmp_path / "bad.json"
    bad_run.write_text(json.dumps(_call("cancel_pending_order", '{"order_id": "#W1", "reason": "too slow"}',
                                        "Error: invalid reason")))
    res = r.invoke(main, ["check", str(bad_run), "--tools", str(TAU / "tools.json"), "--format", "json",
                          "--no-default-packs"])
    assert res.exit_code == 1
    (rec,) = [x for x in json.loads(res.stdout)[0]["records"] if x["verdict"] == "fail"]
    assert rec["rule_id"] == "tools.argument-enums" and rec["step"] == 1 and "['reason']" not in rec["message"]
    assert rec["message"].startswith('cancel_pending_order: value outside the allowed set for ["reason"]')
    junk = tmp_path / "tools.json"
    junk.write_text('{"name": "f"}')
    res = r.invoke(main, ["rules", "from-tools", str(junk)])
    assert res.exit_code == 2 and "must be a JSON list of function schemas" in res.stderr
    assert "Traceback" not in res.output
    res = r.invoke(main, ["check", str(tau_file), "--no-default-packs"])  # no rule at all: a usage error
    assert res.exit_code == 2 and "--rules PACK or --tools" in res.stderr
    res = r.invoke(main, ["rules", "list"])
    assert res.exit_code == 0 and "tau_retail" in res.stdout and "generic.provenance" in res.stdout
    assert "taxonomies" not in res.stdout
    res = r.invoke(main, ["rules", "list", "tau_retail"])
    assert res.exit_code == 0 and "tau_retail.cancel-is-whole-order" in res.stdout and "RELATIONAL_POST" in res.stdout


_TAU_TOOLS = json.loads((Path(__file__).resolve().parents[3] / "examples" / "tools" / "tau_retail_tools.json").read_text())


@pytest.mark.parametrize("name, arguments", [
    ("cancel_pending_order", '{"order_id": 5}'),
    ("cancel_pending_order", '{"order_id": "#W1", "reason": "ordered by mistake"}'),
    ("cancel_pending_order", '{"order_id": "#W1", "reason": "bored"}'),
    ("cancel_pending_order", '{"order_id": "#W1", "reason": "ordered by mistake", "note": 1}'),
    ("cancel_pending_order", '{"order_id": '),
    ("cancel_pending_order", '[1]'),
    ("modify_pending_order_items", '{"order_id": "#W1", "item_ids": [1, "2"], "new_item_ids": ["3"], '
                                   '"payment_method_id": "p"}'),
    ("calculate", '{"expression": null}'),
])
def test_argument_problems_are_the_tool_rules_failures_when_nothing_excuses(name, arguments):
    """guard.tool-arguments (the check before the call runs) names the tools.* rules that fail on the
    same call when its output is an error and no retry follows (nothing excuses it)."""
    from trajaudit.engine.packs.tool_rules import argument_problems, describe_tools

    t = load({"messages": [
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": name, "arguments": arguments}}]},
        {"role": "tool", "tool_call_id": "c1", "name": name, "content": "Error: invalid arguments"}]})
    log = evaluate(t, compile_rules(rules_from_tools(_TAU_TOOLS)))
    failed = {r.rule_id.removeprefix("tools.") for r in log.records if r.verdict == "fail"}
    call = t.steps[0].tool_calls[0]
    problems = argument_problems(describe_tools(_TAU_TOOLS)[name], call.arguments, call.arguments_error)
    assert {p.split(":")[0] for p in problems} == failed
