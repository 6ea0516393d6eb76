"""Rule evaluation on the real tau-retail runs: verdicts, evidence addresses, index, budget, errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from trajaudit import compile_rules, default_checkers, evaluate, load, load_pack, register_checker
from trajaudit.checkers.registry import CheckResult
from trajaudit.engine.config import AuditConfig
from trajaudit.engine.dsl.runtime import TrajContext
from trajaudit.engine.schema import schema_errors
from trajaudit.engine.validation.rule_eval import candidates
from trajaudit.engine.validation_log import Evidence

ROOT = Path(__file__).resolve().parents[3]
TAU = ROOT.parent / "shared" / "data" / "tau_retail"

EXAMPLE = ROOT / "examples" / "rules" / "tau_retail_example.yaml"


@pytest.fixture(scope="module")
def example_rules():
    return {r.id.split(".")[-1]: r for r in compile_rules(load_pack(EXAMPLE))}


def _one(rules, rid):
    return [rules[rid]]


def test_variant_count_fails_on_tau_task_2_at_step_6_with_evidence_at_5(tau_runs, example_rules):
    log = evaluate(tau_runs["2"], _one(example_rules, "variant-count-matches"))
    fails = log.violations()
    assert [(r.step, r.rule_id) for r in fails] == [(6, "example.tau.variant-count-matches")]
    rec = fails[0]
    assert rec.bindings["claimed"] == 11 and rec.bindings["actual"] == 10
    assert rec.bindings["out"]["address"] == "steps.5"
    addrs = {e.address: e for e in rec.evidence}
    assert addrs["steps.5.content.variants"].value == 10
    assert "steps.5" in addrs
    assert any(e.step == 5 for e in rec.evidence) and rec.message.startswith("claims 11 available variants")
    assert rec.targets == ("misinterpretation_of_tool_output",) and rec.rule_type == "RELATIONAL_POST"
    assert not schema_errors("validation_log", log.to_dict())


def test_real_policy_violations(tau_runs, example_rules):
    # tau 34: modify_pending_order_items with 3 item_ids and an empty new_item_ids list
    log = evaluate(tau_runs["34"], _one(example_rules, "item-lists-same-length"))
    (rec,) = log.violations()
    assert rec.step == 16
    ev = {e.address: e.value for e in rec.evidence}
    assert ev["steps.16.tool_calls.0.arguments.item_ids"] == ["1340995114", "7493556126", "8323284863"]
    assert ev["steps.16.tool_calls.0.arguments.new_item_ids"] == []
    # tau 20: an exchange on an order whose latest details (step 13) say "processed"
    log = evaluate(tau_runs["20"], _one(example_rules, "order-status-allows-action"))
    first = log.violations()[0]
    assert first.step == 48 and first.bindings["needed"] == "delivered"
    assert first.bindings["details"]["address"] == "steps.13"
    assert {"address": "steps.13.content.status", "value": "processed"}.items() <= \
        {k: v for e in first.evidence if e.address == "steps.13.content.status" for k, v in e.to_dict().items()}.items()
    # tau 12: a return issued right after a user turn that holds no explicit yes
    log = evaluate(tau_runs["12"], _one(example_rules, "explicit-yes-before-write"))
    assert [r.step for r in log.violations()] == [18]
    assert log.violations()[0].bindings["answer"]["address"] == "steps.15"


def test_index_visits_only_matching_calls(tau_runs, example_rules):
    t = tau_runs["20"]
    tc = TrajContext(t)
    rule = example_rules["item-lists-same-length"]
    units = candidates(rule, tc)
    expected = [(s.index, j) for s in t.steps for j, c in enumerate(s.tool_calls)
                if c.name in ("modify_pending_order_items", "exchange_delivered_order_items")]
    assert [(k, c.position) for k, c in units] == expected and len(units) < len(t.steps)
    assert candidates(example_rules["tool-output-error"], tc) == [(s.index, None) for s in t.steps if s.kind == "tool"]


def test_semantic_rule_is_unknown_without_llm(tau_runs, example_rules):
    log = evaluate(tau_runs["2"], _one(example_rules, "final-answer-resolves-request"))
    (rec,) = log.records
    last_agent = max(s.index for s in tau_runs["2"].steps if s.kind == "agent")
    assert (rec.step, rec.verdict, rec.reason, rec.origin) == (last_agent, "unknown", "no LLM configured", "semantic")


def test_budget_gives_unknown_and_incomplete(tau_runs, example_rules):
    rule = example_rules["authenticate-before-user-data"]
    log = evaluate(tau_runs["20"], [rule], config=AuditConfig(rule_budget=40))
    unknown = [r for r in log.records if r.verdict == "unknown"]
    assert len(unknown) == 1 and "budget of 40 operations exceeded" in unknown[0].reason
    assert log.incomplete and log.incomplete[0].startswith("example.tau.authenticate-before-user-data:")
    full = evaluate(tau_runs["20"], [rule])
    assert not full.incomplete and all(r.verdict == "pass" for r in full.records)


PACK_WITH_RAISING_RULE = """
pack: t
rules:
  - id: json-size
    type: PROTOCOL
    guard: step.kind == "tool"
    assert: len(output.json) >= 0
  - id: has-content
    type: PROTOCOL
    guard: step.kind == "tool"
    assert: len(content) > 0
