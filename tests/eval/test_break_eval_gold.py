"""Defect found by a break-it pass over `trajaudit eval` with odd gold files. Fails without its fix."""

from __future__ import annotations

import copy
import json

from click.testing import CliRunner

from trajaudit.cli import main


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
