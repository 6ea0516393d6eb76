"""`trajaudit eval` through click's CliRunner, on the shared annotated data."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from trajaudit.cli import main
from trajaudit.engine.diagnosis import Diagnosis
from trajaudit.eval import load_gold


def invoke(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


def cli(*args, env=None):
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False, env=env)


def _jsonl(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


@pytest.fixture()
def run():
    def _run(*args):
        return CliRunner().invoke(main, ["eval", *map(str, args)], catch_exceptions=False)

    return _run


def test_strategy_on_tau_json(run, tau_file):
    res = run(tau_file, "--gold", tau_file.parent / "ground_truth.json", "-s", "last", "--format", "json",
              "--bootstrap", "200")
    assert res.exit_code == 0, res.output
    rep = json.loads(res.stdout)
    assert (rep["n_gold"], rep["n_matched"], rep["strategies"]) == (29, 29, ["last"])
    m = rep["metrics"]
    assert m["step_exact"]["value"] == pytest.approx(3 / 29) and m["step_exact"]["n"] == 29
    lo, hi = m["step_exact"]["ci"]
    assert lo <= 3 / 29 <= hi
    assert m["category_critical"]["value"] == 0.0  # baselines answer "inconclusive"
    exp = rep["expected_random"]["step_exact"]["value"]
    assert 0.03 < exp < 0.06  # only decision-step gold is reachable
    assert rep["expected_random"]["mean_inverse_decision_steps"]["value"] > exp
    assert len(rep["misses"]) == 26 and rep["problems"] == {}


def test_pred_file_with_bad_lines_duplicates_and_strangers(run, tau_file, tau_gold, tmp_path):
    lines = []
    for e in tau_gold[:5]:  # perfect predictions for 5 runs, built from the raw 1-based labels
        rc = next(f for f in e["failures"] if str(f["failure_id"]) == str(e["root_cause"]["failure_id"]))
        lines.append(json.dumps({"trajectory_id": str(e["trajectory_id"]), "critical_step": rc["step_number"] - 1,
                                 "category": rc["failure_category"], "agent": rc["failed_agent"], "strategy": "oracle",
                                 "file": str(tau_file), "usage": {"calls": 1, "input_tokens": 10}}))
    lines.append(lines[0].replace('"critical_step"', '"ignored": 1, "critical_step"'))
    lines.append(json.dumps({"trajectory_id": "9999", "critical_step": 1, "category": "x", "strategy": "oracle"}))
    lines.append("{broken")
    lines.append(json.dumps({"critical_step": "three"}))
    pred = tmp_path / "d.jsonl"
    pred.write_text("\n".join(lines) + "\n")
    out = tmp_path / "report.md"
    res = run("--gold", tau_file.parent / "ground_truth.json", "--pred", pred, "--format", "markdown", "-o", out,
              "--misses", "-1")
    assert res.exit_code == 1, res.output  # two unreadable lines were skipped: the report is written, exit 1
    assert "line 8: invalid JSON" in res.stderr and "line 9: not a diagnosis" in res.stderr
    md = out.read_text()
    assert "| Exact step (= CS-Strict) | 17.2% |" in md  # 5 of 29; 24 missing count as wrong
    assert "| Category (critical) = RC-Acc | 17.2% |" in md and "| Agent (exact match) | 17.2% |" in md
    assert "missing predictions (24):" in md and "unmatched predictions (1): 9999 (not in the gold set)" in md
    # a run diagnosed twice in the file (--resume with other options appends): the last line is scored
    assert "holds 1 earlier diagnosis line(s) of runs diagnosed again further down" in " ".join(res.stderr.split())
    assert "duplicate predictions" not in md
    assert "LLM usage over 5 run(s): calls 5, input_tokens 50" in md  # the duplicate once
    assert "Misses (24; showing 24)" in md and "| 41 | 16 | — | missing | assistant:" in md


def test_who_and_when_gold_folder_is_the_dataset(run, ww_dir):
    res = run("--gold", ww_dir, "-s", "first", "--format", "json", "--bootstrap", "100")
    assert res.exit_code == 0, res.output
    rep = json.loads(res.stdout)
    m = rep["metrics"]
    # 20 of 126 labelled steps are the run's first non-terminal, non-user message (checked on the raw files)
    assert m["step_exact"]["value"] == pytest.approx(20 / 126) and m["step_exact"]["n"] == 126
    assert m["agent_exact"]["n"] == 126 and m["category_critical"]["n"] == 0 and m["category_critical"]["value"] is None
    assert rep["taxonomy"] is None and rep["confusion"] == {} and len(rep["per_agent"]) > 50
    assert rep["rows"][0]["key"] == "1" and rep["rows"][0]["gold_preview"].startswith("Excel_Expert: ")
    md = run("--gold", ww_dir, "-s", "first", "--format", "markdown", "--misses", "2", "--bootstrap", "50").stdout
    assert "| Category (critical) = RC-Acc |" not in md and "### By gold agent" in md and "showing 2)" in md


def test_table_output_and_usage_errors(run, tau_file, tmp_path):
    gt = tau_file.parent / "ground_truth.json"
    res = run(tau_file, "--gold", gt, "-s", "first", "--misses", "1", "--bootstrap", "50")
    assert res.exit_code == 0 and "Exact step (= CS-Strict)" in res.stdout and "Misses (29; showing 1)" in res.stdout
    res = run("--gold", gt)
    assert res.exit_code == 2 and "exactly one of --pred FILE or --strategy NAME" in res.stderr
    res = run("--gold", gt, "-s", "first")
    assert res.exit_code == 2 and "--strategy needs DATASET" in res.stderr
    res = run(tau_file, "--gold", gt, "-s", "frist")
    assert res.exit_code == 2 and "did you mean first" in res.stderr
    res = run(tau_file, "--gold", tau_file, "-s", "first")
    assert res.exit_code == 2 and "unknown gold format" in res.stderr and "Traceback" not in res.output
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    res = run("--gold", empty, "--pred", empty)
    assert res.exit_code == 2 and "no gold labels could be loaded" in res.stderr


def test_saved_predictions_round_trip(run, tau_file, tmp_path):
    gt, saved = tau_file.parent / "ground_truth.json", tmp_path / "random.jsonl"
    a = run(tau_file, "--gold", gt, "-s", "random", "--seed", "3", "--tools", tau_file.parent / "tools.json",
            "--save-pred", saved, "--format", "json", "--bootstrap", "50")
    assert a.exit_code == 0 and f"wrote 29 diagnoses to {saved}" in a.stderr
    assert len(saved.read_text().splitlines()) == 29
    b = run("--gold", gt, "--pred", saved, "--format", "json", "--seed", "3", "--bootstrap", "50")
    ra, rb = json.loads(a.stdout), json.loads(b.stdout)
    assert ra["metrics"] == rb["metrics"] and ra["rows"] == rb["rows"]  # previews found via the diagnoses' file
    assert rb["rows"][0]["gold_preview"].startswith("assistant: Currently, there are 11 available T-shirt")


def test_eval_refuses_two_strategies_instead_of_keeping_the_last(tau_file):
    r = CliRunner().invoke(main, ["eval", str(tau_file), "--gold", str(tau_file.parent / "ground_truth.json"),
                                  "-s", "first", "-s", "last"])
    assert r.exit_code == 2 and "one --strategy per eval (got first, last)" in r.output


def test_predictions_of_another_data_set_get_no_step_range_warnings(tmp_path, tau_file, ww_dir):
    """tau diagnoses scored against Who&When gold share ids ("4", "12") with other runs: they pair with
    nothing, so no run's length is used to judge their steps; one warning says what happened."""
    preds = tmp_path / "d.jsonl"
    r = CliRunner().invoke(main, ["audit", str(tau_file), "-o", str(preds), "-q"])
    assert r.exit_code == 0, r.output
    r = CliRunner().invoke(main, ["eval", "--gold", str(ww_dir), "--pred", str(preds)])
    assert r.exit_code == 1
    assert "outside the run" not in r.stderr
    assert "29 of 29 predictions match no gold run" in r.stderr


