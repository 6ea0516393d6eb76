"""End to end against the REAL local model (llama-server + SmolLM2-135M; ../shared/LLM.md).

Opt-in: ``pytest -m localllm --run-localllm`` after ``scripts/build_local_llm.sh``. The model is tiny,
so these tests assert plumbing — valid Diagnoses, schema-valid answers, the cache — never accuracy.
"""

from __future__ import annotations

import pytest
from strategy_helpers import with_evidence

from trajaudit.checkers.semantic_llm import LLMSemanticOracle
from trajaudit.engine.schema import schema_errors
from trajaudit.engine.strategies.context import AuditContext
from trajaudit.engine.strategies.llm.agentrx import AgentRx
from trajaudit.engine.strategies.llm.base import categories
from trajaudit.engine.strategies.registry import default_strategies
from trajaudit.llm import LLMClient, LLMConfig

pytestmark = pytest.mark.localllm

STRATEGIES = ("all-at-once", "step-by-step", "binary-search")


def config(url: str, cache: str) -> LLMConfig:
    # a 6,000-character budget keeps each call ~2k tokens on 2 shared cores, and exercises evidence cuts
    return LLMConfig(base_url=url, model="smollm2-135m-instruct", max_tokens=300, context_chars=6000,
                     timeout=600, max_retries=1, concurrency=1, cache_path=cache)


def test_every_strategy_on_a_tau_run_then_again_from_the_cache(local_llm, tau_runs, tmp_path):
    t = tau_runs["47"]
    decisions = {s.index for s in t.decision_steps}
    ids = {c for c, _ in categories("agentrx")}
    cache = str(tmp_path / "cache.sqlite3")
    reg = default_strategies()
    first = {}
    with LLMClient(config(local_llm.url, cache)) as client:
        info = client.ping()
        assert info["reply"] and info["latency_s"] > 0
        for name in STRATEGIES:
            d = reg.get(name).diagnose(*with_evidence(t, AuditContext(llm=client)))
            assert schema_errors("diagnosis", d.to_dict()) == []
            assert d.critical_step in decisions and d.agent == "assistant" and d.category in ids
            assert d.usage["calls"] >= 1 and d.usage["input_tokens"] > 0 and d.usage["failures"] == 0
            assert d.metadata["context"]["prompts"] >= 1
            first[name] = d.to_dict()
        assert first["all-at-once"]["metadata"]["context"]["prompts_cut"] == 1  # 6,000 chars: cut, and said so
        made = client.usage.calls
        assert made >= 3
    with LLMClient(config(local_llm.url, cache)) as again:
        for name in STRATEGIES:
            d = reg.get(name).diagnose(*with_evidence(t, AuditContext(llm=again))).to_dict()
            assert d["usage"]["calls"] == 0 and d["usage"]["cache_hits"] == d["usage"]["requests"]
            assert {k: v for k, v in d.items() if k != "usage"} == {k: v for k, v in first[name].items() if k != "usage"}
        assert again.usage.calls == 0


STAGED = ("searchauditor", "drift", "hybrid")
# small views and few claims to check: ~8 calls of ~1,700 prompt tokens and <= 360 answer tokens each
STAGED_OPTIONS = {"searchauditor": {"min_budget": 1000}, "drift": {"max_checks": 3, "min_budget": 1000},
                  "hybrid": {"min_budget": 1000}}


def staged_config(url: str, cache: str) -> LLMConfig:
    return LLMConfig(base_url=url, model="smollm2-135m-instruct", max_tokens=360, context_chars=4000,
                     timeout=600, max_retries=1, concurrency=1, cache_path=cache)


def test_staged_strategies_on_a_tau_run_then_again_from_the_cache(local_llm, tau_runs, tmp_path):
    """searchauditor (4 calls), drift (2-3) and hybrid (1) once each, then from the cache (0 calls)."""
    from trajaudit.engine.run.pipeline import AuditSpec, build_context

    t = tau_runs["47"]
    decisions = {s.index for s in t.decision_steps}
    ids = {c for c, _ in categories("agentrx")}
    cache = str(tmp_path / "cache.sqlite3")
    reg = default_strategies()
    first = {}
    for attempt in ("cold", "cached"):
        with LLMClient(staged_config(local_llm.url, cache)) as client:
            ctx = build_context(AuditSpec())
            ctx.llm, ctx.strategy_options = client, {**ctx.strategy_options, **STAGED_OPTIONS}
            for name in STAGED:
                d = reg.get(name).diagnose(*with_evidence(t, ctx))
                out = d.to_dict()
                assert schema_errors("diagnosis", out) == []
                assert d.critical_step in decisions and d.agent == "assistant" and d.category in ids
                assert d.usage["failures"] == 0
                if attempt == "cold":
                    assert d.usage["calls"] >= 1 and d.usage["input_tokens"] > 0
                    first[name] = out
                else:
                    assert d.usage["calls"] == 0 and d.usage["cache_hits"] == d.usage["requests"] > 0
                    assert {k: v for k, v in out.items() if k != "usage"} == \
                        {k: v for k, v in first[name].items() if k != "usage"}
            if attempt == "cached":
                assert client.usage.calls == 0
    assert first["searchauditor"]["usage"]["requests"] == 4 and len(first["searchauditor"]["metadata"]["reports"]) == 3
    assert set(first["drift"]["error_steps"]) <= decisions and first["drift"]["critical_step"] == \
        first["drift"]["error_steps"][0]
    assert first["hybrid"]["usage"]["requests"] == 1


def test_semantic_oracle_answers_a_valid_verdict(local_llm, tau_runs, tmp_path):
    t = tau_runs["47"]
    with LLMClient(config(local_llm.url, str(tmp_path / "c.sqlite3"))) as client:
        a = LLMSemanticOracle(client, window=1).judge(
            "the agent asked the user to confirm before acting", t, t.decision_steps[2], {})
    assert a.verdict in ("pass", "fail", "unknown") and a.reason
    assert all(e.startswith("steps.") for e in a.evidence)


def test_agentrx_on_a_tau_run_then_again_from_the_cache(local_llm, tau_runs, tmp_path):
    import dataclasses

    t = tau_runs["47"]
    decisions = {s.index for s in t.decision_steps}
    ids = {c for c, _ in categories("agentrx")}
    # a rule answer is longer than a verdict: room for one bounded rule; two calls (synthesis, judge),
    # as each takes minutes on 2 shared cores
    cfg = dataclasses.replace(config(local_llm.url, str(tmp_path / "cache.sqlite3")), max_tokens=700)
    agentrx = AgentRx(max_rules=1, max_semantic_checks=0, repair_rules=False)
    with LLMClient(cfg) as client:
        d = agentrx.diagnose(*with_evidence(t, AuditContext(llm=client)))
        assert schema_errors("diagnosis", d.to_dict()) == []
        assert d.critical_step in decisions and d.agent == "assistant" and d.category in ids
        syn = d.metadata["synthesis"]
        # whatever the tiny model wrote, each rule was either compiled or rejected with a reason
        assert len(syn["rule_ids"]) == syn["accepted"] and all(r["stage"] and r["reason"] for r in syn["rejections"])
        assert d.usage["requests"] >= 2 and d.usage["input_tokens"] > 0
        first = d.to_dict()
    with LLMClient(cfg) as again:
        d = agentrx.diagnose(*with_evidence(t, AuditContext(llm=again))).to_dict()
        assert d["usage"]["calls"] == 0 and again.usage.calls == 0
        assert {k: v for k, v in d.items() if k != "usage"} == {k: v for k, v in first.items() if k != "usage"}
