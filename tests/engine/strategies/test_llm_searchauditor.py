"""SearchAuditor end to end: real ``openai`` client -> scripted server -> valid Diagnoses on 3 tau and
3 Who&When runs; parallel audits, deterministic clustering, adjudication over outline + windows,
repair, cache re-runs, the cost bound, faults."""

from __future__ import annotations

import dataclasses

import pytest
from llm_server import ScriptedLLMServer, evidence_of, schema_name
from staged_judges import CATEGORY, EARLY_CATEGORY, early_of, searchauditor_judge, target_of
from strategy_helpers import with_evidence

from trajaudit.engine.schema import schema_errors
from trajaudit.engine.strategies.context import AuditContext
from trajaudit.engine.strategies.llm.adjudication import Proposal, cluster_proposals, disagreement_summary
from trajaudit.engine.strategies.llm.views import final_answer_index, whole_chars, window_indices
from trajaudit.engine.strategies.registry import default_strategies
from trajaudit.errors import ConfigError, LLMError
from trajaudit.llm import LLMClient
from trajaudit.llm.fitting import step_record

TAU_IDS = ("2", "12", "47")
WW_IDS = ("1", "10", "100")


@pytest.fixture
def six_runs(tau_runs, ww_runs):
    return [tau_runs[i] for i in TAU_IDS] + [ww_runs[i] for i in WW_IDS]


def requests_for(server, t, name):
    return [r for r in server.requests if schema_name(r) == name and evidence_of(r)["task"] == t.task]


def test_searchauditor_on_three_tau_and_three_who_and_when_runs_then_from_the_cache(llm_server, llm_config,
                                                                                     six_runs):
    llm_server.responder = searchauditor_judge(six_runs)
    sa = default_strategies().get("searchauditor")
    first = {}
    with LLMClient(llm_config) as client:
        for t in six_runs:
            target, early = target_of(t), early_of(t)
            d = sa.diagnose(*with_evidence(t, AuditContext(llm=client)))
            assert schema_errors("diagnosis", d.to_dict()) == []
            assert (d.strategy, d.critical_step, d.category, d.agent) == ("searchauditor", target, CATEGORY,
                                                                          t.steps[target].agent)
            assert d.usage["calls"] == 4 and d.usage["cache_hits"] == 0 and d.repair is None
            reports = {r["report"]: (r["critical_step"], r["category"]) for r in d.metadata["reports"]}
            assert reports == {"holistic": (target, CATEGORY), "backward": (early, EARLY_CATEGORY),
                               "forward": (target, CATEGORY)}
            assert d.metadata["reports"][1]["constraints"][0]["status"] == "unverified"
            assert d.metadata["clusters"] == [
                {"steps": [early], "reports": ["backward"], "categories": {EARLY_CATEGORY: ["backward"]}},
                {"steps": [target], "reports": ["forward", "holistic"], "categories": {CATEGORY: ["forward", "holistic"]}},
            ]
            assert d.metadata["disagreement"]["lines"] == [
                f"backward proposes step {early} (earlier than the largest cluster)",
                f"forward, holistic agree on step {target}", f"earliest proposal: step {early} by backward",
                f"categories differ: {EARLY_CATEGORY} (backward); {CATEGORY} (holistic, forward)"]
            assert [c.step for c in d.candidates] == [target, early]
            assert [e.address for e in d.evidence] == [f"steps.{target}", f"steps.{early}"]
            assert d.metadata["adjudication"] == {"model_step": target, "supporting_steps": sorted({target, early}),
                                                  "sources": ["holistic", "forward"]}
            # the holistic audit sees the whole run verbatim; the adjudicator only outline + windows
            (hol,) = requests_for(llm_server, t, "searchauditor-holistic")
            assert evidence_of(hol)["trajectory"] == [step_record(s)[0] for s in t.steps]
            (adj,) = requests_for(llm_server, t, "searchauditor-adjudicate")
            ev = evidence_of(adj)
            fin = final_answer_index(t)
            anchors = sorted({target, early, fin})
            shown = [r["step"] for r in ev["windows"] if "step" in r]
            assert shown == window_indices(t, anchors, 1) and set(anchors) <= set(shown)
            assert [r["step"] for r in ev["outline"]] == [s.index for s in t.decision_steps]
            assert [r["report"] for r in ev["reports"]] == ["holistic", "backward", "forward"]
            first[t.id] = d.to_dict()
    assert llm_server.exhausted == 0
    llm_server.reset_counts()
    with LLMClient(llm_config) as client:
        for t in six_runs:
            d = sa.diagnose(*with_evidence(t, AuditContext(llm=client))).to_dict()
            assert d["usage"]["calls"] == 0 and d["usage"]["cache_hits"] == d["usage"]["requests"] == 4
            assert {k: v for k, v in d.items() if k != "usage"} == {k: v for k, v in first[t.id].items() if k != "usage"}
    assert llm_server.calls == 0


