"""The shipped packs on real runs: tau-retail policy cases, generic failure patterns, Who&When."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from trajaudit import compile_rules, evaluate, load_pack
from trajaudit.cli import main
from trajaudit.engine.packs.pack import shipped_packs
from trajaudit.engine.validation.rule_tests import run_examples

SHIPPED = ["generic", "generic.protocol", "generic.system", "generic.guardrails", "generic.capability",
           "generic.provenance", "tau_retail"]


@pytest.fixture(scope="module")
def tau_rules():
    """What the audit pipeline applies to a retail run: the generic packs and the policy pack (whose
    explicit-yes-before-write supersedes the generic confirmation-before-write)."""
    from trajaudit.engine.packs.selection import load_rules

    rules = load_rules(("generic", "tau_retail"), None)
    assert "generic.protocol.confirmation-before-write" not in {r.id for r in rules}
    return rules


@pytest.fixture(scope="module")
def tau_logs(tau_runs, tau_rules):
    """Validation logs of the tau_retail pack on all 29 runs, by run id (evaluated once)."""
    return {i: evaluate(t, tau_rules) for i, t in tau_runs.items()}


@pytest.fixture(scope="module")
def generic_rules():
    return compile_rules(load_pack("generic"))


def failing(log, severity=("error", "critical")):
    return [(r.step, r.rule_id) for r in log.records if r.verdict == "fail" and r.severity in severity]


def record(log, step, rule_id):
    (rec,) = [r for r in log.records if r.step == step and r.rule_id == rule_id]
    return rec


def test_shipped_packs_load_by_short_name_and_every_example_passes():
    assert set(SHIPPED) <= set(shipped_packs())
    for name in SHIPPED:
        pack = load_pack(name)
        for spec in pack.rules:
            assert spec.targets and spec.metadata.get("source"), spec.id
            if not spec.disabled:
                assert {e["expect"] for e in spec.examples} & {"fail", "skip"}, spec.id
    results = run_examples(compile_rules(load_pack("generic")) + compile_rules(load_pack("tau_retail")))
    assert len(results) == 129 and [r.detail for r in results if not r.ok] == []
    assert load_pack("tau_retail").metadata["applies_to_tools"][0] == "calculate"


def test_count_claim_contradicting_available_variants(tau_logs):
    rec = record(tau_logs["2"], 6, "tau_retail.available-count-matches")
    assert rec.verdict == "fail" and rec.targets == ("misinterpretation_of_tool_output",)
    assert rec.bindings["claimed"] == 11 and rec.bindings["actual"] == 10
    assert "steps.5" in [e.address for e in rec.evidence]


def test_exchange_on_a_pending_order(tau_logs):
    log = tau_logs["74"]
    rec = record(log, 20, "tau_retail.order-status-allows-action")
    assert rec.verdict == "fail" and "whose latest status is pending (steps.11); it must be delivered" in rec.message
    assert failing(log)[0] == (20, "tau_retail.order-status-allows-action")


def test_address_change_after_items_were_modified(tau_logs):
    log = tau_logs["105"]
    rec = record(log, 42, "tau_retail.order-status-allows-action")
    assert rec.verdict == "fail" and rec.bindings["details"]["address"] == "steps.39"
    assert "pending (item modified)" in rec.message
    assert min(s for s, _ in failing(log)) == 42


def test_modify_with_mismatched_item_lists(tau_logs):
    log = tau_logs["34"]
    rec = record(log, 16, "tau_retail.item-lists-paired")
    assert rec.verdict == "fail" and rec.targets == ("invalid_invocation",)
    assert rec.message.startswith("modify_pending_order_items: 3 item_ids but 0 new_item_ids")
    assert failing(log) == [(16, "tau_retail.item-lists-paired"), (20, "tau_retail.new-items-differ")]


def test_write_without_a_preceding_explicit_confirmation(tau_logs):
    log = tau_logs["12"]
    rec = record(log, 18, "tau_retail.explicit-yes-before-write")
    assert rec.verdict == "fail" and rec.bindings["answer"]["address"] == "steps.15"
    # the same rule passes where the user said yes right before the write
    assert record(tau_logs["2"], 28, "tau_retail.explicit-yes-before-write").verdict == "pass"
    # the agent asked for confirmation and got an option instead of a yes: a warning, not an error
    log105 = tau_logs["105"]
    assert record(log105, 28, "tau_retail.explicit-yes-before-write").verdict == "pass"
    warn = record(log105, 28, "tau_retail.implicit-confirmation")
    assert warn.verdict == "fail" and warn.severity == "warning"


def test_item_modification_before_a_requested_address_change(tau_logs):
    for run, step in (("72", 20), ("41", 16), ("98", 20)):
        rec = record(tau_logs[run], step, "tau_retail.other-changes-before-item-modification")
        assert rec.verdict == "fail" and rec.targets == ("intent_plan_misalignment",), run
    # the address was changed first: passes
    rec = record(tau_logs["71"], 26, "tau_retail.other-changes-before-item-modification")
    assert rec.verdict == "pass"


def test_whole_order_cancelled_for_one_item(tau_logs):
    rec = record(tau_logs["31"], 30, "tau_retail.cancel-is-whole-order")
    assert rec.verdict == "fail" and rec.bindings["missing"] == ["kettle"]
    # the same order, when the user asked to cancel both of its items
    assert record(tau_logs["32"], 30, "tau_retail.cancel-is-whole-order").verdict == "pass"


def test_transfer_before_attempting_the_requested_return(tau_logs):
    rec = record(tau_logs["47"], 18, "tau_retail.transfer-only-out-of-scope")
    assert rec.verdict == "fail" and rec.targets[0] == "intent_not_supported"
    assert record(tau_logs["12"], 24, "tau_retail.transfer-only-out-of-scope").verdict == "pass"


def test_recovered_status_violation_is_not_an_error(tau_logs):
    # run 98: an exchange on a pending order fails, then the same items are modified successfully
    log = tau_logs["98"]
    assert record(log, 14, "tau_retail.order-status-allows-action").verdict == "pass"
    assert failing(log)[0] == (20, "tau_retail.other-changes-before-item-modification")


def test_recall_at_the_gold_step_on_the_29_tau_runs(tau_logs, tau_gold):
    hits, earliest, errors = [], [], 0
    for g in tau_gold:
        root = str(g["root_cause"]["failure_id"])
        step = next(f["step_number"] for f in g["failures"] if str(f["failure_id"]) == root) - 1
        fails = failing(tau_logs[str(g["trajectory_id"])])
        errors += len(fails)
        hits += [str(g["trajectory_id"])] if any(s == step for s, _ in fails) else []
        earliest += [str(g["trajectory_id"])] if fails and min(s for s, _ in fails) == step else []
    assert sorted(hits, key=int) == ["2", "3", "4", "12", "20", "28", "31", "34", "38", "41", "47", "72", "74",
                                     "80", "98", "104", "105"]
    assert earliest == hits or sorted(earliest, key=int) == sorted(hits, key=int)
    assert errors == 29


def test_generic_rules_on_tau_runs(tau_runs, generic_rules):
    rec = record(evaluate(tau_runs["20"], compile_rules(load_pack("tau_retail"))), 20, "tau_retail.status-claim-matches")
    assert rec.verdict == "fail" and "Delivered Orders (#W4967593" in rec.message and "processed" in rec.message
    assert not [r for r in generic_rules if "status" in r.id and "claim" in r.id]  # no order statuses in generic
    rec = record(evaluate(tau_runs["80"], generic_rules), 25, "generic.protocol.run-ends-on-open-request")
    assert rec.verdict == "fail" and rec.targets == ("system_failure",)
    rec = record(evaluate(tau_runs["105"], generic_rules), 42, "generic.protocol.run-ends-after-failed-call")
    assert rec.verdict == "fail" and "steps.43" in rec.message


def test_generic_packs_on_who_and_when(ww_runs, generic_rules):
    logs = {i: evaluate(t, generic_rules) for i, t in ww_runs.items()}
    assert len(logs) == 126
    assert not [r for lg in logs.values() for r in lg.records if r.verdict == "unknown"]
    assert not [x for lg in logs.values() for x in lg.incomplete]
    # a pasted CAPTCHA page (the labelled mistake step of run 55)
    rec = record(logs["55"], 5, "generic.guardrails.access-blocked")
    assert rec.verdict == "fail" and rec.targets == ("guardrails_triggered",)
    # curl on a placeholder host: placeholder value and DNS failure at the step that wrote the command
    assert record(logs["83"], 8, "generic.provenance.no-placeholder-values").bindings["invented"] == ["<URL>"]
    assert record(logs["83"], 8, "generic.system.tool-system-error").verdict == "fail"
    # a timeout that later code runs overcame is only a warning
    rec = record(logs["86"], 0, "generic.system.tool-system-error-recovered")
    assert rec.verdict == "fail" and rec.severity == "warning"
    assert record(logs["86"], 0, "generic.system.tool-system-error").verdict == "pass"


def test_policy_pack_on_another_domain_is_skipped_not_failed(ww_runs, tau_rules):
    own = [r for r in tau_rules if r.id.startswith("tau_retail.")]
    log = evaluate(ww_runs["1"], own)
    assert log.records == () or all(r.verdict != "fail" for r in log.records)
    assert log.skipped == len(own) * len(ww_runs["1"].steps)


def test_parameters_and_switches_are_overridable(tau_runs):
    # a closing phrase added by parameter: run 80's last turn now counts as a normal end
    rules = compile_rules(load_pack("generic.protocol", params={"closing": "(?i)all good"}))
    log = evaluate(tau_runs["80"], rules)
    assert record(log, 25, "generic.protocol.run-ends-on-open-request").verdict == "pass"
    # one-action-per-turn is off in generic (the retail policy has its own rule)
    assert load_pack("generic").rule("one-action-per-turn").disabled
    on = load_pack("pack: p\ninclude: [generic.protocol]\noverrides:\n"
                   "  generic.protocol.one-action-per-turn: {disabled: false}\nrules: []\n")
    assert not on.rule("one-action-per-turn").disabled
    custom = load_pack("pack: mine\ninclude: [generic.protocol]\noverrides:\n"
                       "  generic.protocol.run-ends-after-failed-call: {severity: warning}\nrules: []\n")
    assert custom.rule("run-ends-after-failed-call").severity == "warning"


def test_the_override_example_in_the_docs_loads():
    import re
    from pathlib import Path

    text = (Path(__file__).resolve().parents[3] / "docs" / "rule_packs.md").read_text(encoding="utf-8")
    pack = load_pack(re.search(r"```yaml\n(.*?)```", text, re.S).group(1))
    assert not pack.rule("one-action-per-turn").disabled and pack.rule("tool-traceback").disabled
    assert pack.rule("claim-values-grounded").severity == "info"
    assert "moderation" in pack.rule("content-policy-refusal").params["content_policy"]
    assert len(compile_rules(pack)) == 23


GENERIC_CONFIRM = "generic.protocol.confirmation-before-write"


def test_generic_confirmation_rule_applies_where_the_instructions_require_it(tau_runs, generic_rules, ww_runs):
    """Without a domain pack (an unseen domain), the retail policy's sentence in the system prompt is
    enough: run 12's return without any confirmation fails at its gold step 18; earlier writes of
    other runs that followed a yes pass; no Who&When run states such a policy (the guard never holds)."""
    rec = record(evaluate(tau_runs["12"], generic_rules), 18, GENERIC_CONFIRM)
    assert rec.verdict == "fail" and rec.targets == ("instruction_adherence_failure",)
    assert "return_delivered_order_items" in rec.message and "(steps.15)" in rec.message
    assert record(evaluate(tau_runs["2"], generic_rules), 28, GENERIC_CONFIRM).verdict == "pass"
    fails = {i: [r.step for r in evaluate(t, generic_rules).records if r.rule_id == GENERIC_CONFIRM
                 and r.verdict == "fail"] for i, t in tau_runs.items()}
    assert {i: s for i, s in fails.items() if s} == {"12": [18], "105": [42]}
    assert not [i for i, t in ww_runs.items() if any(r.rule_id == GENERIC_CONFIRM for r in evaluate(t, generic_rules).records)]


def test_a_domain_rule_supersedes_the_generic_rule_it_makes_precise(tau_runs, tau_file, tmp_path):
    """tau_retail.explicit-yes-before-write declares metadata.supersedes: the audit of a retail run
    (domain pack chosen by its tools) and explicitly named packs keep one record, not two; a user's
    pack can do the same."""
    from trajaudit.engine.packs.selection import load_rules, superseded_ids
    from trajaudit.engine.run.batch import audit_trajectories
    from trajaudit.engine.run.pipeline import AuditSpec

    res = audit_trajectories([tau_runs["12"]], AuditSpec()).results[0]
    ids_at_18 = {r.rule_id for r in res.log.records if r.step == 18 and r.verdict == "fail"}
    assert "tau_retail.explicit-yes-before-write" in ids_at_18 and GENERIC_CONFIRM not in ids_at_18
    assert not [r for r in res.log.records if r.rule_id == GENERIC_CONFIRM]
    assert res.diagnosis.critical_step == 18
    mine = tmp_path / "mine.yaml"
    mine.write_text("pack: mine\nrules:\n  - id: stricter\n    type: PROTOCOL\n    assert: 'true'\n"
                    "    metadata: {supersedes: [generic.protocol.tool-traceback, mine.stricter]}\n")
    rules = load_rules(("generic", str(mine)), None)
    ids = {r.id for r in rules}
    assert "generic.system.tool-traceback" in ids  # a wrong id supersedes nothing
    assert "mine.stricter" in ids and superseded_ids(rules) == frozenset({"generic.protocol.tool-traceback"})
    mine.write_text(mine.read_text().replace("generic.protocol.tool-traceback", "generic.system.tool-traceback"))
    assert "generic.system.tool-traceback" not in {r.id for r in load_rules(("generic", str(mine)), None)}
    # `trajaudit check` combines the packs it is given the same way
    import json

    from click.testing import CliRunner

    from trajaudit.cli import main

    run12 = tmp_path / "run12.json"
    run12.write_text(json.dumps([t for t in json.loads(tau_file.read_text()) if str(t["task_id"]) == "12"]))
    r = CliRunner().invoke(main, ["check", str(run12), "--rules", "generic", "--rules", "tau_retail", "--format", "json"])
    ids = {rec["rule_id"] for lg in json.loads(r.stdout) for rec in lg["records"] if rec["verdict"] == "fail"}
    assert r.exit_code == 1 and "tau_retail.explicit-yes-before-write" in ids and GENERIC_CONFIRM not in ids


def test_a_failing_call_repeated_until_the_end_is_blamed_where_it_was_first_sent():
    """AgentRx's critical step is the first unrecoverable failure: the agent sends the same broken
    call three times and the run ends; the audit names the first attempt (step 4), not the last."""
    import trajaudit

    def call(i, args='{"order": "W1"}', name="get_order"):
        return [{"role": "assistant", "content": None, "tool_calls": [
                    {"id": f"c{i}", "type": "function", "function": {"name": name, "arguments": args}}]},
                {"role": "tool", "tool_call_id": f"c{i}", "name": name,
                 "content": "Error: parameter 'order_id' is required" if name == "get_order" else '{"orders": ["W1"]}'}]

    messages = ([{"role": "system", "content": "You have tools."}, {"role": "user", "content": "Status of W1?"}]
                + call(0, '{"name": "ann"}', "get_user") + call(1) + call(2) + call(3))
    d = trajaudit.audit({"messages": messages})
    assert (d.critical_step, d.category) == (4, "invalid_invocation")
    assert "first sent that call" in d.rationale
    # a different (corrected) call in between ends the series: the last attempt is the one blamed
    fixed = messages[:6] + call(2, '{"order_id": "W1"}')[:1] + [
        {"role": "tool", "tool_call_id": "c2", "name": "get_order", "content": "Error: order W1 not found"}]
    assert trajaudit.audit({"messages": fixed}).critical_step == 6


def test_instructions_given_outside_the_messages_count_as_the_runs_policy():
    """Who&When-style per-agent system prompts are not steps: traj.instructions still holds them, so
    the generic confirmation rule applies when such a prompt states the policy, and not otherwise."""
    from trajaudit import load

    doc = {"question": "Cancel booking B12.", "system_prompt": {"Agent": "Obtain explicit user confirmation before any change."},
           "history": [{"role": "user", "name": "Client", "content": "Cancel booking B12."},
                       {"role": "assistant", "name": "Agent", "content": "Cancelling now.",
                        "tool_calls": [{"id": "c1", "type": "function",
                                        "function": {"name": "cancel_booking", "arguments": '{"id": "B12"}'}}]}]}
    rules = compile_rules(load_pack("generic.protocol"))
    t = load(doc, format="who_and_when")
    assert not [s for s in t.steps if s.kind == "system"] and t.system_prompts
    fails = [r for r in evaluate(t, rules).records if r.rule_id == GENERIC_CONFIRM]
    assert [(r.step, r.verdict) for r in fails] == [(1, "fail")]
    doc["system_prompt"] = {"Agent": "Be helpful."}
    assert not [r for r in evaluate(load(doc, format="who_and_when"), rules).records if r.rule_id == GENERIC_CONFIRM]


def test_generic_handoff_rule_needs_the_policy_and_fires_only_at_the_unattempted_transfer(tau_runs, generic_rules):
    """Without the domain pack, the retail policy's handoff sentence in the system prompt is enough:
    of the tau runs that transfer to a human, only run 47 (a return asked for, never attempted) fails,
    at its transfer (the annotated step 18); the others attempted a write first and pass."""
    rid = "generic.protocol.handoff-only-out-of-scope"
    got = {i: [(r.step, r.verdict) for r in evaluate(t, generic_rules).records if r.rule_id == rid]
           for i, t in tau_runs.items()}
    assert {i: v for i, v in got.items() if v} == {"12": [(24, "pass")], "41": [(22, "pass")],
                                                   "47": [(18, "fail")], "98": [(36, "pass")]}


def test_a_rules_first_listed_target_breaks_a_category_tie(tau_runs):
    """The handoff rules list intent_not_supported first: when their finding is the only one at the
    chosen step, the two targets tie in votes and the first-listed one is the category (not the global
    precedence, which prefers instruction_adherence_failure)."""
    from trajaudit.engine.run.batch import audit_trajectories
    from trajaudit.engine.run.pipeline import AuditSpec

    for spec in (AuditSpec(default_packs=False, rules=("generic",)), AuditSpec()):
        d = audit_trajectories([tau_runs["47"]], spec).results[0].diagnosis
        assert (d.critical_step, d.category) == (18, "intent_not_supported")


def test_a_call_failing_on_infrastructure_is_a_system_failure_not_an_invalid_invocation():
    """A run that ends on a 503 from the tool: generic.system reports the infrastructure failure; the
    protocol rules about failed calls (invalid_invocation) stay silent, so the category says why."""
    import trajaudit

    def run(text):
        return {"messages": [
            {"role": "user", "content": "Weather in Oslo tomorrow?"},
            {"role": "assistant", "content": None, "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "get_forecast", "arguments": '{"city": "Oslo"}'}}]},
            {"role": "tool", "tool_call_id": "c1", "name": "get_forecast", "content": text},
            {"role": "assistant", "content": "Tomorrow will be sunny."}]}

    d = trajaudit.audit(run("Error: upstream weather service unavailable (503)"))
    assert (d.critical_step, d.category) == (1, "system_failure")
    assert "run-ends-after-failed-call" not in d.rationale and "failed-call-unrecovered" not in d.rationale
    d = trajaudit.audit(run("Error: unknown parameter 'city'"))  # the agent's own call: invalid invocation
    assert (d.critical_step, d.category) == (1, "invalid_invocation")


def test_the_protocol_packs_copy_of_system_error_matches_generic_system():
    """generic.protocol keeps a copy of generic.system's infrastructure regexes (packs cannot share
    parameters): they must stay equal."""
    assert load_pack("generic.protocol").params["system_error"] == load_pack("generic.system").params["system_error"]


NO_LLM_ENV = {"TRAJAUDIT_BASE_URL": "", "TRAJAUDIT_MODEL": "", "TRAJAUDIT_LLM_CONFIG": ""}


def run(*args):
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False, env=NO_LLM_ENV)


def test_a_pack_including_generic_with_overrides_replaces_the_default_generic(tmp_path, ww_dir):
    from trajaudit import load_path
    from trajaudit.engine.run.batch import audit_trajectories
    from trajaudit.engine.run.pipeline import AuditSpec

    pack = tmp_path / "my.yaml"
    pack.write_text("pack: my\nversion: 1\ninclude:\n  - pack: generic\n    params: {closing: 'bye'}\n"
                    "overrides:\n  generic.provenance.claim-values-grounded: {severity: info}\n"
                    "disable: [generic.system.tool-traceback]\nrules: []\n", encoding="utf-8")
    runs = load_path(ww_dir / "1.json").trajectories
    res = audit_trajectories(runs, AuditSpec(rules=(str(pack),)))
    assert not res.problems
    recs = res.results[0].log.records
    ids = {r.rule_id for r in recs}
    assert "generic.system.tool-traceback" not in ids and "generic.system.tool-system-error" in ids
    assert {r.severity for r in recs if r.rule_id == "generic.provenance.claim-values-grounded"} == {"info"}
    r = run("audit", ww_dir / "1.json", "--rules", pack, "-o", tmp_path / "o.jsonl", "-q")
    assert r.exit_code == 0, r.output


# Hostile-user pass: `check --rules runs/` (a folder given as the pack) said "rule pack 'runs/' not found
# (not a file; …)" of a folder that is there. It now says it is a folder; a missing path is still "not
# found", and a shipped name still wins over a folder of that name in the working folder.

def test_a_folder_given_as_a_rule_pack_is_named_a_folder(tmp_path, monkeypatch):
    from hostile_kit import good_run, write_json

    runs = write_json(tmp_path / "runs.json", good_run("a"))
    folder = tmp_path / "packs"
    folder.mkdir()
    for args in (("check", runs, "--rules", folder), ("rules", "lint", folder)):
        r = run(*args)
        assert r.exit_code == 2
        assert f"rule pack '{folder}' is a folder: give a pack's YAML file or a shipped pack's name (shipped packs: " \
               "generic," in " ".join(r.stderr.split()), args
    assert "not found (not a file;" in run("check", runs, "--rules", tmp_path / "none.yaml").stderr
    monkeypatch.chdir(tmp_path)
    (tmp_path / "generic").mkdir()
    assert run("check", runs, "--rules", "generic", "-q").exit_code in (0, 1)


def _numeric_order_run(order_words):
    """A cancellation whose order_id is logged as the number 5 (the tool schema says string)."""
    return [
        {"role": "assistant", "content": None, "tool_calls": [{"id": "c1", "type": "function", "function": {
            "name": "get_order_details", "arguments": '{"order_id": 5}'}}]},
        {"role": "tool", "tool_call_id": "c1", "name": "get_order_details", "content":
            '{"order_id": 5, "status": "pending", "items": [{"name": "Garden Hose"}, {"name": "Vacuum Cleaner"}]}'},
        {"role": "user", "content": f"Please cancel {order_words}, reason: no longer needed."},
        {"role": "assistant", "content": f"Shall I cancel {order_words} (reason: no longer needed)?"},
        {"role": "user", "content": "yes"},
        {"role": "assistant", "content": None, "tool_calls": [{"id": "c2", "type": "function", "function": {
            "name": "cancel_pending_order", "arguments": '{"order_id": 5, "reason": "no longer needed"}'}}]},
    ]


@pytest.mark.parametrize(("order_words", "verdicts"), [
    ("order 5", {"tau_retail.cancel-is-whole-order": "pass", "tau_retail.confirmation-lists-order": "pass"}),
    ("the garden hose", {"tau_retail.cancel-is-whole-order": "fail", "tau_retail.confirmation-lists-order": "fail"}),
])
def test_a_numeric_order_id_is_read_as_its_text_not_an_evaluation_error(tau_rules, order_words, verdicts):
    from trajaudit import load

    log = evaluate(load(_numeric_order_run(order_words)), tau_rules)
    got = {r.rule_id: (r.verdict, r.reason) for r in log.records if r.step == 5 and r.rule_id in verdicts}
    assert {k: v for k, (v, _) in got.items()} == verdicts, got
    assert not [r for r in log.records if r.eval_error]
