"""The offline judge, the local test (seed 003 Alg. 1/2) case by case, validation-log records, HTML fragment."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from trajaudit.citation import (
    OfflineCitationJudge,
    audit_citations,
    load_run,
    render_html,
    run_from_dict,
    to_validation_log,
)
from trajaudit.citation.judge import content_words, numbers
from trajaudit.citation.local import evaluate_run
from trajaudit.engine.schema import schema_errors

EX = Path(__file__).resolve().parents[2] / "examples" / "citation" / "ev_market.json"
J = OfflineCitationJudge()


def test_numbers_must_match_exactly():
    assert numbers("rose 35 percent, to 1,200 units (12.50%) in 2023") == {"35%", "1200", "12.5%", "2023"}
    assert J.entails(["Sales grew 35% compared with 2022."], "Sales grew 35% over 2022.")
    assert not J.entails(["Sales grew 35% compared with 2022."], "Sales grew 36% over 2022.")
    assert not J.entails(["Sales grew 35% compared with 2022."], "Sales grew 35 units over 2022.")
    assert J.entails(["Revenue was 1,200 dollars."], "Revenue was 1200 dollars.")
    assert not J.entails([], "Revenue was 1200 dollars.")


def test_content_word_coverage_threshold():
    premise = ["Public charging points worldwide grew by 40% in 2023."]
    assert J.entails(premise, "Public charging points grew 40% in 2023.")
    assert not J.entails(premise, "Public charging points in rural Africa tripled their usage in 2023.")
    assert OfflineCitationJudge(coverage=0.5).entails(premise, "Public charging stations grew 40% in 2023.")
    assert "numbers not in support: 50%" in J.explain(premise, "Charging points grew 50% in 2023.")
    assert content_words("The batteries' prices") == {"battery", "price"}
    with pytest.raises(ValueError):
        OfflineCitationJudge(coverage=0)


@pytest.mark.parametrize("sentence, needs", [
    ("Global electric car sales reached 14 million in 2023.", True),
    ("China leads the global electric car market.", True),
    ("This report reviews the global electric vehicle market.", False),
    ("In summary, the market is changing quickly across many regions.", False),
    ("What drives electric car adoption in emerging markets?", False),
    ("Market overview", False),
    ("It grew.", False),
])
def test_needs_citation_policy(sentence, needs):
    assert J.needs_citation(sentence, "") is needs


def _run(outputs, inputs=None, docs=None):
    """A two-invocation run: a source reader 'src' and a writer 'w' reading its outputs plus extra inputs."""
    docs = docs or [{"id": "A", "text": "Sales grew 35% in 2023."}, {"id": "B", "text": "Prices fell 14% in 2023."}]
    return run_from_dict({
        "format": "trajaudit.citation-run", "documents": docs,
        "invocations": [
            {"id": "src", "agent": "searcher", "inputs": [{"document": d["id"]} for d in docs],
             "outputs": ["Sales grew 35% in 2023 [A].", "Prices fell 14% in 2023 [B]."]},
            {"id": "w", "agent": "writer", "inputs": [{"from": "src"}, *(inputs or [])], "outputs": outputs}]})


@pytest.mark.parametrize("sentence, verdict", [
    ("Sales grew 35% in 2023 [A].", "correct"),
    ("Sales grew 35% and prices fell 14% in 2023 [A, B].", "correct"),
    ("Sales grew 50% in 2023 [A].", "hallucination"),
    ("Sales grew 35% in 2023.", "uncited_output"),
    ("Sales grew 35% and prices fell 14% in 2023 [A].", "insufficient_citations"),
    ("Sales grew 35% in 2023 [B].", "insufficient_citations"),
    ("Sales grew 35% in 2023 in Norway, where 90% of cars are electric [A].", "uncited_input_reliance"),
])
def test_local_test_verdicts(sentence, verdict):
    extra = [{"kind": "note", "text": "In Norway, 90% of new cars are electric."}]
    run = _run([sentence], inputs=extra)
    (r,) = evaluate_run(run, J)["w"]
    assert r.verdict == verdict, r.reason
    if verdict == "uncited_input_reliance":
        assert any(not s.cited and s.address == "invocations.w.inputs.2.text[0:40]" for s in r.spans)
    if verdict == "insufficient_citations":
        assert "cover only part of the needed ones" in r.reason


@pytest.mark.parametrize("output, verdict", [
    ({"text": "Sales grew 35% in 2023. [A]", "kind": "snippet"}, "correct"),
    ({"text": "Sales grew 35% in 2023.", "kind": "snippet"}, "uncited_output"),
    ({"text": "Sales grew 35% in 2023. [B]", "kind": "snippet"}, "insufficient_citations"),
    ({"text": "Sales tripled in 2023. [A]", "kind": "snippet"}, "hallucination"),
    ({"text": "Sales grew 35% in 2023.", "kind": "snippet", "needs_citation": False}, "not_needed"),
    ({"text": "Norway sells 90% electric cars. [A]", "kind": "snippet"}, "uncited_input_reliance"),
])
def test_snippet_verdicts(output, verdict):
    run = run_from_dict({"format": "trajaudit.citation-run",
                         "documents": [{"id": "A", "text": "Sales grew 35% in 2023."},
                                       {"id": "B", "text": "Prices fell 14% in 2023."}],
                         "invocations": [{"id": "s", "agent": "searcher",
                                          "inputs": [{"document": "A"}, {"document": "B"},
                                                     {"text": "Norway sells 90% electric cars."}],
                                          "outputs": [output]}]})
    (r,) = evaluate_run(run, J)["s"]
    assert r.verdict == verdict, r.reason


def test_correct_local_chain_without_an_upstream_error_is_untraced():
    """The writer faithfully repeats a searcher sentence, but the trace's document does not support it."""
    run = run_from_dict({"format": "trajaudit.citation-run",
                         "documents": [{"id": "A", "text": "Sales grew 35% in 2023."}],
                         "invocations": [
                             {"id": "s", "agent": "searcher", "inputs": [{"text": "Sales grew 40% in 2023.",
                                                                          "citations": ["A"], "kind": "snippet"}],
                              "outputs": ["Sales grew 40% in 2023 [A]."]},
                             {"id": "w", "agent": "writer", "inputs": [{"from": "s"}],
                              "outputs": ["Sales grew 40% in 2023 [A]."]}]})
    rep = audit_citations(run, J)
    (t,) = rep.traced
    assert t.status == "untraced" and t.origin is None and [h.ref.invocation for h in t.chain] == ["w", "s"]
    assert rep.recall == 0 and rep.agents[0].final_share is None
    log = to_validation_log(rep)
    assert log.incomplete == ["w.outputs.0: final-report error not traced (no invocation on its support path has a local error)"]