def test_searchauditor_costs_less_than_three_whole_trajectories(llm_server, llm_client, tau_runs):
    runs = [tau_runs[i] for i in TAU_IDS]
    llm_server.responder = searchauditor_judge(runs)
    for t in runs:
        d = default_strategies().get("searchauditor").diagnose(*with_evidence(t, AuditContext(llm=llm_client)))
        whole = whole_chars(t)
        assert d.usage["input_chars"] < 3 * whole, (t.id, d.usage["input_chars"], whole)
        # the specialised audits see compressed views: cut, and said so
        for name in ("searchauditor-backward", "searchauditor-forward"):
            (req,) = requests_for(llm_server, t, name)
            assert len(req["messages"][1]["content"]) < whole
        assert d.metadata["context"]["prompts"] == 4 and d.metadata["context"]["prompts_cut"] >= 2


def test_repair_option_adds_a_synthesizer_that_sees_only_the_diagnosis_and_windows(llm_server, llm_client,
                                                                                   tau_runs):
    t = tau_runs["47"]
    llm_server.responder = searchauditor_judge([t])
    target = target_of(t)
    d = default_strategies().get("searchauditor").diagnose(*with_evidence(t, AuditContext(llm=llm_client, strategy_options={"searchauditor": {"repair": True}})))
    assert d.usage["calls"] == 5 and schema_errors("diagnosis", d.to_dict()) == []
    assert d.repair == (f"1. Before acting at step {target}, re-read the tool output field by field.\n"
                        "2. Confirm the item ids with the user.")
    (req,) = requests_for(llm_server, t, "searchauditor-repair")
    ev = evidence_of(req)
    assert ev["diagnosis"] == {"critical_step": target, "agent": "assistant", "category": CATEGORY,
                               "rationale": f"rule (iii): step {target} misread the output"}
    assert [r["step"] for r in ev["windows"]] == window_indices(t, sorted({target, final_answer_index(t)}), 1)


def test_a_tool_output_named_by_the_adjudicator_goes_to_the_step_that_issued_the_call(llm_server, llm_client,
                                                                                      tau_runs):
    t = tau_runs["47"]
    tool = next(s for s in t.steps if s.kind == "tool" and t.call_for(s) and t.call_for(s)[0].index > target_of(t))
    caller = t.call_for(tool)[0].index
    llm_server.responder = searchauditor_judge([t], adjudicated=lambda _: tool.index)
    d = default_strategies().get("searchauditor").diagnose(*with_evidence(t, AuditContext(llm=llm_client)))
    assert d.critical_step == caller and d.metadata["adjudication"]["model_step"] == tool.index
    # the proposals the adjudicator overruled stay as candidates, one per step, best report first
    assert [c.step for c in d.candidates] == [caller, target_of(t), early_of(t)]
    assert d.candidates[1].reason.startswith("holistic, forward report: ") and d.candidates[1].score == 0.8
    assert f"adjudicator: model named tool output step {tool.index}; attributed to step {caller}, which issued " \
           "the call" in d.metadata["notes"]


def test_one_failed_audit_is_left_out_and_noted_all_three_failing_is_an_error(llm_server, llm_client, ww_runs):
    t = ww_runs["10"]
    llm_server.responder = searchauditor_judge([t], fail=("backward",))
    d = default_strategies().get("searchauditor").diagnose(*with_evidence(t, AuditContext(llm=llm_client)))
    assert [r["report"] for r in d.metadata["reports"]] == ["holistic", "forward"]
    assert any(n.startswith("audit report failed and was left out: backward: searchauditor-backward: the model's "
                            "answer was still invalid after one retry") for n in d.metadata["notes"])
    assert d.critical_step == target_of(t) and d.usage["calls"] == 5 and d.usage["schema_retries"] == 1
    llm_server.responder = lambda req: {"verdict": "the model ignores the schema"}
    llm_client.cache = None  # the answers above are cached; ask again
    with pytest.raises(LLMError, match=r"searchauditor: all three audit reports failed: holistic: "
                                       r"searchauditor-holistic: the model's answer was still invalid after one retry"):
        default_strategies().get("searchauditor").diagnose(*with_evidence(t, AuditContext(llm=llm_client)))


