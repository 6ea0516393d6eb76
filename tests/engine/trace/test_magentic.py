"""Magentic-One traces: hand-written fixtures (tests/data/magentic, see build_fixtures.py) in the
Who&When hand-crafted and AgentRx bare-list shapes, and the general mechanisms they needed:
embedded observations are evidence (engine/trace/observation.py), JSON in agent text is not quotation,
inline ``` is not code, a code runner's output belongs to the step that wrote the code."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from trajaudit import audit, load
from trajaudit.cli import main as cli
from trajaudit.engine.claims import build_claim_graph
from trajaudit.engine.claims.model import Support
from trajaudit.engine.strategies.llm.views import snap_step
from trajaudit.engine.strategies.offline_judge import is_consequential_action
from trajaudit.engine.trace.observation import observation_start, split_observation

MAG = Path(__file__).resolve().parents[2] / "data" / "magentic"
RUNS = sorted(p.stem for p in (MAG / "who_and_when").glob("*.json"))
_SPAN = re.compile(r"^steps\.(\d+)\.content\[(\d+):")


def _ww(name: str):
    return load(MAG / "who_and_when" / f"{name}.json")


def test_both_shapes_load_to_the_same_steps():
    assert len(RUNS) == 7
    for name in RUNS:
        a, b = _ww(name), load(MAG / "agentrx" / f"{name}.json")
        assert (a.source.format, b.source.format) == ("who_and_when", "magentic")
        assert [(s.kind, s.agent) for s in a.steps] == [(s.kind, s.agent) for s in b.steps]
        assert a.task == b.task == a.steps[0].content
    t = _ww("m4_code_never_fixed")
    kinds = {(s.kind, s.agent, s.metadata.get("phase"), s.metadata.get("target")) for s in t.steps}
    assert ("user", None, None, None) in kinds
    assert ("agent", "Orchestrator", "thought", None) in kinds
    assert ("agent", "Orchestrator", None, "ComputerTerminal") in kinds
    assert ("tool", "ComputerTerminal", None, None) in kinds
    assert ("agent", "FileSurfer", None, None) in kinds
    assert "mistake_agent" not in json.dumps(t.to_dict())


def test_observation_headings():
    web = ("I typed 'x' into the search bar.\n\nHere is a screenshot of [x - Search](https://b.com/?q=x). "
           "The viewport shows 20% of the webpage.\nAutomatic OCR of the page screenshot has detected the "
           "following text:\n\nPopulation 12,483")
    assert split_observation(web)[0] == "I typed 'x' into the search bar.\n\n"
    viewer = "Address: file:///w/a.xlsx\nViewport position: Showing page 1 of 1.\n=====\n| a | 1 |"
    assert observation_start(viewer) == 0
    text_mode = "Address: bing: apple board\nTitle: apple board - Search\nViewport position: Showing page 1 of 2."
    assert observation_start(text_mode) == 0
    # a heading inside a sentence is the agent's own words, not the framework's section
    assert observation_start("I said: Here is a screenshot of the page, see above.") is None
    assert split_observation("no page here") == ("no page here", "")


def test_embedded_observations_are_evidence_not_claims():
    for name in RUNS:
        t = _ww(name)
        cg = build_claim_graph(t)
        for c in cg.claims:
            k = observation_start(t.steps[c.step].content)
            m = _SPAN.match(c.address)
            assert k is None or m is None or int(m.group(2)) < k, (name, c.address, c.value)
    cg = build_claim_graph(_ww("m1_blocked_pricing"))
    assert len(cg.claims) < 20  # 51 when every OCR line, metadata key and URL of a page was a claim
    # the misread figure is the WebSurfer's claim; the page it shows (12,483) is not
    t = _ww("m2_misread_population")
    cg = build_claim_graph(t)
    bad = [c for c in cg.claims if c.value == "12843"]
    # ... and it conflicts with the page: two adjacent digits swapped (claims.support.transposed)
    assert [(c.step, c.agent, c.status, c.evidence_value) for c in bad] == [(10, "WebSurfer", Support.CONFLICTING, 12483)]
    assert not [c for c in cg.claims if c.value == "12483"]


def test_own_observation_supports_the_report():
    t = load({"question": "population?", "history": [
        {"role": "human", "content": "What is the population of Harlow Creek?"},
        {"role": "WebSurfer", "content": "The population was 12,483 at the 2020 census.\n\nHere is a screenshot "
         "of [Harlow Creek](https://en.wikipedia.org/wiki/Harlow_Creek). The viewport shows 9% of the webpage.\n"
         "Automatic OCR of the page screenshot has detected the following text:\n\nPopulation (2020) 12,483"},
        {"role": "Orchestrator (final answer)", "content": "FINAL ANSWER: 12,483"}]})
    cg = build_claim_graph(t)
    c = next(c for c in cg.claims if c.value == "12483")
    assert (c.step, c.status) == (1, Support.DIRECT)
    assert c.evidence_address.startswith("steps.1.content[")
    assert int(_SPAN.match(c.evidence_address).group(2)) >= observation_start(t.steps[1].content)


def test_json_in_agent_text_is_not_quotation():
    t = _ww("m5_invented_year")
    cg = build_claim_graph(t)
    ledgers = {s.index for s in t.steps if s.content.startswith("Updated Ledger:")}
    quoted = [c for c in cg.claims if c.step in ledgers and c.kind == "quoted"]
    assert quoted == []  # keys such as "is_request_satisfied" and reason strings were quoted claims
    invented = [c for c in cg.claims if c.value == "1894"]
    assert [(c.step, c.status, c.consequential) for c in invented][:1] == [(11, Support.MISSING, True)]


def test_inline_fence_is_not_code_and_runner_output_goes_to_the_code():
    t = _ww("m4_code_never_fixed")
    assert "```python code blocks" in t.steps[1].content
    assert not is_consequential_action(t.steps[1])
    assert is_consequential_action(t.steps[7])
    assert t.code_authors == {10: 7, 16: 13}
    d = audit(t)
    # the fitted ranker picks the first failing script (the gold step: it was never fixed), not the
    # second attempt (the hand-set judge chose 13 on run-ends-after-failed-call, which no longer fires:
    # the team went on after that failure, issue 17); the finding there is the runner's traceback (a
    # warning), so the basis is weak and the category system_failure (gold: invalid_invocation)
    assert (d.critical_step, d.agent, d.basis) == (7, "Assistant", "weak")
    assert d.category == "system_failure" and any(c.step == 13 for c in d.candidates)


@pytest.mark.parametrize("name,step,agent,category", [
    ("m1_blocked_pricing", 4, "WebSurfer", "guardrails_triggered"),
    # 12,843 stated where the page shows 12,483: a misreading (claims.support.transposed), not an invention
    ("m2_misread_population", 10, "WebSurfer", "misinterpretation_of_tool_output"),
    ("m5_invented_year", 11, "Orchestrator", "invention_of_new_information"),
    # the download path the Orchestrator assumed (step 11), which FileSurfer then reports missing
    # (generic.provenance.invented-resource-not-found), not the later invented figure (step 17)
    ("m7_missing_file", 11, "Orchestrator", "invention_of_new_information"),
])
def test_offline_judge_on_fixtures(name, step, agent, category):
    d = audit(_ww(name))
    assert (d.critical_step, d.agent, d.category) == (step, agent, category)


def test_eval_scores_magentic_agents(tmp_path):
    """AgentRx gold (1-based step_number) on bare lists: agents compared by name, steps 0-based."""
    pred = tmp_path / "p.jsonl"
    r = CliRunner().invoke(cli, ["audit", str(MAG / "agentrx"), "-o", str(pred)])
    assert r.exit_code == 0, r.output
    r = CliRunner().invoke(cli, ["eval", "--gold", str(MAG / "agentrx_ground_truth.json"), "--pred", str(pred),
                                 str(MAG / "agentrx"), "--format", "json", "--bootstrap", "10"])
    assert r.exit_code == 0, r.output
    metrics = json.loads(r.output)["metrics"]
    # steps: 6 of 7 exact under the shipped (fitted) weights (4 under the hand-set judge: m4's first
    # failing script is now found); agents: all seven (m4's failing code is blamed on the Assistant that
    # wrote it, not on the Orchestrator's "please run it"; 6 of 7 before code_authors)
    assert round(metrics["step_exact"]["value"] * 7) == 6
    assert round(metrics["agent_exact"]["value"] * 7) == 7


def test_who_and_when_page_views_are_observations(ww_dir):
    """Real data: CaptainAgent's WebServing_Expert logs text-mode page views ("Address: … Viewport
    position: …"); their content is what the agent was shown, so no claim is introduced there."""
    t = load(ww_dir / "28.json")
    assert observation_start(t.steps[1].content) == 0
    cg = build_claim_graph(t)
    assert not [c for c in cg.claims if c.step == 1]


