"""The ``agentrx`` strategy and constraint synthesis end to end: real ``openai`` client -> scripted
server on 127.0.0.1 -> synthesized rules checked by the rule engine -> validation log -> judge ->
schema-valid Diagnoses on 3 tau and 3 Who&When runs; re-runs from the cache; rejected rules with
reasons; model output never executed."""

from __future__ import annotations

import pytest
from llm_server import evidence_of, schema_name
from strategy_helpers import with_evidence

from trajaudit.engine.schema import schema_errors
from trajaudit.engine.strategies.context import AuditContext
from trajaudit.engine.strategies.registry import default_strategies
from trajaudit.errors import ConfigError
from trajaudit.llm import LLMClient

TAU_IDS = ("2", "12", "47")
WW_IDS = ("1", "10", "100")
CATEGORY = "misinterpretation_of_tool_output"
MARKS = "no-marker-text-at-the-critical-step"
SEMANTIC = "the-agent-restates-the-request"


def target_of(t):
    """The step the scripted model's rule flags: the middle decision step."""
    d = t.decision_steps
    return d[len(d) // 2].index


def first_rules(t, marker_path):
    """What the scripted model writes for run ``t``: two good rules, three bad ones."""
    target, first = target_of(t), t.decision_steps[0].index
    return [
        {"id": MARKS, "title": "the critical step names the marker", "type": "RELATIONAL_POST", "severity": "error",
         "targets": [CATEGORY], "guard": f"step.index == {target}", "assert": 'content ~ /NO_SUCH_MARKER_TEXT/',
         "message": "step {step.index} lacks the marker", "source": "scripted"},
        {"id": SEMANTIC, "title": "the first decision restates the request", "type": "PROTOCOL",
         "targets": ["intent_plan_misalignment"], "guard": f"step.index == {first}",
         "check": {"semantic": "the agent restates the user's request correctly"}},
        {"id": "python-payload", "title": "not a rule", "type": "PROTOCOL", "targets": [CATEGORY],
         "assert": f"__import__('os').system('touch {marker_path}')"},
        {"id": "Wrong Target", "title": "no canned disclaimers", "type": "PROTOCOL", "targets": ["Hallucinated Category"],
         "guard": 'step.kind == "agent"', "assert": "not (content ~ /as an ai language model/i)"},
        {"id": "never-holds", "title": "contradiction", "type": "PROTOCOL", "guard": f"step.index == {target}",
         "assert": f"step.index != {target}"},
    ]


def scripted_model(runs, marker_path):
    """A responder playing the synthesizer, the repairer, the semantic checker and the judge."""
    by_task = {t.task: t for t in runs}

    def respond(req):
        name = schema_name(req)
        ev = evidence_of(req)
        if name == "rule-synthesis-dynamic":
            return {"rules": first_rules(by_task[ev["task"]], marker_path)}
        if name == "rule-synthesis-repair":
            fixed = []
            for item in ev["rejected"]:
                rule = dict(item["rule"])
                if rule["id"] == "Wrong Target":
                    rule["targets"] = ["invention_of_new_information"]
                    fixed.append(rule)
                elif rule["id"] == "python-payload":
                    fixed.append(rule)  # resubmitted unchanged: rejected a second time
            return {"rules": fixed}
        if name == "semantic-check":
            step = int(req["messages"][1]["content"].split("the step checked is step ")[1].split(")")[0])
            return {"verdict": "pass", "evidence": [f"steps.{step}"], "reason": "it does"}
        if name == "agentrx":
            rows = [r for r in ev["violations"] if r.get("rule", "").startswith("synthesized.run.")]
            step = min(r["step"] for r in rows)
            return {"critical_step": step, "agent": "someone", "category": rows[0]["targets"][0], "confidence": 0.7,
                    "rationale": f"steps.{step} breaks the synthesized rule", "evidence": [f"steps.{step}", "steps.9999"],
                    "violations_used": [rows[0]["rule"]]}
        raise AssertionError(f"unexpected request {name}")

    return respond


@pytest.fixture
def six_runs(tau_runs, ww_runs):
    return [tau_runs[i] for i in TAU_IDS] + [ww_runs[i] for i in WW_IDS]


def test_agentrx_on_three_tau_and_three_who_and_when_runs_then_from_the_cache(llm_server, llm_config, six_runs,
                                                                             tmp_path):
    marker = tmp_path / "pwned"
    llm_server.responder = scripted_model(six_runs, marker)
    strategy = default_strategies().get("agentrx")
    first = {}
    with LLMClient(llm_config) as client:
        for t in six_runs:
            ctx = AuditContext(llm=client)
            before = llm_server.calls
            args = with_evidence(t, ctx)
            d = strategy.diagnose(*args)
            assert schema_errors("diagnosis", d.to_dict()) == []
            target = target_of(t)
            assert (d.strategy, d.critical_step, d.category) == ("agentrx", target, CATEGORY)
            assert d.agent == t.steps[target].agent and any("model named agent 'someone'" in n for n in d.metadata["notes"])
            # synthesis, one repair round, one semantic check, the judge (a repair prompt identical to an
            # earlier run's — same rejected rules — is a cache hit)
            assert d.usage["requests"] == 4 and d.metadata["semantic_checks"] == 1
            assert llm_server.calls - before == d.usage["calls"] == 4 - d.usage["cache_hits"]
            syn = d.metadata["synthesis"]
            assert syn["accepted"] == 3 and syn["repaired"] == ["wrong-target"]
            assert set(syn["rule_ids"]) == {f"synthesized.run.{MARKS}", f"synthesized.run.{SEMANTIC}",
                                            "synthesized.run.wrong-target"}
            rej = {r["id"]: r for r in syn["rejections"]}
            assert set(rej) == {"python-payload", "never-holds"}
            assert rej["python-payload"]["stage"] == "lint" and "compile" in rej["python-payload"]["reason"]
            assert "after one repair round" in rej["python-payload"]["reason"]
            assert "contradiction" in rej["never-holds"]["reason"] and "left out" in rej["never-holds"]["reason"]
            # the violation reached the judge as evidence and is cited back, with its address
            assert d.metadata["violations_used"] == [f"synthesized.run.{MARKS}"]
            assert any(e.note == f"violation of synthesized.run.{MARKS} (synthesized)"
                       and e.address.startswith(f"steps.{target}.content") for e in d.evidence), d.evidence
            assert all(e.address != "steps.9999" for e in d.evidence)  # a cited address outside the run is dropped
            log = args[1].log  # the run's evidence, with the synthesized rules' records merged in
            assert [r.step for r in log.records if r.rule_id == f"synthesized.run.{MARKS}" and r.verdict == "fail"] == [target]
            first[t.id] = d.to_dict()
    assert not marker.exists() and llm_server.exhausted == 0
    # the judge saw the taxonomy checklist and the violations as an evidence block
    judge = next(r for r in llm_server.requests if schema_name(r) == "agentrx")
    assert "? Does that derivation contradict the output" in judge["messages"][0]["content"]
    assert any(v["rule"] == f"synthesized.run.{MARKS}" for v in evidence_of(judge)["violations"])

    llm_server.reset_counts()
    with LLMClient(llm_config) as client:
        for t in six_runs:
            d = strategy.diagnose(*with_evidence(t, AuditContext(llm=client))).to_dict()
            assert d["usage"]["calls"] == 0 and d["usage"]["cache_hits"] == d["usage"]["requests"] == 4
            assert {k: v for k, v in d.items() if k != "usage"} == {k: v for k, v in first[t.id].items() if k != "usage"}
    assert llm_server.calls == 0 and not marker.exists()


def test_step_by_step_synthesis_scopes_each_rule_to_its_prefix(llm_server, llm_client, tau_runs):
    from trajaudit.engine.packs.synthesis import RuleSynthesizer

    t = tau_runs["47"]
    decisions = [s.index for s in t.decision_steps]
    seen = []

    def respond(req):
        steps = evidence_of(req)["steps"]
        k = steps[-1]["step"]
        seen.append(k)
        return {"rules": [{"id": "no-error-outputs", "title": f"calls succeed (prefix {k})", "type": "PROTOCOL",
                           "guard": "call.output != null", "assert": "not call.output.is_error"}]}

    llm_server.responder = respond
    res = RuleSynthesizer(llm_client, max_rules=3).from_run(t, mode="step-by-step", max_prefixes=4)
    assert len(seen) == llm_server.calls == 4 and seen[-1] == decisions[-1] and set(seen) <= set(decisions)
    assert f"4 of {len(decisions)} decision-step prefixes used" in res.notes[0]
    assert [r["guard"] for r in res.rules] == [f"step.index >= {k} and (call.output != null)" for k in seen]
    assert [r["id"] for r in res.rules] == ["no-error-outputs"] + [f"no-error-outputs-{i}" for i in (2, 3, 4)]
    assert len(res.compiled()) == 4


def test_reflection_prunes_a_rule_with_the_reason(llm_server, llm_client):
    from trajaudit.engine.packs.synthesis import RuleSynthesizer

    llm_server.script(
        {"rules": [
            {"id": "auth-first", "title": "authenticate first", "type": "TEMPORAL", "targets": ["instruction_adherence_failure"],
             "guard": 'call.name == "get_order_details"',
             "assert": 'exists a in earlier where a.tool == "find_user_id_by_email"'},
            {"id": "no-long-messages", "title": "short messages", "type": "PROTOCOL", "guard": 'step.kind == "agent"',
             "assert": "len(content) < 200"}]},
        {"reviews": [{"id": "auth-first", "keep": True, "reason": "policy says so"},
                     {"id": "synthesized.policy.no-long-messages", "keep": False, "reason": "the policy sets no length"}]})
    res = RuleSynthesizer(llm_client, reflect=True).from_policy("Authenticate the user first.", [])
    assert [r["id"] for r in res.rules] == ["auth-first"]
    assert [(r.rule_id, r.stage, r.reason) for r in res.rejected] == [
        ("no-long-messages", "reflection", "reflection: the policy sets no length")]
    assert schema_name(llm_server.requests[1]) == "rule-reflection"
    shown = evidence_of(llm_server.requests[1])["rules"]
    assert [r["id"] for r in shown] == ["auth-first", "no-long-messages"]


def test_agentrx_without_an_llm_fails_clearly(tau_runs):
    s = default_strategies().get("agentrx")
    assert s.needs_llm is True
    with pytest.raises(ConfigError, match=r"needs an LLM.*--base-url.*TRAJAUDIT_BASE_URL.*--strategy offline"):
        s.diagnose(*with_evidence(tau_runs["2"], AuditContext()))


def test_a_failed_synthesis_degrades_to_pack_rules_and_says_so(llm_server, llm_client, tau_runs):
    t = tau_runs["2"]
    k = target_of(t)
    llm_server.script('{"rules": [', "still not JSON",
                      {"critical_step": k, "agent": "assistant", "category": "intent_plan_misalignment", "confidence": 0.4,
                       "rationale": f"steps.{k}", "evidence": [f"steps.{k}"], "violations_used": []})
    d = default_strategies().get("agentrx").diagnose(*with_evidence(t, AuditContext(llm=llm_client)))
    assert schema_errors("diagnosis", d.to_dict()) == [] and d.critical_step == k
    assert d.usage["calls"] == 3 and d.usage["failures"] == 1 and d.metadata["synthesis"]["accepted"] == 0
    assert any(n.startswith("no rule synthesized: rule-synthesis-dynamic: the model's answer was still invalid")
               for n in d.metadata["notes"])
    judge = evidence_of(llm_server.requests[2])
    assert {(v["step"], v["rule"], v["origin"]) for v in judge["violations"]} >= {
        (6, "claims.conflicting-evidence", "claims")}  # the claim graph's evidence still reaches the judge
    assert all(v["origin"] != "synthesized" for v in judge["violations"])
