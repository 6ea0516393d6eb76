"""DRIFT end to end: real ``openai`` client -> scripted server -> span-level Diagnoses on 3 tau and
3 Who&When runs; the LLM keeper's claims join the deterministic ledger, only unconfirmed consequential
claims are re-checked, the backtrace decides the error spans; cache re-runs; faults."""

from __future__ import annotations

import pytest
from llm_server import evidence_of, schema_name
from staged_judges import NOT_VERBATIM, drift_judge, target_of
from strategy_helpers import with_evidence

from trajaudit.engine.claims import RegexExtractor, build_claim_graph
from trajaudit.engine.claims.extract import ClaimExtractor
from trajaudit.engine.schema import schema_errors
from trajaudit.engine.strategies.context import AuditContext
from trajaudit.engine.strategies.llm.drift_claims import LLMClaimExtractor, claims_to_check
from trajaudit.engine.strategies.registry import default_strategies
from trajaudit.errors import LLMError
from trajaudit.llm import LLMClient

TAU_IDS = ("2", "12", "47")
WW_IDS = ("1", "10", "100")


@pytest.fixture
def six_runs(tau_runs, ww_runs):
    return [tau_runs[i] for i in TAU_IDS] + [ww_runs[i] for i in WW_IDS]


def requests_for(server, t, name):
    return [r for r in server.requests if schema_name(r) == name and evidence_of(r)["task"] == t.task]


def test_drift_on_three_tau_and_three_who_and_when_runs_then_from_the_cache(llm_server, llm_config, six_runs):
    llm_server.responder = drift_judge(six_runs)
    drift = default_strategies().get("drift")
    first = {}
    with LLMClient(llm_config) as client:
        for t in six_runs:
            d = drift.diagnose(*with_evidence(t, AuditContext(llm=client)))
            assert schema_errors("diagnosis", d.to_dict()) == []
            led = d.metadata["ledger"]
            # the keeper's real claim joined the ledger at its verbatim quote; the made-up one was dropped
            (keep,) = requests_for(llm_server, t, "drift-keeper")
            k = next(r["step"] for r in evidence_of(keep)["steps"] if len(r.get("content", "")) >= 40)
            assert led["llm_claims"] == 1 and led["keeper"][0]["address"] == f"steps.{k}.content[0:40]"
            assert f"keeper claim at step {k} dropped: quote {NOT_VERBATIM!r} is not verbatim in that step" \
                in d.metadata["notes"]
            # the support seeker saw exactly the unconfirmed consequential claims, and its verdicts stuck
            keeper_answer = drift_judge([t])(keep)["claims"]
            cg = build_claim_graph(t, extractors=[RegexExtractor(), LLMClaimExtractor(t, keeper_answer)])
            todo, _ = claims_to_check(cg.claims, 16)
            sup = requests_for(llm_server, t, "drift-support")
            if todo:
                (req,) = sup
                assert [c["id"] for c in evidence_of(req)["claims"]] == [c.id for c in todo]
                assert {c["status"] for c in evidence_of(req)["claims"]} <= {"MISSING", "WEAK", "CONFLICTING"}
                assert all(ch["to"] == "MISSING" for ch in led["changed"]) and led["checked"] == len(todo)
                assert d.usage["calls"] == 3
            else:
                assert sup == [] and d.usage["calls"] == 2
                assert "support seeker: no unconfirmed consequential claim; no call" in d.metadata["notes"]
            # the backtrace confirmed every traced candidate: span-level output, critical = first error step
            (bt,) = requests_for(llm_server, t, "drift-backtrace")
            traced = [c["step"] for c in evidence_of(bt)["candidates"]]
            assert traced == led["traced_error_steps"][:12]
            expected = sorted(set(traced[:8])) or [target_of(t)]
            assert list(d.error_steps) == expected and d.critical_step == expected[0]
            assert d.category == "invention_of_new_information" and d.agent == t.steps[d.critical_step].agent
            assert [c.step for c in d.candidates] == expected
            first[t.id] = d.to_dict()
    assert llm_server.exhausted == 0
    assert any(len(d["error_steps"]) > 1 for d in first.values())  # spans, not only single steps
    llm_server.reset_counts()
    with LLMClient(llm_config) as client:
        for t in six_runs:
            d = drift.diagnose(*with_evidence(t, AuditContext(llm=client))).to_dict()
            assert d["usage"]["calls"] == 0 and d["usage"]["cache_hits"] == d["usage"]["requests"] >= 2
            assert {k: v for k, v in d.items() if k != "usage"} == {k: v for k, v in first[t.id].items() if k != "usage"}
    assert llm_server.calls == 0


