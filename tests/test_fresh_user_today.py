"""Papercuts a fresh-venv pass of the README found (load errors, reprs, CLI options, show)."""

from __future__ import annotations

import json

from click.testing import CliRunner

from trajaudit.cli import main


def test_fresh_user_papercuts(tmp_path):
    """A multi-run file without record= names the file; LoadResult prints a summary, not every run;
    audit takes -s like eval; show marks a failed tool output."""
    from pathlib import Path

    import pytest

    import trajaudit
    from trajaudit.errors import TraceFormatError

    sample = Path(__file__).resolve().parents[1] / "examples" / "data" / "tau_retail_sample.json"
    with pytest.raises(TraceFormatError, match=r"tau_retail_sample\.json: input holds 3 runs; pass record=N"):
        trajaudit.load(sample)
    assert repr(trajaudit.load_many([sample])) == "LoadResult(3 trajectories [2, 34, 74], 0 problems)"
    r = CliRunner().invoke(main, ["audit", str(sample), "-s", "first", "-o", str(tmp_path / "d.jsonl"), "-q"])
    assert r.exit_code == 0 and [json.loads(x)["strategy"] for x in (tmp_path / "d.jsonl").read_text().splitlines()] == ["first"] * 3
    trace = tmp_path / "t.json"
    trace.write_text(json.dumps([{"role": "user", "content": "hi"},
                                 {"role": "assistant", "content": None, "tool_calls": [{"id": "c", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
                                 {"role": "tool", "tool_call_id": "c", "name": "f", "content": "Error: boom"}]))
    out = CliRunner().invoke(main, ["show", str(trace), "--width", "60"]).output
    assert [ln for ln in out.splitlines() if "✗ failed" in ln] and "Error: boom" in out


def test_output_after_finds_the_first_answer_after_a_step():
    """Trajectory.output_after (the judge's recovery check uses it instead of rescanning the steps)."""
    import trajaudit

    t = trajaudit.load({"messages": [
        {"role": "assistant", "content": None, "tool_calls": [{"id": "a", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "a", "name": "f", "content": "Error: x"},
        {"role": "assistant", "content": None, "tool_calls": [{"id": "a", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "a", "name": "f", "content": "ok"}]})
    assert t.outputs_by_call_id == {"a": (1, 3)}
    assert [getattr(t.output_after("a", k), "index", None) for k in range(4)] == [1, 3, 3, None]
    assert t.output_after(None, 0) is None and t.output_after("zz", 0) is None


def test_rules_explain_shows_parameter_values_and_what_supersedes_the_rule():
    r = CliRunner().invoke(main, ["rules", "explain", "generic", "generic.protocol.confirmation-before-write"])
    assert r.exit_code == 0
    assert "    confirmation_request = (?i)\\b(?:confirm|proceed|shall i|should i|go ahead)\\b" in r.output
    assert "superseded by: tau_retail.explicit-yes-before-write" in r.output
    r = CliRunner().invoke(main, ["rules", "explain", "tau_retail", "explicit-yes-before-write"])
    assert "superseded by" not in r.output and '    write_tools = ["cancel_pending_order", ' in r.output


def test_audit_table_gives_the_message_position_of_a_split_anthropic_run(tmp_path):
    msgs = [{"role": "user", "content": "Cancel orders A1 and B2."},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "get_order", "input": {"id": "A1"}},
                                              {"type": "tool_use", "id": "t2", "name": "get_order", "input": {"id": "B2"}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": '{"status": "delivered"}'},
                                         {"type": "tool_result", "tool_use_id": "t2", "content": '{"status": "pending"}'}]},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "t3", "name": "cancel_order", "input": {"id": "A1"}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t3", "is_error": True,
                                          "content": "Error: delivered orders cannot be cancelled"}]},
            {"role": "assistant", "content": "Both orders are cancelled."}]
    src = tmp_path / "split.json"
    src.write_text(json.dumps({"system": "You are a shop agent.", "messages": msgs}))
    r = CliRunner().invoke(main, ["audit", str(src), "-o", str(tmp_path / "d.jsonl")])
    d = json.loads((tmp_path / "d.jsonl").read_text())
    assert (d["critical_step"], d["metadata"]["source_message"]) == (4, 3)
    assert "4 (msg 3)" in r.output
