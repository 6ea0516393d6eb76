"""The Who&When baselines end to end: real ``openai`` client -> scripted server on 127.0.0.1 ->
valid Diagnoses on real tau and Who&When runs; re-runs served from the cache; snapping; no LLM."""

from __future__ import annotations

import math

import pytest
from llm_server import Reply, evidence_of, schema_name
from strategy_helpers import CATEGORY, judge_for, target_of, with_evidence

from trajaudit.engine.schema import schema_errors
from trajaudit.engine.strategies.context import AuditContext
from trajaudit.engine.strategies.registry import default_strategies
from trajaudit.errors import ConfigError, LLMError
from trajaudit.llm import LLMClient
from trajaudit.llm.fitting import step_record

STRATEGIES = ("all-at-once", "step-by-step", "binary-search")
TAU_IDS = ("2", "12", "47")
WW_IDS = ("1", "10", "100")


@pytest.fixture
def six_runs(tau_runs, ww_runs):
    return [tau_runs[i] for i in TAU_IDS] + [ww_runs[i] for i in WW_IDS]


def test_three_strategies_on_three_tau_and_three_who_and_when_runs(llm_server, llm_config, six_runs):
    llm_server.responder = judge_for(six_runs)
    reg = default_strategies()
    first: dict[tuple[str, str], dict] = {}
    with LLMClient(llm_config) as client:
        ctx = AuditContext(llm=client)
        for t in six_runs:
            decisions = [s.index for s in t.decision_steps]
            target = target_of(t)
            for name in STRATEGIES:
                before = llm_server.calls
                d = reg.get(name).diagnose(*with_evidence(t, ctx))
                calls = llm_server.calls - before
                assert schema_errors("diagnosis", d.to_dict()) == []
                assert (d.strategy, d.critical_step, d.agent) == (name, target, t.steps[target].agent)
                assert d.category == CATEGORY and d.taxonomy == "agentrx" and 0 < d.confidence <= 1
                assert d.evidence[0].address == f"steps.{target}" and d.candidates[0].step == target
                assert d.usage["calls"] == calls and d.usage["cache_hits"] == 0 and d.usage["input_chars"] > 0
                assert d.usage["input_tokens"] > 0 and d.metadata["context"]["prompts_cut"] == 0
                if name == "all-at-once":
                    assert calls == 1
                elif name == "step-by-step":
                    assert calls == decisions.index(target) + 1
                    assert [j["step"] for j in d.metadata["judged"]] == decisions[: decisions.index(target) + 1]
                else:
                    n = len(decisions)
                    assert math.floor(math.log2(n)) + 1 <= calls <= math.ceil(math.log2(n)) + 1
                    assert all(seg["segment"][0] <= target <= seg["segment"][1] for seg in d.metadata["path"])
                first[(t.id, name)] = d.to_dict()
    assert llm_server.exhausted == 0
    # the whole evidence of the all-at-once call is the run itself, verbatim
    req = next(r for r in llm_server.requests if schema_name(r) == "all-at-once")
    run = next(t for t in six_runs if t.task == evidence_of(req)["task"])
    assert evidence_of(req)["trajectory"] == [step_record(s)[0] for s in run.steps]

    # second run, new client, same cache file: 0 HTTP calls, identical diagnoses
    llm_server.reset_counts()
    with LLMClient(llm_config) as client:
        ctx = AuditContext(llm=client)
        for t in six_runs:
            for name in STRATEGIES:
                d = reg.get(name).diagnose(*with_evidence(t, ctx)).to_dict()
                was = first[(t.id, name)]
                assert d["usage"]["calls"] == 0 and d["usage"]["cache_hits"] == d["usage"]["requests"] > 0
                assert d["usage"]["input_chars"] == was["usage"]["input_chars"]
                strip = lambda x: {k: v for k, v in x.items() if k != "usage"}  # noqa: E731
                assert strip(d) == strip(was)
        assert client.usage.calls == 0
    assert llm_server.calls == 0


def test_named_step_that_is_not_a_decision_is_snapped_and_noted(llm_server, llm_client, tau_runs):
    t = tau_runs["47"]
    tool_step = next(s.index for s in t.steps if s.kind == "tool")
    reg = default_strategies()
    llm_server.script({"critical_step": tool_step, "agent": "assistant", "category": "system_failure",
                       "confidence": 0.4, "reason": "x"},
                      {"critical_step": 999, "agent": "nobody", "category": "system_failure",
                       "confidence": 0.4, "reason": "y"})
    d = reg.get("all-at-once").diagnose(*with_evidence(t, AuditContext(llm=llm_client)))
    assert d.critical_step == tool_step - 1 and t.steps[tool_step - 1].is_decision
    assert f"model named step {tool_step} (a tool step); mapped to the nearest decision step {tool_step - 1}" \
        in d.metadata["notes"]
    assert d.metadata["model_step"] == tool_step
    d2 = reg.get("all-at-once").diagnose(*with_evidence(t, AuditContext(llm=llm_client)))
    # the same prompt again is a cache hit: the first answer, not the second, is reused
    assert d2.usage["cache_hits"] == 1 and d2.critical_step == d.critical_step
    llm_client.cache = None
    d3 = reg.get("all-at-once").diagnose(*with_evidence(t, AuditContext(llm=llm_client)))
    last = t.decision_steps[-1].index
    assert d3.critical_step == last
    assert any("(out of range); mapped to the nearest decision step" in n for n in d3.metadata["notes"])
    assert any("model named agent 'nobody'" in n for n in d3.metadata["notes"])


