"""The IR (engine/trace/ir.py): lookups between steps, calls and outputs."""

from __future__ import annotations


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