def test_who_and_when_gold_refuses_tau_runs_with_the_same_ids(ww_dir, tau_file, tmp_path):
    # tau task ids 2, 3, 4 are also Who&When file stems 2.json, 3.json, 4.json: the files differ
    pred = _jsonl(tmp_path / "tau.jsonl", [
        {"trajectory_id": tid, "file": str(tau_file), "record": rec, "critical_step": 3, "strategy": "x"}
        for rec, tid in enumerate(("2", "3", "4"))])
    gold = load_gold(ww_dir)
    d = Diagnosis.from_dict({"trajectory_id": "2", "file": str(tau_file), "record": 0, "critical_step": 3})
    assert "2" in gold and gold.match(d) is None
    r = cli("eval", "--gold", ww_dir, "--pred", pred, "--format", "json", "--bootstrap", "10")
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
    r = cli("eval", "--gold", tau_file.parent / "ground_truth.json", "--pred", pred, "--format", "json",
            "--bootstrap", "10")
    assert r.exit_code == 1, r.output
    rep = json.loads(r.stdout)
    assert (rep["n_predictions"], rep["n_matched"], len(rep["problems"]["unmatched_predictions"])) == (126, 29, 97)
    assert rep["problems"]["pairing"][0].startswith("97 of 126 predictions match no gold run in ")
    assert "the predictions come from a different data set?" in " ".join(r.stderr.split())


