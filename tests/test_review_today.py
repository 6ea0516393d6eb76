"""Regression tests for bugs found reviewing the streaming-batch / dialect-adapter changes."""

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


def test_jsonl_lines_end_at_newline_only(tmp_path):
    """A JSON string may hold a raw U+2028 (json.dumps(..., ensure_ascii=False) writes one): the JSONL
    reader split the line there, lost the record and shifted the record numbers."""
    import json

    from trajaudit import load_many

    recs = [{"messages": [{"role": "user", "content": f"line one{sep}line two"}, {"role": "assistant", "content": "ok"}]}
            for sep in ("\u2028", "\u2029", "\x85", "\x1c")] + [{"messages": [{"role": "user", "content": "hi"}]}]
    src = tmp_path / "runs.jsonl"
    src.write_text("\r\n".join(json.dumps(r, ensure_ascii=False) for r in recs) + "\r\n", encoding="utf-8")
    res = load_many([src])
    assert res.problems == [] and [t.source.record for t in res.trajectories] == [0, 1, 2, 3, 4]
    assert res.trajectories[0].steps[0].content == "line one\u2028line two"


def test_repair_and_eval_read_jsonl_lines_the_same_way(tmp_path):
    """repair finds a JSONL run's line by its record number, and eval/repair read diagnoses and gold
    JSONL: all split at newlines only, as the loader does (a raw U+2028 in a record)."""
    import json

    from trajaudit.engine.trace.text import jsonl_lines

    text = json.dumps({"a": "x\u2028y"}, ensure_ascii=False) + "\r\n" + json.dumps({"b": 1}) + "\n"
    assert [json.loads(x) for x in jsonl_lines(text) if x.strip()] == [{"a": "x\u2028y"}, {"b": 1}]
    assert len(text.splitlines()) == 3  # what the readers used to see


def test_repair_resumes_the_right_jsonl_record_after_a_line_with_u2028(tmp_path):
    import json

    from click.testing import CliRunner

    from trajaudit.cli import main

    first = {"id": "one", "messages": [{"role": "user", "content": "a\u2028b"}, {"role": "assistant", "content": "x"}]}
    second = {"id": "two", "messages": [
        {"role": "user", "content": "Cancel order W1"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c", "type": "function", "function": {"name": "cancel_order", "arguments": '{"order_id": "W1"}'}}]},
        {"role": "tool", "tool_call_id": "c", "name": "cancel_order", "content": "Error: cannot cancel"},
        {"role": "assistant", "content": "Cancelled!"}]}
    src = tmp_path / "runs.jsonl"
    src.write_text(json.dumps(first, ensure_ascii=False) + "\n" + json.dumps(second) + "\n", encoding="utf-8")
    out = tmp_path / "resumed.json"
    r = CliRunner().invoke(main, ["repair", str(src), "--record", "1", "--template", "-o", str(out)])
    assert r.exit_code == 0, r.output
    doc = json.loads(out.read_text())
    msgs = doc["messages"] if isinstance(doc, dict) else doc
    assert msgs[0]["content"] == "Cancel order W1" and msgs[-1]["role"] == "user"
    assert "OpenAI messages 0..0 verbatim" in r.output  # the record's own line, not a rebuild from the IR
