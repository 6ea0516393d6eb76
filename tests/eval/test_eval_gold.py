"""Gold loaders on the real annotated files, and on the bad inputs they must report."""

from __future__ import annotations

import copy
import json

import pytest
from click.testing import CliRunner
from strategy_helpers import with_evidence

from trajaudit.cli import main
from trajaudit.engine.diagnosis import Diagnosis
from trajaudit.eval.gold import GoldFormatError, detect_gold_format, load_gold


def test_tau_agentrx_gold(tau_file, tau_runs):
    gold = load_gold(tau_file.parent / "ground_truth.json")
    assert gold.format == "agentrx" and len(gold) == 29 and gold.problems == []
    assert list(gold)[:4] == ["2", "3", "4", "12"]
    t2 = gold["2"]
    assert t2.critical_step == 6  # step_number 7 - 1
    assert t2.category == "misinterpretation_of_tool_output" and t2.agent == "Assistant"
    assert [(f.step, f.category, f.failure_id) for f in t2.failures] == [
        (2, "instruction_adherence_failure", "1"), (6, "misinterpretation_of_tool_output", "2")]
    assert t2.error_steps == (2, 6) and "1-based" in t2.numbering
    assert "11 available T-shirt options" in tau_runs["2"].steps[6].content
    assert set(gold) == set(tau_runs)
    # the annotated role at the converted index matches the annotated agent (README: 38 of 39)
    kinds = {"Assistant": "agent", "User": "user"}
    hits = [tau_runs[k].steps[f.step].kind == kinds[f.agent] for k, g in gold.items() for f in g.failures]
    assert (sum(hits), len(hits)) == (38, 39)
    assert sum(tau_runs[k].steps[g.critical_step].kind == kinds[g.agent] for k, g in gold.items()) == 28
    cats = [g.category for g in gold.values()]
    assert cats.count("underspecified_user_intent") == 8 and cats.count("system_failure") == 1


def test_who_and_when_gold_from_trace_folder(ww_dir, ww_runs):
    gold = load_gold(ww_dir)
    assert gold.format == "who_and_when" and len(gold) == 126 and gold.problems == []
    g1 = gold["1"]
    assert (g1.critical_step, g1.agent, g1.category) == (0, "Excel_Expert", None)
    assert g1.n_steps == len(ww_runs["1"].steps) and g1.file.endswith("1.json") and "0-based" in g1.numbering
    assert set(gold) == set(ww_runs)
    same_agent = sum((ww_runs[k].steps[g.critical_step].agent or "").lower() == g.agent.lower() for k, g in gold.items())
    assert same_agent == 123  # README: 123 of 126
    one = load_gold(ww_dir / "10.json")
    assert list(one) == ["10"] and one["10"].critical_step == gold["10"].critical_step


def test_agentrx_variants_and_problems(tmp_path):
    doc = [
        {"trajectory_id": "m-1", "failures": [
            {"failure_id": "1", "step_number": "5", "failure_category": "Guardrails Triggered", "failed_agent": "WebSurfer"},
            {"failure_id": "2", "step_number": 9, "failure_category": "Made Up Thing", "failed_agent": "Orchestrator"}],
         "root_cause": {"failure_id": 2}},
        {"trajectory_id": 7, "failures": [{"failure_id": 1, "step_number": 3, "failure_category": "System Failure"}],
         "root_cause": {}},
        {"trajectory_id": 8, "failures": [{"failure_id": 1, "step_number": 0}], "root_cause": {"failure_id": 3}},
        {"trajectory_id": 7, "failures": [], "root_cause": {"failure_id": 1}},
        {"failures": []},
    ]
    p = tmp_path / "gt.json"
    p.write_text(json.dumps(doc))
    gold = load_gold(p)
    assert list(gold) == ["m-1", "7", "8"]
    m = gold["m-1"]  # string ids vs integer root cause compare as strings
    assert (m.critical_step, m.category, m.agent) == (8, "Made Up Thing", "Orchestrator")
    assert m.failures[0].step == 4 and m.failures[0].category == "guardrails_triggered"
    assert gold["7"].critical_step is None and gold["7"].problem == "no root_cause.failure_id"
    assert gold["8"].critical_step is None and "matches no failure" in gold["8"].problem
    text = "\n".join(gold.problems)
    for bit in ("'Made Up Thing' is not in taxonomy 'agentrx'", "8: failures[0] has no usable 1-based step_number",
                "duplicate gold entry for '7'", "entry 4: no trajectory_id"):
        assert bit in text
    p.write_text(json.dumps({"x": {"failures": [{"failure_id": 1, "step_number": 2}], "root_cause": {"failure_id": 1}}}))
    assert load_gold(p, "agentrx")["x"].critical_step == 1