def test_negative_step_is_scored_wrong_but_its_category_counts(tau_file, tmp_path):
    gold_path = tau_file.parent / "ground_truth.json"
    g80 = load_gold(gold_path)["80"]
    pred = _jsonl(tmp_path / "p.jsonl", [
        {"trajectory_id": "80", "critical_step": -1, "category": g80.category, "agent": g80.agent, "strategy": "x"},
        {"trajectory_id": "47", "critical_step": 999, "category": "system_failure", "strategy": "x"}])
    r = cli("eval", tau_file, "--gold", gold_path, "--pred", pred, "--format", "json", "--bootstrap", "10")
    assert r.exit_code == 0, r.output  # the old code skipped the -1 line (exit 1) but kept 999 (exit 0)
    err = " ".join(r.stderr.split())
    assert "warning: run 80: critical_step -1 is outside the run's 26 steps (valid: 0..25); scored as wrong" in err
    assert "warning: run 47: critical_step 999 is outside the run's" in err
    m = json.loads(r.stdout)["metrics"]
    assert m["category_critical"]["value"] == pytest.approx(1 / 29)
    assert m["agent_exact"]["value"] == pytest.approx(1 / 29)
    assert m["step_within_5"]["value"] == 0


def test_eval_pred_reports_unreadable_dataset_traces(ww_dir, tmp_path):
    good = ww_dir / "2.json"
    broken = tmp_path / "broken.json"
    broken.write_text('{"history": [', encoding="utf-8")
    pred = _jsonl(tmp_path / "p.jsonl", [
        {"trajectory_id": "2", "file": str(good), "critical_step": 0, "strategy": "first"}])
    r = cli("eval", "--gold", ww_dir, "--pred", pred, "--format", "json", "--bootstrap", "10", good, broken)
    assert r.exit_code == 1, r.output
    err = " ".join(r.stderr.split())
    assert "skipped:" in err and "broken.json" in err
    assert "1 run(s) or prediction line(s) were skipped" in err
    assert json.loads(r.stdout)["n_matched"] == 1


def test_eval_pred_steps_outside_the_run_are_kept_warned_and_scored_wrong(tau_file, tmp_path):
    gold = tau_file.parent / "ground_truth.json"
    # run 80 has 26 steps and gold step 25: a prediction of 26 (no such message) was within ±1 before;
    # run 2's -1 used to drop the whole line (exit 1); both are now kept, warned, and the step is wrong
    pred = tmp_path / "d.jsonl"
    pred.write_text(json.dumps({"trajectory_id": "80", "critical_step": 26, "strategy": "x"}) + "\n"
                    + json.dumps({"trajectory_id": "2", "critical_step": -1, "strategy": "x"}) + "\n"
                    + json.dumps({"trajectory_id": "47", "critical_step": 18, "strategy": "x"}) + "\n")
    r = cli("eval", tau_file, "--gold", gold, "--pred", pred, "--format", "json", "--bootstrap", "20")
    assert r.exit_code == 0, r.output  # a warning, the same for both ends of the range
    err = r.stderr.replace("\n", "")
    assert "warning: run 80: critical_step 26 is outside the run's 26 steps (valid: 0..25); scored as wrong" in err
    assert "warning: run 2: critical_step -1 is outside the run's 32 steps (valid: 0..31); scored as wrong" in err
    rep = json.loads(r.stdout)
    assert rep["n_predictions"] == 3 and rep["n_matched"] == 3
    m = rep["metrics"]
    assert m["step_exact"]["value"] == pytest.approx(1 / 29)  # run 47 at its gold step 18
    assert m["step_within_1"]["value"] == pytest.approx(1 / 29)  # 26 no longer counts as 25 ± 1


