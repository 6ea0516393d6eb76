"""Bad input: clear errors naming the file (and record / message), or documented flagged degradation."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from trajaudit import TraceFormatError, load_path
from trajaudit.engine.trace.adapters import LoadOptions
from trajaudit.engine.trace.ir import FLAG_TRUNCATED, FLAG_UNKNOWN_ROLE
from trajaudit.engine.trace.loader import FLAG_NON_UTF8, load_document


@pytest.mark.parametrize(
    "content, expected",
    [
        (b"", "file is empty"),
        (b"   \n", "file is empty"),
        (b'{"messages": [', "invalid JSON at line 1"),
        (b"[]", "no known trace format"),
        (b'{"messages": []}', "run has no messages"),
        (b'{"traj": []}', "run has no messages"),
        (b'{"history": [1, 2]}', "$.history[0]: message must be an object"),
        (b'{"messages": [{"role": "assistant", "tool_calls": "nope"}]}', "tool_calls must be a list"),
    ],
)
def test_bad_files_name_the_file(tmp_path, content, expected):
    p = tmp_path / "bad.json"
    p.write_bytes(content)
    try:
        res = load_path(p)
    except TraceFormatError as e:
        assert str(p) in str(e) and expected in str(e)
        return
    assert not res.trajectories
    assert str(p) in res.problems[0].message and expected in res.problems[0].message


def test_missing_file():
    with pytest.raises(TraceFormatError, match="cannot read"):
        load_path("/nonexistent/trace.json")


def test_non_utf8_bytes_are_replaced_and_flagged(tmp_path):
    p = tmp_path / "latin1.json"
    p.write_bytes('[{"role": "user", "content": "caf\xe9"}, {"role": "assistant", "content": "ok"}]'.encode("latin-1"))
    (t,) = load_path(p).trajectories
    assert FLAG_NON_UTF8 in t.flags and t.steps[0].content == "caf\ufffd"


def test_huge_tool_output_is_truncated_and_flagged(tmp_path):
    big = "x" * (10 * 1024 * 1024)
    msgs = [{"role": "user", "content": "go"},
            {"role": "assistant", "tool_calls": [{"id": "1", "function": {"name": "f", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": "1", "content": big}]
    p = tmp_path / "big.json"
    p.write_text(json.dumps(msgs))
    (t,) = load_path(p, options=LoadOptions(max_content_chars=100_000)).trajectories
    s = t.steps[2]
    assert FLAG_TRUNCATED in s.flags and len(s.content) == 100_000 and s.metadata["original_length"] == len(big)


def test_unknown_role_is_kept_and_flagged(tmp_path):
    p = tmp_path / "r.json"
    p.write_text(json.dumps({"messages": [{"role": "user", "content": "a"}, {"role": "critic", "content": "b"}]}))
    res = load_path(p, format="openai")
    (t,) = res.trajectories
    assert t.steps[1].kind == "agent" and t.steps[1].agent == "critic" and FLAG_UNKNOWN_ROLE in t.steps[1].flags


def test_one_broken_run_in_a_list_is_reported_others_load(tmp_path, tau_file):
    runs = json.loads(tau_file.read_text())[:3]
    runs[1]["traj"][2]["tool_calls"] = [42]
    p = tmp_path / "three.json"
    p.write_text(json.dumps(runs))
    res = load_path(p)
    assert [t.source.record for t in res.trajectories] == [0, 2]
    (prob,) = res.problems
    assert prob.record == 1 and "$.traj[2].tool_calls[0]" in prob.message and "record 1" in prob.message


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda children: st.lists(children, max_size=5) | st.dictionaries(
        st.sampled_from(["role", "content", "messages", "traj", "history", "tool_calls", "name",
                         "function", "arguments", "tool_call_id", "id", "question", "system_prompt", "x"]),
        children, max_size=6),
    max_leaves=40,
)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(json_values)
def test_adapters_only_raise_documented_errors_on_arbitrary_json(doc):
    try:
        res = load_document(doc, file="fuzz.json")
    except TraceFormatError:
        return
    for t in res.trajectories:
        assert t.steps and all(s.index == i for i, s in enumerate(t.steps))


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=200))
def test_loader_only_raises_documented_errors_on_random_bytes(tmp_path_factory, data):
    p = tmp_path_factory.mktemp("fz") / "f.json"
    p.write_bytes(data)
    try:
        load_path(p)
    except TraceFormatError:
        pass
