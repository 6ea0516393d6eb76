"""When a monitor decides a rule at a step (``stepper.horizon``): a rule reading only the step and
earlier ones at that step; a rule reading its call's output once every call up to that step is
answered (before ``close()``); the rest at the end of the run. An early verdict must be the one the
batch audit gives on the complete run: checked on the dev runs and on generated runs."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trajaudit import Monitor
from trajaudit.engine.packs.pack import load_pack
from trajaudit.engine.run.evidence import gather
from trajaudit.engine.run.pipeline import AuditSpec, build_context
from trajaudit.engine.validation.stepper import horizon

#: rules of each horizon over the generated runs' tools
PACK = """
pack: horizon
version: 1
taxonomy: agentrx
rules:
  - id: output-ok
    type: PROTOCOL
    severity: error
    targets: [invalid_invocation]
    assert: call.output == null or not call.output.is_error
    message: "{call.name} failed"
  - id: output-says-ok
    type: PROTOCOL
    severity: warning
    targets: [invalid_invocation]
    guard: call.name == "lookup"
    let:
      said: default(call.output.content, "")
    assert: not (said ~ "Error") or step.index > 3
    message: "lookup answered {said}"
  - id: asked-first
    type: PROTOCOL
    severity: warning
    targets: [invalid_invocation]
    assert: exists u in earlier where u.kind == "user"
    message: "{call.name} before any user turn"
  - id: retried-later
    type: PROTOCOL
    severity: warning
    targets: [invalid_invocation]
    let:
      retried: exists c in calls(later) where c.name == call.name
    assert: call.output == null or not call.output.is_error or retried
    message: "{call.name} failed and was not retried"
"""


@pytest.fixture(scope="module")
def ctx():
    return build_context(AuditSpec())


@pytest.fixture(scope="module")
def small():
    return build_context(AuditSpec(rules=(load_pack(PACK),)))


def _key(r) -> str:
    return json.dumps(r.to_dict(), sort_keys=True, default=str)


def _replay(t, context):
    """Feed ``t`` step by step: (monitor, [(record, step of the add that returned it or None for close)])."""
    m = Monitor(context=context, run_id=t.id, task=t.task, system_prompts=t.system_prompts, source=t.source)
    got = []
    for s in t.steps:
        got += [(r, s.index) for r in m.add(s)]
    got += [(r, None) for r in m.close()]
    return m, got


def _check(t, context) -> list:
    m, got = _replay(t, context)
    batch = gather(t, context).log
    assert m.log.to_dict() == batch.to_dict(), t.id
    assert sorted(_key(r) for r, _ in got) == sorted(_key(r) for r in batch.records), t.id
    return got


def test_horizons_of_shipped_and_tool_rules():
    tools = build_context(AuditSpec(tools="examples/tools/tau_retail_tools.json"))
    by_id = {r.id: horizon(r) for r in tools.rules}
    by_id.update({r.id: horizon(r) for dp in tools.domain_packs for r in dp.rules})
    assert by_id["tau_retail.authenticate-before-write"] == "step"
    assert by_id["tau_retail.single-authenticated-user"] == "outputs"  # reads call.output only
    assert by_id["tools.required-arguments"] == "end"  # excused by the output or a later retry: calls(later)
    assert by_id["generic.protocol.confirmation-before-write"] == "end"  # traj.instructions: later system turns
    assert by_id["tau_retail.items-changed-once"] == "end"  # c.output of earlier calls (prefix state)


def test_output_rules_are_settled_by_the_add_that_answers_the_call(tau_runs, ctx):
    """On the tau dev runs, the records of rules reading their call's output leave add() (not close()):
    at the step that answers the call, or later when the retail pack joins the run later; they equal
    the batch's."""
    outputs = set()
    for t in tau_runs.values():
        ids = {r.id for dp in ctx.domain_packs for r in dp.rules if horizon(r) == "outputs"}
        answer = {s.tool_output.call_id: s.index for s in t.steps if s.tool_output is not None}
        for r, at in _check(t, ctx):
            if r.rule_id in ids:
                call = t.steps[r.step].tool_calls[0]
                assert call.id in answer
                assert at is not None and at >= max(answer[c.id] for s in t.steps[:r.step + 1]
                                                     for c in s.tool_calls if c.id), (t.id, r.rule_id, r.step)
                outputs.add(r.rule_id)
    assert outputs == {"tau_retail.single-authenticated-user", "tau_retail.one-user-per-conversation"}


