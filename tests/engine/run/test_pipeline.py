"""The pipeline for one run (engine/run/pipeline.py): the diagnosis names the source message of its critical step."""

from __future__ import annotations

import json
import socket

import pytest


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


def closed_port_url() -> str:
    """An http://127.0.0.1 URL on a port nothing listens on (bound, then closed)."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return f"http://127.0.0.1:{port}/v1"


def test_the_batch_loop_stops_on_an_unreachable_endpoint(llm_config, tau_runs):
    import dataclasses

    from trajaudit.engine.run.batch import audit_trajectories
    from trajaudit.engine.run.pipeline import AuditSpec
    from trajaudit.errors import LLMUnreachableError

    runs = list(tau_runs.values())[:3]
    cfg = dataclasses.replace(llm_config, base_url=closed_port_url(), max_retries=0, cache_path=None)
    done = []
    with pytest.raises(LLMUnreachableError):
        audit_trajectories(runs, AuditSpec(strategy="all-at-once", llm=cfg), progress=done.append)
    assert done == []  # the first run raised; the others were not tried