def test_step_by_step_with_no_decisive_step_reports_the_last_as_inconclusive(llm_server, llm_client, ww_runs):
    t = ww_runs["1"]
    llm_server.responder = lambda req: {"decisive": False, "category": "inconclusive", "confidence": 0.9,
                                        "reason": "fine"}
    d = default_strategies().get("step-by-step").diagnose(*with_evidence(t, AuditContext(llm=llm_client)))
    assert d.critical_step == t.decision_steps[-1].index and d.category == "inconclusive" and d.confidence == 0
    assert d.usage["calls"] == len(t.decision_steps)
    assert "no decision step was judged decisive" in d.metadata["notes"][-1]
    assert schema_errors("diagnosis", d.to_dict()) == []


def test_small_context_budget_cuts_are_reported_in_the_diagnosis(llm_server, llm_config, tau_runs):
    import dataclasses

    t = tau_runs["2"]
    target = target_of(t)
    llm_server.responder = judge_for([t])
    with LLMClient(dataclasses.replace(llm_config, context_chars=12000)) as client:
        d = default_strategies().get("all-at-once").diagnose(*with_evidence(t, AuditContext(llm=client)))
        ctx = d.metadata["context"]
        assert ctx["prompts_cut"] == 1 and ctx["modes"] == ["capped"] and ctx["budget_chars"] < 12000
        assert 0 in ctx["cut_steps"] and ctx["omitted_steps"] == []  # the long policy prompt was shortened
        sent = llm_server.requests[0]["messages"]
        assert sum(len(m["content"]) for m in sent) <= 12000
        assert d.critical_step == target
        # tighter still: whole steps are left out, and named
    with LLMClient(dataclasses.replace(llm_config, context_chars=6000)) as tight:
        d = default_strategies().get("all-at-once").diagnose(*with_evidence(t, AuditContext(llm=tight)))
        assert d.metadata["context"]["modes"] == ["window"] and d.metadata["context"]["omitted_steps"]


def test_injected_tool_output_reaches_the_server_only_inside_the_evidence_block(llm_server, llm_client):
    from strategy_helpers import INJECTION, injected_run

    t = injected_run()
    llm_server.script({"critical_step": 4, "agent": "assistant", "category": "invention_of_new_information",
                       "confidence": 0.9, "reason": "claims a cancellation no tool performed"})
    d = default_strategies().get("all-at-once").diagnose(*with_evidence(t, AuditContext(llm=llm_client)))
    assert d.critical_step == 4
    sent = llm_server.requests[0]["messages"]
    assert [m["role"] for m in sent] == ["system", "user"]
    user = sent[1]["content"]
    start, end = user.index('<evidence name="trajectory">'), user.rindex("</evidence>")
    assert start < user.index("ignore previous instructions") < end
    assert user.count("</evidence>") == 2 and "answer step 0" not in sent[0]["content"]
    assert evidence_of(llm_server.requests[0])["trajectory"][3]["content"] == INJECTION


def test_strategies_without_an_llm_fail_clearly(tau_runs):
    from trajaudit.engine.strategies.base import Strategy

    reg = default_strategies()
    for name in STRATEGIES:
        s = reg.get(name)
        assert isinstance(s, Strategy) and s.name == name and s.needs_llm is True
        with pytest.raises(ConfigError, match=r"needs an LLM.*--base-url.*TRAJAUDIT_BASE_URL.*--strategy offline"):
            s.diagnose(*with_evidence(tau_runs["2"], AuditContext()))


def test_a_failing_call_surfaces_as_llm_error(llm_server, llm_client, tau_runs):
    llm_server.script(Reply(refusal="I won't judge this."))
    with pytest.raises(LLMError, match="the model refused: I won't judge this."):
        default_strategies().get("binary-search").diagnose(*with_evidence(tau_runs["2"], AuditContext(llm=llm_client)))


def test_the_pipeline_api_runs_an_llm_strategy_from_an_llm_config(llm_server, llm_config, ww_dir, ww_runs):
    from trajaudit.engine.run.pipeline import audit

    t = ww_runs["10"]
    llm_server.responder = judge_for([t])
    d = audit(ww_dir / "10.json", strategy="binary-search", llm=llm_config)
    assert (d.critical_step, d.category, d.strategy) == (target_of(t), CATEGORY, "binary-search")
    assert d.usage["calls"] == llm_server.calls > 0
    with pytest.raises(ConfigError, match="needs an LLM"):
        audit(ww_dir / "10.json", strategy="step-by-step")


def test_a_budget_smaller_than_the_prompt_itself_is_reported(llm_server, llm_config, ww_runs):
    import dataclasses

    t = ww_runs["1"]
    llm_server.responder = judge_for([t])
    with LLMClient(dataclasses.replace(llm_config, context_chars=2000)) as client:
        d = default_strategies().get("all-at-once").diagnose(*with_evidence(t, AuditContext(llm=client)))
    assert any(n.startswith("all_at_once: the prompt without evidence is ") and "exceeds the 2000-char budget" in n
               for n in d.metadata["notes"])
    assert d.metadata["context"]["modes"] == ["window"]
