"""Gold steps are checked against the run's length in source messages (what gold counts), not its
number of IR steps: the two differ for renumbered runs (an AgentRx step record with an empty step,
an Anthropic message split into several steps). Review findings; each test fails without its fix."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from trajaudit import load
from trajaudit.cli import main
from trajaudit.eval.gold_items import GoldItem
from trajaudit.eval.runs import ScoredRun, find_run, index_trajectories, run_length, step_positions

DIALECTS = Path(__file__).resolve().parents[1] / "data" / "dialects"


def _eval(*args: str) -> dict:
    res = CliRunner().invoke(main, ["eval", *args, "--format", "json"])
    assert res.exit_code == 0, res.output
    return json.loads(res.output[res.output.index("{"):])


def _record_with_empty_step(tmp_path: Path) -> Path:
    """An AgentRx step record of 3 steps whose step 2 has no substeps: 2 IR steps, 3 source steps."""
    rec = {"trajectory_id": "r1", "instruction": "Find the price.", "steps": [
        {"index": 1, "substeps": [{"sub_index": 0, "role": "human", "content": "Find the price."}]},
        {"index": 2, "substeps": []},
        {"index": 3, "substeps": [{"sub_index": 0, "role": "WebSurfer", "content": "The price is $5."}]}]}
    data = tmp_path / "magentic_dataset.jsonl"
    data.write_text(json.dumps(rec) + "\n")
    return data


def test_gold_step_on_the_last_source_step_of_a_run_with_an_empty_step_is_scored(tmp_path):
    """Was: gold step_number 3 (position 2) was 'outside the run's 2 steps' (len(steps) after the
    empty step was dropped) and excluded; without the data set the same prediction scored exact."""
    data = _record_with_empty_step(tmp_path)
    gold = tmp_path / "magentic_one.jsonl"
    gold.write_text(json.dumps({
        "trajectory_id": "r1", "failures": [{"failure_id": "1", "step_number": 3, "failure_category":
                                            "Invention of New Information", "failed_agent": "WebSurfer"}],
        "root_cause_failure_id": "1"}) + "\n")
    pred = tmp_path / "pred.jsonl"
    pred.write_text(json.dumps({"trajectory_id": "r1", "critical_step": 1, "metadata": {"source_message": 2},
                                "category": "Invention of New Information", "agent": "WebSurfer"}) + "\n")
    with_runs = _eval("--gold", str(gold), "--pred", str(pred), str(data))
    without = _eval("--gold", str(gold), "--pred", str(pred))
    for rep in (with_runs, without):
        assert "gold_without_critical_step" not in rep["problems"]
        assert rep["metrics"]["step_exact"]["value"] == 1.0 and rep["metrics"]["step_exact"]["n"] == 1
        assert [(r["gold_step"], r["pred_step"]) for r in rep["rows"]] == [(2, 2)]
    assert with_runs["rows"][0]["n_steps"] == 3


def test_gold_step_past_the_last_message_of_a_split_run_is_excluded(tmp_path):
    """Was: an Anthropic run of 4 messages is 6 steps (one message holds 3 tool results), so gold
    positions 4 and 5 — past the last message — passed the check and were scored."""
    data = tmp_path / "anthropic_parallel.jsonl"  # the run id is the file stem#record
    data.write_text((DIALECTS / "anthropic_parallel.jsonl").read_text().splitlines()[0] + "\n")
    assert len(json.loads(data.read_text())["messages"]) == 4
    pred = tmp_path / "pred.jsonl"
    pred.write_text(json.dumps({"trajectory_id": "anthropic_parallel#0", "critical_step": 5,
                                "metadata": {"source_message": 3}}) + "\n")
    gold = tmp_path / "gold.jsonl"
    for step, excluded in ((5, True), (4, True), (3, False)):
        gold.write_text(json.dumps({"id": "anthropic_parallel#0", "critical_step": step}) + "\n")
        rep = _eval("--gold", str(gold), "--pred", str(pred), str(data))
        if excluded:
            assert rep["problems"]["gold_without_critical_step"] == [
                f"anthropic_parallel#0: gold critical_step {step} is outside the run's 4 steps (valid: 0..3); "
                "excluded from step metrics"]
            assert rep["metrics"]["step_exact"]["n"] == 0
        else:
            assert "gold_without_critical_step" not in rep["problems"]
            assert rep["metrics"]["step_exact"]["value"] == 1.0


def test_run_bookkeeping_counts_source_messages(tmp_path):
    data = tmp_path / "anthropic_parallel.jsonl"
    data.write_text((DIALECTS / "anthropic_parallel.jsonl").read_text().splitlines()[0] + "\n")
    t = load(data, record=0)
    assert len(t.steps) == 6 and len(json.loads(data.read_text())["messages"]) == 4
    assert step_positions(t) == (0, 1, 2, 2, 2, 3) and run_length(t) == 4 and run_length(None) is None
    r = ScoredRun(GoldItem(t.id, 2), None, t, None, None, None, positions=step_positions(t))
    assert (r.length, r.position(4), r.step_at(2), r.step_at(3)) == (4, 2, 2, 5)
    index = index_trajectories([t])
    assert find_run(index, "no-such-id", GoldItem("x", 0, file=str(data), record=0), None) is t
