"""The LLM semantic oracle: pass/fail/unclear with cited addresses; unclear and errors stay unknown."""

from __future__ import annotations

from llm_server import Reply, evidence_of

from trajaudit.checkers.semantic import SemanticOracle
from trajaudit.checkers.semantic_llm import LLMSemanticOracle

PREDICATE = "the agent confirmed the order details with the user before cancelling"


def test_oracle_conforms_to_the_protocol(llm_client):
    assert isinstance(LLMSemanticOracle(llm_client), SemanticOracle)


def test_verdicts_and_cited_evidence(llm_server, llm_client, tau_runs):
    t = tau_runs["47"]
    step = t.decision_steps[4]
    oracle = LLMSemanticOracle(llm_client, window=2)
    llm_server.script(
        {"verdict": "fail", "evidence": [f"steps.{step.index}.content", "steps.999", "outside"], "reason": "no confirmation"},
        {"verdict": "unclear", "evidence": [], "reason": "cannot tell"},
        {"verdict": "pass", "evidence": [], "reason": "confirmed"},
        Reply(refusal="no"),
    )
    a = oracle.judge(PREDICATE, t, step, {"call": {"name": "cancel_pending_order"}})
    assert a.verdict == "fail" and a.evidence == (f"steps.{step.index}.content",)  # unseen addresses dropped
    assert a.reason == "no confirmation"
    ev = evidence_of(llm_server.requests[0])
    assert ev["predicate"] == PREDICATE and ev["bindings"] == {"call": {"name": "cancel_pending_order"}}
    shown = [r["step"] for r in ev["context"]]
    decisions_before = [s.index for s in t.decision_steps if s.index < step.index][-2:]
    assert shown[0] == decisions_before[0] and step.index in shown
    assert all(t.steps[i].kind == "tool" for i in shown if i > step.index)  # only its own tool outputs after it
    b = oracle.judge(PREDICATE + " (2)", t, step, {})
    assert (b.verdict, b.reason) == ("unknown", "unclear: cannot tell")  # unclear is never a pass
    c = oracle.judge(PREDICATE + " (3)", t, step, {})
    assert c.verdict == "pass" and c.evidence == (step.address,)
    d = oracle.judge(PREDICATE + " (4)", t, step, {})
    assert d.verdict == "unknown" and d.reason.startswith("LLM error:") and "refused: no" in d.reason
