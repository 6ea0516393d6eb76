"""Rule message templates (engine/dsl/template.py): a quoted field is clipped to its head and tail."""

from __future__ import annotations


def test_a_message_field_quoting_a_huge_output_keeps_head_and_tail():
    """Was: run-ends-after-failed-call quotes {last.content} whole, so a 1 MB failing output made a
    2 MB rationale (38 KB on Who&When run 110). A field is clipped to its head and tail; the tail keeps
    a traceback's last line."""
    import trajaudit

    out = "Traceback (most recent call last):\n" + "  frame\n" * 100_000 + "NameError: name 'x' is not defined"
    doc = {"messages": [{"role": "user", "content": "Run it."},
                        {"role": "assistant", "content": None, "tool_calls": [
                            {"id": "c1", "type": "function", "function": {"name": "run_code", "arguments": "{}"}}]},
                        {"role": "tool", "tool_call_id": "c1", "name": "run_code", "content": out}]}
    d = trajaudit.audit(doc)
    assert d.critical_step == 1 and len(d.rationale) < 3000
    assert "NameError: name 'x' is not defined" in d.rationale and f"[{len(out)} characters]" in d.rationale