def _messages(draw_ops: list[tuple[str, int, bool]]) -> list[dict]:
    """Messages from generated operations: ("user"|"call"|"answer"|"text", n, flag)."""
    msgs: list[dict] = []
    open_calls: list[str] = []
    k = 0
    for op, n, flag in draw_ops:
        if op == "user":
            msgs.append({"role": "user", "content": f"please look up {n}"})
        elif op == "text":
            msgs.append({"role": "assistant", "content": f"working on {n}"})
        elif op == "call":
            calls = []
            for j in range(1 + n % 2):  # one or two calls in the turn
                k += 1
                cid = None if flag and j == 0 else f"c{k}"  # a call without an id never has an output
                args = json.dumps({"id": str(n)} if n % 3 else {})
                calls.append({"id": cid, "type": "function", "function": {"name": "lookup", "arguments": args}})
                if cid:
                    open_calls.append(cid)
            msgs.append({"role": "assistant", "content": None, "tool_calls": calls})
        elif open_calls:  # answer one open call (not always the oldest), or a call id answered twice
            cid = open_calls.pop(n % len(open_calls)) if not flag or len(open_calls) == 1 else open_calls[-1]
            msgs.append({"role": "tool", "tool_call_id": cid, "name": "lookup",
                         "content": "Error: not found" if n % 2 else json.dumps({"id": str(n)})})
    return msgs


_OPS = st.lists(st.tuples(st.sampled_from(["user", "call", "answer", "answer", "text"]),
                          st.integers(0, 6), st.booleans()), min_size=1, max_size=14)


@given(_OPS)
@settings(max_examples=150, deadline=None)
def test_early_verdicts_equal_the_batch_on_generated_runs(small, ops):
    """Generated conversations (parallel calls answered out of order, calls never answered, calls
    without an id, an id answered twice): the monitor's log and every record it hands out equal the
    batch audit's; a record of a rule reading its call's output leaves add() only once every call up
    to its step is answered, and never before that call's own answer."""
    from trajaudit import load

    msgs = _messages(ops)
    if not msgs:
        return
    t = load({"messages": msgs})
    got = _check(t, small)
    answered: dict[str, int] = {}
    for s in t.steps:
        if s.tool_output is not None and s.tool_output.call_id is not None:
            answered.setdefault(s.tool_output.call_id, s.index)
    for r, at in got:
        if r.rule_id in ("horizon.output-ok", "horizon.output-says-ok") and at is not None:
            ids = [c.id for s in t.steps[:r.step + 1] for c in s.tool_calls if c.id]
            assert all(answered.get(i, 10**9) <= at for i in ids), (r.rule_id, r.step, at)
        if r.rule_id == "horizon.retried-later":
            assert at is None  # reads later steps: only at the end


def test_parallel_calls_answered_out_of_order(small):
    """Two calls in one turn, answered second-first: the output rules' records of that turn leave the
    add of the last answer (both calls answered), not the first, and not close()."""
    call = {"role": "assistant", "content": None, "tool_calls": [
        {"id": "a", "type": "function", "function": {"name": "lookup", "arguments": '{"id": "1"}'}},
        {"id": "b", "type": "function", "function": {"name": "lookup", "arguments": '{"id": "2"}'}}]}
    def ours(records):  # the default packs apply too
        return [r for r in records if r.rule_id.startswith("horizon.")]

    m = Monitor(context=small)
    assert ours(m.add({"role": "user", "content": "look up 1 and 2"})) == []
    first = {r.rule_id for r in ours(m.add(call))}
    assert first == {"horizon.asked-first"}  # decided by the step itself
    assert ours(m.add({"role": "tool", "tool_call_id": "b", "name": "lookup", "content": "Error: not found"})) == []
    settled = ours(m.add({"role": "tool", "tool_call_id": "a", "name": "lookup", "content": '{"id": "1"}'}))
    assert [(r.rule_id, r.step, r.verdict) for r in settled] == [
        ("horizon.output-ok", 1, "pass"), ("horizon.output-ok", 1, "fail"),
        ("horizon.output-says-ok", 1, "pass"), ("horizon.output-says-ok", 1, "fail")]
    assert [r.rule_id for r in ours(m.log.records)] == [  # in the batch's order
        "horizon.output-ok", "horizon.output-ok", "horizon.output-says-ok", "horizon.output-says-ok",
        "horizon.asked-first", "horizon.asked-first"]
    late = m.close()
    assert {r.rule_id for r in ours(late)} == {"horizon.retried-later"}
    assert m.log.to_dict() == gather(m.trajectory(final=True), small).log.to_dict()