def test_validation_log_of_the_example():
    rep = audit_citations(load_run(EX), J)
    log = to_validation_log(rep)
    d = log.to_dict()
    assert schema_errors("validation_log", d) == []
    assert log.skipped == 1  # the meta sentence that needs no citation
    by_rule = d["summary"]["fail_by_rule"]
    assert by_rule == {"citation.local-test": 5, "citation.report-support": 5, "citation.trace-origin": 5}
    origins = [r for r in log.records if r.rule_id == "citation.trace-origin"]
    assert sorted((r.step, r.targets[0]) for r in origins) == [
        (1, "hallucination"), (3, "insufficient_citations"), (3, "uncited_input_reliance"),
        (4, "hallucination"), (4, "uncited_output")]
    src = next(r for r in origins if r.step == 1)
    assert [e.address for e in src.evidence] == ["invocations.orchestrator-1.outputs.4",
                                                 "invocations.researcher-1.outputs.2", "invocations.searcher-2.outputs.1"]
    assert src.severity == "error" and src.message.startswith("[approximate] final-report sentence")
    assert all(r.bindings["approximate"] is True and r.origin == "citation" for r in log.records)
    uir = next(r for r in log.records if r.rule_id == "citation.local-test" and r.targets == ("uncited_input_reliance",))
    assert uir.evidence[0].address == "invocations.researcher-1.outputs.4"
    assert uir.evidence[1].address == "invocations.researcher-1.inputs.0.text[76:192]"
    assert uir.evidence[1].note == "supporting span, uncited" and "90%" in uir.evidence[1].value
    passes = [r for r in log.records if r.rule_id == "citation.report-support" and r.verdict == "pass"]
    assert len(passes) == 1 and passes[0].evidence[0].address == "invocations.orchestrator-1.outputs.1"