def test_runner_output_derives_from_the_code_that_produced_it():
    """A value the runner printed derives from the values the code's author passed (claim graph), as
    judge.blame attributes the output: not from the Orchestrator's "please run it" in between."""
    t = load({"question": "Add 1520 and 2480.", "history": [
        {"role": "human", "content": "Add 1520 and 2480."},
        {"role": "Orchestrator (-> Assistant)", "content": "Write code that adds the two numbers."},
        {"role": "Assistant", "content": "```python\nprint(1520 + 2480)\n```"},
        {"role": "Orchestrator (-> ComputerTerminal)", "content": "Please run the script."},
        {"role": "ComputerTerminal", "content": "The script ran, then exited with code 0\nIts output was:\n4000"},
        {"role": "Orchestrator (final answer)", "content": "FINAL ANSWER: 4000"}]})
    assert t.code_authors == {4: 2}
    by_value = {c.value: c for c in build_claim_graph(t).claims}
    total = by_value["4000"]
    assert (total.step, total.status, total.evidence_address[:15]) == (5, Support.DIRECT, "steps.4.content")
    assert total.derived_from == [by_value["1520"].id, by_value["2480"].id]
    assert by_value["1520"].final_steps == [5]  # the final answer's step, pushed back to the code's inputs


def test_llm_step_on_runner_output_snaps_to_the_code_author():
    """A model naming the runner's output step is attributed the code's author, not the nearest step
    (the Orchestrator's "please run it")."""
    t = _ww("m4_code_never_fixed")
    assert snap_step(t, 10) == (7, "model named tool output step 10; attributed to step 7, which wrote the code it ran")
    assert snap_step(t, 16)[0] == 13
    assert snap_step(t, 9) == (9, None)


def test_observation_memo_is_bounded_and_cleared_with_the_other_caches():
    """perf.md: every per-process cache is bounded by text size and emptied by clear_caches()."""
    from trajaudit.engine.run.evidence import clear_caches
    from trajaudit.engine.trace import observation

    clear_caches(packs=False)
    page = "I opened it.\nAddress: file:///a.txt\nViewport position: Showing page 1 of 1.\n"
    huge = "x" * (observation.MEMO_MAX_CHARS + 1) + "\n" + page
    assert observation_start(huge) == observation.MEMO_MAX_CHARS + 1 + len("\nI opened it.\n")
    assert observation._memo.cache_info().currsize == 0  # a long message is searched, not pinned
    assert observation_start(page) == len("I opened it.\n")
    assert observation._memo.cache_info().currsize == 1
    clear_caches(packs=False)
    assert observation._memo.cache_info().currsize == 0
