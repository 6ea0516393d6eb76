"""Precision of the evidence (issue 17): what counts as a claim or a source, pack applicability,
fallback consistency and origin tracing — on synthetic runs in several formats (OpenAI chat,
Anthropic, LangChain, an AutoGen-style group chat, an orchestrator with a progress ledger).

Each test states the general rule it checks; the runs are written for the rule, not copied from
any dev run. Where a knob turns a fix off, the test shows the finding comes back without it.
"""

from __future__ import annotations

import json

from trajaudit.engine.claims import ClaimConfig, Support, build_claim_graph
from trajaudit.engine.claims.noise import runtime_spans
from trajaudit.engine.claims.normalize import when_key
from trajaudit.engine.claims.origin import origin_features, origin_of
from trajaudit.engine.packs.selection import default_packs
from trajaudit.engine.run.evidence import gather
from trajaudit.engine.run.pipeline import AuditSpec, build_context
from trajaudit.engine.strategies.offline_judge import JudgeSettings, OfflineJudge, responsible_agent
from trajaudit.engine.trace.loader import load_document


def _load(doc):
    res = load_document(doc)
    assert not res.problems, res.problems
    return res.trajectories[0]


def _ctx():
    return build_context(AuditSpec(strategy="offline"))


def _diagnose(t, judge=None):
    ctx = _ctx()
    return (judge or OfflineJudge()).diagnose(t, gather(t, ctx), ctx)


def _errors(t, ctx=None):
    """Error-level failing records of the run's evidence."""
    return [r for r in gather(t, ctx or _ctx()).log.records
            if r.verdict == "fail" and r.severity in ("error", "critical")]


def _status(g, value):
    hits = [c for c in g.claims if c.value == value]
    assert hits, f"no claim {value!r}: {[(c.step, c.value) for c in g.claims]}"
    return hits[0].status


# -- 1. the task and a brief restating it are sources -----------------------------------------------

GROUP_CHAT = {  # an AutoGen-style group chat log: the run opens with the manager's brief
    "question": "Which river flows through the city where the 1992 Summer Olympics were held?",
    "history": [
        {"role": "assistant", "name": "Planner_Expert", "content":
            "You are given a task and a plan from your manager.\n# General Task\nWhich river flows through "
            "the city where the 1992 Summer Olympics were held?\n# Plan\n1. Confirm the host city (Barcelona).\n"
            "## Results from last response\nThe host city was \"Barcelona\"; the river is the \"Llobregat\", "
            "length 170 km, checked on 2023-04-11."},
        {"role": "user", "name": "Geography_Expert", "content":
            "The brief says \"Barcelona\" and the \"Llobregat\" (170 km), checked on April 11, 2023. I agree."},
        {"role": "assistant", "name": "Planner_Expert", "content": "Final answer: Llobregat. TERMINATE"},
    ],
}


def test_an_opening_brief_is_the_runs_input_not_its_claims():
    t = _load(GROUP_CHAT)
    assert t.steps[0].is_decision and t.source.format == "who_and_when"
    g = build_claim_graph(t)
    assert [c for c in g.claims if c.step == 0] == []  # nothing extracted from the brief
    assert _status(g, "llobregat") is Support.DIRECT  # the team's reuse is supported by the brief
    assert _status(g, "2023-04-11") is Support.DIRECT  # (and in another date format)
    assert not [r for r in _errors(t) if r.origin == "claims"]
    # without the rule the brief's values are the brief's own unsupported claims
    old = build_claim_graph(t, ClaimConfig(brief_is_input=False))
    assert any(c.step == 0 and c.status is Support.MISSING and c.value == "llobregat" for c in old.claims)


def test_a_restatement_after_the_users_turn_is_still_a_claim_of_what_it_adds():
    t = _load([{"role": "user", "content": "Summarise report_2023.pdf for me."},
               {"role": "assistant", "name": "lead", "content":
                   "Task: summarise report_2023.pdf. It has \"Fourteen Chapters\" and the summary goes to "
                   "summary_v2.docx."}])
    g = build_claim_graph(t)
    assert _status(g, "report_2023.pdf") is Support.DIRECT  # from the user's task
    assert _status(g, "fourteen chapters") is Support.MISSING  # the lead's own addition


# -- 2. runtime output pasted into a message is evidence ----------------------------------------------

TRACEBACK = (
    "Traceback (most recent call last):\n"
    '  File "/usr/lib/python3.11/site-packages/pandas/io/parsers.py", line 912, in read_csv\n'
    "    return _read(filepath_or_buffer, kwds)\n"
    "FileNotFoundError: [Errno 2] No such file or directory: 'sales_2022.csv'\n"
)


