"""The agent-trace dialects read as OpenAI messages: Anthropic Messages, OpenAI Responses items,
LangChain/LangGraph message dumps (tests/data/dialects: one cancel-order failure written in all three
dialects and as plain OpenAI messages, plus each dialect's own shapes)."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from json_mutation import json_values, mutate

import trajaudit
from trajaudit import TraceFormatError, load, load_path
from trajaudit.cli import main
from trajaudit.engine.trace.adapters import default_adapters
from trajaudit.engine.trace.ir import (
    FLAG_MALFORMED_ARGUMENTS,
    FLAG_MALFORMED_CALL,
    FLAG_NON_TEXT_CONTENT,
    FLAG_ORPHAN_TOOL_OUTPUT,
    FLAG_SPLIT_MESSAGE,
    FLAG_UNKNOWN_ROLE,
)
from trajaudit.engine.trace.loader import load_document
from trajaudit.errors import TrajauditError

D = Path(__file__).resolve().parents[2] / "data" / "dialects"
POLICY = ("You are a retail support agent. Only pending orders can be cancelled. "
          "Confirm actions with the customer before any write.")
CANCEL = {"order_id": "#W4417", "reason": "ordered by mistake"}
FORMATS = {"anthropic": "anthropic_cancel.json", "openai_responses": "responses_cancel.json",
           "langchain": "langchain_cancel.json"}


def _calls(step):
    return [(c.name, c.arguments, c.id) for c in step.tool_calls]


def test_registered_in_detection_order_before_openai():
    names = list(default_adapters())
    assert names == ["ir", "tau", "who_and_when", "anthropic", "openai_responses", "langchain", "openai", "magentic",
                     "agentrx_steps", "openinference", "langfuse", "otel", "langsmith", "inspect"]


@pytest.mark.parametrize("fmt,file", sorted(FORMATS.items()))
def test_auto_detection_forced_format_and_cli(fmt, file):
    assert load(D / file).source.format == fmt
    forced = load_path(D / file, format=fmt).trajectories[0]
    assert forced.source.format == fmt and len(forced.steps) == len(load(D / file).steps)
    r = CliRunner().invoke(main, ["show", str(D / file), "--input-format", fmt])
    assert r.exit_code == 0, r.output
    assert f"[{fmt}]" in r.output and "cancel_pending_order" in r.output
    other = "langchain" if fmt != "langchain" else "anthropic"  # a format the file is not in: refused
    with pytest.raises(TraceFormatError, match=f"not in the '{other}' format"):
        load_path(D / file, format=other)


def test_plain_openai_messages_are_not_taken_for_anthropic(tmp_path):
    # content-part lists (OpenAI's own) and text-only blocks are no evidence of the Anthropic format
    doc = {"messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]},
                        {"role": "assistant", "content": "hello"}]}
    assert load_document(doc).trajectories[0].source.format == "openai"
    assert load(D / "openai_cancel.json").source.format == "openai"
    with pytest.raises(TraceFormatError) as e:
        load_document({"foo": 1})
    for name in ("anthropic:", "openai_responses:", "langchain:"):
        assert name in str(e.value)


def test_anthropic_steps_calls_outputs_and_top_level_system():
    t = load(D / "anthropic_cancel.json")
    assert t.system_prompts == {"*": POLICY}  # the top-level system is a prompt, not a step
    assert [s.kind for s in t.steps] == ["user", "agent", "tool", "agent", "user", "agent", "tool", "agent"]
    assert [s.index for s in t.steps] == list(range(8)) and all(s.source_number is None for s in t.steps)
    assert t.task.startswith("Hi, please cancel my order #W4417")
    assert t.agents == ("assistant",) and t.metadata == {"model": "claude-sonnet-4-5", "max_tokens": 1024}
    assert t.steps[1].content == "Let me look up that order."
    assert _calls(t.steps[1]) == [("get_order_details", {"order_id": "#W4417"}, "toolu_01A")]
    assert t.steps[2].tool_output.call_id == "toolu_01A" and not t.steps[2].tool_output.is_error
    assert t.steps[2].content.startswith('{"order_id": "#W4417", "status": "processed"')
    # a thinking block before a tool call with no text: the thinking is the step's content
    assert t.steps[5].content == "The customer confirmed. I will cancel the order now."
    assert t.steps[5].metadata == {"content_from": "thinking"}
    assert _calls(t.steps[5]) == [("cancel_pending_order", CANCEL, "toolu_01B")]
    out = t.steps[6]
    assert (out.tool_output.call_id, out.tool_output.is_error) == ("toolu_01B", True)
    assert out.content == "Error: non-pending order cannot be cancelled" and out.flags == ()
    assert t.final_answer.startswith("Done! Your order #W4417 has been cancelled")
    # the outline (show, LLM prompts) names the tool of an output that carries only the call id
    assert [r["tool"] for r in t.outline()] == ["", "get_order_details", "get_order_details", "", "",
                                                "cancel_pending_order", "cancel_pending_order", ""]


def test_anthropic_parallel_results_split_into_steps_and_batch_survives_bad_runs():
    res = load_path(D / "anthropic_parallel.jsonl")
    assert [t.id for t in res.trajectories] == ["anthropic_parallel#0", "anthropic_parallel#1"]
    assert [p.record for p in res.problems] == [2] and "no known trace format matches" in res.problems[0].message
    t = res.trajectories[0]
    assert t.system_prompts == {"*": "You are a retail support agent."}
    assert [s.kind for s in t.steps] == ["user", "agent", "tool", "tool", "user", "agent"]
    assert [s.index for s in t.steps] == [0, 1, 2, 3, 4, 5]
    assert [s.source_number for s in t.steps] == [0, 1, 2, 2, 2, 3]  # message 2 held two results and text
    assert [s.flags for s in t.steps] == [(), (), (), (FLAG_SPLIT_MESSAGE,), (FLAG_SPLIT_MESSAGE,), ()]
    assert [s.metadata.get("block") for s in t.steps] == [None, None, 0, 1, 2, None]
    assert [c[2] for c in _calls(t.steps[1])] == ["toolu_11", "toolu_12"]
    assert [(s.tool_output.call_id, s.tool_output.is_error) for s in t.steps[2:4]] == [
        ("toolu_11", False), ("toolu_12", True)]  # is_error from the marker: the text reads like no error
    assert t.steps[3].content == "order #W1002 not found for this customer"
    assert t.steps[4].content == "Also, can you tell me when #W1002 ships?"
    bad = res.trajectories[1]  # a tool_use without an id, a non-object block, arguments that are no JSON
    call = bad.steps[1].tool_calls[0]
    assert (call.name, call.id, call.raw_arguments) == ("cancel_pending_order", None, '{"order_id": "#W2002"')
    assert call.arguments_error.startswith("invalid JSON")
    assert bad.steps[1].flags == (FLAG_MALFORMED_CALL, FLAG_NON_TEXT_CONTENT, FLAG_MALFORMED_ARGUMENTS)
    assert bad.steps[1].content == "42"
    assert bad.steps[2].flags == (FLAG_ORPHAN_TOOL_OUTPUT,) and bad.steps[2].tool_output.call_id is None


def test_anthropic_message_that_is_not_an_object_names_its_path():
    r = load_document({"system": "s", "messages": [{"role": "user", "content": "hi"}, "oops"]})
    assert r.trajectories == [] and "$.messages[1]" in r.problems[0].message
    assert "message must be an object" in r.problems[0].message


def test_responses_items_one_step_each():
    t = load(D / "responses_cancel.json")
    assert [s.kind for s in t.steps] == ["system", "user", "agent", "tool", "agent", "user", "agent", "agent",
                                         "tool", "agent"]
    assert t.steps[0].content == POLICY and t.task.startswith("Hi, please cancel my order #W4417")
    assert _calls(t.steps[2]) == [("get_order_details", {"order_id": "#W4417"}, "call_a1")]
    assert t.steps[3].tool_output.call_id == "call_a1" and t.steps[3].flags == ()
    assert t.steps[5].content == "Yes, go ahead."  # a role-only input message
    assert t.steps[6].content == "The customer confirmed; cancelling the order."
    assert t.steps[6].metadata == {"item_type": "reasoning"} and t.steps[6].agent == "assistant"
    assert _calls(t.steps[7]) == [("cancel_pending_order", CANCEL, "call_a2")]
    assert (t.steps[8].tool_output.call_id, t.steps[8].tool_output.is_error) == ("call_a2", True)
    assert t.final_answer.startswith("Done! Your order #W4417") and t.metadata == {"model": "gpt-4.1"}


def test_responses_object_with_instructions_hosted_tools_and_bad_items():
    doc = {"id": "resp_9f2", "object": "response", "instructions": "You are a travel agent.",
           "input": "Find a hotel in Porto for May 3.",
           "output": [
               {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "gAAAA"},
               {"type": "web_search_call", "id": "ws_1", "status": "completed",
                "action": {"type": "search", "query": "Porto hotels May 3"}},
               {"type": "function_call", "call_id": "call_h1", "name": "book_hotel", "arguments": '{"hotel": '},
               {"type": "function_call_output", "output": "booked"},
               {"type": "mcp_list_tools", "id": "mcp_1", "tools": []},
               {"type": "message", "role": "assistant",
                "content": [{"type": "refusal", "refusal": "I cannot book without a date range."}]}]}
    t = load_document(doc).trajectories[0]
    assert (t.id, t.system_prompts, t.task) == ("resp_9f2", {"*": "You are a travel agent."},
                                                "Find a hotel in Porto for May 3.")
    assert t.source.format == "openai_responses" and len(t.steps) == 7
    assert t.steps[1].metadata == {"item_type": "reasoning", "encrypted": True} and t.steps[1].content == ""
    assert _calls(t.steps[2]) == [("web_search", {"action": {"type": "search", "query": "Porto hotels May 3"}}, None)]
    assert t.steps[3].tool_calls[0].raw_arguments == '{"hotel": ' and FLAG_MALFORMED_ARGUMENTS in t.steps[3].flags
    assert t.steps[4].flags == (FLAG_ORPHAN_TOOL_OUTPUT,)
    assert t.steps[5].flags == (FLAG_UNKNOWN_ROLE,) and t.steps[5].role == "mcp_list_tools"
    assert t.final_answer == "I cannot book without a date range."
    bad = {"output": [{"type": "message", "role": "assistant", "content": []}, 7]}
    with pytest.raises(TraceFormatError, match=r"openai_responses: \$\.output\[1\] is not an item"):
        load_document(bad)
    with pytest.raises(TraceFormatError, match=r"not in the 'openai_responses' format: \$\.output\[1\] is not"):
        load_document(bad, format="openai_responses")


def test_langchain_model_dump_messages():
    t = load(D / "langchain_cancel.json")
    assert [s.kind for s in t.steps] == ["system", "user", "agent", "tool", "agent", "user", "agent", "tool",
                                         "agent"]
    assert _calls(t.steps[2]) == [("get_order_details", {"order_id": "#W4417"}, "call_a1")]
    assert (t.steps[3].tool_output.call_id, t.steps[3].tool_output.name) == ("call_a1", "get_order_details")
    assert not t.steps[3].tool_output.is_error  # status "success"
    assert _calls(t.steps[6]) == [("cancel_pending_order", CANCEL, "call_a2")]
    assert t.steps[7].tool_output.is_error and t.steps[7].tool_output.call_id == "call_a2"
    assert t.task.startswith("Hi, please cancel") and t.agents == ("assistant",)


def test_langchain_messages_to_dict_dumpd_and_additional_kwargs():
    t = load(D / "langchain_supervisor.json")
    assert t.source.format == "langchain" and [s.kind for s in t.steps] == ["user", "agent", "tool", "agent"]
    assert t.agents == ("weather_agent",)  # LangGraph names the agent on its AI messages
    assert _calls(t.steps[1]) == [("get_forecast", {"city": "Oslo", "day": "tomorrow"}, "call_w1")]
    assert t.steps[1].flags == ()
    # status "error" marks the failure although the text does not read like one
    assert t.steps[2].tool_output.is_error and t.steps[2].content == "upstream weather service unavailable (503)"
    assert t.steps[3].content == "Tomorrow in Oslo will be sunny, no umbrella needed."  # dumpd form
    assert t.steps[3].metadata == {"thinking": "The forecast call failed; I have no data."}
    assert t.final_answer == t.steps[3].content


def test_langchain_invalid_calls_chunks_chat_messages_and_bad_tool_calls():
    doc = [{"type": "HumanMessageChunk", "content": "Plan my trip."},
           {"type": "AIMessageChunk", "content": "", "tool_calls": [],
            "invalid_tool_calls": [{"name": "plan", "args": '{"days": ', "id": "c1", "error": "bad JSON"}]},
           {"type": "chat", "role": "critic", "content": "Too vague."},
           {"type": "ai", "content": [{"type": "reasoning", "summary": [{"type": "summary_text", "text": "Ask."}]},
                                      {"type": "text", "text": "How many days?"}]}]
    t = load_document(doc).trajectories[0]
    assert [s.kind for s in t.steps] == ["user", "agent", "agent", "agent"]
    assert (t.steps[3].content, t.steps[3].metadata) == ("How many days?", {"thinking": "Ask."})
    assert t.steps[1].tool_calls[0].raw_arguments == '{"days": ' and FLAG_MALFORMED_ARGUMENTS in t.steps[1].flags
    assert t.steps[2].role == "critic" and FLAG_UNKNOWN_ROLE in t.steps[2].flags
    r = load_document([{"type": "human", "data": {"content": "hi"}},
                       {"type": "ai", "data": {"content": "", "tool_calls": ["plan"]}}])
    assert "$[1].data.tool_calls" in r.problems[0].message


def test_explicit_error_marker_on_openai_tool_messages_too():
    msgs = [{"role": "user", "content": "go"},
            {"role": "assistant", "tool_calls": [{"id": "c", "type": "function",
                                                  "function": {"name": "f", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": "c", "content": "quota exhausted", "is_error": True},
            {"role": "tool", "tool_call_id": "c", "content": "quota exhausted"}]
    t = load_document(msgs).trajectories[0]
    assert t.source.format == "openai" and [s.tool_output.is_error for s in t.steps[2:]] == [True, False]


def test_same_failure_in_four_formats_gets_the_same_diagnosis():
    files = {"openai": "openai_cancel.json", **FORMATS}
    got = {}
    for fmt, file in files.items():
        t = load(D / file)
        d = trajaudit.audit(t)
        step = t.steps[d.critical_step]
        got[fmt] = (d.critical_step, d.category, d.agent, _calls(step)[0][:2])
    expected = got["openai"]
    assert expected == (6, "instruction_adherence_failure", "assistant", ("cancel_pending_order", CANCEL))
    # the same decision in each: the index differs only where the format has fewer/more steps before it
    # (Anthropic's system is no step; Responses writes the first call's text and call as two items)
    assert {f: g[0] for f, g in got.items()} == {"openai": 6, "anthropic": 5, "openai_responses": 7, "langchain": 6}
    assert all(g[1:] == expected[1:] for g in got.values())


def test_cli_audits_a_folder_of_the_three_dialects(tmp_path):
    folder = tmp_path / "runs"
    folder.mkdir()
    for file in FORMATS.values():
        (folder / file).write_bytes((D / file).read_bytes())
    out = tmp_path / "d.jsonl"
    r = CliRunner().invoke(main, ["audit", str(folder), "-o", str(out), "-q"], catch_exceptions=False)
    assert r.exit_code == 0, r.output
    diags = sorted((json.loads(x) for x in out.read_text().splitlines()), key=lambda d: d["trajectory_id"])
    assert [(d["trajectory_id"], d["critical_step"], d["category"]) for d in diags] == [
        ("anthropic_cancel", 5, "instruction_adherence_failure"),
        ("langchain_cancel", 6, "instruction_adherence_failure"),
        ("responses_cancel", 7, "instruction_adherence_failure")]


_WORDS = ["text", "tool_use", "tool_result", "thinking", "function_call", "function_call_output", "reasoning",
          "message", "ai", "human", "tool", "error", "x"]
_KEYS = ["type", "content", "role", "id", "call_id", "tool_use_id", "name", "input", "arguments", "output",
         "summary", "tool_calls", "args", "status", "is_error", "data", "additional_kwargs", "text", "system"]


@pytest.mark.parametrize("fmt,file", sorted(FORMATS.items()))
@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_edited_dialect_documents_load_or_fail_with_a_trajaudit_error(fmt, file, data):
    """Random edits (a block's type made a list, a key deleted, ...) never raise anything but a
    TrajauditError (found: an unhashable ``type`` looked up in a set raised TypeError)."""
    doc = json.loads((D / file).read_text())
    assert load_document(copy.deepcopy(doc), format=fmt).trajectories[0].source.format == fmt
    mutate(doc, data, json_values(_WORDS, _KEYS), _KEYS)
    for forced in (None, fmt):
        try:
            load_document(copy.deepcopy(doc), format=forced)
        except TrajauditError:
            pass


def test_a_langchain_batch_with_one_empty_or_broken_run_is_still_read_as_langchain():
    """Was: the LangChain sniff needed every run to be LangChain, so [good, {"messages": []}, good]
    fell through to the OpenAI adapter, which read every good message as an unknown role (9 agent
    steps, '<missing>' agents) — wrong diagnoses, no warning."""
    good = json.loads((D / "langchain_cancel.json").read_text())
    broken = {"messages": [good["messages"][0], "junk"]}
    for bad, why in (({"messages": []}, "run has no messages"), (broken, "not a LangChain message")):
        res = load_document([good, bad, copy.deepcopy(good)])
        assert [t.source.format for t in res.trajectories] == ["langchain", "langchain"]
        assert [t.source.record for t in res.trajectories] == [0, 2]
        assert [s.kind for s in res.trajectories[0].steps][:2] == ["system", "user"]
        (p,) = res.problems
        assert p.record == 1 and why in p.message


def test_a_responses_batch_with_one_empty_or_broken_run_keeps_the_good_runs():
    """Was: one run object whose item list was empty or held a non-object made the whole list 'no
    known trace format' — every run of the batch lost ('no run could be audited')."""
    good = {"instructions": "Be brief.", "input": [{"role": "user", "content": "Cancel W1."}],
            "output": [{"type": "function_call", "call_id": "k1", "name": "get_order", "arguments": '{"id": "W1"}'},
                       {"type": "function_call_output", "call_id": "k1", "output": '{"status": "pending"}'},
                       {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Pending."}]}]}
    doc = [good, {"input": [], "output": []}, {"input": [{"role": "user", "content": "hi"}, 5]}, copy.deepcopy(good)]
    res = load_document(doc)
    assert [(t.source.format, t.source.record) for t in res.trajectories] == [("openai_responses", 0), ("openai_responses", 3)]
    assert [(p.record, "run has no messages" in p.message or "$.input[1]" in p.message) for p in res.problems] == [(1, True), (2, True)]


def test_a_single_broken_run_is_still_refused_with_its_reason():
    """The relaxation is for lists of runs only: one run with a non-message element is no LangChain run."""
    good = json.loads((D / "langchain_cancel.json").read_text())
    with pytest.raises(Exception, match="element 1 is not a LangChain message"):
        load_document({"messages": [good["messages"][0], "junk"]})


def test_anthropic_server_tool_calls_and_their_results_are_calls_and_tool_steps():
    """Was: server_tool_use / web_search_tool_result blocks were no evidence of Anthropic content, so a
    run using only server tools was read as OpenAI messages, the calls and results as one JSON blob of
    the assistant's text: no call, no failed output for the rules to see."""
    doc = [{"role": "user", "content": "Latest Python release? And 2**100?"},
           {"id": "msg_1", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5", "stop_reason": "end_turn",
            "content": [
                {"type": "server_tool_use", "id": "srv1", "name": "web_search", "input": {"query": "python release"}},
                {"type": "web_search_tool_result", "tool_use_id": "srv1",
                 "content": [{"type": "web_search_result", "url": "https://python.org", "title": "Python"}]},
                {"type": "server_tool_use", "id": "srv2", "name": "code_execution", "input": {"code": "print(2**100)"}},
                {"type": "code_execution_tool_result", "tool_use_id": "srv2",
                 "content": {"type": "code_execution_result", "stdout": "", "stderr": "NameError", "return_code": 1}},
                {"type": "web_search_tool_result", "tool_use_id": "srv1",
                 "content": {"type": "web_search_tool_result_error", "error_code": "max_uses_exceeded"}},
                {"type": "text", "text": "Python 3.14; 2**100 = 1267650600228229401496703205376."}]}]
    t = load(doc)
    assert t.source.format == "anthropic"
    got = [(s.index, s.kind, s.tool_names, s.tool_output.is_error if s.tool_output else None, s.source_number)
           for s in t.steps]
    assert got == [(0, "user", (), None, 0), (1, "agent", ("web_search",), None, 1), (2, "tool", (), False, 1),
                   (3, "agent", ("code_execution",), None, 1), (4, "tool", (), True, 1), (5, "tool", (), True, 1),
                   (6, "agent", (), None, 1)]
    assert t.steps[2].tool_output.call_id == "srv1" and "python.org" in t.steps[2].content
    # LangChain content lists (read with the same block reader) keep such blocks as text, as before
    lc = [{"type": "human", "content": "news?"},
          {"type": "ai", "content": [{"type": "server_tool_use", "id": "s", "name": "web_search", "input": {}}]}]
    assert load(lc).steps[1].tool_calls == ()


def test_a_responses_mcp_call_is_named_by_the_mcp_tool_not_by_its_type():
    """Was: every *_call item was named by its type, so an MCP server's delete_repo was the tool 'mcp'
    and name-based rules (writes, handoffs) could not see what was called."""
    t = load({"output": [
        {"type": "mcp_call", "id": "mcp_1", "server_label": "gh", "name": "delete_repo",
         "arguments": '{"repo": "x"}', "output": None, "error": "permission denied"},
        {"type": "web_search_call", "id": "ws_1", "status": "completed", "action": {"type": "search", "query": "q"}},
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Deleted."}]}]})
    assert [s.tool_names for s in t.steps] == [("delete_repo",), ("web_search",), ()]
    assert t.steps[0].tool_calls[0].arguments["error"] == "permission denied"
