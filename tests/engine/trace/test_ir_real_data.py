"""The IR on the real annotated data: every run loads, validates, round-trips; concrete facts hold."""

from __future__ import annotations

import json

from trajaudit import Trajectory
from trajaudit.engine.schema import schema_errors


def test_all_tau_runs_load_validate_and_round_trip(tau_runs):
    assert len(tau_runs) == 29
    for t in tau_runs.values():
        d = t.to_dict()
        assert schema_errors("trajectory", d) == []
        assert Trajectory.from_dict(d) == t
        assert Trajectory.from_dict(json.loads(json.dumps(d))) == t
        assert [s.index for s in t.steps] == list(range(len(t.steps)))


def test_all_who_and_when_runs_load_validate_and_round_trip(ww_runs):
    assert len(ww_runs) == 126
    for t in ww_runs.values():
        d = t.to_dict()
        assert schema_errors("trajectory", d) == []
        assert Trajectory.from_dict(json.loads(json.dumps(d))) == t
        assert t.task  # the question becomes the task


def test_tau_task_2_count_claim_and_its_tool_output(tau_runs):
    t = tau_runs["2"]
    claim = t.steps[6]
    assert claim.kind == "agent" and claim.is_decision and claim.agent == "assistant"
    assert "11 available T-shirt options" in claim.content
    out = t.steps[5]
    assert out.kind == "tool" and out.tool_output.name == "get_product_details"
    call_step, call = t.call_for(out)
    assert call_step.index == 4 and call.name == "get_product_details"
    assert call.arguments == {"product_id": "9523456873"}
    assert t.steps[0].kind == "system" and t.steps[0].content.startswith("# Retail agent policy")
    assert t.steps[6].source_number == 7  # tau's own 1-based index is kept


def test_tau_info_is_never_in_the_ir(tau_runs):
    for t in tau_runs.values():
        text = json.dumps(t.to_dict())
        assert '"info"' not in text
        assert "reward_info" not in text
        assert "instruction" not in t.metadata


def test_tau_gold_step_conversion_lands_on_the_named_agent(tau_runs, tau_gold):
    """AgentRx step_number is 1-based over all messages: the gold message is steps[step_number - 1]."""
    matched = total = 0
    for g in tau_gold:
        t = tau_runs[str(g["trajectory_id"])]
        for f in g["failures"]:
            s = t.steps[int(f["step_number"]) - 1]
            total += 1
            role_ok = (f["failed_agent"].lower() == "assistant" and s.kind == "agent") or (
                f["failed_agent"].lower() == "user" and s.kind == "user")
            matched += role_ok
    assert total == 39 and matched == 38  # the data README's own check: 38 of 39
    # tau task 2's root cause (failure 2, step_number 7) is the count claim at index 6
    g2 = next(g for g in tau_gold if g["trajectory_id"] == 2)
    root = next(f for f in g2["failures"] if str(f["failure_id"]) == str(g2["root_cause"]["failure_id"]))
    assert root["step_number"] - 1 == 6


def test_who_and_when_gold_step_conversion(ww_dir, ww_runs):
    """Who&When mistake_step is a 0-based string index into history."""
    matches = 0
    for p in sorted(ww_dir.glob("*.json")):
        raw = json.loads(p.read_text())
        t = ww_runs[p.stem]
        step = t.steps[int(raw["mistake_step"])]
        matches += step.agent == raw["mistake_agent"]
        assert "mistake_agent" not in json.dumps(t.to_dict())
    assert matches == 123  # data README: 123 of 126
    t1 = ww_runs["1"]
    assert t1.steps[0].agent == "Excel_Expert" and t1.steps[0].is_decision
    assert t1.steps[1].kind == "tool" and t1.steps[1].agent == "Computer_terminal"
    assert set(t1.system_prompts) >= {"Excel_Expert"}


def test_outline_rows(tau_runs):
    rows = tau_runs["2"].outline(60)
    assert rows[4] == {"index": 4, "kind": "agent", "agent": "assistant", "tool": "get_product_details",
                       "preview": 'get_product_details({"product_id": "9523456873"})'}
    assert rows[5]["tool"] == "get_product_details" and rows[5]["kind"] == "tool"
    assert all(len(r["preview"]) <= 60 for r in rows)