def test_a_claim_the_seeker_finds_direct_is_no_longer_an_error_root(llm_server, llm_client, ww_runs):
    t = ww_runs["100"]
    llm_server.responder = drift_judge([t], support_status="MISSING")
    before = default_strategies().get("drift").diagnose(*with_evidence(t, AuditContext(llm=llm_client)))
    llm_client.cache = None
    llm_server.responder = drift_judge([t], support_status="DIRECT")
    after = default_strategies().get("drift").diagnose(*with_evidence(t, AuditContext(llm=llm_client)))
    checked = after.metadata["ledger"]["checked"]
    assert checked > 0 and after.metadata["ledger"]["changed"]
    assert all(ch["to"] == "DIRECT" for ch in after.metadata["ledger"]["changed"])
    # every checked claim now supported: fewer (or no) traced error steps than with all MISSING
    assert len(after.metadata["ledger"]["traced_error_steps"]) < len(before.metadata["ledger"]["traced_error_steps"])


def test_keeper_with_no_new_claims_still_diagnoses(llm_server, llm_client, tau_runs):
    t = tau_runs["12"]
    llm_server.responder = drift_judge([t], keep=False)
    d = default_strategies().get("drift").diagnose(*with_evidence(t, AuditContext(llm=llm_client)))
    assert d.metadata["ledger"]["llm_claims"] == 0 and d.critical_step == d.error_steps[0]
    assert schema_errors("diagnosis", d.to_dict()) == []


def test_llm_extractor_is_a_claim_extractor_and_never_trusts_a_bad_step(tau_runs):
    t = tau_runs["47"]
    ex = LLMClaimExtractor(t, [
        {"step": 5, "quote": "daiki", "claim": "x", "stage": "Plan", "consequential": False, "used_in": []},
        {"step": 99, "quote": "x", "claim": "x", "stage": "Plan", "consequential": False, "used_in": []},
        {"step": 4, "quote": '"zip": "80273"', "claim": "zip given", "stage": "Retrieve", "consequential": True,
         "used_in": [18, 3]}])
    assert isinstance(ex, ClaimExtractor)
    assert ex.dropped == ["keeper claim at step 5 dropped: not a decision step",
                          "keeper claim at step 99 dropped: not a decision step"]
    (kept,) = ex.kept
    assert kept["address"].startswith("steps.4.tool_calls.0.arguments[")
    cg = build_claim_graph(t, extractors=[RegexExtractor(), ex])
    (claim,) = [c for c in cg.claims if c.mention.slot == ("llm",)]
    assert claim.step == 4 and claim.reused_in == [18]  # step 3 is earlier: not a reuse
    assert 18 in claim.final_steps and claim.consequential  # step 18 is a write call (transfer_to_human_agents)


def test_a_model_ignoring_the_schema_is_a_clear_error(llm_server, llm_client, ww_runs):
    llm_server.responder = lambda req: {"claims": "not a list"}
    with pytest.raises(LLMError, match=r"drift-keeper: the model's answer was still invalid after one retry: the "
                                       r"JSON does not match the schema at \$\.claims"):
        default_strategies().get("drift").diagnose(*with_evidence(ww_runs["1"], AuditContext(llm=llm_client)))
    assert llm_server.calls == 2