"""


def test_a_raising_rule_gives_unknown_and_others_still_run(tau_runs):
    rules = compile_rules(load_pack(PACK_WITH_RAISING_RULE))
    t = tau_runs["2"]
    log = evaluate(t, rules)
    plain = [s.index for s in t.steps if s.kind == "tool" and not s.content.lstrip().startswith(("{", "["))]
    bad = [r for r in log.records if r.rule_id == "t.json-size" and r.verdict == "unknown"]
    assert [r.step for r in bad] == plain and plain  # e.g. the user id output "yusuf_rossi_9620"
    assert "len() of a null" in bad[0].reason
    assert sum(1 for r in log.records if r.rule_id == "t.has-content" and r.verdict == "pass") == \
        sum(1 for s in t.steps if s.kind == "tool")


def test_registered_and_shipped_checkers(tau_runs):
    reg = default_checkers()
    seen = []

    def tool_is_known(ctx, names):
        seen.append(ctx.call.name)
        ok = ctx.call.name in names
        return CheckResult("pass" if ok else "fail", (Evidence(ctx.call_address + ".name", ctx.call.name),))

    register_checker(reg, "tool_is_known", tool_is_known, args_schema={
        "type": "object", "required": ["names"], "properties": {"names": {"type": "array"}}}, per_call=True)
    pack = load_pack("""
pack: c
rules:
  - id: known
    type: SCHEMA
    check: {checker: tool_is_known, args: {names: [get_product_details, list_all_product_types]}}
  - id: count
    type: RELATIONAL_POST
    guard: step.kind == "agent"
    check:
      checker: list_count_matches_claim
      args: {tool: get_product_details, list: "values(variants)[?available]", claim: '(\\d+) available'}
  - id: schema
    type: SCHEMA
    check: {checker: tool_args_schema}
""")
    rules = compile_rules(pack, checkers=reg)
    tools = json.loads((TAU / "tools.json").read_text())
    log = evaluate(tau_runs["2"], rules, tools=tools)
    known = [r for r in log.records if r.rule_id == "c.known"]
    assert [r.verdict for r in known][:2] == ["pass", "pass"] and "fail" in [r.verdict for r in known]
    (count,) = [r for r in log.records if r.rule_id == "c.count"]
    assert (count.step, count.verdict, count.bindings["claimed"], count.bindings["actual"]) == (6, "fail", 11, 10)
    assert count.evidence[0].address == "steps.6.content[21:33]" and count.evidence[1].address == "steps.5.content"
    assert all(r.verdict == "pass" for r in log.records if r.rule_id == "c.schema")
    bad_call = load([{"role": "assistant", "content": None, "tool_calls": [{"id": "1", "type": "function", "function": {
        "name": "get_order_details", "arguments": '{"order_id": 7}'}}]}], format="openai")
    (rec,) = [r for r in evaluate(bad_call, rules, tools=tools).records if r.rule_id == "c.schema"]
    assert rec.verdict == "fail" and rec.evidence[-1].address == "steps.0.tool_calls.0.arguments.order_id"
    no_tools = evaluate(bad_call, rules)
    assert [r.verdict for r in no_tools.records if r.rule_id == "c.schema"] == ["unknown"]


def test_records_are_ordered_and_skips_counted(tau_runs, example_rules):
    rules = list(example_rules.values())
    t = tau_runs["20"]
    log = evaluate(t, rules)
    steps = [r.step for r in log.records]
    assert steps == sorted(steps)
    s = log.summary()
    assert s["verdicts"]["skip"] > 0 and s["records"] == len(log.records)


def test_a_configured_oracle_decides_semantic_rules(tau_runs, example_rules):
    from trajaudit.checkers.semantic import SemanticAnswer

    class Scripted:
        def __init__(self):
            self.calls = []

        def judge(self, predicate, trajectory, step, bindings):
            self.calls.append((predicate, step.index))
            return SemanticAnswer("fail", (f"steps.{step.index}.content",), "the request was not resolved")

    oracle = Scripted()
    log = evaluate(tau_runs["2"], _one(example_rules, "final-answer-resolves-request"), oracle=oracle)
    (rec,) = log.records
    assert oracle.calls == [("The assistant's last message resolves what the user asked for, without inventing "
                             "facts.", rec.step)]
    assert (rec.verdict, rec.message, rec.origin) == ("fail", "the request was not resolved", "semantic")
    assert rec.evidence[-1].address == f"steps.{rec.step}.content"
