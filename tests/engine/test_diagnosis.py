"""Diagnoses (engine/diagnosis.py): which run a diagnosis belongs to."""

from __future__ import annotations


def test_other_run_is_the_rule_eval_pairs_by():
    from trajaudit.engine.diagnosis import Diagnosis, other_run

    d = Diagnosis.from_dict({"trajectory_id": "2", "file": "/a/2.json", "record": None, "critical_step": 1,
                             "category": "x", "taxonomy": "agentrx", "confidence": 0.1, "rationale": "",
                             "strategy": "s"})
    assert other_run(d, "/b/tau.json", 0) == "its file 2.json is not the run's tau.json"
    assert other_run(d, "/elsewhere/2.json", None) is None
    assert other_run(d, None, None) is None
