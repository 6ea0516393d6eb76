"""The pipeline for one run (engine/run/pipeline.py): the diagnosis names the source message of its critical step."""

from __future__ import annotations

import json


def test_a_split_anthropic_run_names_the_message_of_the_critical_step(tmp_path):
    """Was: critical_step 4 for the cancel_order message that is messages[3] in the file (parallel
    tool results before it became two steps), and neither the diagnosis nor `show` said so."""
    from click.testing import CliRunner

    import trajaudit
    from trajaudit.cli import main

    doc = {"system": "Obtain explicit user confirmation (yes) before cancelling anything.", "messages": [
        {"role": "user", "content": "Cancel order W1 and W2"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "get_order", "input": {"id": "W1"}},
                                          {"type": "tool_use", "id": "t2", "name": "get_order", "input": {"id": "W2"}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": '{"status": "pending"}'},
                                     {"type": "tool_result", "tool_use_id": "t2", "content": '{"status": "pending"}'}]},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t3", "name": "cancel_order", "input": {"id": "W1"}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t3", "content": "ok"}]},
        {"role": "assistant", "content": "Done."}]}
    d = trajaudit.audit(doc)
    assert (d.critical_step, d.metadata["source_message"]) == (4, 3)
    assert "source_message" not in trajaudit.audit({"messages": doc["messages"][:2]}).metadata  # not split
    path = tmp_path / "run.json"
    path.write_text(json.dumps(doc))
    out = CliRunner().invoke(main, ["show", str(path), "--width", "40"], env={"COLUMNS": "120"}).output
    assert "msg" in out
    row = next(line for line in out.splitlines() if "cancel_order(" in line)
    assert [c.strip() for c in row.split("│")[1:4]] == ["4", "3", "agent"]
