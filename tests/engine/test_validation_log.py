"""The validation log (engine/validation_log.py): rows and dicts round-trip, slim logs keep their pass count."""

from __future__ import annotations

import json

from trajaudit.engine.run.batch import audit_trajectories
from trajaudit.engine.run.pipeline import AuditSpec
from trajaudit.engine.validation_log import ValidationLog


def test_a_log_without_passes_round_trips_its_pass_count(tau_runs):
    """to_rows/from_rows and to_dict/from_dict give back an equal log, also for a slim log."""
    full = audit_trajectories([tau_runs["105"]], AuditSpec()).results[0].log
    slim = full.without_passes()
    assert slim.summary()["verdicts"]["pass"] == 388
    by_rows = ValidationLog.from_rows(slim.to_rows())
    assert by_rows == slim and by_rows.summary() == full.summary()
    by_dict = ValidationLog.from_dict(json.loads(slim.to_json()))
    assert by_dict.dropped_passes == 388 and by_dict.summary() == full.summary()
    assert ValidationLog.from_dict(json.loads(full.to_json())).dropped_passes == 0
