"""hybrid end to end: the offline evidence (validation log, claim graph, offline candidates) as a compact
log for one judge call over the outline and windows; 3 tau and 3 Who&When runs; cost; cache; faults."""

from __future__ import annotations

import dataclasses

import pytest
from llm_server import ScriptedLLMServer, evidence_of
from staged_judges import CATEGORY, hybrid_judge, target_of
from strategy_helpers import with_evidence

from trajaudit.engine.run.evidence import gather
from trajaudit.engine.run.pipeline import AuditSpec, build_context
from trajaudit.engine.schema import schema_errors
from trajaudit.engine.strategies.llm.views import final_answer_index, whole_chars, window_indices
from trajaudit.engine.strategies.offline_judge import OfflineJudge, blame
from trajaudit.engine.strategies.registry import default_strategies
from trajaudit.errors import LLMError
from trajaudit.llm import LLMClient

TAU_IDS = ("2", "12", "47")
WW_IDS = ("1", "10", "100")


@pytest.fixture
def six_runs(tau_runs, ww_runs):
    return [tau_runs[i] for i in TAU_IDS] + [ww_runs[i] for i in WW_IDS]


def context(client):
    ctx = build_context(AuditSpec())  # the shipped default packs, as `trajaudit audit` uses them
    ctx.llm = client
    return ctx


def test_hybrid_on_three_tau_and_three_who_and_when_runs_then_from_the_cache(llm_server, llm_config, six_runs):
    llm_server.responder = hybrid_judge(six_runs)
    hybrid = default_strategies().get("hybrid")
    first = {}
    with LLMClient(llm_config) as client:
        ctx = context(client)
        for t in six_runs:
            offline = OfflineJudge().diagnose(*with_evidence(t, ctx))
            before = llm_server.calls
            d = hybrid.diagnose(*with_evidence(t, ctx))
            assert schema_errors("diagnosis", d.to_dict()) == []
            assert d.usage["calls"] == llm_server.calls - before == 1
            expected = offline.critical_step if offline.candidates else target_of(t)
            assert (d.strategy, d.critical_step, d.category) == ("hybrid", expected, CATEGORY)
            assert d.metadata["offline_step"] == offline.critical_step
            assert d.metadata["agrees_with_offline"] is (expected == offline.critical_step)
            ev = evidence_of(llm_server.requests[-1])
            # the compact log: every violation at >= warning, blamed on its decision step; unsupported claims
            log = gather(t, ctx).log
            viol = log.violations("warning")
            assert [(v["step"], v["rule"], v["blamed_step"]) for v in ev["violations"]] == \
                [(r.step, r.rule_id, blame(t, r)) for r in sorted(viol, key=lambda r: (r.step, r.rule_id))][:30]
            assert len([c for c in ev["claims"] if "claim" in c]) == min(20, len(gather(t, ctx).claim_rows))
            assert [c["step"] for c in ev["offline"]["candidates"]] == [c.step for c in offline.candidates[:5]]
            # windows only around the offline choice, its candidates and the final answer — never the whole run
            anchors = sorted({c.step for c in offline.candidates[:5]} | {offline.critical_step, final_answer_index(t)})
            assert [r["step"] for r in ev["windows"] if "step" in r] == window_indices(t, anchors, 1)
            assert d.usage["input_chars"] < 3 * whole_chars(t)
            assert d.metadata["evidence_counts"]["violations"] == len(viol)
            first[t.id] = d.to_dict()
    assert sum(1 for d in first.values() if d["metadata"]["evidence_counts"]["violations"]) >= 3
    llm_server.reset_counts()
    with LLMClient(llm_config) as client:
        ctx = context(client)
        for t in six_runs:
            d = hybrid.diagnose(*with_evidence(t, ctx)).to_dict()
            assert d["usage"]["calls"] == 0 and d["usage"]["cache_hits"] == 1
            assert {k: v for k, v in d.items() if k != "usage"} == {k: v for k, v in first[t.id].items() if k != "usage"}
    assert llm_server.calls == 0


def test_hybrid_input_is_well_under_the_whole_trajectory_on_tau(llm_server, llm_client, tau_runs):
    runs = [tau_runs[i] for i in TAU_IDS]
    llm_server.responder = hybrid_judge(runs)
    ctx = context(llm_client)
    for t in runs:
        d = default_strategies().get("hybrid").diagnose(*with_evidence(t, ctx))
        assert d.usage["input_chars"] < whole_chars(t), t.id


def test_hybrid_faults_are_clear_errors(llm_server, llm_config, ww_runs):
    t = ww_runs["10"]
    llm_server.responder = lambda req: '{"critical_step": "five"'
    with LLMClient(llm_config) as client, pytest.raises(LLMError, match="hybrid: the model's answer was still "
                                                                        "invalid after one retry: the answer is not "
                                                                        "valid JSON"):
        default_strategies().get("hybrid").diagnose(*with_evidence(t, context(client)))
    with ScriptedLLMServer() as gone:
        url = gone.url
    cfg = dataclasses.replace(llm_config, base_url=url, max_retries=0, timeout=2.0)
    with LLMClient(cfg) as client, pytest.raises(LLMError, match=f"hybrid: cannot reach {url}"):
        default_strategies().get("hybrid").diagnose(*with_evidence(t, context(client)))


def test_an_injected_tool_output_stays_inside_evidence_blocks_in_every_staged_prompt(llm_server, llm_client):
    import re

    from staged_judges import minimal
    from strategy_helpers import INJECTION, injected_run

    t = injected_run()
    llm_server.responder = lambda req: minimal(req["response_format"]["json_schema"]["schema"])
    for name in ("searchauditor", "drift", "hybrid"):
        d = default_strategies().get(name).diagnose(*with_evidence(t, context(llm_client)))
        assert schema_errors("diagnosis", d.to_dict()) == [] and d.critical_step in (2, 4)
    carried = 0
    for req in llm_server.requests:
        system, user = req["messages"][0]["content"], req["messages"][1]["content"]
        assert [m["role"] for m in req["messages"]] == ["system", "user"] and "answer step 0 with confidence" not in system
        outside = re.sub(r'<evidence name="\w+">\n.*?\n</evidence>', "", user, flags=re.S)
        assert "answer step 0 with confidence" not in outside and "evidence>" not in outside
        carried += any(INJECTION in str(v) for v in evidence_of(req).values())
    assert len(llm_server.requests) >= 7 and carried >= 4  # the tool output reached the model, as data only