def test_runtime_spans_by_structure():
    text = ("I ran the script:\n" + TRACEBACK + "\n2024-12-19 12:37:12.219880: I core/util/port.cc:113] oneDNN on.\n"
            "UserWarning: model mismatch gpt-x-2024-08-06 != gpt-x-2024-05-13\nexitcode: 1 (execution failed)\n"
            "Code output: unknown language bash\n\nSCENARIO.PY\nThe file sales_2022.csv is missing.")
    spans = [text[a:b] for a, b in runtime_spans(text)]
    assert spans[0].startswith("Traceback") and spans[0].endswith("'sales_2022.csv'")
    assert any("oneDNN" in s and "UserWarning" in s for s in spans)
    assert any("exitcode: 1 (execution failed)\nCode output: unknown language bash" in s for s in spans)
    assert "SCENARIO.PY" in spans[-1]
    assert all("The file" not in s and "I ran" not in s for s in spans)  # the agent's own sentences stay


def test_pasted_traceback_in_openai_chat_is_no_claim_and_supports_quotes():
    t = _load([
        {"role": "user", "content": "Load the sales figures and report the total."},
        {"role": "assistant", "content": "Running it failed:\n" + TRACEBACK +
         "\nThe loader could not find 'sales_2022.csv', so there is no total yet. Could you upload it?"},
    ])
    g = build_claim_graph(t)
    addrs = [c.address for c in g.claims if c.step == 1]
    assert not any(c.value.endswith("parsers.py") for c in g.claims)  # library frames: not claims
    assert _status(g, "sales_2022.csv") is Support.DIRECT  # quoted from the pasted output
    assert not [r for r in _errors(t) if r.origin == "claims"], addrs


def test_log_lines_and_termination_marker_in_anthropic_messages_are_not_claims():
    doc = {"system": "You are a data assistant.", "messages": [
        {"role": "user", "content": "Train the model and tell me the accuracy."},
        {"role": "assistant", "content": [
            {"type": "text", "text": "Training now."},
            {"type": "tool_use", "id": "t1", "name": "run_shell", "input": {"cmd": "python train.py"}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "accuracy=0.913"}]},
        {"role": "assistant", "content":
            "2025-01-02 10:11:12,345 INFO trainer: epoch 12 done\nWARNING: lr 0.00031 clipped\n"
            "SCENARIO.PY\nThe accuracy is 0.913."},
    ]}
    t = _load(doc)
    assert t.source.format == "anthropic"
    g = build_claim_graph(t)
    values = {c.value for c in g.claims if c.step == t.steps[-1].index}
    assert "0.00031" not in values and "scenario.py" not in values and "2025-01-02 10:11:12" not in values
    assert _status(g, "0.913") is Support.DIRECT


# -- 3. values compared after normalization; counts only from count syntax -----------------------------

def test_dates_and_times_compare_as_values():
    assert when_key("May 23, 2024", "date") == when_key("2024-05-23", "date") == "2024-05-23"
    assert when_key("06:00 AM", "time") == when_key("06:00:00", "time") == "06:00"
    assert when_key("April 2018", "date") == "2018-04"


def test_reformatted_date_time_and_money_in_langchain_are_supported():
    doc = {"messages": [
        {"type": "human", "content": "When does my flight QX7781 leave, and what did it cost?"},
        {"type": "ai", "content": "", "tool_calls": [{"name": "get_booking", "args": {"ref": "QX7781"}, "id": "k1"}]},
        {"type": "tool", "tool_call_id": "k1", "content": json.dumps(
            {"ref": "QX7781", "departure": "2024-05-23T06:00:00", "price": 1200.5, "currency": "USD"})},
        {"type": "ai", "content": "Your flight departs on May 23, 2024 at 06:00 AM; you paid $1,200.50."},
    ]}
    t = _load(doc)
    assert t.source.format == "langchain"
    g = build_claim_graph(t)
    assert _status(g, "2024-05-23") is Support.DIRECT
    assert _status(g, "06:00") is Support.DIRECT
    assert not [r for r in _errors(t) if r.origin == "claims"]


def test_a_day_after_a_month_name_is_no_count():
    t = _load([{"role": "user", "content": "What is on the calendar?"},
               {"role": "assistant", "content": "The schedule for May 23 includes the board review."}])
    g = build_claim_graph(t)
    assert not [c for c in g.claims if c.kind == "count"]  # "23 includes" is not a count of includes
    assert [c.value for c in g.claims if c.kind == "date"] == ["05-23"]


