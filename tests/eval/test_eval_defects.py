"""Defects a fresh user found in `eval` pairing and step ranges, `rules from-tools`, `claims` and
`rules list` messages: each test fails on the old behaviour."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from trajaudit.cli import main
from trajaudit.engine.diagnosis import Diagnosis
from trajaudit.eval import evaluate, load_gold
from trajaudit.eval.runner import check_step_ranges


def run(*args):
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)


def _jsonl(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


# --- 1. predictions of another data set must not be paired by a bare numeric id ---------------------

def test_who_and_when_gold_refuses_tau_runs_with_the_same_ids(ww_dir, tau_file, tmp_path):
    # tau task ids 2, 3, 4 are also Who&When file stems 2.json, 3.json, 4.json: the files differ
    pred = _jsonl(tmp_path / "tau.jsonl", [
        {"trajectory_id": tid, "file": str(tau_file), "record": rec, "critical_step": 3, "strategy": "x"}
        for rec, tid in enumerate(("2", "3", "4"))])
    gold = load_gold(ww_dir)
    d = Diagnosis.from_dict({"trajectory_id": "2", "file": str(tau_file), "record": 0, "critical_step": 3})
    assert "2" in gold and gold.match(d) is None
    r = run("eval", "--gold", ww_dir, "--pred", pred, "--format", "json", "--bootstrap", "10")
    assert r.exit_code == 1, r.output
    rep = json.loads(r.stdout)
    assert rep["n_matched"] == 0
    assert rep["problems"]["unmatched_predictions"][0] == "2 (its file trajectories.json is not the gold run's 2.json)"
    err = " ".join(r.stderr.split())
    assert ("warning: 3 of 3 predictions match no gold run in " in err
            and "3 of them share an id with a gold run but name another trace file: the predictions come from a "
                "different data set?" in err)


def test_tau_gold_with_who_and_when_predictions_warns_and_exits_1(tau_file, ww_dir, tmp_path):
    # the reported case: 126 Who&When diagnoses scored against tau ground truth (no files in the gold);
    # the 29 whose file stems equal tau task ids used to count as matched with exit code 0
    stems = sorted((p.stem for p in ww_dir.glob("*.json")), key=int)
    pred = _jsonl(tmp_path / "ww.jsonl", [
        {"trajectory_id": s, "file": f"elsewhere/{s}.json", "critical_step": 0, "strategy": "first"} for s in stems])
    r = run("eval", "--gold", tau_file.parent / "ground_truth.json", "--pred", pred, "--format", "json",
            "--bootstrap", "10")
    assert r.exit_code == 1, r.output
    rep = json.loads(r.stdout)
    assert (rep["n_predictions"], rep["n_matched"], len(rep["problems"]["unmatched_predictions"])) == (126, 29, 97)
    assert rep["problems"]["pairing"][0].startswith("97 of 126 predictions match no gold run in ")
    assert "the predictions come from a different data set?" in " ".join(r.stderr.split())


def test_a_few_unmatched_predictions_stay_a_note(tau_file, tmp_path):
    pred = _jsonl(tmp_path / "p.jsonl", [
        {"trajectory_id": "47", "file": str(tau_file), "record": 13, "critical_step": 18, "strategy": "x"},
        {"trajectory_id": "80", "file": str(tau_file), "record": 21, "critical_step": 25, "strategy": "x"},
        {"trajectory_id": "9999", "critical_step": 1, "strategy": "x"}])
    rep = evaluate(load_gold(tau_file.parent / "ground_truth.json"), [json.loads(x) for x in pred.read_text().split("\n")
                                                                      if x], resamples=10)
    assert rep.n_matched == 2 and "pairing" not in rep.problems
    assert rep.problems["unmatched_predictions"] == ["9999 (not in the gold set)"]


# --- 2. out-of-range predicted steps: kept, warned, step wrong, category and agent scored -------------

def test_negative_step_is_scored_wrong_but_its_category_counts(tau_file, tmp_path):
    gold_path = tau_file.parent / "ground_truth.json"
    g80 = load_gold(gold_path)["80"]
    pred = _jsonl(tmp_path / "p.jsonl", [
        {"trajectory_id": "80", "critical_step": -1, "category": g80.category, "agent": g80.agent, "strategy": "x"},
        {"trajectory_id": "47", "critical_step": 999, "category": "system_failure", "strategy": "x"}])
    r = run("eval", tau_file, "--gold", gold_path, "--pred", pred, "--format", "json", "--bootstrap", "10")
    assert r.exit_code == 0, r.output  # the old code skipped the -1 line (exit 1) but kept 999 (exit 0)
    err = " ".join(r.stderr.split())
    assert "warning: run 80: critical_step -1 is outside the run's 26 steps (valid: 0..25); scored as wrong" in err
    assert "warning: run 47: critical_step 999 is outside the run's" in err
    m = json.loads(r.stdout)["metrics"]
    assert m["category_critical"]["value"] == pytest.approx(1 / 29)
    assert m["agent_exact"]["value"] == pytest.approx(1 / 29)
    assert m["step_within_5"]["value"] == 0


def test_negative_step_never_earns_a_tolerance_credit(tmp_path):
    gold = load_gold(_jsonl(tmp_path / "g.jsonl", [{"id": "a", "critical_step": 0, "n_steps": 4}]))
    # without check_step_ranges (library callers): -1 is 1 away from 0 but names no message
    rep = evaluate(gold, [{"trajectory_id": "a", "critical_step": -1}], resamples=10)
    assert rep.metrics["step_within_1"].value == 0
    assert rep.problems["predictions"] == ["a: critical_step -1 is negative (counted wrong)"]
    # the range check clears it even when the run's length is unknown
    (d,), warnings = check_step_ranges(
        [Diagnosis.from_dict({"trajectory_id": "b", "critical_step": -3})], gold)
    assert d.critical_step is None
    assert warnings == ["run b: critical_step -3 is outside the run (valid: 0 or more; steps are 0-based message "
                        "indexes); scored as wrong"]


# --- 3. rules from-tools validates tool parameters like audit/check/eval --------------------------

def test_from_tools_rejects_an_invalid_parameter_type_like_check(tau_file, tmp_path):
    tools = json.loads((tau_file.parent / "tools.json").read_text())
    fn = tools[0].get("function", tools[0])
    prop = next(iter(fn["parameters"]["properties"]))
    fn["parameters"]["properties"][prop]["type"] = "strnig"
    bad = tmp_path / "tools.json"
    bad.write_text(json.dumps(tools))
    r = run("rules", "from-tools", bad)
    assert r.exit_code == 2, r.output
    msg = " ".join(r.stderr.split())
    assert msg.startswith(f"error: {bad}, element 0: tool {fn['name']!r}: invalid JSON Schema at "
                          f"parameters.properties.{prop}.type: 'strnig' is not valid")
    c = run("check", tau_file, "--tools", bad)
    assert c.exit_code == 2 and " ".join(c.stderr.split()) == msg


# --- 4. messages: no Python None, no "<rules>" placeholder ------------------------------------------

def test_claims_prints_none_in_words(tau_file):
    r = run("claims", tau_file, "--record", "3")  # run 12: no claim is unsupported
    assert r.exit_code == 0, r.output
    assert "first error step: none" in r.stdout and "None" not in r.stdout
    t = run("claims", tau_file, "--record", "3", "--format", "text")
    assert "first error step: none" in t.stdout and "None" not in t.stdout


def test_rules_list_unknown_pack_names_the_argument():
    r = run("rules", "list", "nonexistent")
    assert r.exit_code == 2
    err = " ".join(r.stderr.split())
    assert "<rules>" not in err
    assert err.startswith("error: rules list nonexistent: rule pack 'nonexistent' not found")


# --- a DATASET trace that cannot be read is reported, not silently dropped ---------------------------

def test_eval_pred_reports_unreadable_dataset_traces(ww_dir, tmp_path):
    good = ww_dir / "2.json"
    broken = tmp_path / "broken.json"
    broken.write_text('{"history": [', encoding="utf-8")
    pred = _jsonl(tmp_path / "p.jsonl", [
        {"trajectory_id": "2", "file": str(good), "critical_step": 0, "strategy": "first"}])
    r = run("eval", "--gold", ww_dir, "--pred", pred, "--format", "json", "--bootstrap", "10", good, broken)
    assert r.exit_code == 1, r.output
    err = " ".join(r.stderr.split())
    assert "skipped:" in err and "broken.json" in err
    assert "1 run(s) or prediction line(s) were skipped" in err
    assert json.loads(r.stdout)["n_matched"] == 1