def test_jsonl_gold(tmp_path):
    lines = [
        {"file": "runs/a.json", "critical_step": 4, "tolerance_span": [3, 6], "category": "Search Coverage Gap",
         "taxonomy": "searchauditor", "agent": "assistant", "error_steps": [6, 4], "repair_rubrics": ["r1", "r2"]},
        {"id": 12, "critical_step": 2, "category": "Invalid Invocation"},
        {"file": "runs/multi.jsonl", "record": 3, "critical_step": 9, "tolerance_span": [1, 2]},
        {"id": "bad", "critical_step": -1},
        {"critical_step": 1},
    ]
    p = tmp_path / "gold.jsonl"
    p.write_text("\n".join(json.dumps(x) for x in lines) + "\n{not json\n")
    gold = load_gold(p)
    assert gold.format == "jsonl" and list(gold) == ["a", "12", "multi#3"]
    a = gold["a"]
    assert (a.critical_step, a.tolerance_span, a.category, a.taxonomy) == (4, (3, 6), "search_coverage_gap", "searchauditor")
    assert a.error_steps == (4, 6) and a.repair_rubrics == ("r1", "r2")
    assert gold["12"].category == "invalid_invocation" and gold["12"].error_steps is None
    text = "\n".join(gold.problems)
    assert "line 3: tolerance_span [1, 2] does not contain critical_step 9" in text
    assert "line 4: $.critical_step" in text and "line 5:" in text and "line 6: invalid JSON" in text
    d = Diagnosis(trajectory_id="whatever", critical_step=9, category="x", strategy="s",
                  file="/elsewhere/multi.jsonl", record=3)
    assert gold.match(d) == "multi#3"
    assert gold.match(Diagnosis(trajectory_id="12", critical_step=0, category="x", strategy="s")) == "12"
    assert gold.match(Diagnosis(trajectory_id="nope", critical_step=0, category="x", strategy="s")) is None


def test_format_detection_and_errors(tmp_path, tau_file):
    assert detect_gold_format(tau_file.parent / "ground_truth.json") == "agentrx"
    with pytest.raises(GoldFormatError, match="unknown gold format"):
        load_gold(tau_file)  # the trajectories, not the labels
    with pytest.raises(GoldFormatError, match="no such file"):
        load_gold(tmp_path / "missing.json")
    bad = tmp_path / "bad.json"
    bad.write_text("{oops")
    with pytest.raises(GoldFormatError, match="not valid JSON"):
        load_gold(bad)
    with pytest.raises(GoldFormatError, match="unknown gold format 'csv'"):
        load_gold(bad, "csv")
    (tmp_path / "ww").mkdir()
    (tmp_path / "ww" / "x.json").write_text(json.dumps({"history": [{"content": "hi", "role": "user"}],
                                                        "mistake_step": "3", "mistake_agent": "A"}))
    (tmp_path / "ww" / "y.json").write_text("[]")
    ww = load_gold(tmp_path / "ww")
    assert ww["x"].critical_step is None and "outside history" in ww["x"].problem
    assert any("y.json: not a Who&When file" in p for p in ww.problems)


def test_agentrx_magentic_form_end_to_end(tmp_path):
    """AgentRx Magentic-One gold: keyed by the trace file's stem, root-cause id a string, failure ids ints."""
    from pathlib import Path

    from trajaudit.engine.strategies.context import AuditContext
    from trajaudit.engine.strategies.registry import default_strategies
    from trajaudit.engine.trace.loader import load
    from trajaudit.eval.evaluate import evaluate

    trace = Path(__file__).resolve().parents[2] / "examples" / "traces" / "magentic_one.json"
    gt = tmp_path / "magentic_one_ground_truth.json"
    gt.write_text(json.dumps([{"trajectory_id": "magentic_one", "root_cause": {"failure_id": "2"}, "failures": [
        {"failure_id": 1, "step_number": 4, "failure_category": "Guardrails Triggered", "failed_agent": "WebSurfer"},
        {"failure_id": 2, "step_number": 5, "failure_category": "Invention of New Information",
         "failed_agent": "Orchestrator"}]}]))
    gold = load_gold(gt)
    assert gold["magentic_one"].critical_step == 4 and gold["magentic_one"].category == "invention_of_new_information"
    t = load(trace)
    assert t.steps[4].agent == "Orchestrator" and "museum opens at 9:00" in t.steps[4].content
    last = default_strategies().get("last").diagnose(*with_evidence(t, AuditContext()))  # step 5, Orchestrator (-> WebSurfer)
    r = evaluate(gold, [last], trajectories=[t], resamples=10)
    assert r.value("step_exact") == 0.0 and r.value("step_within_1") == 1.0 and r.value("agent_exact") == 1.0
    assert r.value("category_terminal") == 0.0 and r.rows[0].gold_preview.startswith("Orchestrator: WebSurfer is blocked")


