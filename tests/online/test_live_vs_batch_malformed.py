"""A malformed chat message read live (Monitor: watch, guard) and in a finished file (the batch loader):
the documented difference (docs/monitor.md "Malformed messages: live and batch"), pinned shape by shape.

Live, the message is refused with a MonitorError naming it and the run goes on without it (watch skips
the line, guard answers 400); in a batch the same message either fails the whole run (reported and
skipped, the rest of the batch goes on) or is read leniently (odd content rendered as text, a nameless
call named "<unnamed>")."""

from __future__ import annotations

import json

import pytest

from trajaudit import load_many
from trajaudit.engine.run.monitor import Monitor, MonitorError

PREFIX = [{"role": "system", "content": "policy"}, {"role": "user", "content": "hi"}]
AFTER = [{"role": "assistant", "content": "ok"}]

#: shape -> (message, what the monitor says, the batch's outcome: ("skipped", words of the problem) or
#: ("read", the step's content or its first call's name))
CASES = {
    "role not a string": ({"role": 5, "content": "x"}, "'role' must be a string, got int 5",
                          ("skipped", "no known trace format matches")),
    "no role": ({"content": "x"}, "no 'role' field", ("skipped", "no known trace format matches")),
    "not an object": ("hello", "expected a chat message", ("skipped", "no known trace format matches")),
    "content an object": ({"role": "user", "content": {"text": "x"}},
                          "'content' must be a string, null or a list of parts, got dict", ("read", '{"text": "x"}')),
    "content a number": ({"role": "assistant", "content": 5},
                         "'content' must be a string, null or a list of parts, got int", ("read", "5")),
    "content parts not text": ({"role": "user", "content": [1, 2]},
                               "content[0] must be a text or a content block (object), got int", ("read", "1\n2")),
    "tool_calls not a list": ({"role": "assistant", "content": None, "tool_calls": {"id": "c9"}},
                              "'tool_calls' must be a list, got dict", ("skipped", "tool_calls must be a list")),
    "tool call not an object": ({"role": "assistant", "content": None, "tool_calls": ["x"]},
                                "tool_calls[0] must be an object, got str", ("skipped", "tool call must be an object")),
    "tool call without a name": ({"role": "assistant", "content": None,
                                  "tool_calls": [{"id": "c9", "function": {"arguments": "{}"}}]},
                                 "tool_calls[0] has no function name", ("call", "<unnamed>")),
    "function_call without a name": ({"role": "assistant", "content": None, "function_call": {"arguments": "{}"}},
                                     "function_call has no function name", ("call", "<unnamed>")),
}


@pytest.mark.parametrize("shape", list(CASES))
def test_live_refuses_and_batch_behaves_as_documented(shape, tmp_path):
    msg, live_says, (batch_does, batch_detail) = CASES[shape]
    m = Monitor()
    m.add_history(PREFIX)
    with pytest.raises(MonitorError, match="^message 2: ") as e:
        m.add(msg)
    assert live_says in str(e.value)
    assert len(m.steps) == 2  # refused: the run goes on without it
    m.add(AFTER[0])
    assert [s.index for s in m.steps] == [0, 1, 2]

    f = tmp_path / "run.json"
    f.write_text(json.dumps({"messages": [*PREFIX, msg, *AFTER]}))
    res = load_many([f])
    if batch_does == "skipped":  # the whole run reported and skipped (one run per file here)
        assert not res.trajectories and len(res.problems) == 1
        assert batch_detail in str(res.problems[0]) and str(f) in str(res.problems[0])
        return
    [t] = res.trajectories
    assert not res.problems and len(t.steps) == 4
    step = t.steps[2]
    if batch_does == "read":
        assert step.content == batch_detail
    else:
        assert [c.name for c in step.tool_calls] == [batch_detail]


def test_docs_table_lists_every_shape():
    from pathlib import Path

    doc = (Path(__file__).resolve().parents[2] / "docs" / "monitor.md").read_text(encoding="utf-8")
    section = doc[doc.index("Malformed messages: live and batch"):]
    for shape in CASES:
        assert f"| {shape} |" in section, shape