def test_html_fragment_is_self_contained_and_escaped():
    doc = {"format": "trajaudit.citation-run", "documents": [{"id": "A", "text": "Sales grew 35% in 2023."}],
           "invocations": [{"id": "w", "agent": "<script>alert(1)</script>", "inputs": [{"document": "A"}],
                            "outputs": ["Sales grew 99% in 2023 <b>[A]</b>."]}]}
    html = render_html(audit_citations(run_from_dict(doc), J))
    assert html.startswith('<section class="ta-cite"') and html.rstrip().endswith("</section>")
    assert "<script" not in html and "&lt;script&gt;" in html and "&lt;b&gt;" in html
    assert not re.search(r"(src|href)\s*=|url\(|@import|https?://", html)
    assert "Approximate." in html


def test_html_shows_each_propagation_chain():
    html = render_html(audit_citations(load_run(EX), J))
    assert html.count('<div class="ta-trace">') == 5
    trace = html.split("invocations.orchestrator-1.outputs.4</code> — ")[1].split('<div class="ta-trace">')[0]
    head, chain = trace.split('<ol class="ta-chain">', 1)
    assert "<b>searcher-2</b> introduced" in head
    assert chain.index("<b>orchestrator-1</b>") < chain.index("<b>researcher-1</b>") < chain.index("<b>searcher-2</b>")
    assert chain.count('class="ta-origin"') == 1
    assert "Final-report citation recall: <b>16.7%</b>" in html and "Citation precision: <b>20.0%</b>" in html


def _ms_agent_like(final_citations):
    """MS-Agent-like: researchers cite evidence notes as [Note: <hex>]; the report must cite sources (App. I.5)."""
    doc = {"format": "trajaudit.citation-run", "citation_pattern": r"\[(?:Note:\s*)?([0-9a-f]{6}|https?://[^\]\s]+)\]",
           "documents": [{"id": "D", "url": "https://ev.example/a", "text": "Sales grew 35% in 2023."}],
           "invocations": [
               {"id": "optimizer", "agent": "content-optimizer", "inputs": [{"document": "D"}],
                "outputs": ["Sales grew 35% in 2023 [https://ev.example/a]."]},
               {"id": "researcher", "agent": "researcher",
                "inputs": [{"from": "optimizer.outputs.0", "id": "a1b2c3", "citations": ["a1b2c3"]}],
                "outputs": ["Sales grew 35% in 2023 [Note: a1b2c3]."]},
               {"id": "reporter", "agent": "orchestrator", "inputs": [{"from": "researcher"}],
                "outputs": ["Sales grew 35% in 2023 [Note: a1b2c3]."]}]}
    if final_citations:
        doc["final_citations"] = final_citations
    return audit_citations(run_from_dict(doc), J)


def test_note_citations_are_fine_inside_but_not_in_the_final_report():
    kept = _ms_agent_like(None)
    assert [r.verdict for rs in kept.results.values() for r in rs] == ["correct"] * 3
    (t,) = kept.traced
    assert t.status == "untraced" and kept.final[0].relevant == {"a1b2c3": False}
    dropped = _ms_agent_like("documents")
    assert [r.verdict for rs in dropped.results.values() for r in rs] == ["correct", "correct", "uncited_output"]
    (t,) = dropped.traced
    assert t.status == "traced" and t.origin.ref.invocation == "reporter" and dropped.recall == 0
