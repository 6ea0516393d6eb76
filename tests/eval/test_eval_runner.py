"""trajaudit/eval/runner.py: reading diagnoses files (read_diagnoses) and the step-range check before
scoring (check_step_ranges)."""

from __future__ import annotations


def test_read_diagnoses_keeps_a_negative_step_for_the_range_check(tmp_path):
    from trajaudit.eval.runner import read_diagnoses

    p = tmp_path / "d.jsonl"
    p.write_text('{"trajectory_id": "a", "critical_step": 3}\n\n{"trajectory_id": "b", "critical_step": -2}\n'
                 '{"trajectory_id": "c", "critical_step": "4"}\n')
    diags, problems = read_diagnoses(p)
    assert [(d.trajectory_id, d.critical_step) for d in diags] == [("a", 3), ("b", -2)]
    assert [pr.record for pr in problems] == [4]  # only the non-integer step is a bad line
    assert "line 4: not a diagnosis (needs trajectory_id and an integer or null critical_step)" in problems[0].message
