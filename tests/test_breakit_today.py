"""Defects found by an adversarial pass over the dialect adapters and the generic policy rules
(Anthropic / OpenAI Responses / LangChain input; confirmation-before-write, handoff-only-out-of-scope).
Each test fails without its fix."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
from policy_runs import CONFIRM, HANDOFF, call

from trajaudit import evaluate, load
from trajaudit.engine.trace.loader import load_document

D = Path(__file__).resolve().parent / "data" / "dialects"


def _fails(messages, rules, rule_id):
    return [(r.step, r.message) for r in evaluate(load(messages), rules).records
            if r.rule_id == rule_id and r.verdict == "fail"]


# --- one bad run of a multi-run document must not decide the format of (or lose) the others ----------

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


# --- confirmation-before-write: what a write is, and what a confirmation policy is ------------------

POLICY = "You are a library assistant. Obtain explicit user confirmation before reserving or cancelling a book."


@pytest.mark.parametrize("tool", ["book_search", "bookSearch", "BOOK_SEARCH", "return_policy_lookup", "update_check",
                                  "updateCheck", "place_details", "refund_status", "purchase_history", "exchange_rate"])
def test_a_read_tool_whose_name_starts_with_a_write_verb_needs_no_confirmation(tool, protocol):
    """Was: any name whose first word is a write verb was a write, so a library agent's book_search
    right after the user's question failed as an unconfirmed write (error, the run's critical step)."""
    messages = [{"role": "system", "content": POLICY}, {"role": "user", "content": "Do you have Dune?"},
                *call(1, tool, {"q": "Dune"}), {"role": "assistant", "content": "Yes."}]
    assert _fails(messages, protocol, CONFIRM) == []


@pytest.mark.parametrize("tool", ["cancel_order", "cancelBooking", "CancelOrder", "update_status", "book_flight",
                                  "book_check_in", "place_order", "return_delivered_order_items", "delete_history",
                                  "exchange_delivered_order_items", "modify-address"])
def test_write_tools_still_need_the_yes(tool, protocol):
    messages = [{"role": "system", "content": POLICY}, {"role": "user", "content": "Order 1, quickly."}, *call(1, tool, {"id": "1"})]
    assert [s for s, _ in _fails(messages, protocol, CONFIRM)] == [2]


def test_a_read_named_tool_is_no_attempted_write_for_the_handoff_rule(protocol):
    """The handoff rule's 'attempted' uses the same write test: a book_search was counted as the
    attempted cancellation, so a handoff instead of the cancellation passed."""
    system = ("You are an airline agent. Transfer the user to a human agent if and only if the request "
              "cannot be handled within the scope of your actions.")
    messages = [{"role": "system", "content": system}, {"role": "user", "content": "Please cancel my reservation ABC123."},
                *call(1, "book_search", {"q": "ABC123"}), *call(2, "transfer_to_human_agents", {"summary": "cancel"})]
    assert [s for s, _ in _fails(messages, protocol, HANDOFF)] == [4]


@pytest.mark.parametrize("system", [
    "You are a bank agent. Before taking any action, confirm the caller's identity by asking for their date of birth.",
    "You must explicitly confirm the customer's identity before sharing account details.",
])
def test_confirming_a_fact_is_no_confirmation_policy(system, protocol):
    """Was: 'before taking any action … confirm' and 'explicitly confirm' matched an identity check, so
    every write of a bank agent that verifies callers failed without a 'yes'."""
    messages = [{"role": "system", "content": system},
                {"role": "user", "content": "I'm Ann, born 1990-01-02. Please update my address to 5 Main St."},
                *call(1, "update_address", {"address": "5 Main St"})]
    assert _fails(messages, protocol, CONFIRM) == []


@pytest.mark.parametrize("system", [
    "Confirm actions with the customer before any write.",  # tests/test_dialects.py's POLICY: was not recognized
    "Before taking any action, ask the user to confirm.",
    "The user must explicitly confirm every cancellation.",
    "Before taking consequential actions that update the database (cancel, modify, return, exchange), you have "
    "to list the action detail and obtain explicit user confirmation (yes) to proceed.",
])
def test_confirmation_policies_are_recognized(system, protocol):
    messages = [{"role": "system", "content": system}, {"role": "user", "content": "Cancel order 5."},
                *call(1, "cancel_order", {"id": "5"})]
    assert [s for s, _ in _fails(messages, protocol, CONFIRM)] == [2]


def test_the_message_says_none_when_no_user_turn_precedes_the_write(protocol):
    """Was: '… the user's turn before it (null) holds no explicit yes'."""
    messages = [{"role": "system", "content": POLICY}, *call(1, "cancel_order", {"id": "5"})]
    ((step, message),) = _fails(messages, protocol, CONFIRM)
    assert step == 1 and "(none)" in message and "null" not in message


# --- repair of a dialect run keeps the run's system prompt -------------------------------------------

def test_repair_of_an_anthropic_run_resumes_under_its_top_level_system_prompt():
    """Was a documented gap: the resumed prefix (OpenAI messages rebuilt from the IR) dropped the
    top-level `system`, so the agent resumed without the very policy the diagnosis said it broke."""
    from trajaudit.engine.run.repair_prefix import resume_document

    doc = {"system": "Obtain explicit user confirmation (yes) before cancelling anything.",
           "messages": [{"role": "user", "content": "Cancel order W1."},
                        {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "cancel_order",
                                                           "input": {"id": "W1"}}]},
                        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "ok"}]}]}
    t = load(doc)
    resumed, what = resume_document(t, 1, "Ask the user to confirm first.")
    assert [m["role"] for m in resumed] == ["system", "user", "user"]
    assert resumed[0]["content"] == doc["system"] and "the run's system prompt, then steps 0..0" in what
    plain = load({"messages": doc["messages"]}, format="anthropic")  # no system prompt: nothing added
    assert [m["role"] for m in resume_document(plain, 1, "x")[0]] == ["user", "user"]


# --- Anthropic server tools (web search, code execution, MCP) ----------------------------------------

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


# --- where one Anthropic message became several steps, say which message ---------------------------

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


def test_a_single_saved_message_is_named_as_such():
    """A saved Anthropic API response ({"id", "type": "message", "role", "content", "stop_reason", …})
    is one message: the error said only 'no known trace format matches' and listed eight formats."""
    msg = {"id": "msg_01", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
           "content": [{"type": "text", "text": "Let me check."}], "stop_reason": "end_turn", "usage": {}}
    with pytest.raises(Exception, match=r"^the document is one message \(a saved API response\?\), not a run"):
        load_document(msg)


# --- a message quoting a huge tool output ------------------------------------------------------------

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
