"""Multi-agent chat logs a realistic user sends: AutoGen's history written from the human proxy's
side, speaker names with case/space variants, blank names; `eval --mapping` reads like `audit`."""

from __future__ import annotations

import json

import pytest

import trajaudit
from trajaudit import load_path
from trajaudit.engine.trace.adapters.speakers import is_human_name


def _write(tmp_path, messages, name="run.json"):
    p = tmp_path / name
    p.write_text(json.dumps(messages), encoding="utf-8")
    return p


# AutoGen two-agent chat as ``user_proxy.initiate_chat(assistant, ...).chat_history`` returns it: the
# initiator's view, so the human proxy's turns are named ``assistant`` messages and the LLM's are
# named ``user`` messages.
AUTOGEN_INITIATOR = [
    {"content": "Plot NVDA's price change YTD and save it to stock.png.", "role": "assistant", "name": "user_proxy"},
    {"content": "```python\nimport yfinance as yf\nprint(yf.download('NVDA'))\n```", "role": "user",
     "name": "assistant"},
    {"content": "exitcode: 1 (execution failed)\nCode output: ModuleNotFoundError: No module named 'yfinance'",
     "role": "assistant", "name": "user_proxy"},
    {"content": "The chart is saved to stock.png. TERMINATE", "role": "user", "name": "assistant"},
]


def test_autogen_initiator_history_reads_the_proxy_as_the_user(tmp_path):
    t = load_path(_write(tmp_path, AUTOGEN_INITIATOR)).trajectories[0]
    assert [(s.kind, s.agent) for s in t.steps] == [("user", None), ("agent", "assistant"), ("user", None),
                                                    ("agent", "assistant")]
    assert t.agents == ("assistant",)
    assert t.task == AUTOGEN_INITIATOR[0]["content"]
    assert t.steps[0].metadata == {"logged_role": "assistant"}
    assert t.steps[1].metadata == {"logged_role": "user"}
    diag = trajaudit.audit(t)
    assert diag.agent == "assistant" and diag.critical_step in (1, 3)


def test_named_users_user_keeps_the_logged_roles(tmp_path):
    mapping = tmp_path / "m.yaml"
    mapping.write_text("name: chat\nmessages: '@'\nnamed_users: user\n", encoding="utf-8")
    t = load_path(_write(tmp_path, AUTOGEN_INITIATOR), mapping=str(mapping)).trajectories[0]
    assert [s.kind for s in t.steps] == ["agent", "user", "agent", "user"]


def test_a_named_customer_in_two_spellings_is_one_user(tmp_path):
    msgs = [
        {"role": "user", "name": "Alice", "content": "I want to return order #W123."},
        {"role": "assistant", "content": "Which items?"},
        {"role": "user", "name": "alice ", "content": "The lamp."},
        {"role": "assistant", "content": "Done."},
    ]
    t = load_path(_write(tmp_path, msgs)).trajectories[0]
    assert [s.kind for s in t.steps] == ["user", "agent", "user", "agent"]
    assert t.agents == ("assistant",)


def test_assistant_names_are_stripped_and_blank_names_absent(tmp_path):
    msgs = [
        {"role": "user", "content": "task"},
        {"role": "assistant", "name": "Planner ", "content": "plan"},
        {"role": "assistant", "name": "Planner", "content": "more"},
        {"role": "assistant", "name": "  ", "sender": "Triage", "content": "routed"},
        {"role": "assistant", "name": " ", "content": "hi"},
    ]
    t = load_path(_write(tmp_path, msgs)).trajectories[0]
    assert [s.agent for s in t.steps[1:]] == ["Planner", "Planner", "Triage", "assistant"]
    assert t.agents == ("Planner", "Triage", "assistant")


@pytest.mark.parametrize(("name", "human"), [("User Proxy", True), ("user-proxy", True), ("UserProxy", True),
                                             ("human_proxy", True), ("ADMIN", True), ("Planner", False),
                                             ("user_proxy_2", False)])
def test_human_names_ignore_case_and_separators(name, human):
    assert is_human_name(name) is human


def test_eval_reads_the_dataset_with_the_same_mapping_as_audit(tmp_path):
    from click.testing import CliRunner

    from trajaudit.cli import main

    run = _write(tmp_path, AUTOGEN_INITIATOR, "chat.json")
    mapping = tmp_path / "m.yaml"
    mapping.write_text("name: chat\nmessages: '@'\nnamed_users: user\n", encoding="utf-8")
    gold = tmp_path / "gold.jsonl"
    gold.write_text(json.dumps({"trajectory_id": "chat", "critical_step": 1}) + "\n", encoding="utf-8")
    rows = {}
    for extra in ([], ["--mapping", str(mapping)]):
        res = CliRunner().invoke(main, ["eval", str(run), "--gold", str(gold), "--strategy", "first", "--format",
                                        "json", *extra], catch_exceptions=False)
        assert res.exit_code == 0, res.output
        rows[bool(extra)] = json.loads(res.stdout)["rows"][0]
    assert (rows[False]["pred_step"], rows[False]["pred_agent"]) == (1, "assistant")  # the LLM's first turn
    assert (rows[True]["pred_step"], rows[True]["pred_agent"]) == (0, "user_proxy")  # as `audit --mapping` reads it


def test_a_group_chat_without_a_user_turn_has_no_task_from_an_agent(tmp_path):
    """Every named ``user`` message is another agent's turn (or a runner's output): none is the task,
    in the OpenAI adapter as in a mapping. The claims stage then takes the opening message — nothing
    precedes it, no task is given apart — as the run's input (issue 17: a run's opening requirement
    is not its invention), so the Clerk's use of the order id is supported by it."""
    from trajaudit.engine.claims import build_claim_graph
    from trajaudit.engine.claims.model import Support

    msgs = [
        {"role": "user", "name": "Planner", "content": "Refund order 98765 to the card."},
        {"role": "assistant", "name": "Clerk", "content": "Refunding order 98765 now."},
        {"role": "user", "name": "Computer_terminal", "content": "exitcode: 0"},
        {"role": "user", "name": "Critic", "content": "Looks done."},
    ]
    mapping = tmp_path / "m.yaml"
    mapping.write_text("name: chat\nmessages: '@'\n", encoding="utf-8")
    a = load_path(_write(tmp_path, msgs)).trajectories[0]
    b = load_path(_write(tmp_path, msgs), mapping=str(mapping)).trajectories[0]
    assert [(s.kind, s.agent) for s in a.steps] == [("agent", "Planner"), ("agent", "Clerk"),
                                                    ("tool", "Computer_terminal"), ("agent", "Critic")]
    assert a.task == b.task == ""
    order = next(c for c in build_claim_graph(a).claims if c.value == "98765")
    assert (order.step, order.agent, order.status) == (1, "Clerk", Support.DIRECT)
    assert order.evidence_address.startswith("steps.0.content")
