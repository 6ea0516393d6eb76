"""Adapters on small hand-made inputs: OpenAI chat, Magentic-One, JSONL, the mapping adapter, detection."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from trajaudit import TraceFormatError, load, load_path
from trajaudit.engine.trace.ir import FLAG_MALFORMED_ARGUMENTS, FLAG_ORPHAN_TOOL_OUTPUT, FLAG_UNANSWERED_CALL
from trajaudit.engine.trace.loader import load_document

EX = Path(__file__).resolve().parents[3] / "examples"


def test_openai_chat_example():
    t = load(EX / "traces" / "openai_chat.json")
    assert t.source.format == "openai"
    assert [s.kind for s in t.steps] == ["system", "user", "agent", "tool", "agent", "tool", "agent"]
    assert t.steps[4].tool_calls[0].arguments == {"flight": "TP1940"}
    assert t.steps[5].tool_output.call_id == "call_2"
    assert t.final_answer.startswith("Done! I booked TP1940")
    assert t.task.startswith("Book me the cheapest flight")


def test_openai_bare_list_and_list_of_runs(tmp_path):
    msgs = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]
    p = tmp_path / "bare.json"
    p.write_text(json.dumps(msgs))
    assert load(p).steps[1].agent == "assistant"
    p2 = tmp_path / "runs.json"
    p2.write_text(json.dumps([{"id": "a", "messages": msgs}, {"id": "b", "messages": msgs}]))
    res = load_path(p2)
    assert [t.id for t in res.trajectories] == ["a", "b"]
    assert [t.source.record for t in res.trajectories] == [0, 1]


def test_magentic_roles_encode_the_agent():
    t = load(EX / "traces" / "magentic_one.json")
    assert t.source.format == "magentic"
    assert t.steps[0].kind == "user"
    assert t.steps[1].agent == "Orchestrator" and t.steps[1].metadata["phase"] == "thought"
    assert t.steps[2].agent == "Orchestrator" and t.steps[2].metadata["target"] == "WebSurfer"
    assert t.steps[3].agent == "WebSurfer" and t.steps[3].is_decision
    assert t.agents == ("Orchestrator", "WebSurfer")


def test_who_and_when_hand_crafted_subset_form(tmp_path):
    doc = {"question": "Q?", "history": [
        {"role": "human", "content": "Q?"},
        {"role": "Orchestrator (-> FileSurfer)", "content": "open the file"},
        {"role": "FileSurfer", "content": "opened"},
        {"role": "ComputerTerminal", "content": "Traceback (most recent call last):\n  boom"},
    ], "mistake_agent": "FileSurfer", "mistake_step": "2", "ground_truth": "x"}
    p = tmp_path / "7.json"
    p.write_text(json.dumps(doc))
    t = load(p)
    assert t.id == "7" and t.task == "Q?"
    assert [s.kind for s in t.steps] == ["user", "agent", "agent", "tool"]
    assert t.steps[3].tool_output.is_error
    assert "mistake" not in json.dumps(t.to_dict())


def test_malformed_arguments_kept_and_flagged_and_orphans(tmp_path):
    msgs = [
        {"role": "user", "content": "x"},
        {"role": "assistant", "tool_calls": [{"id": "c1", "type": "function",
                                              "function": {"name": "f", "arguments": "{\"a\": 1"}}]},
        {"role": "tool", "tool_call_id": "zz", "content": "Error: nope"},
    ]
    p = tmp_path / "m.json"
    p.write_text(json.dumps(msgs))
    t = load(p)
    call = t.steps[1].tool_calls[0]
    assert call.arguments is None and call.raw_arguments == '{"a": 1' and "invalid JSON" in call.arguments_error
    assert FLAG_MALFORMED_ARGUMENTS in t.steps[1].flags and FLAG_UNANSWERED_CALL in t.steps[1].flags
    assert FLAG_ORPHAN_TOOL_OUTPUT in t.steps[2].flags
    assert t.steps[2].tool_output.is_error


def test_jsonl_one_broken_line_is_reported_others_load(tmp_path):
    good = json.dumps({"messages": [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}]})
    p = tmp_path / "runs.jsonl"
    p.write_text("\n".join([good, "{not json", good, json.dumps({"messages": []}), ""]))
    res = load_path(p)
    assert [t.source.record for t in res.trajectories] == [0, 2]
    assert [pr.record for pr in res.problems] == [1, 3]
    assert "line 2" in res.problems[0].message and "runs.jsonl" in res.problems[0].message
    assert "no messages" in res.problems[1].message


def test_mapping_adapter_example():
    with pytest.raises(TraceFormatError, match="no known trace format"):
        load(EX / "traces" / "custom_events.json")  # detection fails without the mapping
    res = load_path(EX / "traces" / "custom_events.json", mapping=EX / "mappings" / "events.yaml")
    (tr,) = res.trajectories
    assert tr.id == "refund-0042" and tr.source.format == "custom-events"
    assert tr.task.startswith("Refund order #W1001")
    assert [s.kind for s in tr.steps] == ["system", "user", "agent", "tool", "agent", "tool", "agent"]
    assert tr.steps[2].agent == "support" and tr.steps[2].tool_calls[0].arguments == {"order_id": "#W1001"}
    assert tr.steps[4].tool_calls[0].arguments_error and tr.steps[5].tool_output.is_error


def test_detection_failure_lists_formats_tried(tmp_path):
    p = tmp_path / "x.json"
    p.write_text(json.dumps({"foo": 1}))
    with pytest.raises(TraceFormatError) as e:
        load_path(p)
    msg = str(e.value)
    for name in ("tau", "who_and_when", "openai", "magentic"):
        assert f"{name}:" in msg
    assert str(p) in msg


def test_forced_format_and_unknown_format(tmp_path, tau_file):
    with pytest.raises(TraceFormatError, match="unknown format 'tua'; did you mean tau"):
        load_path(tau_file, format="tua")
    res = load_path(tau_file, format="tau", record=3)
    assert [t.id for t in res.trajectories] == ["12"] and res.trajectories[0].source.record == 3


# Hostile-user pass: `audit runs/ -o runs/d.jsonl`, then `audit runs/` again read the diagnoses back as
# traces: each line was skipped as "no known trace format matches; tried ir: …" (14 formats), never
# saying it was trajaudit's own output. A diagnosis line and a `check --format json` list of logs are now
# named as such, without the list of formats.

def test_trajaudits_own_outputs_are_named_as_such(tmp_path):
    from click.testing import CliRunner
    from hostile_kit import good_run, write_json

    from trajaudit.cli import main

    runs = tmp_path / "runs"
    runs.mkdir()
    write_json(runs / "a.json", good_run("a"))
    cli = CliRunner()
    assert cli.invoke(main, ["audit", str(runs), "-o", str(runs / "d.jsonl"), "-q"]).exit_code == 0
    assert cli.invoke(main, ["check", str(runs / "a.json"), "--format", "json", "-o", str(runs / "logs.json"),
                             "-q"]).exit_code == 1  # a violation: the gate
    r = cli.invoke(main, ["audit", str(runs), "-o", str(tmp_path / "d2.jsonl"), "-q"])
    assert r.exit_code == 0, r.stderr  # a folder leaves trajaudit's output out (a note names it)
    assert str(runs / "d.jsonl") in r.stderr and str(runs / "logs.json") in r.stderr
    r = cli.invoke(main, ["audit", str(runs / "a.json"), str(runs / "d.jsonl"), str(runs / "logs.json"),
                          "-o", str(tmp_path / "d2.jsonl"), "-q"])  # named as inputs: read as given
    assert r.exit_code == 1
    assert r.stderr.splitlines() == [
        f"skipped: {runs / 'd.jsonl'}, record 0: the document is a trajaudit diagnosis (a line of `trajaudit "
        "audit`'s output), not a run: leave that file out of the inputs",
        f"skipped: {runs / 'logs.json'}: the document is a trajaudit validation log (`trajaudit check`'s output), "
        "not a run: leave that file out of the inputs"]
    with pytest.raises(TraceFormatError, match="^no known trace format matches"):
        load_document({"trajectory_id": "x", "note": "not ours"})


def test_a_single_saved_message_is_named_as_such():
    """A saved Anthropic API response ({"id", "type": "message", "role", "content", "stop_reason", …})
    is one message: the error said only 'no known trace format matches' and listed eight formats."""
    msg = {"id": "msg_01", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
           "content": [{"type": "text", "text": "Let me check."}], "stop_reason": "end_turn", "usage": {}}
    with pytest.raises(Exception, match=r"^the document is one message \(a saved API response\?\), not a run"):
        load_document(msg)