def test_eval_exit_codes(tmp_path, tau_file):
    gold = tau_file.parent / "ground_truth.json"
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    r = invoke("eval", "--gold", gold, "--pred", empty)
    assert r.exit_code == 2 and "nothing to score" in r.output
    pred = tmp_path / "p.jsonl"
    pred.write_text('{"trajectory_id": "2", "critical_step": 6, "category": "x", "strategy": "s"}\n{oops\n')
    r = invoke("eval", "--gold", gold, "--pred", pred, "--format", "json")
    assert r.exit_code == 1 and "skipped" in r.output


# Fresh-user pass: `eval -s offline --run-timeout 1e-6 --save-pred pred.jsonl` never marked a diagnosis
# degraded (metadata.degraded absent; only metadata.incomplete said the budget was exceeded) nor
# warned, where `audit` does both. eval's runner now marks them as audit does (pipeline.degraded) and
# eval warns with audit's words (cli.common.warn_degraded).

def test_eval_marks_and_warns_about_runs_out_of_rule_time(tmp_path):
    from hostile_kit import good_run, write_json

    runs = write_json(tmp_path / "runs.json", [good_run("r1"), good_run("r2", item="X2")])
    gold = _jsonl(tmp_path / "gold.jsonl", [{"id": "r1", "critical_step": 4}, {"id": "r2", "critical_step": 4}])
    pred = tmp_path / "pred.jsonl"
    cut = cli("eval", runs, "--gold", gold, "-s", "offline", "--run-timeout", "0.000001", "--save-pred", pred,
              "--format", "json", "--bootstrap", "10")
    assert cut.exit_code == 0, cut.output
    saved = [json.loads(x) for x in pred.read_text().splitlines()]
    assert [d["trajectory_id"] for d in saved] == ["r1", "r2"]
    assert all(d["metadata"]["degraded"] == d["metadata"]["incomplete"] for d in saved)
    assert all(d["metadata"]["degraded"][0].startswith("run time budget of 1e-06 s exceeded") for d in saved)
    assert ("warning: 2 run(s) ran out of rule-evaluation time (--run-timeout): the checks left were 'unknown', so "
            "their diagnoses rest on partial evidence (metadata.degraded)") in " ".join(cut.stderr.split())
    whole = cli("eval", runs, "--gold", gold, "-s", "offline", "--save-pred", tmp_path / "p2.jsonl", "--format",
                "json", "--bootstrap", "10")
    assert whole.exit_code == 0 and "rule-evaluation time" not in whole.stderr
    assert not any("degraded" in json.loads(x)["metadata"] for x in (tmp_path / "p2.jsonl").read_text().splitlines())


# Hostile-user pass: `eval --bootstrap 100000000000000000000` ran until killed (each metric's interval
# resamples and sorts that many means) and `--bootstrap -5` quietly meant no intervals. The option now
# takes 0 (no intervals, said in its help) to 100,000; anything else is a usage error naming the range.

def test_bootstrap_is_bounded(tmp_path):
    from hostile_kit import good_run, write_json

    runs = write_json(tmp_path / "runs.json", [good_run("r1"), good_run("r2", item="X2")])
    gold = _jsonl(tmp_path / "gold.jsonl", [{"id": "r1", "critical_step": 4}, {"id": "r2", "critical_step": 4}])
    args = ("eval", runs, "--gold", gold, "-s", "offline", "--format", "json", "--bootstrap")
    for bad in ("-5", str(10**20)):  # -5 first: the old code took it (exit 0) and hung on 10**20
        r = invoke(*args, bad)
        assert r.exit_code == 2 and f"Invalid value for '--bootstrap': {bad} is not in the range 0<=x<=100000" in r.output
    none = cli(*args, "0")
    assert none.exit_code == 0 and json.loads(none.stdout)["metrics"]["step_exact"]["ci"] is None
    some = cli(*args, "50")
    assert some.exit_code == 0 and json.loads(some.stdout)["metrics"]["step_exact"]["ci"] == [1.0, 1.0]