def test_an_endpoint_that_is_down_is_a_clear_error(llm_config, ww_runs):
    with ScriptedLLMServer() as gone:
        url = gone.url
    cfg = dataclasses.replace(llm_config, base_url=url, max_retries=0, timeout=2.0)
    with LLMClient(cfg) as client, pytest.raises(LLMError, match=f"cannot reach {url}"):
        default_strategies().get("searchauditor").diagnose(*with_evidence(ww_runs["1"], AuditContext(llm=client)))


def test_unknown_or_mistyped_options_are_config_errors(llm_client, ww_runs):
    sa = default_strategies().get("searchauditor")
    with pytest.raises(ConfigError, match=r"strategy 'searchauditor' has no option\(s\) \['repiar'\]; known: "):
        sa.diagnose(*with_evidence(ww_runs["1"], AuditContext(llm=llm_client, strategy_options={"searchauditor": {"repiar": True}})))
    with pytest.raises(ConfigError, match="option 'radius' must be int, got '2'"):
        sa.diagnose(*with_evidence(ww_runs["1"], AuditContext(llm=llm_client, strategy_options={"searchauditor": {"radius": "2"}})))
    with pytest.raises(ConfigError, match="needs an LLM"):
        sa.diagnose(*with_evidence(ww_runs["1"], AuditContext()))


def test_clustering_and_disagreement_summary_are_deterministic():
    decisions = [2, 4, 6, 8, 10, 12]
    ps = [Proposal("holistic", 8, "a", 0.9, ""), Proposal("backward", 2, "b", 0.5, ""),
          Proposal("forward", 10, "a", 0.7, "")]
    clusters = cluster_proposals(ps, decisions, gap=1)
    assert clusters == [{"steps": [2], "reports": ["backward"], "categories": {"b": ["backward"]}},
                        {"steps": [8, 10], "reports": ["holistic", "forward"], "categories": {"a": ["holistic", "forward"]}}]
    s = disagreement_summary(ps, clusters)
    assert s == {"same_step": False, "same_category": False, "clusters": 2, "lines": [
        "backward proposes step 2 (earlier than the largest cluster)", "holistic, forward agree on steps 8-10",
        "earliest proposal: step 2 by backward", "categories differ: a (holistic, forward); b (backward)"]}
    assert cluster_proposals(list(reversed(ps)), decisions, gap=1) == clusters
    assert len(cluster_proposals(ps, decisions, gap=3)) == 1
    same = [Proposal(n, 6, "a", 0.5, "") for n in ("holistic", "backward", "forward")]
    assert disagreement_summary(same, cluster_proposals(same, decisions))["lines"] == [
        "all 3 reports propose step 6", "all reports name category a"]


def test_a_small_context_budget_cuts_visibly(llm_server, llm_config, tau_runs):
    t = tau_runs["2"]
    llm_server.responder = searchauditor_judge([t])
    with LLMClient(dataclasses.replace(llm_config, context_chars=6000)) as client:
        d = default_strategies().get("searchauditor").diagnose(*with_evidence(t, AuditContext(llm=client)))
    ctx = d.metadata["context"]
    assert ctx["prompts"] == 4 and ctx["prompts_cut"] == 4 and ctx["budget_chars"] <= 6000
    assert "outline outline_capped: previews cut to 60 chars" in d.metadata["notes"]
    (hol,) = requests_for(llm_server, t, "searchauditor-holistic")
    shown = evidence_of(hol)["trajectory"]
    # steps left out of the holistic view are named in a note record and in the diagnosis
    omitted = [i for i in range(len(t.steps)) if i not in {r.get("step") for r in shown}]
    assert set(omitted) <= set(ctx["omitted_steps"])
    assert not omitted or shown[-1]["note"].startswith(f"{len(omitted)} step(s) left out")
    assert d.critical_step == target_of(t) and schema_errors("diagnosis", d.to_dict()) == []


def test_supporting_steps_outside_the_run_are_listed_not_snapped(llm_server, llm_config, six_runs):
    """An adjudicator citing step 99999 of a 30-step run cites nothing: it is not mapped onto the
    nearest decision step (which would invent a supporting step); it is kept aside and named."""
    t = six_runs[0]
    llm_server.responder = searchauditor_judge([t], extra_support=(99999, len(t.steps)))
    with LLMClient(llm_config) as client:
        d = default_strategies().get("searchauditor").diagnose(*with_evidence(t, AuditContext(llm=client)))
    adj = d.metadata["adjudication"]
    assert adj["supporting_steps"] == sorted({target_of(t), early_of(t)})
    assert adj["supporting_steps_outside_run"] == [99999, len(t.steps)]
    assert [e.address for e in d.evidence] == [f"steps.{target_of(t)}", f"steps.{early_of(t)}"]
