"""The example deep-research run produces exactly its expected findings — offline and through the LLM path.

examples/citation/ev_market.json (native form) and aiq_like_trace.json (an AI-Q-like span trace read
through examples/citation/mappings/aiq_like.yaml) describe the same run; both judges must find the
5 local errors of ev_market.expected.json at the expected invocations, trace the 5 unsupported
final-report sentences to the expected origins, and give recall 1/6 and precision 1/5.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from citation_oracle import Oracle, llm_session

from trajaudit.citation import LLMJudge, OfflineCitationJudge, audit_citations, load_run
from trajaudit.citation.local import CORRECT, NOT_NEEDED

EX = Path(__file__).resolve().parents[2] / "examples" / "citation"
EXPECTED = json.loads((EX / "ev_market.expected.json").read_text())
INPUTS = {
    "native": (EX / "ev_market.json", None),
    "mapped": (EX / "aiq_like_trace.json", EX / "mappings" / "aiq_like.yaml"),
}


def _frac(pair):
    return pair[0] / pair[1]


def check_expected(report, expected=EXPECTED):
    """Assert a CitationReport matches the expected findings exactly (errors, traces, metrics, agents)."""
    verdicts = {r.ref.address: r.verdict for rs in report.results.values() for r in rs}
    errors = {a: v for a, v in verdicts.items() if v not in (CORRECT, NOT_NEEDED)}
    assert errors == expected["local_errors"]
    assert sorted(a for a, v in verdicts.items() if v == NOT_NEEDED) == expected["not_needed"]
    traced = {t.sentence.address: {"origin": t.origin.ref.address, "error_type": t.error_type,
                                   "chain": [h.ref.invocation for h in t.chain]}
              for t in report.traced}
    assert traced == expected["traced"]
    rep = expected["report"]
    need = [f for f in report.final if f.needs_citation]
    assert len(need) == rep["needs_citation"] and sum(f.supported for f in need) == rep["supported"]
    cits = [v for f in need for v in f.relevant.values()]
    assert (len(cits), sum(cits)) == (rep["citations"], rep["relevant"])
    assert report.recall == pytest.approx(_frac(rep["recall"]))
    assert report.precision == pytest.approx(_frac(rep["precision"]))
    agents = {a.agent: a for a in report.agents}
    assert list(agents) == list(expected["agents"])
    for name, exp in expected["agents"].items():
        a = agents[name]
        assert (a.invocations, a.evaluated, a.final_errors) == (exp["invocations"], exp["evaluated"], exp["final_errors"])
        assert {k: v for k, v in a.errors.items() if v} == exp["errors"]
        assert a.final_share == pytest.approx(_frac(exp["final_share"]))
        assert a.unknown == 0


@pytest.mark.parametrize("form", sorted(INPUTS))
def test_offline_approximation_finds_the_expected_errors(form):
    path, mapping = INPUTS[form]
    report = audit_citations(load_run(path, mapping=mapping), OfflineCitationJudge())
    assert report.approximate and report.judge["name"] == "offline"
    check_expected(report)


@pytest.mark.parametrize("form", sorted(INPUTS))
def test_llm_path_against_scripted_server_finds_the_expected_errors(form):
    path, mapping = INPUTS[form]
    oracle = Oracle()
    run = load_run(path, mapping=mapping)
    with llm_session(oracle) as (server, client):
        report = audit_citations(run, LLMJudge(client))
    assert not report.approximate and report.judge["name"] == "llm"
    assert oracle.unknown_claims == []  # every sentence the judge asked about is in the script
    check_expected(report)
    kinds = [r["messages"][0]["content"].split("]")[0] for r in server.requests]
    assert {k.split()[-2] for k in kinds} == {"citation.need-citation", "citation.extract-spans", "citation.entails"}
    # one need-citation call per distinct sentence (answers are cached): 18 outputs, 13 distinct texts
    distinct = {o.text for inv in run.invocations for o in inv.outputs}
    assert len(distinct) == 13 and sum("need-citation" in k for k in kinds) == 13
    assert len(server.requests) == client.usage.calls == client.usage.requests


def test_the_two_paths_agree_on_every_sentence():
    """Offline and LLM verdicts coincide on the example (its sentences are built so both can decide them)."""
    run = load_run(INPUTS["native"][0])
    offline = audit_citations(run, OfflineCitationJudge())
    with llm_session(Oracle()) as (server, client):
        llm = audit_citations(run, LLMJudge(client))
    flat = lambda rep: [(r.ref.address, r.verdict) for rs in rep.results.values() for r in rs]  # noqa: E731
    assert flat(offline) == flat(llm)
    assert len(flat(offline)) == 18
