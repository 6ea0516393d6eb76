"""OpenAI-format runs from multi-agent frameworks: a code runner's output logged as a named ``user``
(or ``assistant``) message is a tool output, as the Who&When adapter reads the same speaker."""

from __future__ import annotations

import json
import re

from trajaudit import load_path
from trajaudit.engine.adapters.base import LoadOptions


def _write(tmp_path, messages, name="run.json"):
    p = tmp_path / name
    p.write_text(json.dumps({"messages": messages}), encoding="utf-8")
    return p


MESSAGES = [
    {"role": "user", "content": "How many rows does data.csv have?"},
    {"role": "assistant", "name": "Coder", "content": "```python\nprint(len(open('data.csv').readlines()))\n```"},
    {"role": "user", "name": "Computer_terminal", "content": "exitcode: 1 (execution failed)\nFileNotFoundError"},
    {"role": "user", "name": "alice", "content": "the file is in /data"},
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
    t = load_path(_write(tmp_path, MESSAGES), options=LoadOptions(tool_agent_pattern=re.compile(r"^alice$"))
                  ).trajectories[0]
    assert [s.kind for s in t.steps][2:4] == ["user", "tool"]