# Hostile-user pass: `eval -s offline --rules BROKEN.yaml` scored diagnoses made on rules that could not
# be evaluated (10 / 0, len() of a step range) without a word, as `audit` did. It now warns in audit's
# words (cli.unknowns); the report on stdout and the exit code are unchanged.

def test_eval_warns_when_a_rule_could_not_be_evaluated(tmp_path):
    from hostile_kit import good_run, write_json
    from test_check import BROKEN_PACK

    pack = tmp_path / "bad.yaml"
    pack.write_text(BROKEN_PACK)
    runs = write_json(tmp_path / "runs.json", [good_run("r1"), good_run("r2", item="X2")])
    gold = _jsonl(tmp_path / "gold.jsonl", [{"id": "r1", "critical_step": 4}, {"id": "r2", "critical_step": 4}])
    args = ("eval", runs, "--gold", gold, "-s", "offline", "--format", "json", "--bootstrap", "10")
    broken = cli(*args, "--rules", pack)
    assert broken.exit_code == 0, broken.output
    assert ("warning: 14 check(s) could not be evaluated in 2 of 2 run(s) (bad.div at 6 step(s), first reason: "
            "evaluation error: division by zero (10 / 0); bad.range at 6 step(s)") in " ".join(broken.stderr.split())
    assert json.loads(broken.stdout)["metrics"]["step_exact"]["value"] == 1.0
    fine = cli(*args)
    assert fine.exit_code == 0 and "could not be evaluated" not in fine.stderr


# Hostile-user pass: with a dataset given but no gold run usable for the step metrics (its critical step
# outside the run, or ids that match no run), eval noted "no trajectories given: previews, normalized
# distance and the random baseline's expected value are left out" — beside the trajectories it was given.
# The note now says what is missing.

def test_the_random_baseline_note_does_not_deny_the_trajectories_given(tmp_path):
    from hostile_kit import good_run, write_json

    runs = write_json(tmp_path / "runs.json", [good_run("r1"), good_run("r2", item="X2")])
    gold = _jsonl(tmp_path / "gold.jsonl", [{"id": "r1", "critical_step": 99}])
    r = cli("eval", runs, "--gold", gold, "-s", "offline", "--format", "json", "--bootstrap", "10")
    assert r.exit_code == 0, r.output
    notes = json.loads(r.stdout)["notes"]
    assert ("no gold run with a usable critical step was found among the trajectories given: the random baseline's "
            "expected value is left out") in notes
    assert not any(n.startswith("no trajectories given") for n in notes)
    pred = _jsonl(tmp_path / "pred.jsonl", [{"trajectory_id": "r1", "critical_step": 4}])
    alone = json.loads(cli("eval", "--gold", gold, "--pred", pred, "--format", "json", "--bootstrap", "10").stdout)
    assert any(n.startswith("no trajectories given") for n in alone["notes"])


# Hostile-user pass: `eval --pred d.jsonl` without DATASET reads the traces the diagnoses name; a file
# that is no longer there (moved, or eval run from another folder) was left out without a word, and its
# runs had no preview, run length or normalized distance in the report. A note now names such files.

def test_eval_names_the_trace_files_of_the_diagnoses_that_are_not_there(tmp_path):
    from hostile_kit import good_run, write_json

    runs = write_json(tmp_path / "runs.json", [good_run("r1"), good_run("r2", item="X2")])
    gold = _jsonl(tmp_path / "gold.jsonl", [{"id": "r1", "critical_step": 4}, {"id": "r2", "critical_step": 4}])
    gone = tmp_path / "moved.json"
    pred = _jsonl(tmp_path / "pred.jsonl", [{"trajectory_id": "r1", "critical_step": 4, "file": str(runs)},
                                            {"trajectory_id": "r2", "critical_step": 4, "file": str(gone)}])
    r = cli("eval", "--gold", gold, "--pred", pred, "--format", "json", "--bootstrap", "10")
    assert r.exit_code == 0, r.output
    assert (f"note: 1 trace file(s) named by the diagnoses are not there (their runs get no preview, run length or "
            f"normalized distance; give the traces as DATASET): {gone}") in " ".join(r.stderr.split())
    full = cli("eval", runs, "--gold", gold, "--pred", pred, "--format", "json", "--bootstrap", "10")
    assert full.exit_code == 0 and "not there" not in full.stderr