def test_a_gold_step_past_the_loaded_run_is_excluded_and_reported(tmp_path, tau_file, tau_gold):
    """Was: AgentRx or JSONL gold naming a step past the end of the run (here 9998 in a 32-message
    run) was scored silently: a distance of 9992 steps entered step_distance_mean, no warning. Now
    it is listed under gold_without_critical_step and left out of the step metrics (as a Who&When
    mistake_step out of range already was)."""
    runs = json.loads(tau_file.read_text())[:3]
    data = tmp_path / "three.json"
    data.write_text(json.dumps(runs))
    ids = [str(r["task_id"]) for r in runs]
    pred = tmp_path / "pred.jsonl"
    pred.write_text("".join(json.dumps({"trajectory_id": i, "file": str(data), "record": n, "critical_step": 5,
                                        "category": "intent_plan_misalignment", "agent": "assistant"}) + "\n"
                            for n, i in enumerate(ids)))
    jsonl = tmp_path / "gold.jsonl"
    jsonl.write_text("".join(json.dumps({"id": i, "critical_step": s, "category": "intent_plan_misalignment"}) + "\n"
                             for i, s in zip(ids, (10**6, 5, 7), strict=True)))
    gold = [copy.deepcopy(g) for g in tau_gold if str(g["trajectory_id"]) in ids]
    root = next(f for f in gold[0]["failures"] if f["failure_id"] == gold[0]["root_cause"]["failure_id"])
    root["step_number"] = 9999
    agentrx = tmp_path / "ground_truth.json"
    agentrx.write_text(json.dumps(gold))
    for path, step in ((jsonl, 10**6), (agentrx, 9998)):
        res = CliRunner().invoke(main, ["eval", "--gold", str(path), "--pred", str(pred), str(data), "--format", "json"])
        assert res.exit_code == 0, res.output
        report = json.loads(res.output[res.output.index("{"):])
        assert report["problems"]["gold_without_critical_step"] == [
            f"{ids[0]}: gold critical_step {step} is outside the run's {len(runs[0]['traj'])} steps "
            f"(valid: 0..{len(runs[0]['traj']) - 1}); excluded from step metrics"]
        assert report["metrics"]["step_exact"]["n"] == 2
        assert report["metrics"]["step_distance_mean"]["value"] < 100
    jsonl_report = json.loads(CliRunner().invoke(main, ["eval", "--gold", str(jsonl), "--pred", str(pred), str(data),
                                                        "--format", "json"]).output)
    assert jsonl_report["metrics"]["step_exact"]["value"] == 0.5  # run 2: 5 == 5; run 3: 5 != 7
    assert jsonl_report["metrics"]["step_distance_mean"]["value"] == 1.0


# Hostile-user pass: an empty gold file (or an empty .json in a Who&When gold folder) was "not valid JSON:
# Expecting value: line 1 column 1 (char 0)", where an empty trace file is "file is empty".

def test_an_empty_gold_file_says_so(tmp_path):
    empty = tmp_path / "gold.json"
    empty.write_text("")
    with pytest.raises(GoldFormatError) as e:
        load_gold(empty)
    assert str(e.value) == f"{empty}: file is empty"
    folder = tmp_path / "ww"
    folder.mkdir()
    (folder / "1.json").write_text("  \n")
    r = CliRunner().invoke(main, ["eval", "--gold", str(folder), "--pred", str(empty)])
    assert r.exit_code == 2 and f"gold: {folder / '1.json'}: file is empty (skipped)" in r.stderr
