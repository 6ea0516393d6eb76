"""OpenAI-format runs from multi-agent frameworks: a code runner's output logged as a named ``user``
(or ``assistant``) message is a tool output, as the Who&When adapter reads the same speaker."""

from __future__ import annotations

import json
import re

from trajaudit import load_path
from trajaudit.engine.trace.adapters.base import LoadOptions


def _write(tmp_path, messages, name="run.json"):
    p = tmp_path / name
    p.write_text(json.dumps({"messages": messages}), encoding="utf-8")
    return p


MESSAGES = [
    {"role": "user", "content": "How many rows does data.csv have?"},
    {"role": "assistant", "name": "Coder", "content": "```python\nprint(len(open('data.csv').readlines()))\n```"},
    {"role": "user", "name": "Computer_terminal", "content": "exitcode: 1 (execution failed)\nFileNotFoundError"},
    {"role": "user", "name": "Admin", "content": "the file is in /data"},
    {"role": "assistant", "name": "executor", "content": "", "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "run", "arguments": "{}"}}]},
    {"role": "tool", "tool_call_id": "c1", "content": "ok"},
]


def test_named_code_runner_messages_are_tool_outputs(tmp_path):
    t = load_path(_write(tmp_path, MESSAGES)).trajectories[0]
    kinds = [(s.kind, s.agent) for s in t.steps]
    assert kinds == [("user", None), ("agent", "Coder"), ("tool", "Computer_terminal"), ("user", None),
                     ("agent", "executor"), ("tool", None)]
    out = t.steps[2].tool_output
    assert out is not None and out.is_error is True and out.name == "Computer_terminal"
    assert [s.index for s in t.decision_steps] == [1, 4]


def test_the_runner_names_come_from_the_load_options(tmp_path):
    t = load_path(_write(tmp_path, MESSAGES), options=LoadOptions(tool_agent_pattern=re.compile(r"^admin$", re.I))
                  ).trajectories[0]
    assert [s.kind for s in t.steps][2:4] == ["user", "tool"]


# --- group chats logged from one agent's side (LoadOptions.named_users, base.group_chat_agents) ---

GROUP = [
    {"role": "user", "content": "Which year had the most rainfall?"},
    {"role": "assistant", "name": "Planner", "content": "DataAnalysis_Expert, please load the data."},
    {"role": "user", "name": "DataAnalysis_Expert", "content": "```python\nprint(max_year())\n```"},
    {"role": "user", "name": "Computer_terminal", "content": "exitcode: 0 (execution succeeded)\n1998"},
    {"role": "user", "name": "Verification_Expert", "content": "1998 is confirmed. TERMINATE"},
]


def _kinds(tmp_path, messages, **options):
    t = load_path(_write(tmp_path, messages), options=LoadOptions(**options)).trajectories[0]
    return [(s.kind, s.agent) for s in t.steps], t


def test_other_agents_logged_as_named_user_messages_are_agent_turns(tmp_path):
    kinds, t = _kinds(tmp_path, GROUP)
    assert kinds == [("user", None), ("agent", "Planner"), ("agent", "DataAnalysis_Expert"),
                     ("tool", "Computer_terminal"), ("agent", "Verification_Expert")]
    assert t.steps[2].role == "assistant" and t.steps[2].metadata["logged_role"] == "user"
    assert [s.index for s in t.decision_steps] == [1, 2, 4]
    assert set(t.agents) >= {"Planner", "DataAnalysis_Expert", "Verification_Expert"}


def test_one_expert_beside_a_code_runner_is_a_group_chat(tmp_path):
    # two names on user messages (the runner counts): the expert is an agent
    kinds, _ = _kinds(tmp_path, GROUP[:4])
    assert kinds[2] == ("agent", "DataAnalysis_Expert")


def test_a_single_named_user_stays_a_user(tmp_path):
    msgs = [{"role": "user", "name": "alice", "content": "refund my order"},
            {"role": "assistant", "content": "Done."},
            {"role": "user", "name": "alice", "content": "thanks"}]
    kinds, _ = _kinds(tmp_path, msgs)
    assert kinds == [("user", None), ("agent", "assistant"), ("user", None)]
    # forced either way by the load options
    assert _kinds(tmp_path, msgs, named_users="agent")[0][0] == ("agent", "alice")
    assert _kinds(tmp_path, GROUP, named_users="user")[0][2] == ("user", None)


def test_a_name_that_also_speaks_as_assistant_is_an_agent(tmp_path):
    msgs = [{"role": "user", "content": "task"},
            {"role": "assistant", "name": "Coder", "content": "draft"},
            {"role": "user", "name": "Coder", "content": "revised draft"}]
    assert _kinds(tmp_path, msgs)[0][2] == ("agent", "Coder")


def test_human_names_never_make_a_group(tmp_path):
    msgs = [{"role": "user", "name": "user", "content": "task"},
            {"role": "assistant", "content": "ok"},
            {"role": "user", "name": "alice", "content": "go on"},
            {"role": "user", "name": "Admin", "content": "approved"}]
    kinds, _ = _kinds(tmp_path, msgs)
    assert [k for k, _ in kinds] == ["user", "agent", "user", "user"]


def test_named_users_must_be_a_known_mode():
    import pytest

    from trajaudit.errors import ConfigError

    with pytest.raises(ConfigError, match="named_users must be one of auto, agent, user"):
        LoadOptions(named_users="agents")


def test_mapping_format_reads_group_chats_too(tmp_path):
    from trajaudit.engine.trace.adapters.mapping import MappingAdapter

    doc = {"log": [{"speaker": m.get("name"), "kind": m["role"], "text": m["content"]} for m in GROUP]}
    p = tmp_path / "chat.json"
    p.write_text(json.dumps(doc), encoding="utf-8")
    adapter = MappingAdapter({"messages": "log", "fields": {"role": "kind", "content": "text", "name": "speaker"}})
    t = load_path(p, mapping=adapter).trajectories[0]
    assert [(s.kind, s.agent) for s in t.steps][2:] == [("agent", "DataAnalysis_Expert"), ("tool", "Computer_terminal"),
                                                        ("agent", "Verification_Expert")]


def test_who_and_when_logs_as_openai_messages_read_like_the_who_and_when_adapter(tmp_path):
    """All 126 Who&When runs rewritten with the roles they were logged with: the steps' kinds and agents
    equal the Who&When adapter's (shifted by the prepended question) in 125 runs; the one left has a
    single expert on the user side and no code runner, which stays a user turn."""
    from pathlib import Path

    import pytest

    from trajaudit import load

    data = Path(__file__).resolve().parents[4] / "shared" / "data" / "who_and_when" / "algorithm_generated"
    if not data.is_dir():
        pytest.skip(f"the Who&When data is not at {data}")
    same, differ = 0, []
    for f in sorted(data.glob("*.json")):
        w = json.loads(f.read_text(encoding="utf-8"))
        msgs = [{"role": "user", "content": w["question"]}] + [
            {"role": m["role"], "name": m.get("name"), "content": m["content"]} for m in w["history"]]
        t = load_path(_write(tmp_path, msgs, name=f.name)).trajectories[0]
        if [(s.kind, s.agent) for s in load(f).steps] == [(s.kind, s.agent) for s in t.steps[1:]]:
            same += 1
        else:
            differ.append(f.name)
    assert (same, differ) == (125, ["55.json"])


def test_a_mapping_file_can_force_the_reading_of_named_user_messages(tmp_path):
    from trajaudit.engine.trace.adapters.mapping import MappingAdapter
    from trajaudit.errors import TraceFormatError

    msgs = [{"role": "user", "content": "task"}, {"role": "assistant", "name": "Planner", "content": "plan"},
            {"role": "user", "name": "Researcher", "content": "found it"}]  # one name: a user turn by default
    p = _write(tmp_path, msgs)
    m = tmp_path / "m.yaml"
    m.write_text("messages: messages\nnamed_users: agent\n", encoding="utf-8")
    t = load_path(p, mapping=MappingAdapter.from_file(m)).trajectories[0]
    assert (t.steps[2].kind, t.steps[2].agent) == ("agent", "Researcher")
    m.write_text("messages: messages\n", encoding="utf-8")
    assert load_path(p, mapping=MappingAdapter.from_file(m)).trajectories[0].steps[2].kind == "user"
    m.write_text("messages: messages\nnamed_users: agents\n", encoding="utf-8")
    import pytest

    with pytest.raises(TraceFormatError, match="named_users must be one of auto, agent, user"):
        MappingAdapter.from_file(m)


def test_swarm_sender_names_the_agent_of_assistant_messages(tmp_path):
    """OpenAI Swarm logs hand-offs between agents with the speaker in ``sender``, not ``name``."""
    msgs = [{"role": "user", "content": "I want a refund for order 7"},
            {"role": "assistant", "sender": "Triage Agent", "content": None, "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "transfer_to_refunds", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": "c1", "tool_name": "transfer_to_refunds", "content": "Refunds Agent"},
            {"role": "assistant", "sender": "Refunds Agent", "content": "Refund issued for order 7."},
            {"role": "assistant", "name": "Auditor", "sender": "Refunds Agent", "content": "ok"}]
    kinds, t = _kinds(tmp_path, msgs)
    assert kinds == [("user", None), ("agent", "Triage Agent"), ("tool", None), ("agent", "Refunds Agent"),
                     ("agent", "Auditor")]  # name wins over sender
    assert "Triage Agent" in t.agents and "Refunds Agent" in t.agents


def test_named_user_turns_keep_their_speaker_and_load_takes_options_and_mappings(tmp_path):
    from trajaudit import LoadOptions, load
    from trajaudit.errors import ConfigError

    p = _write(tmp_path, GROUP)
    t = load(p, options=LoadOptions(named_users="user"))
    assert [s.kind for s in t.steps] == ["user", "agent", "user", "tool", "user"]
    assert t.steps[2].metadata["name"] == "DataAnalysis_Expert"  # the speaker is kept, not dropped
    assert load(p).steps[2].kind == "agent"
    m = tmp_path / "m.yaml"
    m.write_text('messages: "messages || @"\nnamed_users: user\n', encoding="utf-8")
    assert load(p, mapping=m).steps[2].kind == "user"
    bare = tmp_path / "bare.json"
    bare.write_text(json.dumps(GROUP), encoding="utf-8")
    assert load(bare, mapping=m).steps[4].metadata["name"] == "Verification_Expert"
    import pytest

    with pytest.raises(ConfigError, match="either an input format .* or a mapping, not both"):
        load(p, format="openai", mapping=m)


def test_a_mapping_reads_swarm_senders_by_default(tmp_path):
    from trajaudit import load

    msgs = [{"role": "user", "content": "refund order 7"},
            {"role": "assistant", "sender": "Triage Agent", "content": "Passing you to refunds."},
            {"role": "assistant", "sender": "Refunds Agent", "content": "Done."}]
    m = tmp_path / "m.yaml"
    m.write_text('messages: "messages || @"\n', encoding="utf-8")
    t = load(_write(tmp_path, msgs), mapping=m)
    assert [s.agent for s in t.steps] == [None, "Triage Agent", "Refunds Agent"]


def test_cli_refuses_a_forced_format_with_a_mapping(tmp_path):
    from click.testing import CliRunner

    from trajaudit.cli import main

    m = tmp_path / "m.yaml"
    m.write_text("messages: messages\n", encoding="utf-8")
    res = CliRunner().invoke(main, ["show", str(_write(tmp_path, GROUP)), "--mapping", str(m),
                                    "--input-format", "openai"])
    assert res.exit_code == 2 and "not both" in res.output
