"""The judge's recovery check (AgentRx: a failed call the same agent later retried successfully is not
the critical failure) answers from a per-run index of last successes; it must equal the definition
(scan every later step of the same agent for a successful call of the same tool)."""

from __future__ import annotations

import json

import pytest

from trajaudit import load
from trajaudit.engine.strategies.offline_judge import _last_success, _recovered
from trajaudit.engine.validation_log import Record


def _reference(t, step: int) -> bool:
    s = t.steps[step]
    for call in s.tool_calls:
        out = t.output_after(call.id, step)
        if out is None or not out.tool_output.is_error:
            continue
        for later in t.steps[out.index + 1:]:
            if later.agent != s.agent:
                continue
            for c2 in later.tool_calls:
                if c2.name != call.name or c2.id is None:
                    continue
                res = t.output_after(c2.id, later.index)
                if res is not None and not res.tool_output.is_error:
                    return True
    return False


def _record(step: int) -> Record:
    return Record(step=step, rule_id="r", verdict="fail", severity="error", rule_type="PROTOCOL", targets=(),
                  message="", evidence=(), bindings={}, origin="rules", reason=None)


def _call(i: int, name: str) -> dict:
    return {"role": "assistant", "content": None,
            "tool_calls": [{"id": f"c{i}", "type": "function", "function": {"name": name, "arguments": "{}"}}]}


def _out(i: int, name: str, text: str) -> dict:
    return {"role": "tool", "tool_call_id": f"c{i}", "name": name, "content": text}


@pytest.mark.parametrize("tail, expected", [
    ([_call(2, "fetch"), _out(2, "fetch", "ok page")], True),            # same tool later succeeds
    ([_call(2, "search"), _out(2, "search", "ok")], False),              # another tool succeeds
    ([_call(2, "fetch"), _out(2, "fetch", "Error: 500")], False),         # the retry fails too
    ([], False),                                                        # never retried
])
def test_recovery_cases(tmp_path, tail, expected):
    msgs = [{"role": "user", "content": "get it"}, _call(1, "fetch"), _out(1, "fetch", "Error: not found"), *tail]
    p = tmp_path / "run.json"
    p.write_text(json.dumps(msgs), encoding="utf-8")
    t = load(p)
    assert _recovered(t, 1, _record(1), _last_success(t)) is expected
    assert _reference(t, 1) is expected


def test_success_before_the_failure_is_no_recovery(tmp_path):
    msgs = [{"role": "user", "content": "get it"}, _call(1, "fetch"), _out(1, "fetch", "fine"),
            _call(2, "fetch"), _out(2, "fetch", "Error: not found")]
    p = tmp_path / "run.json"
    p.write_text(json.dumps(msgs), encoding="utf-8")
    t = load(p)
    assert _recovered(t, 3, _record(3), _last_success(t)) is False


def test_equals_the_definition_on_the_real_data(tau_runs, ww_runs):
    checked = recovered = 0
    for t in [*tau_runs.values(), *ww_runs.values()]:
        last = _last_success(t)
        for s in t.steps:
            if s.tool_calls:
                got = _recovered(t, s.index, _record(s.index), last)
                assert got is _reference(t, s.index), (t.id, s.index)
                checked += 1
                recovered += got
    assert checked >= 280 and recovered > 0  # 284 tool-calling steps on tau (Who&When has no call ids)