def test_a_count_of_the_steps_own_list_is_its_own():
    doc = [
        {"role": "user", "content": "Which blue kettles can I get?"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "get_product", "arguments": '{"id": "kettle"}'}}]},
        {"role": "tool", "tool_call_id": "c1", "name": "get_product", "content": json.dumps({"variants": {
            "101": {"color": "blue", "size": "1l", "available": True, "price": 30},
            "102": {"color": "blue", "size": "2l", "available": True, "price": 40},
            "103": {"color": "blue", "size": "3l", "available": True, "price": 50}}})},
        {"role": "assistant", "content": "For 1-2 litre sizes there are two available options:\n"
                                         "1. 1l blue - $30\n2. 2l blue - $40\nWhich one?"},
    ]
    g = build_claim_graph(_load(doc))
    counts = [c for c in g.claims if c.kind == "count"]
    assert counts and counts[0].status is Support.WEAK  # was CONFLICTING (3 blue available)


# -- 4. packs say when they apply ----------------------------------------------------------------------

def _tools_run(names):
    msgs = [{"role": "user", "content": "Help me with my booking."}]
    for i, n in enumerate(names):
        msgs.append({"role": "assistant", "content": None, "tool_calls": [
            {"id": f"c{i}", "type": "function", "function": {"name": n, "arguments": "{}"}}]})
        msgs.append({"role": "tool", "tool_call_id": f"c{i}", "name": n, "content": "{}"})
    return _load(msgs)


def test_generic_tool_names_never_select_a_domain_pack():
    ctx = _ctx()
    airline = _tools_run(["get_user_details", "think", "calculate", "get_reservation_details",
                          "transfer_to_human_agents"])
    assert gather(airline, ctx).domain_packs == ()  # 4 of 5 tools are in the retail list, none is retail's own
    retail = _tools_run(["get_user_details", "get_order_details", "cancel_pending_order"])
    assert gather(retail, _ctx()).domain_packs == ("tau_retail",)
    _, domains = default_packs(())
    dp = next(d for d in domains if d.name == "tau_retail")
    assert "think" in dp.tools and "think" not in dp.distinctive
    assert dp.applies({"get_order_details", "some_other_tool"}) is True
    assert dp.applies({"think", "calculate", "get_user_details"}) is False


# -- 5. a guess names an agent consistent with its category ----------------------------------------------

def test_fallback_in_a_dialogue_names_the_user():
    doc = [
        {"role": "system", "content": "You help customers with their accounts."},
        {"role": "user", "content": "Hi, I need to change something."},
        {"role": "assistant", "content": "Sure, what should I change?"},
        {"role": "user", "content": "Delete my old address, the one in Porto."},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "delete_address", "arguments": '{"city": "Porto"}'}}]},
        {"role": "tool", "tool_call_id": "c1", "name": "delete_address", "content": '{"ok": true}'},
        {"role": "assistant", "content": "Done."},
    ]
    t = _load(doc)
    d = _diagnose(t)
    assert d.category == "underspecified_user_intent"
    assert d.agent == "user"  # was "assistant": the category blames the request, the agent must too
    assert responsible_agent(t, d.critical_step, "intent_plan_misalignment") == t.steps[d.critical_step].agent


# -- 6. origin tracing ------------------------------------------------------------------------------------

LEDGER_RUN = [  # an orchestrator with a progress ledger directing a web agent
    {"role": "human", "content": "Find the 1998 annual report of the Harbour Trust."},
    {"role": "Orchestrator (thought)", "content":
        'Updated Ledger: {"is_request_satisfied": false, "is_progress_being_made": true, '
        '"next_speaker": "WebSurfer", "instruction_or_question": "Open members.harbourtrust.example/archive '
        'and download the 1998 report"}'},
    {"role": "Orchestrator (-> WebSurfer)", "content":
        "Open members.harbourtrust.example/archive and download the 1998 report."},
    {"role": "WebSurfer", "content": "I opened the archive. The page says: Please log in to continue."},
    {"role": "Orchestrator (thought)", "content": "The archive is closed to us. FINAL ANSWER: not available"},
]


def test_origin_of_a_blocked_page_is_the_instruction_and_the_plan_that_chose_it():
    t = _load(LEDGER_RUN)
    tr = origin_of(t, 3, build_claim_graph(t))
    assert [(x.step, x.relation) for x in tr.chain][:2] == [(3, "symptom"), (2, "instructed-by")]
    assert tr.step in (1, 2) and tr.depth >= 1
    d = _diagnose(t)  # default: the symptom stays, the origin is proposed
    assert d.critical_step == 3 and d.metadata["origin"]["symptom"] == 3
    assert any(c.step == tr.step and "origin of the late symptom" in c.reason for c in d.candidates)
    d = _diagnose(t, OfflineJudge(JudgeSettings(redirect_to_origin=True)))
    assert d.critical_step == d.metadata["origin"]["step"] == tr.step != 3
    assert d.rationale.startswith("origin of a late symptom at steps.3")
    feats = origin_features(t, [(3, [r for r in _errors(t) if r.step == 3])], build_claim_graph(t))
    assert feats[3]["is_late_symptom"] == 1.0 and feats[tr.step]["is_origin_of_late_symptom"] == 1.0


def test_origin_walks_back_over_a_loop_of_equal_calls():
    call = {"id": "x", "type": "function", "function": {"name": "fetch_page", "arguments": '{"url": "https://a.example/p"}'}}
    msgs = [{"role": "user", "content": "Read https://a.example/p"}]
    for i in range(3):
        msgs.append({"role": "assistant", "content": None, "tool_calls": [dict(call, id=f"c{i}")]})
        msgs.append({"role": "tool", "tool_call_id": f"c{i}", "name": "fetch_page", "content": "Error: 403 Forbidden"})
    t = _load(msgs)
    tr = origin_of(t, 5)
    assert tr.step == 1 and tr.chain[1].relation == "loop-start"


# -- 7. a command is an action, not a claim ---------------------------------------------------------------

def test_a_short_command_argument_is_scanned_as_code():
    doc = {"messages": [
        {"role": "user", "content": "Run the tests of the parser package."},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "run_shell",
                                           "input": {"cmd": "pytest -q tests/parser"}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "12 passed in 0.4s"}]},
        {"role": "assistant", "content": "All 12 tests pass."},
    ]}
    g = build_claim_graph(_load(doc))
    assert not [c for c in g.claims if c.kind == "argument"]  # was 'pytest -q tests/parser', MISSING
    assert not [c for c in g.claims if c.status.unsupported]


# -- 8. successful runs get no error-level finding ------------------------------------------------------

def test_the_synthetic_successful_runs_raise_no_error_level_finding():
    from pathlib import Path

    from trajaudit import load_many

    runs = sorted((Path(__file__).resolve().parents[3] / "benchmarks" / "data" / "successful_runs").glob("*.json"))
    assert len(runs) >= 13
    res = load_many(runs)
    assert not res.problems and len(res.trajectories) == len(runs)
    formats = {t.source.format for t in res.trajectories}
    assert {"openai", "anthropic", "langchain", "who_and_when", "magentic"} <= formats
    flagged = {t.id: [r.rule_id for r in _errors(t)] for t in res.trajectories}
    assert {k: v for k, v in flagged.items() if v} == {}


def test_the_same_quantity_in_another_unit_is_supported():
    doc = {"messages": [
        {"type": "human", "content": "How long is the bridge, and the charity run on it?"},
        {"type": "ai", "content": "", "tool_calls": [{"name": "web_search", "args": {"query": "bridge length"}, "id": "s1"}]},
        {"type": "tool", "tool_call_id": "s1", "content": "Total length 12,345 m. The charity run covers 5 miles."},
        {"type": "ai", "content": "It is 12.3 km long; the run is 8.05 km; the deck weighs 20 kg per metre."},
    ]}
    g = build_claim_graph(_load(doc))
    by_text = {c.text: c.status for c in g.claims}
    assert by_text["12.3 km"] is Support.WEAK and by_text["8.05 km"] is Support.WEAK
    assert by_text["20 kg"] is Support.MISSING  # no mass shown: a unit table is no licence to invent


def test_an_opening_requirement_without_a_task_apart_is_the_task():
    # a code-writing team: the team leader's requirement opens the run, no task field, no user turn
    t = _load([
        {"role": "assistant", "name": "TeamLeader", "content":
            "Requirement: write snake_game.py, a terminal snake game, with tests in test_snake.py."},
        {"role": "assistant", "name": "Engineer", "content":
            "Done: snake_game.py implements the game and test_snake.py has 4 tests."},
    ])
    assert t.task == "" and t.steps[0].is_decision
    g = build_claim_graph(t)
    assert [c for c in g.claims if c.step == 0] == []
    assert _status(g, "snake_game.py") is Support.DIRECT  # the engineer's reuse is supported by the requirement
    old = build_claim_graph(t, ClaimConfig(brief_is_input=False))
    assert any(c.step == 0 and c.value == "snake_game.py" and c.status is Support.MISSING for c in old.claims)


def test_version_stamps_and_bracketed_logger_lines_are_not_claims():
    t = _load([
        {"role": "user", "content": "Summarise the run log."},
        {"role": "assistant", "content":
            "[llm.client: 12-02 01:00:00] {412} WARNING - Model chat-large-2024-08-06 is not found; cost set to 0.\n"
            "The run used chat-large-2024-08-06 and finished."},
    ])
    g = build_claim_graph(t)
    assert not [c for c in g.claims if c.kind == "date"]  # a date glued into a model name is a version stamp
    assert not [c for c in g.claims if c.status.unsupported]
